"""The recent-avatars list: most recent first, at most ten, missing files marked, a damaged file kept aside."""

from __future__ import annotations

import json

from studio.recent import MAX_RECENT_AVATARS, RECENT_AVATARS_FILE, RecentAvatars


def _files(folder, count):
    paths = []
    for i in range(count):
        path = folder / f"avatar{i}.glb"
        path.write_bytes(b"glTF")
        paths.append(path)
    return paths


def test_most_recent_first_once_each_and_at_most_ten(tmp_path):
    recent = RecentAvatars(tmp_path / "config" / RECENT_AVATARS_FILE)
    assert recent.entries() == []
    paths = _files(tmp_path, 12)
    for path in paths:
        recent.add(path)
    recent.add(paths[5])  # opened again: moves to the front, not listed twice
    names = [entry.name for entry in RecentAvatars(recent.path).entries()]  # as read back by the next session
    assert len(names) == MAX_RECENT_AVATARS == 10
    assert names == ["avatar5.glb", "avatar11.glb", "avatar10.glb", "avatar9.glb", "avatar8.glb", "avatar7.glb",
                     "avatar6.glb", "avatar4.glb", "avatar3.glb", "avatar2.glb"]


def test_paths_are_stored_absolute(tmp_path, monkeypatch):
    (tmp_path / "me.vrm").write_bytes(b"glTF")
    monkeypatch.chdir(tmp_path)
    recent = RecentAvatars(tmp_path / RECENT_AVATARS_FILE)
    recent.add("me.vrm")
    assert json.loads(recent.path.read_text())["avatars"] == [str(tmp_path / "me.vrm")]


def test_a_missing_file_is_marked_and_can_be_forgotten(tmp_path):
    recent = RecentAvatars(tmp_path / RECENT_AVATARS_FILE)
    kept, gone = _files(tmp_path, 2)
    recent.add(kept)
    recent.add(gone)
    gone.unlink()
    assert [(e.name, e.exists) for e in recent.entries()] == [("avatar1.glb", False), ("avatar0.glb", True)]
    assert recent.remove_missing() == 1
    assert [e.name for e in recent.entries()] == ["avatar0.glb"]


def test_a_damaged_list_is_reported_and_kept_aside_not_overwritten(tmp_path):
    path = tmp_path / RECENT_AVATARS_FILE
    path.write_text("{not json")
    recent = RecentAvatars(path)
    assert recent.entries() == []
    assert recent.problem is not None and str(path) in recent.problem and "recent-avatars.json.bad" in recent.problem
    (avatar,) = _files(tmp_path, 1)
    recent.add(avatar)
    assert (tmp_path / "recent-avatars.json.bad").read_text() == "{not json"
    assert [e.name for e in recent.entries()] == ["avatar0.glb"] and recent.problem is None


def test_a_list_of_the_wrong_shape_names_the_field(tmp_path):
    path = tmp_path / RECENT_AVATARS_FILE
    path.write_text(json.dumps({"schema_version": 1, "avatars": "me.glb"}))
    recent = RecentAvatars(path)
    assert recent.entries() == []
    assert "field 'avatars' must be a list of file paths" in recent.problem
