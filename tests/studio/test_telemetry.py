"""Latency telemetry: right percentiles over a sliding window, over-budget counting, bounded memory."""

import time

import numpy as np
import pytest

from studio.telemetry import LatencyTelemetry


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
