"""The viewport presents at the preset's fps, never faster, and scales its render resolution, shown in the status bar."""

from __future__ import annotations

import numpy as np
from PySide6.QtGui import QImage

from studio.presets import preset_by_name
from tests.conftest import make_random_avatar
from widgets.main_window import MainWindow
from widgets.models import EngineController


def _no_engine():
    raise ImportError("no engine in this test")


def _pixels(image: QImage) -> np.ndarray:
    image = image.convertToFormat(QImage.Format.Format_RGBA8888)
    return np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.width(), 4)[..., :3].astype(int)


def test_present_timer_follows_the_preset_and_half_resolution_looks_like_full(qtbot, studio_home):
    window = MainWindow(make_random_avatar(), engine=EngineController(_no_engine), show_dialogs=False,
                        persist_layout=False, preset=preset_by_name("default"))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    assert window.present_timer.interval() == 33  # 30 fps: never more presents than the preset asks for
    window.apply_preset(preset_by_name("performance"))
    assert window.present_timer.interval() == 40 and window.viewport.dynamic_resolution.fps == 25.0

    canvas = window.viewport.canvas
    window.viewport.dynamic_resolution.enabled = False
    window.present_timer.stop()  # the same frame for both pictures
    canvas.render_scale = 1.0
    full = _pixels(canvas.native.grabFramebuffer())
    canvas.render_scale = 0.5  # each grab draws once
    half = _pixels(canvas.native.grabFramebuffer())
    assert full.shape == half.shape
    difference = np.abs(full - half)
    assert difference.max() > 0  # really drawn at another resolution
    assert difference.mean() < 6  # ... and scaled up over the same picture
    canvas.render_scale = 0.5  # (a draw with dynamic resolution off puts it back to full)
    window._update_status()
    assert "50% res" in window.fps_label.text()
    canvas.render_scale = 1.0
    window._update_status()
    assert "res" not in window.fps_label.text()
    window.close()
