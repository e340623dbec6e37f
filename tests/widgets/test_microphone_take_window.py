"""A take recorded in the window while the microphone listens keeps the device's own rate and channels (the
services' PulseAudio source `vmic`: 48 kHz stereo), not the engine's 16 kHz mono copy."""

from __future__ import annotations

import os

from studio.presets import persona_by_name
from studio.recording.take import open_take
from tests.conftest import make_random_avatar
from widgets.main_window import MainWindow
from widgets.models import EngineController


def test_a_take_recorded_from_the_microphone_in_the_window_is_48_khz_stereo(qtbot, studio_home, tmp_path, monkeypatch):
    os.environ.setdefault("EGL_PLATFORM", "surfaceless")
    monkeypatch.setenv("PULSE_SOURCE", "vmic")  # scripts/services.sh makes it 48 kHz stereo
    win = MainWindow(make_random_avatar(), show_dialogs=False, persist_layout=False, engine=EngineController(),
                     persona=persona_by_name("default"), recordings_root=tmp_path / "takes")
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    assert win.start_microphone(), win.engine.state
    controller = win.recording
    assert controller.start_recording()
    qtbot.waitUntil(lambda: controller.recorder.frames_written > 15 and controller.recorder.audio_samples > 48000 // 4,
                    timeout=30000)
    controller.stop_recording()
    take = open_take(controller.rows[0].path)
    assert (take.sample_rate, take.audio.channels, take.manifest["channels"]) == (48000, 2, 2)
    assert len(take.audio) >= 48000 // 4
