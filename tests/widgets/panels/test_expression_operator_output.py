"""Expression editor, operator controls and the clean output window, with speech from the real engine."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QWidget

from studio.avatar.arkit import ARKIT_INDEX
from studio.cues import ClipSource
from studio.frame import FrameState
from studio.speech.visemes import closure_intervals, lips_closed, mouth_openness


def _speak_and_collect(window, qtbot, text: str, rate_wpm: int = 140):
    """Speak a line on the running engine; (frames, source, media time of the source's sample 0)."""
    queue = window.engine.engine.subscribe(20_000)
    assert window.speak_text(text, rate_wpm=rate_wpm), window.engine.state
    source = window.engine.source
    qtbot.waitUntil(lambda: window.engine.engine.source is source, timeout=10000)  # started on the engine thread
    start = window.engine.engine.source_start_media_s
    qtbot.waitUntil(lambda: window.engine.source is None, timeout=60000)
    window.engine.engine.unsubscribe(queue)
    frames = [f for f in queue.drain() if f.media_time_s >= start]
    assert frames, "the engine produced no frames for the line"
    return frames, source, start


def _warm_engine(window, qtbot) -> None:
    assert window.speak_text("Hello.", rate_wpm=200), window.engine.state
    qtbot.waitUntil(lambda: window.engine.source is None, timeout=60000)


def test_a_jaw_open_cap_set_in_the_editor_holds_while_speech_drives_the_face(studio_window, qtbot):
    window = studio_window(real_engine=True)
    editor = window.panels.editor_panel
    editor.rows["jawOpen"].label.click()
    editor.cap.setValue(0.5)
    assert window.persona.style.caps == {"jawOpen": 0.5} and editor.curve.output(1.0) == 0.5
    _warm_engine(window, qtbot)
    line = "Wow! How absolutely awesome, I saw a giant cat."
    frames, _source, _start = _speak_and_collect(window, qtbot, line)
    capped = max(f.weight("jawOpen") for f in frames)
    assert 0.35 < capped <= 0.5 + 1e-6, capped
    editor.before.click()  # before: the face without the editor's caps
    frames, _source, _start = _speak_and_collect(window, qtbot, line)
    assert max(f.weight("jawOpen") for f in frames) > 0.55, "the speech opens wider than the cap"
    editor.before.click()
    editor.undo_button.click()
    assert window.persona.style.caps.get("jawOpen", 1.0) == 1.0
    editor.redo_button.click()
    assert window.persona.style.caps == {"jawOpen": 0.5}


def test_a_hotkey_smile_blends_over_speech_and_closures_still_close(studio_window, qtbot):
    window = studio_window(real_engine=True)
    panels = window.panels
    _warm_engine(window, qtbot)
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    QTest.keyClick(window, Qt.Key.Key_1)
    assert panels.mixer.is_active("smile"), "key 1 fires the default persona's smile"
    qtbot.wait(400)  # past its fade-in
    frames, source, start = _speak_and_collect(window, qtbot, "Bob met Pam by the maple tree, maybe.")
    closures = closure_intervals(source.clip.phonemes)
    assert len(closures) >= 5
    for begin, end in closures:
        inside = [f for f in frames if start + begin - 0.011 <= f.media_time_s <= start + end + 0.011]
        assert inside and any(lips_closed(f.arkit) for f in inside), f"closure {begin:.2f}-{end:.2f} s never closed"
    smile = np.array([f.weight("mouthSmileLeft") for f in frames])
    assert np.median(smile) >= 0.6, "the smile holds while the avatar speaks"
    assert max(mouth_openness(f.arkit) for f in frames) > 0.2, "the lips keep articulating under the smile"
    QTest.keyClick(window, Qt.Key.Key_1)
    assert not panels.mixer.is_active("smile")
    QTest.keyClick(window, Qt.Key.Key_2)
    assert panels.mixer.is_active("concerned")
    QTest.keyClick(window, Qt.Key.Key_0)
    assert panels.mixer.active_names() == [], "0 is the panic neutral key"


def test_expression_editor_sliders_mirror_solo_mute_named_expressions_and_undo(studio_window):
    window = studio_window()
    panels = window.panels
    editor = panels.editor_panel
    assert len(editor.rows) == 52
    editor.mirror.click()
    editor.set_weight("mouthSmileLeft", 0.6)
    assert panels.editor.weight("mouthSmileRight") == pytest.approx(0.6)
    assert editor.rows["mouthSmileRight"].slider.value() == 60
    idle = window.panels.filter_idle(FrameState())
    assert idle.weight("mouthSmileLeft") == pytest.approx(0.6), "the designer's pose shows on the idle face"
    editor.rows["mouthSmileLeft"].mute.click()
    assert window.panels.filter_idle(FrameState()).weight("mouthSmileRight") == 0.0
    editor.rows["mouthSmileLeft"].mute.click()
    editor.rows["browInnerUp"].solo.click()
    assert np.count_nonzero(window.panels.filter_idle(FrameState()).arkit) == 0
    editor.rows["browInnerUp"].solo.click()
    assert editor.save_expression("grin")
    assert window.persona.expressions["grin"].weights == {"mouthSmileLeft": 0.6, "mouthSmileRight": 0.6}
    assert "[4]  grin" in panels.operator_panel.trigger_buttons["grin"].text(), "new expressions get the next key"
    editor.reset_button.click()
    assert panels.editor.weight("mouthSmileLeft") == 0.0
    editor.undo_button.click()
    assert panels.editor.weight("mouthSmileLeft") == pytest.approx(0.6)
    editor.reset_button.click()
    editor.load_expression("grin")
    assert panels.editor.weight("mouthSmileRight") == pytest.approx(0.6)
    assert not editor.save_expression("a/b") and "not allowed" in editor.message.text()


def test_hotkeys_rebind_and_refuse_a_key_already_bound(studio_window):
    window = studio_window()
    panel = window.panels.operator_panel
    assert not panel.bind("concerned", "1")
    assert "already bound to 'smile'" in panel.message.text()
    assert not panel.bind("concerned", "H")
    assert "taken by the window" in panel.message.text()
    assert panel.bind("concerned", "7")
    assert window.persona.hotkeys["concerned"] == "7" and "7" in [s.key().toString() for s in panel.shortcuts.values()]
    assert panel.trigger_buttons["concerned"].text().startswith("[7]")


def test_cue_list_speaks_shows_playing_and_next_pauses_resumes_mutes(studio_window, qtbot):
    window = studio_window(real_engine=True)
    panels = window.panels
    assert panels.speak_cue()
    assert (panels.cues.playing, panels.cues.next_index) == (0, 1)
    status = panels.operator_panel.cue_status.text()
    assert "Playing: 1. Hello!" in status and "Next (Space): 2. Thanks" in status
    assert panels.operator_panel.cue_list.item(0).text().startswith("▶")
    spoken, engine = window.engine.source, window.engine.engine
    line = spoken.clip
    qtbot.waitUntil(lambda: engine.source is spoken, timeout=10000)  # started on the engine thread
    qtbot.waitUntil(lambda: engine.media_time_now() - engine.source_start_media_s > 0.3, timeout=10000)
    assert panels.pause_resume() and window.engine.source is None and panels.paused_clip is not None
    rest = panels.paused_clip
    heard_s = (len(line.audio) - len(rest.audio)) / line.sample_rate
    assert 0.25 < heard_s < line.duration_s, "paused after the part already heard, before the end"
    np.testing.assert_array_equal(rest.audio, line.audio[len(line.audio) - len(rest.audio):])
    assert [p.symbol for p in rest.phonemes] == [p.symbol for p in line.phonemes if p.end_s > heard_s]
    assert panels.cues.playing == 0, "a paused cue still counts as playing"
    assert panels.pause_resume() and isinstance(window.engine.source, ClipSource)
    assert window.engine.source.clip is rest, "resumes where it stopped, not from the start"
    panels.set_muted(True)
    assert window.engine.engine.speaker.muted
    qtbot.waitUntil(lambda: panels.cues.playing is None, timeout=60000)
    panels.set_muted(False)
    assert not window.engine.engine.speaker.muted
    assert panels.speak_cue(1) and panels.cues.next_index is None
    panels.neutral()
    assert window.engine.source is None and panels.cues.playing is None


def test_the_output_window_shows_the_avatar_alone_on_chroma_and_transparent(studio_window, qtbot):
    window = studio_window()
    window.present_timer.stop()
    output = window.panels.show_output(True)
    qtbot.waitExposed(output)
    assert output.windowFlags() & Qt.WindowType.FramelessWindowHint
    assert output.findChildren(QWidget) == [output.canvas.native], "no UI: the canvas is the only widget"
    assert output.width() * 9 == output.height() * 16, "the preset's 1280×720 aspect"
    arkit = np.zeros(52)
    arkit[ARKIT_INDEX["jawOpen"]] = 1.0
    state = FrameState(media_time_s=1.0, arkit=arkit)
    draws, viewport_draws = output.draw_count, window.viewport.draw_count
    for _ in range(5):
        window.present_frame(state)
        qtbot.wait(60)
    assert output.view._state is state, "fed the same FrameState as the main viewport"
    assert output.draw_count - draws <= window.viewport.draw_count - viewport_draws + 1
    chroma = output.render_image()
    assert tuple(chroma[2, 2, :3]) == pytest.approx((0, 177, 64), abs=2)
    green = np.all(np.abs(chroma[..., :3].astype(int) - (0, 177, 64)) <= 3, axis=2)
    assert 0.01 < (~green).mean() < 0.9, "the avatar covers part of the picture"
    window.panels.set_output_background("transparent")
    clear = output.render_image()
    assert clear[2, 2, 3] == 0 and (clear[..., 3] == 255).mean() > 0.01
    assert np.array_equal(clear[..., 3] > 0, ~green), "opaque exactly where the avatar is"
    window.panels.show_output(False)
    assert not output.isVisible() and not window.panels.output_action.isChecked()


def test_an_avatar_opened_from_the_file_menu_appears_in_the_open_output_window(studio_window, qtbot):
    from pathlib import Path

    window = studio_window()
    output = window.panels.show_output(True)
    qtbot.waitExposed(output)
    before = output.view.avatar.mesh.model.v_template.shape[0]
    path = Path(__file__).parents[2] / "data" / "avatars" / "humanoid_arkit.glb"
    assert window.open_avatar(path)
    assert output.view.avatar.mesh.model.source == window.viewport.base_avatar.source == str(path)
    assert output.view.avatar.mesh.model.v_template.shape[0] != before, "the audience sees the opened avatar, not the old one"
    window.panels.show_output(False)
