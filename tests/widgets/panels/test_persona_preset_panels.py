"""Persona and preset panels: choose, edit with a live preview, unsaved marker, save/revert, bad input refused."""

from __future__ import annotations

import numpy as np
import pytest

from studio.presets import load_persona


def test_choosing_a_persona_changes_the_look_style_cues_and_preset(studio_window, qtbot):
    window = studio_window()
    panels = window.panels
    before = window.avatar.colors().copy()
    assert panels.select_persona("presenter")
    qtbot.waitUntil(lambda: not np.array_equal(window.avatar.colors(), before), timeout=5000)
    assert window.persona.name == "presenter" and window.idle.style.gesture_energy == pytest.approx(1.9)
    assert panels.cues.lines == window.persona.cue_lines and panels.hotkeys.key_for("big smile") == "1"
    assert panels.preset_doc.item.name == "default"
    assert panels.select_persona("clinician")
    assert panels.preset_doc.item.name == "medical" and window.latency_model.target_ms == 50
    assert panels.persona_panel.chooser.currentText() == "clinician"


def test_edits_preview_at_once_are_marked_unsaved_and_save_or_revert(studio_window, qtbot, studio_home):
    window = studio_window()
    panel = window.panels.persona_panel
    assert "unsaved" not in panel.title.text() and not panel.save_button.isEnabled()
    changes = []
    window.panels.persona_doc.changed.connect(changes.append)
    panel.rate.setValue(220)
    assert len(changes) == 1, "the panel's redraw does not echo the value back into the persona"
    assert window.persona.voice.rate_wpm == 220 and "unsaved" in panel.title.text()
    shirt = window.avatar.part_mask("body")
    assert panel.set_color("skin", (0.2, 0.3, 0.9))
    qtbot.waitUntil(lambda: window.avatar.colors()[shirt].mean(axis=0)[2] > 0.5, timeout=5000)
    panel.betas[0].setValue(15)
    assert window.persona.betas == [1.5]
    panel.style_fields["gesture_energy"].setValue(1.7)
    assert window.idle.style.gesture_energy == pytest.approx(1.7)
    panel.save_button.click()
    saved = load_persona(studio_home / "personas" / "default.yaml")
    assert saved.voice.rate_wpm == 220 and saved.betas == [1.5] and "unsaved" not in panel.title.text()
    panel.pitch.setValue(10)
    panel.revert_button.click()
    assert window.persona.voice.pitch == saved.voice.pitch and panel.pitch.value() == saved.voice.pitch


def test_an_unspeakable_cue_line_is_refused_and_the_persona_keeps_its_lines(studio_window):
    window = studio_window()
    panel = window.panels.persona_panel
    lines = list(window.persona.cue_lines)
    panel.cue_lines.setPlainText("Fine line.\n" + "x" * 10000)
    assert not panel.commit_cue_lines()
    assert "cue_lines[1]" in panel.message.text() and "10000 characters; allowed 1..500" in panel.message.text()
    assert window.persona.cue_lines == lines and panel._cue_text() == lines


def test_library_actions_refuse_bad_and_duplicate_names(studio_window, studio_home):
    window = studio_window()
    panels = window.panels
    assert not panels.create_persona("a/b")
    assert "contains /" in panels.persona_panel.message.text()
    assert not panels.create_persona("teacher")
    assert "already exists" in panels.persona_panel.message.text()
    assert panels.duplicate_persona("my host")
    assert window.persona.name == "my host" and (studio_home / "personas" / "my host.yaml").is_file()
    assert panels.rename_persona("anchor") and window.persona.name == "anchor"
    assert not (studio_home / "personas" / "my host.yaml").exists()
    assert "anchor" in [panels.persona_panel.chooser.itemText(i) for i in range(panels.persona_panel.chooser.count())]
    assert panels.delete_persona() and window.persona.name == "default"
    assert not panels.rename_persona("other")
    assert "built in and cannot be renamed" in panels.persona_panel.message.text()


def test_an_invalid_persona_file_never_replaces_the_running_one_and_stays_untouched(studio_window, studio_home):
    bad = studio_home / "personas" / "broken.yaml"
    bad.parent.mkdir(parents=True, exist_ok=True)
    text = "schema_version: 2\nname: broken\nvoice: {rate_wpm: 5}\n"
    bad.write_text(text)
    window = studio_window()
    panels = window.panels
    assert not panels.select_persona("broken")
    message = panels.persona_panel.message.text()
    assert str(bad) in message and "voice.rate_wpm" in message and "Keeping persona 'default'" in message
    assert window.persona.name == "default" and bad.read_text() == text


def test_preset_panel_edits_levels_shows_costs_and_says_which_module_to_lower(studio_window, studio_home):
    window = studio_window()
    panels = window.panels
    panel = panels.preset_panel
    assert panels.select_preset("medical")
    table = {"face": {"high": 1.2, "medium": 0.5, "low": 0.4}, "hands": {"high": 0.3, "medium": 0.2, "low": 0.1},
             "body": {"high": 0.9, "medium": 0.6, "low": 0.3}, "cloth": {"high": 0.2, "medium": 0.1, "low": 0.1}}
    panel.set_cost_table(table)
    assert panel.costs.item(0, 0).text() == "1.20" and panel.costs.item(0, 0).font().bold()
    assert panel.update_verdict(20.0) and "meets the target" in panel.verdict_label.text()
    assert not panel.update_verdict(75.0)
    assert "75.0 ms > 50 ms" in panel.verdict_label.text() and "lower face to medium" in panel.verdict_label.text()
    assert not panel.update_verdict(75.0, render_ms=60.0)
    assert "the render takes 60 ms" in panel.verdict_label.text()
    panel.levels["face"].setCurrentText("medium")
    panel.levels["face"].activated.emit(1)
    assert panels.preset_doc.item.modules.face == "medium" and "unsaved" in panel.title.text()
    assert window.engine.plan.face_variant == "int8", "the running engine switches with the edit"
    panel.target_spin.setValue(80)
    assert window.latency_model.target_ms == 80
    assert panels.save_preset() and (studio_home / "presets" / "medical.yaml").is_file()
    bad = studio_home / "presets" / "bad.yaml"
    bad.write_text("schema_version: 2\nname: bad\nmodules: {face: ultra}\n")
    assert not panels.select_preset("bad")
    assert "modules.face" in panel.message.text() and panels.preset_doc.item.name == "medical"
