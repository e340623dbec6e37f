"""The window's controls as a user meets them: size limits, docks, framing, zoom, CPU plot, microphone, messages."""

from __future__ import annotations

import os
import re
import subprocess

import numpy as np
import pytest
import soundfile
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication

from tests.conftest import make_random_avatar
from tests.studio.engine.helpers import two_sentences
from widgets.latency_dock import LatencyPanel
from widgets.level_meter import LevelMeter
from widgets.main_window import MINIMUM_SIZE, MainWindow, readable_device_name
from widgets.models import INSPECTED_JOINTS, EngineController, InspectorModel, LatencyModel


def _no_engine():
    raise ImportError("No module named 'studio.engine.pipeline'")


@pytest.fixture
def open_window(qtbot, studio_home):
    def build(**kwargs) -> MainWindow:
        kwargs.setdefault("engine", EngineController(_no_engine))
        window = MainWindow(make_random_avatar(), show_dialogs=False, **kwargs)
        qtbot.addWidget(window)
        window.show()
        qtbot.waitExposed(window)
        return window

    return build


def test_the_window_has_a_minimum_size_and_the_inspector_keeps_its_labels_after_shrinking(open_window, qtbot):
    window = open_window()
    window.resize(320, 200)
    qtbot.wait(100)
    assert (window.width(), window.height()) >= MINIMUM_SIZE
    assert window.width() >= MINIMUM_SIZE[0] and window.height() >= MINIMUM_SIZE[1]
    window.resize(1440, 900)
    qtbot.waitUntil(lambda: window.width() == 1440, timeout=5000)
    qtbot.wait(100)
    labels = window.inspector.name_labels()
    assert len(labels) == 52
    cut = [label.text() for label in labels if label.width() < label.sizeHint().width()]
    assert cut == [], f"Inspector names cut off after shrinking and growing the window: {cut}"
    assert window.inspector_dock.width() >= window.inspector.minimumSizeHint().width()


def test_layout_restore_remembers_the_head_framing(open_window):
    first = open_window()
    first.viewport.frame_head()
    first.close()
    second = open_window()
    assert second.viewport.framing == "head"
    head_center = second.viewport.view.camera.center
    second.viewport.frame_head()
    assert second.viewport.view.camera.center == pytest.approx(head_center)


