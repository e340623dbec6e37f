"""Recording in the window: Record, the red indicator, the Takes dock, playback driving the viewport,
rename/delete/undo, recovery of an unfinished take on start, exports in a separate process, CSV import."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

from studio.avatar.io import default_avatar_path, load_avatar
from studio.frame import FrameState
from studio.recording.livelink import write_livelink_csv
from studio.recording.recorder import take_manifest
from studio.recording.session import write_take
from studio.recording.take import MANIFEST, open_take
from tests.conftest import make_random_avatar
from widgets.main_window import MainWindow
from widgets.models import EngineController


@pytest.fixture
def window(qtbot, studio_home, tmp_path):
    os.environ.setdefault("EGL_PLATFORM", "surfaceless")

    def build(**kwargs) -> MainWindow:
        win = MainWindow(make_random_avatar(), show_dialogs=False, persist_layout=False,
                         recordings_root=tmp_path / "takes", **kwargs)
        qtbot.addWidget(win)
        win.show()
        qtbot.waitExposed(win)
        return win

    return build


def _take(root, name="demo", frames=60):
    rng = np.random.default_rng(0)
    states = [FrameState(media_time_s=5 + i / 30, arkit=rng.random(52) * 0.5, voice_activity=float(i % 20 < 10), sequence=i)
              for i in range(frames)]
    audio = (0.2 * np.sin(np.arange(frames * 16000 // 30) * 0.07)).astype(np.float32)
    events = [{"kind": "cue", "media_time_s": 5.5, "text": "Hello"}]
    return write_take(root / name, take_manifest("default", "default", load_avatar(default_avatar_path()), 16000, 30),
                      states, audio, events)


def _shown(frame, take):
    """The sequence number of the take's frame on screen, None when the frame is not the take's."""
    return next((f.sequence for f in take.frames if f.media_time_s == frame.media_time_s
                 and np.array_equal(f.arkit, frame.arkit)), None)


def test_record_shows_the_indicator_and_lists_the_take(window, qtbot):
    win = window(engine=EngineController())
    controller = win.recording
    assert not controller.indicator.isVisible()
    win.recording.record_action.trigger()  # Ctrl+R
    assert controller.recording and controller.indicator.isVisible()
    win.speak_text("Hello there.")
    qtbot.waitUntil(lambda: controller.recorder.frames_written > 90, timeout=30000)
    qtbot.waitUntil(lambda: "REC" in controller.indicator.text() and "kB" in controller.indicator.text(), timeout=5000)
    assert controller.panel.record_button.text() == "■ Stop"
    manifest = controller.stop_recording()
    assert not controller.indicator.isVisible() and manifest["status"] == "complete"
    assert [r.status for r in controller.rows] == ["complete"] and controller.panel.table.rowCount() == 1
    take = open_take(controller.rows[0].path)
    assert any(e["kind"] == "cue" and "Hello" in e["text"] for e in take.events)
    assert np.abs(take.audio).max() > 0.05  # the spoken line's audio is in the take


def test_playback_drives_the_viewport_and_seeks(window, qtbot, tmp_path):
    take = _take(tmp_path / "takes")
    win = window(engine=EngineController())
    controller = win.recording
    controller.refresh(select="demo")
    assert controller.selected().name == "demo"
    assert controller.load_selected()
    controller.seek(1.0)
    win.present()
    assert _shown(win.current_frame, take) == take.frame_at(1.0).sequence
    assert controller.panel.time_label.text().startswith("00:01.0")
    controller.set_loop(True)
    controller.toggle_playback()
    qtbot.waitUntil(lambda: controller.player.position() > 1.3, timeout=10000)
    win.present()
    assert _shown(win.current_frame, take) is not None
    controller.toggle_playback()
    assert controller.player.state == "paused"
    controller.close_playback()
    win.present()
    assert _shown(win.current_frame, take) is None  # live again


def test_rename_delete_and_undo(window, tmp_path):
    _take(tmp_path / "takes")
    controller = window().recording
    controller.refresh(select="demo")
    assert controller.rename(str(tmp_path / "takes" / "demo"), "Client demo")
    assert [r.name for r in controller.rows] == ["Client demo"]
    assert not controller.rename(str(tmp_path / "takes" / "Client demo"), "a/b")
    assert "not allowed" in controller.window.last_error
    controller.select("Client demo")
    assert controller.delete_selected() and controller.rows == []
    assert controller.undo_delete() and [r.name for r in controller.rows] == ["Client demo"]


def test_unfinished_take_is_recovered_and_offered_on_start(window, tmp_path):
    take = _take(tmp_path / "takes", "crashed")
    manifest = json.loads((take.path / MANIFEST).read_text())
    manifest.update(status="recording")
    manifest.pop("files")
    (take.path / MANIFEST).write_text(json.dumps(manifest))
    (take.path / "recording.lock").write_text("999999999\n")
    win = window()
    assert "crashed was not finished" in win.last_error
    assert [(r.name, r.status) for r in win.recording.rows] == [("crashed", "recovered")]
    assert win.recording.selected().name == "crashed"


def test_exports_run_in_another_process_with_progress_and_cancel(window, qtbot, tmp_path):
    _take(tmp_path / "takes", frames=300)
    controller = window().recording
    out = tmp_path / "out"
    out.mkdir()
    assert controller.export(tmp_path / "takes" / "demo", "csv", out / "demo.csv")
    qtbot.waitUntil(lambda: controller.export_process is None, timeout=60000)
    assert controller.last_export.startswith("exported") and (out / "demo.csv").is_file()
    assert controller.export(tmp_path / "takes" / "demo", "mp4", out / "demo.mp4", size=(1280, 720))
    started = time.monotonic()
    qtbot.waitUntil(lambda: controller.panel.progress.value() >= 5 or controller.export_process is None, timeout=120000)
    controller.window.present()  # the window keeps working while the export runs
    controller.cancel_export()
    qtbot.waitUntil(lambda: controller.export_process is None, timeout=60000)
    assert time.monotonic() >= started
    assert "cancelled" in controller.last_export
    assert sorted(p.name for p in out.iterdir()) == ["demo.csv"]  # no demo.mp4, no temporary file


def test_live_link_csv_imports_as_a_take_and_a_bad_one_is_refused(window, tmp_path):
    rng = np.random.default_rng(2)
    frames = [FrameState(media_time_s=i / 60, arkit=rng.random(52), sequence=i) for i in range(60)]
    write_livelink_csv(frames, tmp_path / "face.csv", 60)
    controller = window().recording
    folder = controller.import_livelink(str(tmp_path / "face.csv"))
    assert folder is not None and [r.name for r in controller.rows] == ["face"]
    assert open_take(folder).manifest["source"] == "livelink-csv"
    (tmp_path / "other.csv").write_text("time,jaw\n0,0.5\n")
    assert controller.import_livelink(str(tmp_path / "other.csv")) is None
    assert "not a Live Link Face CSV" in controller.window.last_error
    assert [r.name for r in controller.rows] == ["face"]


def test_export_dialog_offers_size_fps_and_background(window, tmp_path):
    from widgets.take_browser import ExportDialog

    _take(tmp_path / "takes")
    controller = window().recording
    info = controller.rows[0]
    mp4 = ExportDialog(controller.window, info, "mp4", "studio")
    assert [mp4.background.itemText(i) for i in range(mp4.background.count())] == ["studio", "chroma"]
    mp4.path.setText(str(tmp_path / "clip"))
    mp4.size_box.setCurrentText("1920x1080")
    assert mp4.out_path() == str(tmp_path / "clip.mp4") and mp4.size() == (1920, 1080)
    mp4.size_box.setCurrentText("big")
    assert mp4.size() is None
    webm = ExportDialog(controller.window, info, "webm", "transparent")
    assert webm.background.currentText() == "transparent"
