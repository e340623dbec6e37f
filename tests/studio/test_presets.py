"""Presets and personas: built-ins load, bad files are refused by name and never overwritten."""

from __future__ import annotations

import pytest

from studio.avatar.arkit import ARKIT_INDEX
from studio.presets import (
    PresetError,
    load_persona,
    load_preset,
    persona_by_name,
    preset_by_name,
    save_yaml,
)


def test_builtin_presets_and_persona_load():
    medical = preset_by_name("medical")
    assert (medical.render.width, medical.render.height, medical.render.fps) == (1280, 720, 30)
    assert medical.modules.face == "high" and medical.modules.hands == "medium" and medical.modules.cloth == "low"
    assert medical.render.latency_target_ms == 50
    assert preset_by_name("education").long_session.prewarm
    assert persona_by_name("default").voice.name == "en-us"


def test_user_preset_shadows_the_builtin(tmp_path, monkeypatch):
    monkeypatch.setenv("AVATAR_STUDIO_HOME", str(tmp_path))
    save_yaml(preset_by_name("medical").model_copy(update={"description": "mine"}), tmp_path / "presets" / "medical.yaml")
    assert preset_by_name("medical").description == "mine"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: x\nmodules: {face: ultra}\n", "field 'modules.face' = 'ultra'"),
        ("name: x\nrender: {fps: -3}\n", "field 'render.fps' = -3"),
        ("name: x\nbogus: 1\n", "field 'bogus'"),
        ("schema_version: 9\nname: x\n", "field 'schema_version' = 9: allowed 1..2"),
        ("- just\n- a list\n", "expected a YAML mapping"),
        ("name: [unclosed\n", "line 2, column 1: not a valid YAML preset file: expected"),
    ],
)
def test_bad_preset_names_file_field_and_value_and_stays_intact(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(PresetError) as error:
        load_preset(path)
    assert str(path) in str(error.value) and expected in str(error.value)
    assert path.read_text() == text


def test_bad_persona_voice_rate(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("name: p\nvoice: {rate_wpm: 5}\n")
    with pytest.raises(PresetError, match="voice.rate_wpm"):
        load_persona(path)


def test_unknown_name_lists_the_available_ones():
    with pytest.raises(PresetError, match="available: .*medical"):
        preset_by_name("no-such-preset")


def test_save_is_atomic_and_round_trips(tmp_path):
    preset = preset_by_name("education")
    path = tmp_path / "e.yaml"
    save_yaml(preset, path)
    assert load_preset(path) == preset
    assert [p.name for p in tmp_path.iterdir()] == ["e.yaml"]


def test_persona_style_names_arkit_shapes_and_becomes_engine_settings(tmp_path):
    path = tmp_path / "calm.yaml"
    path.write_text(
        "name: calm\nstyle: {gains: {JawOpen: 1.5}, caps: {mouthSmile_L: 0.4}, blink_rate_per_min: 6,"
        " head_motion: 0.5, gesture_energy: 0.2}\n"
    )
    persona = load_persona(path)
    gains, caps = persona.style.weight_arrays()
    assert gains[ARKIT_INDEX["jawOpen"]] == 1.5 and caps[ARKIT_INDEX["mouthSmileLeft"]] == 0.4
    assert gains.sum() == 51 + 1.5 and caps.sum() == 51 + 0.4
    style = persona.motion_style()
    assert (style.blink_rate_per_min, style.head_gain, style.gesture_energy) == (6, 0.5, 0.2)


def test_persona_gain_for_an_unknown_shape_is_refused_by_name(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text("name: typo\nstyle: {gains: {jawOpne: 2}}\n")
    with pytest.raises(PresetError, match="style.gains.*'jawOpne'"):
        load_persona(path)


def test_version_1_preset_migrates_and_means_what_it_meant(tmp_path):
    path = tmp_path / "old.yaml"
    text = "schema_version: 1\nname: old\nmodules: {face: medium, hands: low, body: low, cloth: low}\n"
    path.write_text(text)
    preset = load_preset(path)
    assert preset.schema_version == 2 and preset.render.lod == "auto" and preset.rates.face_hz is None
    assert preset.plan.face_variant == "int8" and preset.plan.lod == "low" and preset.plan.body_mode == "head_torso"
    assert path.read_text() == text


def test_every_builtin_preset_has_a_plan():
    plans = {name: preset_by_name(name).plan for name in ("default", "medical", "education", "performance")}
    medical = plans["medical"]
    assert medical.face_variant == "fp32" and medical.keep_face_detail and medical.body_mode == "head_torso"
    assert medical.cloth_regions == () and medical.hands_mode == "relaxed"
    performance = plans["performance"]
    assert performance.face_rate_hz < plans["default"].face_rate_hz and performance.lod == "low"
    assert plans["default"].cloth_regions  # secondary motion on by default


def test_explicit_rates_override_the_level(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("name: r\nrates: {face_hz: 20, body_hz: 10}\nrender: {lod: medium}\n")
    plan = load_preset(path).plan
    assert (plan.face_rate_hz, plan.body_rate_hz, plan.lod) == (20.0, 10.0, "medium")
    assert plan.face_batch_hops == 5 and plan.body_every_hops == 10
    path.write_text("name: r\nrates: {face_hz: 500}\n")
    with pytest.raises(PresetError, match="rates.face_hz"):
        load_preset(path)