def _wheel(widget, position: tuple[float, float], notches: int) -> None:
    point = QPointF(*position)
    event = QWheelEvent(point, widget.mapToGlobal(point), QPoint(0, 0), QPoint(0, 120 * notches),
                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(widget, event)


def test_the_mouse_wheel_zooms_toward_the_cursor_not_the_hips(open_window, qtbot):
    window = open_window()
    window.present_timer.stop()
    view = window.viewport.view
    face = view._zoom_target[None]
    cursor = view.project(face)[0]
    scale = view.camera.scale_factor
    _wheel(window.viewport.canvas.native, tuple(cursor), 3)
    qtbot.waitUntil(lambda: view.camera.scale_factor < scale, timeout=5000)
    after = view.project(face)[0]
    assert np.abs(after - cursor).max() < 2.0, f"the face moved from {cursor} to {after} under the cursor"


def test_zoom_without_a_cursor_closes_in_on_the_face(open_window):
    window = open_window()
    view = window.viewport.view
    face = view._zoom_target[None]
    before = view.project(face)[0]
    width, height = window.viewport.canvas.size
    view.zoom(0.4)
    after = view.project(face)[0]
    assert np.abs(after - before).max() < 2.0
    assert 0 <= after[0] < width and 0 <= after[1] < height  # still in view, four times closer


def test_the_cpu_plot_range_follows_a_load_above_100_percent(qtbot):
    panel = LatencyPanel(LatencyModel())
    qtbot.addWidget(panel)
    panel.show()
    qtbot.waitExposed(panel)
    panel.model.update(1.0, None, cpu_pct=136.7)
    panel.refresh()
    assert panel.cpu_label.text() == "CPU 136.7 %"
    low, high = panel.cpu_range()
    assert low == 0 and high >= 136.7
    panel.model.update(30.0, None, cpu_pct=40.0)  # the busy point has left the window
    panel.refresh()
    assert panel.cpu_range()[1] == 100


def test_the_inspector_has_no_jaw_joint_row_that_reads_zero_while_the_jaw_is_open(open_window):
    window = open_window()
    assert "Jaw" not in dict(INSPECTED_JOINTS)
    assert "Jaw" not in InspectorModel().joint_angles_deg()
    with pytest.raises(KeyError):
        window.inspector.angle_texts("Jaw")
    assert window.inspector.weight_text("jawOpen") != ""  # the jaw is shown by its blendshape weight


def test_empty_speak_text_says_so_once(open_window):
    window = open_window()
    assert window.speak_text("   ") is False
    assert window.statusBar().currentMessage() == "Nothing to speak: the text is empty"
    assert "empty" not in window.source_label.text()
    assert window.source_label.text() == "Source: idle"


def test_the_status_bar_shows_audio_underruns_when_there_are_some(open_window, monkeypatch):
    window = open_window()
    snapshot = {"stages": {}, "audio": {"output_underruns": 0, "input_overflows": 0}}
    monkeypatch.setattr(window.engine, "telemetry_snapshot", lambda: snapshot)
    window._update_telemetry()
    assert window.underrun_label.isHidden()
    snapshot["audio"] = {"output_underruns": 2, "input_overflows": 0}
    window._update_telemetry()
    assert not window.underrun_label.isHidden() and window.underrun_label.text() == "2 audio underruns"


def test_level_meter_shows_peak_dbfs():
    meter = LevelMeter()
    meter.set_level(0.5)
    assert meter.level_db == pytest.approx(-6.02, abs=0.01)
    meter.set_level(None)
    assert meter.fraction() == 0.0


def test_device_names_are_spelled_out():
    assert readable_device_name("pulse") == "PulseAudio sound server"
    assert readable_device_name("default") == "System default"
    assert readable_device_name("HDA Intel PCH: ALC3246 Analog (hw:0,0)") == "HDA Intel PCH: ALC3246 Analog (hw:0,0)"


@pytest.mark.usefixtures("pulse_audio")
def test_microphone_item_device_list_name_and_level_follow_the_microphone(open_window, qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("PULSE_SOURCE", "vsink.monitor")  # the microphone hears what the null sink plays
    window = open_window(engine=EngineController())
    assert window.microphone_action.isCheckable() and not window.microphone_action.isChecked()
    assert window.input_label.text() == "Input: off"

    window.fill_microphone_menu()
    entries = [action for action in window.microphone_menu.actions() if action.isEnabled()]
    assert entries and not any(re.match(r"\d+: ", action.text()) for action in entries)
    assert "PulseAudio sound server" in [action.text() for action in entries]
    assert not any(action.isChecked() for action in entries)

    pulse = next(action for action in entries if action.text() == "PulseAudio sound server")
    pulse.trigger()
    qtbot.waitUntil(lambda: window.source_label.text().startswith("Source: microphone"), timeout=10000)
    assert window.microphone_action.isChecked()
    assert window.input_label.text() == "Input: PulseAudio sound server"
    window.fill_microphone_menu()
    checked = [action.text() for action in window.microphone_menu.actions() if action.isChecked()]
    assert checked == ["PulseAudio sound server"]

    tone = tmp_path / "tone.wav"
    t = np.arange(48000 * 3) / 48000
    soundfile.write(tone, (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), 48000)
    player = subprocess.Popen(["paplay", "-d", "vsink", str(tone)], env=os.environ.copy())
    try:
        qtbot.waitUntil(lambda: window.input_meter.level_db > -20, timeout=10000)
    finally:
        player.kill()
        player.wait()

    assert window.lift_label.isHidden()  # a loud tone: nothing to lift

    window.microphone_action.trigger()  # unchecking stops listening
    assert not window.microphone_action.isChecked()
    assert window.source_label.text() == "Source: idle"
    window._update_input()
    assert window.input_label.text() == "Input: off" and window.input_meter.fraction() == 0.0

    # a voice 30 dB under a normal one: the status bar says it is lifted for the lips (a new source, a new level)
    pulse.trigger()
    qtbot.waitUntil(lambda: window.source_label.text().startswith("Source: microphone"), timeout=10000)
    quiet = tmp_path / "quiet.wav"
    soundfile.write(quiet, np.tile(two_sentences(p90_dbfs=-48.0), 3), 16000)
    player = subprocess.Popen(["paplay", "-d", "vsink", str(quiet)], env=os.environ.copy())
    try:
        qtbot.waitUntil(lambda: window._update_input() or window.lift_label.isVisible(), timeout=20000)
    finally:
        player.kill()
        player.wait()
    assert re.fullmatch(r"Quiet voice: \+\d+ dB for the lips", window.lift_label.text())
    window.microphone_action.trigger()
    window._update_input()
    assert window.lift_label.isHidden()
