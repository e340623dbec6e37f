"""The Drift dock: live figures from the real engine, a plain-language warning, re-anchor, bounded plots."""

from __future__ import annotations

import numpy as np
import pytest

from studio.engine.anchor import AnchorSettings, DriftingTracker, SpatialAnchor
from studio.engine.pipeline import Engine
from studio.frame import FrameState
from tests.conftest import make_synthetic_avatar
from widgets.drift_dock import DriftModel, DriftPanel
from widgets.main_window import MainWindow
from widgets.models import EngineController


def _drifting_engine(enabled: bool):
    now = [500.0]
    tracker = DriftingTracker(bias_mm_per_min=6.0, bias_deg_per_min=0.6, seed=2)  # a poor tracker
    engine = Engine(anchor=SpatialAnchor(AnchorSettings(enabled=enabled), tracker), monotonic=lambda: now[0])
    return engine, now


def _session(model: DriftModel, engine, now, seconds: int) -> None:
    for _ in range(seconds):
        for _ in range(10):
            now[0] += 0.1
            engine.run_once()
        model.poll(engine, engine.slot.latest(), now[0], rss_mb=300.0)


def test_an_unanchored_drift_warns_in_plain_words_and_anchoring_brings_it_back():
    engine, now = _drifting_engine(enabled=False)
    model = DriftModel()
    _session(model, engine, now, 25)
    warnings = model.monitor.warnings()
    assert any(w.startswith("body") and "off its rest anchor (anchoring is off)" in w for w in warnings), warnings
    assert any(w.startswith("head") for w in warnings)
    model.set_anchoring(True)
    model.re_anchor()  # take where the tracker sits now as the rest
    _session(model, engine, now, 30)
    assert not any("rest anchor" in w for w in model.monitor.warnings()), model.monitor.warnings()
    assert any("re-anchored by the operator" in event for event in model.monitor.events)
    assert model.monitor.current["raw_root_drift_mm"] > 1.0  # the input still drifts: anchoring hides it


def test_the_panel_shows_figures_with_limits_and_the_warning(qtbot):
    engine, now = _drifting_engine(enabled=False)
    model = DriftModel()
    panel = DriftPanel(model)
    qtbot.addWidget(panel)
    panel.show()
    _session(model, engine, now, 15)
    assert "anchoring is off" in panel.warning_text()
    assert panel.values["session"].text() == "0:00:14"
    assert panel.values["root"].text().endswith("mm") and panel.limits["root"].text() == "≤ 0.5 mm"
    assert not panel.anchoring.isChecked()
    panel.anchoring.setChecked(True)
    assert engine.anchor.settings.enabled
    panel.reanchor_button.click()
    assert any("re-anchored" in event for event in model.monitor.events)


def test_ten_hours_of_history_stay_a_bounded_number_of_plot_points(qtbot):
    model = DriftModel()
    panel = DriftPanel(model)
    qtbot.addWidget(panel)
    panel.show()
    for second in range(36_000):
        model.monitor.update_clock(float(second), np.sin(second / 600.0), 200.0)
    panel.refresh()
    points = len(panel.av_curve.getData()[0])
    assert 0 < points <= model.monitor.series["av_offset_ms"].capacity
    assert model.monitor.worst("av_offset_ms") == pytest.approx(1.0, abs=1e-3)


def test_the_main_window_has_a_drift_dock_next_to_latency(qtbot, studio_home):
    window = MainWindow(make_synthetic_avatar(), engine=EngineController(lambda: None), show_dialogs=False,
                        persist_layout=False)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    assert window.drift.dock in window.tabifiedDockWidgets(window.latency_dock)
    assert window.drift.dock.toggleViewAction() in window.menuBar().actions()[1].menu().actions()
    window.drift.poll()  # no engine yet: the monitor still counts session time and memory
    assert window.drift.model.monitor.current["rss_mb"] > 0


def test_the_window_checks_identity_with_its_own_canvas_at_a_fixed_camera(qtbot, studio_home):
    avatar = make_synthetic_avatar()
    window = MainWindow(avatar, engine=EngineController(lambda: None), show_dialogs=False, persist_layout=False)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    check, view, neutral = window.drift.model.identity, window.viewport.view, FrameState()
    assert check is not None, "the window gives the drift monitor an identity renderer"

    view.orbit(40.0, 10.0)
    assert check(neutral) == 1.0  # the reference
    assert window.viewport.render_identity(neutral).std() > 5.0, "the identity render is blank"
    view.orbit(-70.0)  # the operator turns the view: the identity camera stays where it was
    turned = view.camera.get_state()
    assert check(neutral) > 0.98
    assert view.camera.get_state() == turned, "the operator's view is put back after an identity render"

    view.set_avatar(avatar, betas=np.full(10, 3.0))  # the drawn shape changes behind the studio's back
    assert check(neutral) < 0.98
