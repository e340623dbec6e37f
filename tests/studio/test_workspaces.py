"""The workspace model: which workspace is current, how each was left, and its JSON form."""

from __future__ import annotations

import pytest

from studio.workspaces import WORKSPACES, DockGroup, WorkspaceError, Workspaces


def test_the_three_workspaces_each_put_every_panel_somewhere_once():
    assert [w.name for w in WORKSPACES] == ["operate", "design", "record"]
    assert [w.shortcut for w in WORKSPACES] == ["Ctrl+1", "Ctrl+2", "Ctrl+3"]
    assert set(WORKSPACES[0].docks) == {"operatorDock", "outputsDock", "latencyDock", "driftDock"}
    assert set(WORKSPACES[1].docks) == {"personaDock", "expressionEditorDock", "presetDock", "inspectorDock"}
    assert set(WORKSPACES[2].docks) == {"takesDock"}
    for workspace in WORKSPACES:
        assert len(workspace.docks) == len(set(workspace.docks)), workspace.name


def test_switching_keeps_how_each_workspace_was_left():
    model = Workspaces()
    seen = []
    model.switched.connect(seen.append)
    assert model.current == "operate" and model.arrangement("operate") is None
    assert model.switch("design", b"operate as left") is None  # never left: laid out afresh
    assert model.switch("operate", b"design as left") == b"operate as left"
    assert model.switch("design", b"operate changed") == b"design as left"
    assert seen == ["design", "operate", "design"]
    model.forget("design")
    assert model.arrangement("design") is None and model.arrangement("operate") == b"operate changed"


def test_json_round_trip_and_unknown_workspaces_are_dropped():
    model = Workspaces()
    model.switch("record", b"\x00operate\xff")
    payload = model.to_json()
    again = Workspaces()
    again.load_json({**payload, "arrangements": {**payload["arrangements"], "animate": "AAAA"}}, "layout.json")
    assert again.current == "record" and again.arrangement("operate") == b"\x00operate\xff"
    assert again.to_json() == payload


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ([], "field 'workspaces' is list, expected an object"),
        ({"current": "animate"}, "workspaces.current is 'animate'; allowed: operate, design, record"),
        ({"arrangements": []}, "workspaces.arrangements is list"),
        ({"arrangements": {"design": "@@@"}}, "workspaces.arrangements.design is not valid base64"),
    ],
)
def test_bad_saved_workspaces_are_refused_naming_file_and_field_and_change_nothing(payload, expected):
    model = Workspaces()
    model.keep("operate", b"kept")
    with pytest.raises(WorkspaceError, match=expected) as caught:
        model.load_json(payload, "/home/u/window-layout.json")
    assert str(caught.value).startswith("/home/u/window-layout.json: ")
    assert model.current == "operate" and model.arrangement("operate") == b"kept"


def test_unknown_names_and_areas_say_what_is_allowed():
    with pytest.raises(WorkspaceError, match="no workspace 'edit'; allowed: operate, design, record"):
        Workspaces().switch("edit", b"")
    with pytest.raises(WorkspaceError, match="dock area 'top'; allowed: left, right, bottom"):
        DockGroup("top", ("takesDock",), 100)
