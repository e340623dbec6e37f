"""The latency and inspector panels on their own, driven through their models."""

from __future__ import annotations

import numpy as np
import pytest

from studio.avatar.arkit import ARKIT_INDEX
from studio.frame import FrameState
from studio.telemetry import LatencyTelemetry
from widgets.inspector import InspectorPanel, WeightBar
from widgets.latency_dock import LatencyPanel
from widgets.models import ENGINE_STAGES, RENDER_STAGE, InspectorModel, LatencyModel


@pytest.fixture
def latency_panel(qtbot):
    panel = LatencyPanel(LatencyModel(window_s=30.0, target_ms=40.0))
    qtbot.addWidget(panel)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def test_latency_panel_shows_render_only_without_an_engine(latency_panel):
    model = latency_panel.model
    for i in range(10):
        model.add_render_time(1.0 + i * 0.016, 12.0)
    model.update(1.2, None)
    latency_panel.refresh()
    assert latency_panel.stat_texts(RENDER_STAGE) == ("  12.0", "  12.0", "  12.0")
    assert latency_panel.stat_texts("inference") == ("—", "—", "—")
    assert "engine idle" in latency_panel.engine_label.text()
    x, y = latency_panel.curves[RENDER_STAGE].getData()
    assert list(y) == [12.0] and x[-1] == 0.0
    inference_y = latency_panel.curves["inference"].getData()[1]
    assert inference_y is None or len(inference_y) == 0


def test_latency_panel_updates_from_a_telemetry_snapshot(latency_panel):
    telemetry = LatencyTelemetry(window=200, budget_ms=40.0)
    timings = {"capture": 1.5, "features": 0.7, "inference": 3.0, "motion": 0.4, "anchor": 0.2}
    model = latency_panel.model
    for tick in range(5):
        for _ in range(10):
            telemetry.record(timings)
        model.update(10.0 + tick * 0.1, telemetry.snapshot())
    telemetry.record({**timings, "inference": 60.0})
    model.update(10.5, telemetry.snapshot())
    latency_panel.refresh()
    assert latency_panel.stat_texts("inference")[0] == "   3.0"
    assert latency_panel.stat_texts("capture") == ("   1.5", "   1.5", "   1.5")
    x, y = latency_panel.curves["inference"].getData()
    assert len(x) == 6 and y[-1] == 60.0 and x[-1] == 0.0
    marks_x, marks_y = latency_panel.over_budget.getData()
    assert len(marks_x) == 1 and marks_y[0] == pytest.approx(62.8)
    assert latency_panel.target_line.value() == 40.0
    assert latency_panel.cpu_label.text().startswith("CPU ")
    assert latency_panel.engine_label.text() == ""
    for stage in ENGINE_STAGES:
        assert latency_panel.stat_texts(stage)[0] != "—"


def test_latency_panel_moves_the_target_line(latency_panel):
    latency_panel.model.set_target(33.0)
    latency_panel.refresh()
    assert latency_panel.target_line.value() == 33.0


def test_inspector_panel_shows_the_model_frame(qtbot):
    model = InspectorModel()
    panel = InspectorPanel(model)
    qtbot.addWidget(panel)
    arkit = np.zeros(52)
    arkit[ARKIT_INDEX["mouthSmileLeft"]] = 0.5
    model.set_frame(FrameState(arkit=arkit))
    panel.refresh()
    assert panel.weight_text("mouthSmileLeft") == "0.50" and panel.bar_value("mouthSmileLeft") == 0.5
    assert panel.weight_text("mouthSmileRight") == "0.00"


def test_weight_bar_repaints_only_when_the_shown_step_changes(qtbot):
    bar = WeightBar()
    qtbot.addWidget(bar)
    assert bar.set_value(0.5) is True
    assert bar.set_value(0.5002) is False
    assert bar.set_value(0.6) is True
    assert bar.set_value(7.0) is True and bar.value() == 1.0


def test_latency_panel_shows_the_audio_underrun_count(latency_panel):
    latency_panel.refresh()
    assert latency_panel.underrun_label.text() == "Audio underruns —"
    telemetry = LatencyTelemetry()
    counts = {"output_underruns": 0, "input_overflows": 0}
    telemetry.counter_sources["audio"] = lambda: counts
    telemetry.record({"capture": 1.0})
    latency_panel.model.update(1.0, telemetry.snapshot())
    latency_panel.refresh()
    assert latency_panel.underrun_label.text() == "Audio underruns 0"
    counts.update(output_underruns=3, input_overflows=4)
    latency_panel.model.update(1.1, telemetry.snapshot())
    latency_panel.refresh()
    assert latency_panel.underrun_label.text() == "Audio underruns 3 · input overflows 4"
