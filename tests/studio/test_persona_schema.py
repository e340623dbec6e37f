"""Persona files: version 1 migrates, unknown keys and unspeakable cue lines are refused with the field named."""

from __future__ import annotations

import pytest

from studio.presets import MAX_CUE_CHARS, PERSONA_SCHEMA_VERSION, PresetError, load_persona, save_yaml


def test_a_version_1_persona_migrates_and_saves_as_the_current_version(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text("schema_version: 1\nname: old\nvoice: {name: en-gb, rate_wpm: 150, pitch: 40}\n")
    persona = load_persona(path)
    assert persona.schema_version == PERSONA_SCHEMA_VERSION == 2 and persona.expressions == {}
    save_yaml(persona, tmp_path / "new.yaml")
    assert "schema_version: 2" in (tmp_path / "new.yaml").read_text()
    assert load_persona(tmp_path / "new.yaml") == persona


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: p\nmood: happy\n", "field 'mood'"),
        ("name: p\ncolors: {cape: [1, 0, 0]}\n", "unknown colour part 'cape'; allowed: skin"),
        ("name: p\ncolors: {skin: [2, 0, 0]}\n", "colors.skin = [2.0, 0.0, 0.0]: each channel allowed 0..1"),
        ("name: p\nbetas: [9]\n", "betas[0] = 9.0: allowed -5..5"),
        ("name: p\ncue_lines: ['  ']\n", "cue_lines[0]: a cue line must have words to speak; it is empty"),
        (f"name: p\ncue_lines: ['{'a' * 10000}']\n", f"has 10000 characters; allowed 1..{MAX_CUE_CHARS}"),
        ("name: p\nexpressions: {grin: {weights: {mouthGrin: 1}}}\n", "unknown ARKit shape 'mouthGrin'"),
        ("name: p\nexpressions: {a: {}, b: {}}\nhotkeys: {a: '1', b: '1'}\n", "key '1' is bound twice"),
        ("name: p\nhotkeys: {ghost: '5'}\n", "'ghost' is not one of this persona's expressions"),
        ("name: p\nexpressions: {a: {}}\nhotkeys: {a: 'Hyper+Q'}\n", "hotkey 'Hyper+Q' is not allowed"),
        ("name: p\nexpressions: {'a/b': {}}\n", "expression name 'a/b' is not allowed"),
        ("schema_version: 3\nname: p\n", "field 'schema_version' = 3: allowed 1..2"),
    ],
)
def test_bad_persona_files_are_refused_with_the_field_and_left_untouched(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(PresetError) as error:
        load_persona(path)
    assert str(path) in str(error.value) and expected in str(error.value)
    assert path.read_text() == text
