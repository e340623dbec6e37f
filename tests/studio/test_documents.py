"""An edited persona: accepted edits fire events and mark it unsaved; invalid ones change nothing."""

from __future__ import annotations

import pytest

from studio.documents import Document
from studio.presets import Persona, PresetError


def test_edits_mark_unsaved_and_revert_restores():
    document = Document(Persona(name="p"))
    seen, dirty = [], []
    document.changed.connect(seen.append)
    document.dirty_changed.connect(dirty.append)
    document.update("voice.rate_wpm", 200)
    document.update("betas", [0.5, -0.5])
    assert document.dirty and document.item.voice.rate_wpm == 200 and len(seen) == 2 and dirty == [True]
    document.revert()
    assert not document.dirty and document.item == Persona(name="p") and dirty == [True, False]


def test_an_invalid_edit_is_refused_and_the_item_stays():
    document = Document(Persona(name="p"))
    with pytest.raises(PresetError, match="field 'voice.pitch' = 120"):
        document.update("voice.pitch", 120)
    with pytest.raises(PresetError, match="cue_lines"):
        document.update("cue_lines", [""])
    assert document.item == Persona(name="p") and not document.dirty


def test_mark_saved_clears_the_marker():
    document = Document(Persona(name="p"))
    saved = []
    document.saved.connect(saved.append)
    document.update("default_preset", "medical")
    document.mark_saved()
    assert not document.dirty and saved == [document.item] and document.saved_item.default_preset == "medical"
