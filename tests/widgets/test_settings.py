"""Window layout files: round trip, atomic save, clear errors for bad files."""

from __future__ import annotations

import json

import pytest

from widgets.settings import LayoutError, WindowLayout, default_layout_path, load_layout, save_layout


def test_layout_round_trips_and_lives_under_the_config_dir(studio_home):
    path = default_layout_path()
    assert path.is_relative_to(studio_home)
    assert load_layout() is None
    save_layout(WindowLayout(b"\x01geometry\xff", b"\x00state", {"background": "chroma"}))
    loaded = load_layout()
    assert loaded.geometry == b"\x01geometry\xff" and loaded.dock_state == b"\x00state"
    assert loaded.options == {"background": "chroma"}
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp files left behind


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "cannot be read as a layout file"),
        ("[1, 2]", "expected an object"),
        ('{"schema_version": 99, "geometry": "", "dock_state": ""}', "schema_version is 99"),
        ('{"schema_version": 1, "geometry": 5, "dock_state": ""}', "field 'geometry' is int"),
        ('{"schema_version": 1, "geometry": "@@@", "dock_state": ""}', "'geometry' is not valid base64"),
    ],
)
def test_bad_layout_files_are_refused_naming_file_and_problem(tmp_path, content, expected):
    path = tmp_path / "layout.json"
    path.write_text(content)
    with pytest.raises(LayoutError, match=expected) as caught:
        load_layout(path)
    assert str(path) in str(caught.value)
    assert path.read_text() == content


def test_saving_over_a_bad_file_keeps_it_aside(tmp_path):
    path = tmp_path / "layout.json"
    path.write_text("{garbage")
    save_layout(WindowLayout(b"g", b"s"), path, keep_bad_copy=True)
    assert path.with_name("layout.json.bad").read_text() == "{garbage"
    assert json.loads(path.read_text())["schema_version"] == 1
