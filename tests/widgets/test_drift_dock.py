"""The Drift dock: live figures from the real engine, a plain-language warning, re-anchor, bounded plots, and
no false alarm from a take, a spoken line or an idle studio on a busy machine."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from PySide6.QtWidgets import QLabel

from studio.drift_model import DriftModel
from studio.frame import FrameState
from studio.recording.recorder import take_manifest
from studio.recording.session import write_take
from tests.conftest import make_random_avatar
from tests.studio.test_drift_model import drifting_engine, run_session
from widgets.drift_dock import DriftPanel
from widgets.main_window import MainWindow
from widgets.models import EngineController


def test_the_panel_shows_figures_with_limits_and_the_warning(qtbot):
    engine, now = drifting_engine(enabled=False)
    model = DriftModel()
    panel = DriftPanel(model)
    qtbot.addWidget(panel)
    panel.show()
    run_session(model, engine, now, 15)
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


def _menu_actions(actions) -> list:
    """Every action in these menus and their submenus."""
    found = []
    for action in actions:
        found.append(action)
        if action.menu() is not None:
            found += _menu_actions(action.menu().actions())
    return found


def test_the_main_window_has_a_drift_dock_next_to_latency(qtbot, studio_home):
    window = MainWindow(make_random_avatar(), engine=EngineController(lambda: None), show_dialogs=False,
                        persist_layout=False)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    assert window.drift.dock in window.tabifiedDockWidgets(window.latency_dock)
    assert window.drift.dock.toggleViewAction() in _menu_actions(window.menuBar().actions())
    window.drift.poll()  # no engine yet: the monitor still counts session time and memory
    assert window.drift.model.monitor.current["rss_mb"] > 0


def test_the_window_checks_identity_with_its_own_canvas_at_a_fixed_camera(qtbot, studio_home):
    avatar = make_random_avatar()
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


@pytest.fixture
def busy_process():
    """A process that keeps one core busy beside the test (as other work did when the false alarms came)."""
    process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield process
    process.kill()
    process.wait()


class DriftWatch:
    """The studio with its real engine, speaking through the PulseAudio null sink; the test polls the Drift
    dock itself, once per second of real time, and keeps what the dock said at each poll."""

    def __init__(self, window: MainWindow, qtbot) -> None:
        self.window, self.qtbot = window, qtbot
        self.warnings: list[str] = []
        self.texts: list[str] = []  # every visible label of the panel, one a line

    def poll(self, seconds: int) -> None:
        panel = self.window.drift.panel
        for _ in range(seconds):
            self.qtbot.wait(1000)  # the window presents frames meanwhile, as it does for the operator
            self.window.drift.poll()
            self.warnings.append(panel.warning_text())
            self.texts.append(shown_texts(panel))

    def speak(self, text: str, longest_s: int = 60) -> None:
        """Speak a line and poll until it has ended."""
        engine = self.window.engine
        assert engine.speak_text(text), engine.state
        for _ in range(longest_s):
            self.poll(1)
            if engine.poll().startswith("idle"):
                return
        raise AssertionError(f"the line did not end within {longest_s} s: {engine.state}")

    def alarms(self) -> list[str]:
        return [text for text in self.warnings if text.startswith("⚠")]


@pytest.fixture
def watch(qtbot, studio_home, tmp_path, pulse_audio):
    window = MainWindow(make_random_avatar(), show_dialogs=False, persist_layout=False,
                        recordings_root=tmp_path / "takes")
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    window.drift.timer.stop()
    yield DriftWatch(window, qtbot)
    window.close()


def shown_texts(panel) -> str:
    """What the panel's visible labels say, one a line."""
    return "\n".join(label.text() for label in panel.findChildren(QLabel) if label.isVisible())


def test_a_take_played_and_stopped_then_a_spoken_line_raise_no_alarm(watch, tmp_path):
    window = watch.window
    watch.speak("This line finishes before the take plays.")  # its source stays the engine's last one
    seconds = 10
    frames = [FrameState(media_time_s=200.0 + i / 30, arkit=np.full(52, (i % 30) / 30), sequence=i)
              for i in range(30 * seconds)]
    tone = (0.2 * np.sin(np.arange(seconds * 16000) * 0.05)).astype(np.float32)
    take = write_take(tmp_path / "takes" / "tone", take_manifest("default", "default", window.avatar, 16000, 30),
                      frames, tone)
    assert window.recording.load(take.path)
    window.recording.toggle_playback()
    assert window.recording.player.silent_reason is None, window.recording.player.silent_reason
    watch.poll(5)
    playing = "\n".join(watch.texts[-5:])
    window.recording.toggle_playback()  # stopped part-way; the take stays loaded
    watch.poll(2)
    watch.speak("And now a line after the take.")
    window.recording.close_playback()
    watch.speak("The take is closed, so the viewport shows this voice again, for a few seconds longer.")
    watch.poll(2)
    assert len(watch.warnings) >= 14
    assert watch.alarms() == []
    # measured while it played, on the take's own clock: a small offset, the skew still too young to tell
    assert re.search(r"A/V offset · skew\n[+-]\d+\.\d ms · —\n≤ 10 ms\ntake tone; skew after 30 s", playing), playing
    assert "text 'The take is closed" in "\n".join(watch.texts)  # then on the line's own clock


def test_idle_beside_a_busy_process_raises_no_alarm(watch, busy_process):
    window = watch.window
    watch.speak("Hello.")
    watch.poll(10)
    assert watch.alarms() == []
    assert "nothing playing" in shown_texts(window.drift.panel)


def test_the_dock_says_why_body_and_head_drift_are_empty(watch):
    window = watch.window
    watch.speak("Hi.")
    assert "no tracker input: nothing to anchor" in shown_texts(window.drift.panel)
