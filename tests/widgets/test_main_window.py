"""The main window on a real X server with Mesa GL: viewport, docks, menus, layout, bad files."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QMenu, QMessageBox

from studio.avatar.arkit import ARKIT_INDEX
from studio.avatar.skeleton import JOINT_INDEX
from studio.frame import FrameState
from studio.presets import ExpressionStyle, Persona, Voice
from studio.workspaces import WORKSPACES
from tests.conftest import make_random_avatar
from widgets.main_window import MainWindow, SpeakTextDialog
from widgets.models import EngineController
from widgets.settings import default_layout_path


def _no_engine():
    raise ImportError("No module named 'studio.engine.pipeline'")


@pytest.fixture
def open_window(qtbot, studio_home):
    """Build, show and register a window; it is closed (and saves its layout) at teardown."""

    def build(show_dialogs: bool = False, **kwargs) -> MainWindow:
        kwargs.setdefault("engine", EngineController(_no_engine))
        window = MainWindow(make_random_avatar(), show_dialogs=show_dialogs, **kwargs)
        qtbot.addWidget(window)
        window.show()
        qtbot.waitExposed(window)
        return window

    return build


def _jaw_open_frame() -> FrameState:
    arkit = np.zeros(52)
    arkit[ARKIT_INDEX["jawOpen"]] = 1.0
    pose = np.zeros((55, 3))
    pose[JOINT_INDEX["head"]] = (math.radians(15.0), 0.0, 0.0)
    return FrameState(media_time_s=1.0, arkit=arkit, pose=pose)


def test_window_opens_presents_idle_frames_and_draws_the_avatar(open_window, qtbot):
    window = open_window()
    qtbot.waitUntil(lambda: window.viewport.draw_count >= 3, timeout=20000)
    assert window.current_frame is not None
    assert window.source_label.text().startswith("Source: idle")
    assert window.avatar_label.text() == "Avatar: synthetic"
    window.present_timer.stop()
    with_avatar = window.viewport.render_image()
    window.viewport.view.avatar.visible = False
    background_only = window.viewport.render_image()
    assert with_avatar.shape[2] == 4 and with_avatar.shape[:2] == background_only.shape[:2]
    changed = np.abs(with_avatar[..., :3].astype(int) - background_only[..., :3]).max(axis=2) > 24
    assert changed.mean() > 0.01, "the avatar covers almost no pixels of the viewport"


def test_background_menu_switches_the_viewport(open_window):
    window = open_window()
    window.present_timer.stop()
    window.background_actions["chroma"].trigger()
    assert window.viewport.background == "chroma"
    corner = window.viewport.render_image()[2, 2, :3]
    assert tuple(corner) == pytest.approx((0, 177, 64), abs=2)


def test_inspector_shows_52_rows_and_follows_the_presented_frame(open_window, qtbot):
    window = open_window()
    window.switch_workspace("design")  # the Inspector's workspace: a hidden panel does not refresh
    window.present_timer.stop()
    inspector = window.inspector
    assert inspector.row_count() == 52
    window.present_frame(_jaw_open_frame())
    qtbot.waitUntil(lambda: inspector.weight_text("jawOpen") == "1.00", timeout=5000)
    assert inspector.bar_value("jawOpen") == 1.0
    assert inspector.weight_text("eyeBlinkLeft") == "0.00"
    assert inspector.angle_texts("Head") == (" +15.0", "  +0.0", "  +0.0")


def test_docks_can_be_hidden_and_shown_from_view_panels_the_one_menu_with_dock_toggles(open_window, qtbot):
    window = open_window()
    docks = window.findChildren(QDockWidget)
    toggles = {dock.toggleViewAction() for dock in docks}
    assert set(window.workspaces.panels_menu.actions()) == toggles
    assert {dock.objectName() for dock in docks} == set().union(*(workspace.docks for workspace in WORKSPACES))
    elsewhere = [action.text() for menu in window.menuBar().findChildren(QMenu) if menu is not window.workspaces.panels_menu
                 for action in menu.actions() if action in toggles]
    assert elsewhere == []
    for dock in (window.panels.operator_dock, window.latency_dock):
        toggle = dock.toggleViewAction()
        assert dock.isVisible() and toggle.isChecked()
        toggle.trigger()
        assert not dock.isVisible()
        toggle.trigger()
        qtbot.waitUntil(dock.isVisible, timeout=5000)
    window.latency_dock.hide()
    window.reset_layout()
    assert window.latency_dock.isVisible()


def test_layout_is_saved_on_close_and_restored_on_start(open_window):
    first = open_window()
    first.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, first.inspector_dock)
    first.set_background("chroma")
    first.close()
    saved = json.loads(default_layout_path().read_text())
    assert saved["options"] == {"background": "chroma", "framing": "body", "api": {"on": False, "port": 8765}}
    second = open_window()
    assert second.dockWidgetArea(second.inspector_dock) == Qt.DockWidgetArea.LeftDockWidgetArea
    assert second.viewport.background == "chroma"
    assert second.background_actions["chroma"].isChecked()


def test_corrupt_layout_is_ignored_and_kept_until_a_good_save(open_window):
    path = default_layout_path()
    path.parent.mkdir(parents=True)
    path.write_text("{this is not a layout")
    window = open_window()
    message = window.statusBar().currentMessage()
    assert "Ignored the saved window layout" in message and str(path) in message
    assert window.dockWidgetArea(window.inspector_dock) == Qt.DockWidgetArea.RightDockWidgetArea
    assert path.read_text() == "{this is not a layout"
    window.close()
    assert json.loads(path.read_text())["schema_version"] == 1
    assert path.with_name(path.name + ".bad").read_text() == "{this is not a layout"


def test_a_bad_avatar_file_keeps_the_current_avatar_and_says_why(open_window, tmp_path):
    window = open_window(show_dialogs=True)
    bad = tmp_path / "broken.npz"
    bad.write_bytes(b"this is not a zip archive")
    before = window.avatar
    assert window.open_avatar(bad) is False
    assert window.avatar is before and window.avatar_label.text() == "Avatar: synthetic"
    assert str(bad) in window.last_error and "is not a valid avatar" in window.last_error
    assert str(bad) in window.statusBar().currentMessage()
    boxes = [w for w in window.findChildren(QMessageBox) if w.isVisible()]
    assert len(boxes) == 1 and not boxes[0].isModal() and str(bad) in boxes[0].text()


def test_a_good_avatar_file_replaces_the_avatar(open_window, tmp_path):
    from studio.avatar.io import save_avatar

    other = make_random_avatar(seed=3)
    path = tmp_path / "other.npz"
    save_avatar(other, path)
    window = open_window()
    assert window.open_avatar(path) is True
    assert window.avatar.source == str(path) and window.last_error is None


def test_speech_without_an_engine_keeps_the_idle_animation_and_says_so(open_window):
    window = open_window()
    assert window.speak_text("Hello there") is False
    assert window.source_label.text() == "Source: idle"
    assert "speech engine unavailable" in window.source_label.toolTip() and "speech engine unavailable" in window.last_error
    assert "speech engine unavailable" in window.statusBar().currentMessage()
    before = window.current_frame
    window.present()
    assert window.current_frame is not before and window.current_frame.media_time_s > 0


def test_spoken_text_drives_the_avatar_through_the_real_engine(open_window, qtbot):
    window = open_window(engine=EngineController())
    assert window.speak_text("Hello, how are you today?", rate_wpm=200) is True, window.engine.state
    assert window.source_label.text().startswith("Source: text")
    qtbot.waitUntil(lambda: window.inspector_model.weights()[ARKIT_INDEX["jawOpen"]] > 0.1, timeout=30000)
    qtbot.waitUntil(lambda: window.latency_model.engine_active and "inference" in window.latency_model.stats, timeout=10000)
    qtbot.waitUntil(lambda: window.source_label.text() == "Source: idle", timeout=30000)
    assert window.speak_text("And once more, with feeling.") is True
    assert window.source_label.text().startswith("Source: text")
    window.stop_speech()
    assert window.source_label.text() == "Source: idle"
    engine = window.engine.engine
    window.close()
    assert not engine.running


def test_microphone_device_menu_lists_the_inputs_and_starts_the_chosen_one(open_window, qtbot):
    window = open_window(engine=EngineController())
    window.fill_microphone_menu()
    entries = [action for action in window.microphone_menu.actions() if action.isEnabled()]
    assert entries, "the PulseAudio test services provide input devices"
    entries[0].trigger()
    qtbot.waitUntil(lambda: window.source_label.text().startswith("Source: microphone"), timeout=10000)
    window.stop_speech()
    assert window.source_label.text() == "Source: idle"


def test_the_persona_sets_the_voice_defaults_and_the_idle_motion(open_window):
    calm = Persona(name="calm", voice=Voice(name="en-gb", rate_wpm=200, pitch=30),
                   style=ExpressionStyle(blink_rate_per_min=0))
    window = open_window(persona=calm)
    dialog = SpeakTextDialog(window, window.persona.voice)
    assert (dialog.voice.currentText(), dialog.rate.value(), dialog.pitch.value()) == ("en-gb", 200, 30)
    blinks = [window.idle.frame_at(t / 10).arkit[ARKIT_INDEX["eyeBlinkLeft"]] for t in range(600)]
    assert max(blinks) < 0.1


def test_run_gui_opens_the_avatar_with_the_presets_latency_target_and_returns_0_when_closed(qapp, studio_home, tmp_path):
    from PySide6.QtCore import QTimer

    from studio.avatar.io import save_avatar
    from studio.presets import preset_by_name
    from widgets.main_window import run_gui

    path = tmp_path / "mine.npz"
    save_avatar(make_random_avatar(seed=5), path)
    seen = {}

    def inspect_and_close():
        window = next(w for w in qapp.topLevelWidgets() if isinstance(w, MainWindow))
        seen.update(source=window.avatar.source, target=window.latency_model.target_ms)
        window.close()

    QTimer.singleShot(1500, inspect_and_close)
    assert run_gui(str(path), "education") == 0
    assert seen == {"source": str(path), "target": preset_by_name("education").render.latency_target_ms}
    assert default_layout_path().is_file()
