"""Media clock estimation: a 100 ppm fast card is measured as such and the mapping holds for 2 hours."""

import numpy as np
import pytest

from studio.engine.clock import MediaClock
from studio.engine.ring import AudioRing

SKEW = 100e-6  # the card's samples come 100 ppm faster than the monotonic clock says they should
START = 5000.0


def _true_monotonic(media):
    return START + media / (1.0 + SKEW)


def test_fast_card_skew_estimated_and_mapping_does_not_drift_over_two_hours():
    rng = np.random.default_rng(0)
    clock = MediaClock()
    block_s = 480 / 48000
    n_blocks = int(2 * 3600 / block_s)
    jitter = rng.exponential(0.0015, n_blocks) + (rng.random(n_blocks) < 0.01) * rng.uniform(0, 0.05, n_blocks)
    errors = []
    for i in range(1, n_blocks + 1):
        media = i * block_s
        clock.observe(media, _true_monotonic(media) + jitter[i - 1])
        if i % 30000 == 0:  # every 5 minutes of media
            errors.append(clock.media_to_monotonic(media) - _true_monotonic(media))
    assert clock.skew_ppm == pytest.approx(100.0, abs=3.0)
    errors = np.array(errors)
    assert np.abs(errors).max() < 0.003  # within 3 ms of the jitter-free truth, start to end
    assert abs(errors[-1] - errors[1]) < 0.001  # and no creep
    end = 2 * 3600.0
    assert clock.drift_s == pytest.approx(end - end / (1.0 + SKEW), abs=0.003)  # ~0.72 s gained
    assert clock.monotonic_to_media(clock.media_to_monotonic(1234.5)) == pytest.approx(1234.5, abs=1e-9)


def test_before_any_bucket_closes_the_mapping_uses_the_earliest_observation():
    clock = MediaClock()
    clock.observe(0.01, 100.02)
    clock.observe(0.02, 100.021)  # less late
    assert clock.media_to_monotonic(0.5) == pytest.approx(100.501)
    assert clock.skew_ppm == 0.0


def test_ring_returns_positions_and_drops_oldest_when_the_reader_falls_behind():
    ring = AudioRing(1000)
    ring.write(np.arange(300, dtype=np.float32))
    start, samples = ring.read_available()
    assert start == 0 and np.array_equal(samples, np.arange(300))
    for k in range(10):
        ring.write(np.full(300, k, np.float32))
    start, samples = ring.read_available()
    assert start + len(samples) == 3300  # ends at the newest sample
    assert len(samples) < 1000 and ring.dropped_samples == start - 300
    assert samples[-1] == 9
    assert ring.read_available()[1].size == 0


def _observe_seconds(clock: MediaClock, start_media: float, seconds: float, ppm: float, rng, mono_start: float) -> float:
    """Blocks of 10 ms each delivered late by up to a few ms, the card `ppm` fast; returns the monotonic end."""
    block = 0.01
    for i in range(1, int(seconds / block) + 1):
        clock.observe(start_media + i * block, mono_start + i * block / (1 + ppm * 1e-6) + rng.exponential(0.002))
    return mono_start + seconds / (1 + ppm * 1e-6)


def test_the_fit_says_how_far_to_trust_it_and_where_the_sound_left_the_line():
    rng = np.random.default_rng(1)
    clock = MediaClock()
    assert clock.recent_error_s() is None and clock.skew_error_ppm == float("inf")
    mono = _observe_seconds(clock, 0.0, 4.0, 0.0, rng, START)
    few = clock.skew_error_ppm
    assert clock.fitted_points == 4 and 2.0 < clock.fitted_span_s < 3.0
    mono = _observe_seconds(clock, 4.0, 116.0, 0.0, rng, mono)
    assert clock.skew_error_ppm < few / 10  # more data, a tighter bound
    assert abs(clock.skew_ppm) < 3 * clock.skew_error_ppm + 5
    assert abs(clock.recent_error_s()) < 0.001  # a steady card: the picture is where the sound is
    _observe_seconds(clock, 120.0, 20.0, 2000.0, rng, mono)  # the card speeds up: the line lags behind it
    assert clock.recent_error_s() < -0.005  # the sound runs ahead of where the line places the picture
