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


def test_window_rectangle_and_workspaces_round_trip_and_older_files_have_neither(tmp_path):
    path = tmp_path / "layout.json"
    window = {"x": -20, "y": 30, "width": 1280, "height": 720, "maximized": True}
    workspaces = {"current": "design", "arrangements": {"design": "AAE="}}
    save_layout(WindowLayout(b"g", b"s", {}, window, workspaces), path)
    loaded = load_layout(path)
    assert loaded.window == window and loaded.workspaces == workspaces
    save_layout(WindowLayout(b"g", b"s"), path)
    assert "window" not in json.loads(path.read_text())
    assert load_layout(path).window is None and load_layout(path).workspaces is None


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        ([1, 2], "field 'window' is list, expected an object"),
        ({"x": 1, "y": 2, "width": 0, "height": 5}, "window.width is 0; allowed: a whole number above 0"),
        ({"x": 1.5, "y": 2, "width": 9, "height": 5}, "window.x is 1.5; allowed: a whole number"),
        ({"x": 1, "y": 2, "width": 9, "height": 5, "maximized": "yes"}, "window.maximized is 'yes'; allowed: true or false"),
    ],
)
def test_bad_window_rectangles_are_refused_naming_the_field(tmp_path, window, expected):
    path = tmp_path / "layout.json"
    path.write_text(json.dumps({"schema_version": 1, "geometry": "", "dock_state": "", "window": window}))
    with pytest.raises(LayoutError, match=expected):
        load_layout(path)
