"""DriftModel with the real engine: plain-language warnings, re-anchoring, the A/V offset and skew measured on
the clock of what plays (and not at all while nothing plays), a skew told only on enough data."""

from __future__ import annotations

import re

import numpy as np

from studio.drift_model import MIN_SKEW_SPAN_S, NO_TRACKER, NOTHING_PLAYS, DriftModel
from studio.engine.anchor import AnchorSettings, DriftingTracker, SpatialAnchor
from studio.engine.pipeline import Engine
from studio.soak import SimulatedCapture, SyntheticClock


def drifting_engine(enabled: bool):
    now = [500.0]
    tracker = DriftingTracker(bias_mm_per_min=6.0, bias_deg_per_min=0.6, seed=2)  # a poor tracker
    engine = Engine(anchor=SpatialAnchor(AnchorSettings(enabled=enabled), tracker), monotonic=lambda: now[0])
    return engine, now


def run_session(model: DriftModel, engine, now, seconds: int) -> None:
    for _ in range(seconds):
        for _ in range(10):
            now[0] += 0.1
            engine.run_once()
        model.poll(engine, now[0], rss_mb=300.0)


def test_an_unanchored_drift_warns_in_plain_words_and_anchoring_brings_it_back():
    engine, now = drifting_engine(enabled=False)
    model = DriftModel()
    run_session(model, engine, now, 25)
    warnings = model.monitor.warnings()
    assert any(w.startswith("body") and "off its rest anchor (anchoring is off)" in w for w in warnings), warnings
    assert any(w.startswith("head") for w in warnings)
    assert model.pose_note is None
    model.set_anchoring(True)
    model.re_anchor()  # take where the tracker sits now as the rest
    run_session(model, engine, now, 30)
    assert not any("rest anchor" in w for w in model.monitor.warnings()), model.monitor.warnings()
    assert any("re-anchored by the operator" in event for event in model.monitor.events)
    assert model.monitor.current["raw_root_drift_mm"] > 1.0  # the input still drifts: anchoring hides it


def _speech_like(seconds: float = 4.0) -> np.ndarray:
    t = np.arange(int(seconds * 16000)) / 16000
    syllables = (np.sin(2 * np.pi * 4 * t) > 0).astype(np.float32)  # four bursts a second
    return (0.3 * syllables * np.sin(2 * np.pi * 180 * t)).astype(np.float32)


def _captured(skew_ppm: float, jitter_ms: float, drop_rate: float = 0.0):
    """The real engine fed by a capture device on a synthetic clock (the soak's), and a poll per second."""
    clock = SyntheticClock()
    engine = Engine(monotonic=clock)
    source = SimulatedCapture(_speech_like(), clock, skew_ppm=skew_ppm, jitter_ms=jitter_ms, drop_rate=drop_rate,
                              seed=3)
    engine.set_source(source)
    model = DriftModel()

    def seconds(count: int) -> list[list[str]]:
        warned = []
        for _ in range(count):
            for _ in range(20):
                clock.advance(0.05)
                engine.run_once()
                while source.pending:
                    engine.run_once()
            model.poll(engine, clock(), rss_mb=300.0)
            warned.append(model.monitor.warnings())
        return warned

    return engine, model, seconds


def _clock_warnings(polls: list[list[str]]) -> list[str]:
    """The A/V and clock warnings among each poll's (frame times, on this shared machine, are not the subject)."""
    return [w for warned in polls for w in warned if w.startswith(("lips", "audio clock"))]


def test_an_injected_skew_warns_once_the_estimate_rests_on_enough_data():
    engine, model, seconds = _captured(skew_ppm=1500.0, jitter_ms=5.0)
    early = seconds(int(MIN_SKEW_SPAN_S) - 5)
    assert not any(_clock_warnings(early)), early  # a skew from a few seconds is mostly jitter: measured, not yet told
    assert "skew after" in model.av_note
    late = seconds(40)
    assert any(re.match(r"audio clock 1(49\d|50\d) ppm off the system clock", w) for w in late[-1]), late[-1]
    assert abs(model.monitor.current["skew_ppm"] - 1500.0) < 3 * model.monitor.skew_error_ppm + 20
    assert abs(model.monitor.current["av_offset_ms"]) < model.thresholds.max_av_offset_ms  # compensated
    assert not any(w.startswith("lips") for w in _clock_warnings(late))


def test_a_busy_machine_then_a_minute_idle_raise_no_alarm():
    """Callbacks late by tens of milliseconds and blocks lost (load 7), then Esc and a minute of idle: the
    A/V figures go with the source, and nothing warns."""
    engine, model, seconds = _captured(skew_ppm=0.0, jitter_ms=40.0, drop_rate=0.05)
    speaking = seconds(12)
    assert "av_offset_ms" in model.monitor.current, model.av_note  # it was measured while the source played
    engine.set_source(None)
    idle = seconds(60)
    assert _clock_warnings(speaking + idle) == []
    assert "av_offset_ms" not in model.monitor.current and "skew_ppm" not in model.monitor.current
    assert model.av_note == NOTHING_PLAYS
    assert model.pose_note == NO_TRACKER  # the default engine has no tracker: there is nothing to anchor
