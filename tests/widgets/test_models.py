"""The Qt-free view-models: events, joint angles, latency bookkeeping, the engine seam."""

from __future__ import annotations

import math

import numpy as np
import pytest

from studio.avatar.arkit import ARKIT_INDEX, ARKIT_NAMES
from studio.avatar.skeleton import JOINT_INDEX
from studio.frame import FrameState
from studio.telemetry import LatencyTelemetry
from widgets.models import (
    ARKIT_GROUPS,
    RENDER_STAGE,
    EngineController,
    FpsMeter,
    InspectorModel,
    LatencyModel,
    axis_angle_to_euler_deg,
    parse_telemetry,
)


def test_a_models_signal_calls_listeners_in_order_and_is_silent_while_blocked():
    model, calls = LatencyModel(), []
    model.changed.connect(lambda: calls.append(("a", model.target_ms)))
    second = model.changed.connect(lambda: calls.append(("b", model.target_ms)))
    model.set_target(40.0)
    with model.changed.blocked():  # a widget writing back the value it shows hears no echo of it
        model.set_target(45.0)
    model.changed.disconnect(second)
    model.set_target(50.0)
    assert calls == [("a", 40.0), ("b", 40.0), ("a", 50.0)]


def test_arkit_groups_cover_all_52_names_once():
    grouped = [name for _, names in ARKIT_GROUPS for name in names]
    assert sorted(grouped) == sorted(ARKIT_NAMES) and len(grouped) == 52


@pytest.mark.parametrize(
    ("axis_angle", "expected"),
    [
        ((math.radians(20), 0, 0), (20, 0, 0)),
        ((0, math.radians(-35), 0), (0, -35, 0)),
        ((0, 0, math.radians(10)), (0, 0, 10)),
        ((0, 0, 0), (0, 0, 0)),
    ],
)
def test_single_axis_rotations_read_as_that_euler_angle(axis_angle, expected):
    assert np.allclose(axis_angle_to_euler_deg(np.array(axis_angle)), expected, atol=1e-6)


def test_inspector_model_reports_frames_and_joint_angles():
    model, seen = InspectorModel(), []
    model.changed.connect(seen.append)
    assert model.weights().shape == (52,) and not model.weights().any()
    pose = np.zeros((55, 3))
    pose[JOINT_INDEX["head"]] = (math.radians(12), 0, 0)
    arkit = np.zeros(52)
    arkit[ARKIT_INDEX["jawOpen"]] = 1.0
    state = FrameState(arkit=arkit, pose=pose)
    model.set_frame(state)
    assert seen == [state]
    assert model.weights()[ARKIT_INDEX["jawOpen"]] == 1.0
    assert model.joint_angles_deg()["Head"][0] == pytest.approx(12.0)


def _telemetry_snapshot(stage_ms: dict[str, float], frames: int = 20, budget_ms: float = 10.0) -> dict:
    telemetry = LatencyTelemetry(window=100, budget_ms=budget_ms)
    for _ in range(frames):
        telemetry.record(stage_ms)
    return telemetry.snapshot()


def test_parse_telemetry_reads_the_engine_snapshot():
    snapshot = _telemetry_snapshot({"capture": 1.0, "features": 0.5, "inference": 2.0, "motion": 0.2, "anchor": 0.1})
    sample = parse_telemetry(snapshot, 5.0)
    assert sample.stage_ms == {"capture": 1.0, "features": 0.5, "inference": 2.0, "motion": 0.2, "anchor": 0.1}
    assert sample.stats["inference"].p99_ms == pytest.approx(2.0)
    assert sample.end_to_end_ms == pytest.approx(3.8)
    assert sample.over_budget_total == 0 and sample.cpu_pct is not None


def test_latency_model_traces_render_only_when_no_engine_runs():
    model = LatencyModel(window_s=10.0)
    for i in range(30):
        model.add_render_time(i * 0.1, 5.0 + i % 3)
    model.update(3.0, None)
    times, values = model.trace(RENDER_STAGE)
    assert len(times) == 1 and values[0] == 7.0
    assert model.stats[RENDER_STAGE].p50_ms == pytest.approx(6.0)
    assert not model.engine_active and "inference" not in model.stats


