"""What the Takes dock tells the presenter: a take without sound is said at stop (and Space after Ctrl+R does
record the cue's voice), the Export dialog starts where exports go, alpha formats start transparent, take names
show whole, and Undo Delete says the take is back."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from studio.avatar.io import default_avatar_path, load_avatar
from studio.frame import FrameState
from studio.presets import persona_by_name
from studio.recording.recorder import take_manifest
from studio.recording.session import write_take
from studio.recording.take import open_take
from tests.conftest import make_random_avatar
from widgets.main_window import MainWindow
from widgets.models import EngineController

TAKE_NAME = "take-2026-12-04-201530"  # what the recorder names a take


@pytest.fixture
def window(qtbot, studio_home, tmp_path):
    os.environ.setdefault("EGL_PLATFORM", "surfaceless")

    def build(real_engine: bool = False) -> MainWindow:
        engine = EngineController() if real_engine else None
        win = MainWindow(make_random_avatar(), show_dialogs=False, persist_layout=False, engine=engine,
                         persona=persona_by_name("default"), recordings_root=tmp_path / "takes")
        qtbot.addWidget(win)
        win.show()
        qtbot.waitExposed(win)
        return win

    return build


def _take(root: Path, name: str = TAKE_NAME, frames: int = 30):
    states = [FrameState(media_time_s=i / 30, arkit=np.full(52, 0.1), sequence=i) for i in range(frames)]
    audio = (0.2 * np.sin(np.arange(frames * 16000 // 30) * 0.07)).astype(np.float32)
    manifest = take_manifest("default", "default", load_avatar(default_avatar_path()), 16000, 30)
    return write_take(root / name, manifest, states, audio, [])


def _press(window, qtbot, key, modifier=Qt.KeyboardModifier.NoModifier) -> None:
    """A key as the operator presses it: to the active window, so the window's shortcuts see it."""
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    QTest.keyClick(window.focusWidget() or window, key, modifier)


def _peak(take_path: Path) -> float:
    audio = open_take(take_path).audio
    return float(np.abs(np.asarray(audio)).max()) if len(audio) else 0.0


def test_space_after_ctrl_r_records_the_cue_voice_even_when_the_cue_list_had_ended(window, qtbot):
    win = window(real_engine=True)
    panels, controller = win.panels, win.recording
    assert panels.speak_cue(len(panels.cues.lines) - 1)  # the list played through, as in a rehearsal
    panels.neutral()
    _press(win, qtbot, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    assert controller.recording, "Ctrl+R starts a take"
    _press(win, qtbot, Qt.Key.Key_Space)
    assert panels.cues.playing == 0, "Space at the end of the list speaks cue 1 again"
    qtbot.waitUntil(lambda: panels.cues.playing is None, timeout=60000)
    qtbot.waitUntil(lambda: controller.recorder.audio_peak > 0.05, timeout=10000)
    _press(win, qtbot, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    assert not controller.recording
    assert _peak(controller.rows[0].path) > 0.05, "the spoken cue is in the take's audio"
    assert win.last_error is None or "no sound" not in win.last_error


def test_a_take_without_sound_warns_when_it_stops(window, qtbot):
    win = window(real_engine=True)
    controller = win.recording
    assert controller.start_recording()
    qtbot.waitUntil(lambda: controller.recorder.frames_written > 15, timeout=30000)  # idle frames, nothing spoken
    controller.stop_recording()
    name = controller.rows[0].name
    assert win.last_error is not None and f"The take {name} holds no sound" in win.last_error
    assert "It was kept" in win.last_error and (controller.root / name).is_dir()


def test_the_export_dialog_starts_in_the_exports_folder_then_where_the_last_export_went(window, qtbot, studio_home,
                                                                                          tmp_path):
    _take(tmp_path / "takes")
    controller = window().recording
    info = controller.rows[0]
    first = Path(controller.export_dialog(info, "mp4").path.text())
    assert first == studio_home / "exports" / f"{TAKE_NAME}.mp4" and first.parent.is_dir()
    elsewhere = tmp_path / "client"
    elsewhere.mkdir()
    assert controller.export(info.path, "csv", elsewhere / "face.csv")
    qtbot.waitUntil(lambda: controller.export_process is None, timeout=120000)
    assert (elsewhere / "face.csv").is_file(), controller.last_export
    assert Path(controller.export_dialog(info, "bvh").path.text()) == elsewhere / f"{TAKE_NAME}.bvh"
    remembered = json.loads((studio_home / "config" / "recent-folders.json").read_text())
    assert remembered == {"export": str(elsewhere.resolve())}
    elsewhere.joinpath("face.csv").unlink()
    elsewhere.rmdir()  # a remembered folder that is gone: back to the exports folder
    assert Path(controller.export_dialog(info, "mp4").path.text()).parent == studio_home / "exports"


def test_formats_with_alpha_start_transparent_and_mp4_with_the_viewport_background(window, tmp_path):
    _take(tmp_path / "takes")
    controller = window().recording
    info = controller.rows[0]
    for kind in ("webm", "mov"):
        assert controller.export_dialog(info, kind).background.currentText() == "transparent", kind
    assert controller.export_dialog(info, "mp4").background.currentText() == controller.window.viewport.background


def test_take_names_show_whole_in_the_takes_dock(window, qtbot, tmp_path):
    _take(tmp_path / "takes")
    win = window()
    controller = win.recording
    controller.dock.show()
    controller.dock.raise_()
    qtbot.waitUntil(controller.panel.table.isVisible, timeout=5000)
    table = controller.panel.table
    needed = table.fontMetrics().horizontalAdvance(TAKE_NAME)
    assert table.columnWidth(0) >= needed + 6, f"name column {table.columnWidth(0)} px, the name needs {needed} px"
    assert TAKE_NAME in table.item(0, 0).toolTip()


def test_undo_delete_says_the_take_is_back(window, tmp_path):
    _take(tmp_path / "takes", "demo")
    win = window()
    controller = win.recording
    controller.refresh(select="demo")
    assert controller.delete_selected()
    assert "Moved take demo to the trash" in win.statusBar().currentMessage()
    assert controller.undo_delete()
    message = win.statusBar().currentMessage()
    assert "trash" not in message.replace("from the trash", "") and "Restored take demo" in message
