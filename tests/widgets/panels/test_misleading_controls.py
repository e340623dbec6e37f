"""Controls that must say what they do: toggles that look on when on, a Cap box that takes "0.6" as typed,
and a cue list whose end is said out loud and can wrap around."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest


def _pixels(widget) -> np.ndarray:
    """The widget as drawn on screen (RGB), via QWidget.grab()."""
    image = widget.grab().toImage().convertToFormat(widget.grab().toImage().Format.Format_RGB888)
    width, height = image.width(), image.height()
    data = np.frombuffer(image.constBits(), np.uint8, image.bytesPerLine() * height)
    return data.reshape(height, image.bytesPerLine())[:, :width * 3].reshape(height, width, 3).astype(float)


def _looks_different(off: np.ndarray, on: np.ndarray) -> float:
    """How far the on button's mean colour is from the off one's (0..255 per channel, the largest)."""
    return float(np.abs(off.reshape(-1, 3).mean(0) - on.reshape(-1, 3).mean(0)).max())


@pytest.mark.parametrize("which", ["mute", "pause", "mirror", "before"])
def test_a_toggle_on_is_unmistakable_from_off_in_text_and_colour(studio_window, qtbot, which):
    window = studio_window()
    operator, editor = window.panels.operator_panel, window.panels.editor_panel
    button = {"mute": operator.mute_button, "pause": operator.pause_button,
              "mirror": editor.mirror, "before": editor.before}[which]
    dock = window.panels.operator_dock if which in ("mute", "pause") else window.panels.editor_dock
    dock.show()
    dock.raise_()
    qtbot.waitUntil(button.isVisible, timeout=5000)
    off_text, off = button.text(), _pixels(button)
    button.setChecked(True)
    qtbot.wait(50)
    on_text, on = button.text(), _pixels(button)
    assert on_text != off_text, f"{which}: the text says the same on and off ({on_text!r})"
    assert _looks_different(off, on) > 40, f"{which}: on and off look alike ({_looks_different(off, on):.0f} levels apart)"
    button.setChecked(False)
    assert button.text() == off_text


def test_the_mute_key_and_the_model_move_the_visible_state(studio_window):
    window = studio_window()
    panels = window.panels
    panels.hotkey("mute")
    assert panels.muted and panels.operator_panel.mute_button.text() == "Muted"
    panels.hotkey("mute")
    assert not panels.muted and panels.operator_panel.mute_button.text() == "Mute"
    panels.editor.set_mirror(True)  # the model changed elsewhere (signals blocked while the button follows)
    assert panels.editor_panel.mirror.isChecked() and panels.editor_panel.mirror.text() != "Mirror L/R"


@pytest.mark.parametrize(("box", "typed", "expected"), [("cap", "0.6", 0.6), ("gain", "1.5", 1.5), ("cap", ".35", 0.35)])
def test_a_decimal_typed_into_cap_or_gain_is_taken_whole(studio_window, qtbot, box, typed, expected):
    window = studio_window()
    editor = window.panels.editor_panel
    window.panels.editor_dock.show()
    window.panels.editor_dock.raise_()
    editor.rows["jawOpen"].label.click()
    spin = getattr(editor, box)
    spin.setFocus()
    spin.selectAll()
    qtbot.keyClicks(spin, typed)
    qtbot.keyClick(spin, Qt.Key.Key_Return)
    model = window.panels.editor.cap if box == "cap" else window.panels.editor.gain
    assert model("jawOpen") == pytest.approx(expected), f"typed {typed!r}, box shows {spin.text()!r}"
    assert spin.value() == pytest.approx(expected)
    editor.undo_button.click()  # one undo step for one typed value
    assert model("jawOpen") == pytest.approx(1.0)


def test_next_cue_at_the_end_of_the_list_says_so_and_wraps_around(studio_window, qtbot):
    window = studio_window(real_engine=True)
    panels, panel = window.panels, window.panels.operator_panel
    last = len(panels.cues.lines) - 1
    assert panels.speak_cue(last)
    assert "ends here" in panel.message.text()
    assert "the list has ended; starts again at 1." in panel.cue_status.text()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    QTest.keyClick(window, Qt.Key.Key_Space)  # the next-cue key at the end: cue 1 again, and why
    assert panels.cues.playing == 0, "Space at the end of the list speaks nothing"
    assert "had ended: starting again at cue 1" in window.statusBar().currentMessage()
    assert window.engine.state.startswith("text ")
    panels.neutral()
    panel.wrap_box.setChecked(False)
    assert panels.speak_cue(last) and not panels.speak_cue()
    assert "the cue list has ended" in panel.message.text() and "Wrap around" in panel.message.text()
    assert "the list has ended (turn on Wrap around" in panel.cue_status.text()
    panels.neutral()
