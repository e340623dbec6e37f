"""Latency telemetry: right percentiles over a sliding window, over-budget counting, bounded memory."""

import time

import numpy as np
import pytest

from studio.telemetry import LatencyTelemetry, SoundToScreen, engine_latency_parts, pipeline_lookahead_ms


def test_percentiles_follow_the_sliding_window():
    telemetry = LatencyTelemetry(window=100, budget_ms=10.0)
    for value in range(1, 101):
        telemetry.record({"features": float(value), "inference": 0.0})
    stages = telemetry.snapshot()["stages"]
    assert stages["features"]["p50_ms"] == pytest.approx(50.5)
    assert stages["features"]["p99_ms"] == pytest.approx(np.percentile(np.arange(1, 101), 99))
    assert stages["features"]["last_ms"] == 100.0
    for _ in range(100):  # old values leave the window
        telemetry.record({"features": 2.0, "inference": 0.0})
    assert telemetry.snapshot()["stages"]["features"]["p99_ms"] == 2.0


def test_over_budget_counts_frames_whose_total_exceeds_the_target():
    telemetry = LatencyTelemetry(window=10, budget_ms=5.0)
    for _ in range(30):
        telemetry.record({"a": 3.0, "b": 3.0})  # 6 ms total: over
        telemetry.record({"a": 1.0, "b": 1.0})
    snap = telemetry.snapshot()
    assert snap["over_budget_count"] == 30
    assert snap["over_budget_in_window"] == 5
    assert snap["stages"]["total"]["p50_ms"] == pytest.approx(4.0)
    assert snap["frames"] == 60


def test_cpu_load_is_reported_even_for_a_short_light_interval():
    """3 ms of work is less than one /proc clock tick: a tick-based reading would say 0 %."""
    telemetry = LatencyTelemetry()
    telemetry.snapshot()
    start = time.process_time()
    while time.process_time() - start < 0.003:
        pass
    assert telemetry.snapshot()["cpu_pct"] > 0.0


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="budget_ms"):
        LatencyTelemetry(budget_ms=0)


def test_sound_to_screen_is_the_sum_of_its_parts_and_judges_a_target():
    latency = SoundToScreen(device_ms=25.0, lookahead_ms=20.0, engine_ms=3.0, render_ms=40.0, present_ms=33.3)
    assert latency.total_ms == pytest.approx(121.3)
    assert list(latency.parts()) == ["device", "lookahead", "engine", "render", "present"]
    assert not latency.meets(80.0) and latency.meets(121.3)
    assert latency.total_text() == "sound→screen p95 121.3 ms"
    assert latency.parts_text() == "device 25.0 + lookahead 20.0 + engine 3.0 + render 40.0 + present 33.3"


def test_the_lookahead_part_counts_the_model_lookahead_and_a_lower_face_rate_batch():
    assert pipeline_lookahead_ms(2) == 20.0
    assert pipeline_lookahead_ms(2, face_batch_hops=3) == 40.0  # 33 Hz faces: the first hop waits for two more


def test_an_engine_reports_its_fixed_parts_and_its_speaker_buffer():
    from studio.engine.output import MIN_BUFFER_S
    from studio.engine.pipeline import Engine

    engine = Engine()
    parts = engine_latency_parts(engine)
    assert parts["device_ms"] == 0.0  # no live input: nothing waits in an input buffer
    assert parts["lookahead_ms"] == pipeline_lookahead_ms(engine.model.lookahead_frames, engine.plan.face_batch_hops)
    assert parts["speaker_buffer_ms"] == pytest.approx(MIN_BUFFER_S * 1000.0)
