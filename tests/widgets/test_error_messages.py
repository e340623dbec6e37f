"""Errors a person must read: plain sentences naming the file and what works, in a dialog that stays."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QMessageBox

from tests.conftest import make_random_avatar
from tests.widgets.test_commands import run_headless
from widgets.main_window import MainWindow
from widgets.models import EngineController

FORMATS = "use WAV, FLAC, OGG, MP3 or M4A"


@pytest.fixture
def not_audio(tmp_path):
    path = tmp_path / "notes.wav"
    path.write_text("meeting notes, not sound\n" * 20)
    return path


def _plain(message: str, path) -> None:
    assert f"{path} is not an audio file; {FORMATS}" in message
    assert message.count(str(path)) == 1
    assert "Errno" not in message and "Invalid data" not in message


def test_play_audio_file_names_a_non_audio_file_in_a_dialog_that_stays(qtbot, studio_home, not_audio):
    engine = EngineController()
    window = MainWindow(make_random_avatar(), engine=engine, show_dialogs=True, persist_layout=False)
    qtbot.addWidget(window)
    window.show()
    try:
        assert window.play_audio_file(str(not_audio)) is False
        boxes = [w for w in window.findChildren(QMessageBox) if w.isVisible()]
        assert len(boxes) == 1, "one dialog, not a status-bar line that scrolls away"
        _plain(boxes[0].text(), not_audio)
        assert window.source_label.text() == "Source: idle", "the status bar does not carry the cut-off reason"
        qtbot.wait(300)
        assert boxes[0].isVisible()
    finally:
        engine.shutdown()


@pytest.mark.parametrize("command", ["lipsync", "render"])
def test_commands_name_a_non_audio_file_in_one_plain_line(tmp_path, not_audio, command):
    if command == "lipsync":
        result = run_headless("lipsync", str(not_audio), "--out", str(tmp_path / "out.csv"))
    else:
        result = run_headless("render", "--audio", str(not_audio), "--out", str(tmp_path / "out.mp4"))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    _plain(result.stderr, not_audio)
