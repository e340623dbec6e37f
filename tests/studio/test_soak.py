"""The soak's real drift sources, each tested on a short simulated session through the real engine."""

import types
from collections import deque

import numpy as np

from studio.drift import DriftMonitor
from studio.engine.clock import MediaClock
from studio.engine.pipeline import Engine
from studio.presets import preset_by_name
from studio.soak import SimulatedCapture, SoakOptions, SyntheticClock, run_soak
from tests.studio.engine.helpers import silence_vowel_silence


def _speech() -> np.ndarray:
    return np.tile(silence_vowel_silence(), 4)


def test_200_ppm_skew_keeps_lip_sync_within_one_frame_where_an_unestimated_clock_would_not():
    options = SoakOptions(duration_s=120.0, preset=preset_by_name("default"), skew_ppm=200.0, jitter_ms=3.0,
                          drop_rate=0.001, audio=_speech())
    report = run_soak(options)
    summary = report["summary"]
    one_frame_ms = 1000.0 / 60.0  # one display frame at 60 Hz
    assert summary["complete"]
    assert summary["max_av_offset_ms"] < one_frame_ms
    assert abs(summary["naive_av_offset_ms_at_end"]) > one_frame_ms  # 200 ppm over 2 minutes is 24 ms
    assert abs(summary["estimated_skew_ppm"] - 200.0) < 20.0


def _engine_on_capture(drop_rate: float, skew_ppm: float = 0.0):
    clock = SyntheticClock()
    engine = Engine(monotonic=clock)
    source = SimulatedCapture(_speech(), clock, skew_ppm=skew_ppm, jitter_ms=2.0, drop_rate=drop_rate, seed=4)
    queue = engine.subscribe(100_000)
    engine.set_source(source)
    return clock, engine, source, queue


def _advance(clock, engine, source, seconds: float, step_s: float = 0.1) -> None:
    for _ in range(int(round(seconds / step_s))):
        clock.advance(step_s)
        engine.run_once()
        while source.pending:
            engine.run_once()


def test_dropped_blocks_and_jitter_never_slip_the_frames_off_the_true_media_time():
    clock, engine, source, queue = _engine_on_capture(drop_rate=0.02, skew_ppm=-150.0)
    _advance(clock, engine, source, 40.0)
    frames = queue.drain()
    times = np.array([f.media_time_s for f in frames])
    assert source.dropped_blocks > 50  # ~0.8 s of audio lost in 10 ms pieces
    assert np.all(np.diff(times) > 0)
    true_now = engine.source_start_media_s + source.true_media_s(clock())
    assert true_now - times[-1] < 0.2  # only the pipeline's latency behind, not the 0.8 s that was lost
    assert abs(engine.media_time_now() - true_now) < 0.005


def _footprint(*roots) -> tuple[int, int]:
    """(items in every list, deque, dict and set; bytes in every array) reachable from the roots."""
    seen, stack, total, nbytes = set(), list(roots), 0, 0
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, (type, types.ModuleType, types.FunctionType, str, bytes)):
            continue
        seen.add(id(item))
        if isinstance(item, np.ndarray):
            nbytes += item.nbytes
        elif isinstance(item, dict):
            total += len(item)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, deque, set, frozenset)):
            total += len(item) if not isinstance(item, tuple) else 0
            stack.extend(item)
        elif hasattr(item, "__dict__"):
            stack.extend(vars(item).values())
    return total, nbytes


def test_nothing_grows_over_a_session_bounded_buffers_everywhere():
    """Telemetry, frame slot and queues, clock history, anchor buffer, drift series: nothing accumulates."""
    clock, engine, source, queue = _engine_on_capture(drop_rate=0.001)
    source.clock = MediaClock(history_s=20.0)  # a short clock history, so that it too is full when we look
    monitor = DriftMonitor()
    anchor = engine.anchor

    def run(seconds: float) -> tuple[int, int]:
        for _ in range(int(seconds)):
            _advance(clock, engine, source, 1.0)
            monitor.update_frames(queue.drain())
            monitor.update_anchor(clock(), anchor.take_sums(), anchor.rest)
            monitor.update_clock(clock(), 0.0, source.clock.skew_ppm)
        return _footprint(engine, source, monitor, queue)

    warm_items, warm_bytes = run(70.0)  # rings, histories and the first minute's figures are in by now
    items, nbytes = run(150.0)
    assert items <= warm_items + 64  # a few pending points in the downsampled series, nothing per frame
    assert nbytes <= warm_bytes * 1.01
