"""The preset's anchor, drift and long-session sections: validated on load, with the allowed range named."""

import pytest

from studio.presets import PresetError, load_preset, preset_by_name


@pytest.mark.parametrize(("section", "field", "value", "allowed"), [
    ("anchor", "buffer_frames", 0, "30..3000"),
    ("anchor", "similarity_threshold", 2, "0.5..0.999"),
    ("anchor", "translation_blend", -0.2, "0..1"),
    ("anchor", "rotation_blend", -1, "0..1"),
    ("anchor", "refresh_min_frames", 10, "50..5000"),
    ("drift", "max_av_offset_ms", -1, "0.1..1000"),
])
def test_out_of_range_values_are_refused_naming_file_field_and_range(tmp_path, section, field, value, allowed):
    path = tmp_path / "bad.yaml"
    text = f"schema_version: 1\nname: bad\n{section}: {{{field}: {value}}}\n"
    path.write_text(text)
    with pytest.raises(PresetError) as error:
        load_preset(path)
    message = str(error.value)
    assert str(path) in message and f"{section}.{field}" in message and allowed in message
    assert path.read_text() == text  # never rewritten


def test_refresh_interval_bounds_must_be_in_order(tmp_path):
    path = tmp_path / "order.yaml"
    path.write_text("schema_version: 1\nname: order\nanchor: {refresh_min_frames: 400, refresh_max_frames: 300}\n")
    with pytest.raises(PresetError, match="refresh_min_frames"):
        load_preset(path)


def test_education_keeps_house_every_45_minutes_with_a_watermark_at_80_percent_of_its_budget():
    preset = preset_by_name("education")
    assert preset.long_session.housekeeping_interval_s == 45 * 60
    assert preset.long_session.watermark_mb == pytest.approx(0.8 * preset.long_session.memory_budget_mb)
    assert preset.anchor.enabled and preset.anchor.buffer_frames == 300