def test_latency_model_marks_over_budget_ticks_and_forgets_old_points():
    model = LatencyModel(window_s=10.0, target_ms=50.0)
    fast = _telemetry_snapshot({"capture": 1.0, "inference": 2.0})
    slow = _telemetry_snapshot({"capture": 1.0, "inference": 80.0})
    model.update(1.0, fast)
    model.update(2.0, slow)
    assert [t for t, _ in model.over_budget] == [2.0]
    model.update(20.0, fast)
    assert list(model.over_budget) == [] and len(model.traces["inference"]) == 1


def test_latency_model_marks_new_engine_overruns_below_the_target():
    model = LatencyModel(target_ms=50.0)
    model.update(1.0, {"stages": {"inference": {"p50_ms": 3.0}}, "over_budget_count": 4})
    model.update(1.1, {"stages": {"inference": {"p50_ms": 3.0}}, "over_budget_count": 4})
    model.update(1.2, {"stages": {"inference": {"p50_ms": 3.0}}, "over_budget_count": 6})
    assert [t for t, _ in model.over_budget] == [1.2]


def test_latency_target_must_be_positive():
    with pytest.raises(ValueError, match="latency target 0"):
        LatencyModel(target_ms=0)


def test_fps_meter_measures_the_tick_rate():
    meter = FpsMeter(window_s=1.0)
    for i in range(121):
        meter.tick(10.0 + i / 60.0)
    assert meter.fps() == pytest.approx(60.0, rel=1e-6)


def test_engine_controller_stays_idle_and_says_why_when_the_engine_cannot_be_built():
    def broken_factory():
        raise ImportError("No module named 'studio.engine.pipeline'")

    controller, states = EngineController(broken_factory), []
    controller.state_changed.connect(states.append)
    assert controller.speak_text("hello") is False
    assert not controller.running and controller.latest_frame() is None and controller.telemetry_snapshot() is None
    assert "speech engine unavailable" in controller.state and "studio.engine.pipeline" in controller.state
    assert states and states[-1] == controller.state


def test_engine_controller_refuses_empty_text():
    controller = EngineController(lambda: pytest.fail("the engine must not be built for empty text"))
    assert controller.speak_text("   ") is False
    assert "text is empty" in controller.state


def test_engine_controller_reports_a_missing_audio_file_and_stays_idle(tmp_path):
    controller = EngineController()
    missing = tmp_path / "nothing.wav"
    try:
        assert controller.play_file(str(missing)) is False
        assert controller.state == f"idle — {missing}: no such audio file"
        assert controller.running, "the engine keeps running idle after a refused source"
    finally:
        controller.shutdown()
    assert not controller.running


def test_engine_controller_says_once_that_a_cut_off_file_ends_early(tmp_path, monkeypatch):
    import time

    import soundfile

    from studio.engine.sources import FileSource

    path = tmp_path / "cut.wav"
    soundfile.write(path, np.zeros(16000, np.float32) + 0.01, 16000)
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
    controller, notices = EngineController(), []
    controller.notice.connect(notices.append)
    try:
        assert controller.play_file(str(path)) is True  # short: decoded whole when opened, so said at once
        assert len(notices) == 1 and "cut.wav ends early" in notices[0] and "of the 1.00 s" in notices[0]
        controller.stop()
        monkeypatch.setattr(FileSource, "STREAM_OVER_S", 0.1)  # long: streamed, so known when it has played out
        assert controller.play_file(str(path)) is True and len(notices) == 1
        deadline = time.monotonic() + 10.0
        while controller.poll() != "idle" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert controller.state == "idle" and len(notices) == 2 and "cut.wav ends early" in notices[1]
    finally:
        controller.shutdown()


def test_latency_model_takes_the_callers_cpu_load_when_no_engine_reports_one():
    model = LatencyModel()
    model.update(1.0, None, cpu_pct=37.5)
    assert model.latest_cpu_pct() == 37.5
    model.update(1.1, _telemetry_snapshot({"capture": 1.0}), cpu_pct=99.0)
    assert model.latest_cpu_pct() != 99.0
