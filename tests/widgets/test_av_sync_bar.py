"""The Latency dock's A/V sync row drives the real engine's delayed voice monitor."""

from __future__ import annotations

import pytest

from tests.conftest import make_random_avatar
from widgets.main_window import MainWindow
from widgets.models import EngineController


@pytest.fixture
def window(qtbot, studio_home):
    win = MainWindow(make_random_avatar(), show_dialogs=False, engine=EngineController())
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    yield win
    win.close()


def test_monitor_follows_the_checkbox_and_shows_the_measured_delay(window, qtbot):
    bar = window.av_sync
    bar.offset.setValue(25)
    bar.enabled.setChecked(True)
    assert window.engine.voice_monitor == (True, 25.0)
    assert "starts with the microphone" in bar.delay_label.text()
    assert window.engine.start_microphone() is True, window.engine.state
    engine = window.engine.engine
    qtbot.waitUntil(lambda: engine.monitor.clip is not None, timeout=10000)
    qtbot.waitUntil(lambda: engine.monitor.render_s > 0 and engine.monitor.video_delay_s > 0, timeout=10000)
    bar.refresh()
    text = bar.delay_label.text()
    delay_ms, measured_ms = (float(part.split()[0]) for part in text.removeprefix("delay ").split("(measured "))
    assert delay_ms == pytest.approx(measured_ms + 25, abs=1.5)
    bar.enabled.setChecked(False)
    qtbot.waitUntil(lambda: engine.monitor.clip is None, timeout=5000)
    assert bar.delay_label.text() == "delay — (off)"
    window.stop_speech()
