"""The mapping of an imported avatar as the mapping dialog edits it (Qt-free): rows, edits, checks, saving."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from studio.avatar.arkit import ARKIT_INDEX
from studio.avatar.io import load_avatar
from studio.avatar.skeleton import JOINT_INDEX

DATA = Path(__file__).resolve().parents[2] / "data" / "avatars"


def copy_avatar(folder: Path, name: str = "humanoid_arkit.glb", mapping: str | None = None) -> Path:
    path = folder / name
    path.write_bytes((DATA / name).read_bytes())
    if mapping is not None:
        path.with_name(path.stem + ".mapping.yaml").write_text(mapping)
    return path


def test_a_mapping_file_may_say_a_guessed_bone_is_not_driven(tmp_path):
    guessed = load_avatar(copy_avatar(tmp_path))
    assert "head" in guessed.info["humanoid"]
    unmapped = load_avatar(copy_avatar(tmp_path, mapping="bones:\n  head: none\n"))
    assert "head" not in unmapped.info["humanoid"]
    assert np.allclose(unmapped.rest_joints()[JOINT_INDEX["head"]], unmapped.rest_joints()[JOINT_INDEX["neck"]])


def test_rows_say_what_drives_each_channel_and_how_it_was_matched(tmp_path):
    from studio.avatar.mapping_model import BONE_NAMES, MappingModel

    glb = MappingModel(copy_avatar(tmp_path))
    assert len(glb.rows) == 52 + len(BONE_NAMES)
    assert (glb.row("jawOpen").sources, glb.row("jawOpen").match) == ((("morph", "jawOpen", 1.0),), "name")
    assert glb.row("mouthPucker").missing and glb.row("mouthPucker").match == "missing"
    assert (glb.row("head").source_text, glb.row("head").match) == ("head", "guess")
    assert glb.row("jaw").missing  # the Blender humanoid has no jaw bone
    assert "none" in glb.choices(glb.index[("arkit", "jawOpen")]) and "mouthSmileLeft" in glb.choices(0)
    assert "hair_1" in glb.choices(glb.index[("bone", "head")])
    assert glb.summary().startswith("6 of 52 ARKit shapes and 17 of 55 bones driven; no mapping file yet")
    assert [glb.rows[i].channel for i in glb.filtered("smile")] == ["mouthSmileLeft", "mouthSmileRight"]
    assert all(glb.rows[i].missing for i in glb.filtered("mouth", missing_only=True))

    vrm = MappingModel(copy_avatar(tmp_path, "humanoid_vrm0.vrm"))
    jaw = vrm.row("jawOpen")
    assert (jaw.match, jaw.source_text, jaw.choice) == ("fallback", "expression: aa", "expression: aa")
    assert vrm.row("head").match == "VRM"
    assert "expression: aa" in vrm.choices(0)


def test_an_edited_row_is_saved_beside_the_avatar_and_the_reloaded_avatar_uses_it(tmp_path):
    from studio.avatar.mapping_model import MappingModel

    path = copy_avatar(tmp_path)
    before = load_avatar(path)
    model = MappingModel(path)
    changed, dirty = [], []
    model.row_changed.connect(changed.append)
    model.dirty_changed.connect(dirty.append)
    jaw = model.index[("arkit", "jawOpen")]
    model.set_source(jaw, "mouthSmileLeft")
    model.set_weight(jaw, 0.5)
    assert changed == [jaw, jaw] and dirty == [True] and model.row("jawOpen").match == "edited"
    assert model.row("jawOpen").source_text == "mouthSmileLeft ×0.5"
    preview = model.preview_avatar()  # the unsaved edit, as the preview shows it
    smile = before.expr_dirs[:, :, ARKIT_INDEX["mouthSmileLeft"]]
    assert np.allclose(preview.expr_dirs[:, :, ARKIT_INDEX["jawOpen"]], 0.5 * smile, atol=1e-6)

    written = model.save()
    assert written == tmp_path / "humanoid_arkit.mapping.yaml" and dirty == [True, False] and not model.dirty
    assert yaml.safe_load(written.read_text()) == {
        "schema_version": 1, "arkit": {"jawOpen": [{"morph": "mouthSmileLeft", "weight": 0.5}]}, "bones": {}}
    after = load_avatar(path)
    assert after.info["mapping_file"] == str(written)
    assert np.allclose(after.expr_dirs[:, :, ARKIT_INDEX["jawOpen"]], 0.5 * smile, atol=1e-6)
    assert not np.allclose(after.expr_dirs[:, :, ARKIT_INDEX["jawOpen"]], before.expr_dirs[:, :, ARKIT_INDEX["jawOpen"]])
    assert np.array_equal(after.expr_dirs[:, :, ARKIT_INDEX["eyeBlinkLeft"]], before.expr_dirs[:, :, ARKIT_INDEX["eyeBlinkLeft"]])
    assert MappingModel(path).row("jawOpen").match == "file"  # read back from the file


def test_a_bone_set_to_none_and_a_moved_bone_are_saved(tmp_path):
    from studio.avatar.mapping_model import MappingModel

    path = copy_avatar(tmp_path)
    model = MappingModel(path)
    model.set_source(model.index[("bone", "head")], "none")
    model.set_source(model.index[("bone", "jaw")], "head")
    model.save()
    assert yaml.safe_load(model.mapping_path.read_text())["bones"] == {"head": "none", "jaw": "head"}
    reloaded = load_avatar(path)
    assert "head" not in reloaded.info["humanoid"] and "jaw" in reloaded.info["humanoid"]


def test_a_bad_row_is_named_and_the_users_file_is_left_as_it_was(tmp_path):
    from studio.avatar.mapping_file import MappingEntryError
    from studio.avatar.mapping_model import MappingModel

    path = copy_avatar(tmp_path, mapping="# mine\narkit:\n  cheekPuff: mouthFunnel\n")
    original = path.with_name("humanoid_arkit.mapping.yaml").read_bytes()
    model = MappingModel(path)
    assert model.row("cheekPuff").match == "file"
    model.set_source(model.index[("arkit", "jawOpen")], "jawOpenn")
    model.set_source(model.index[("bone", "head")], "Noggin")
    assert model.problems() == [
        "Row jawOpen: morph target 'jawOpenn' is not in the avatar (it has 6: eyeBlinkLeft, eyeBlinkRight, jawOpen, "
        "mouthFunnel, mouthSmileLeft, mouthSmileRight)",
        "Row head: node 'Noggin' is not in the avatar"]
    with pytest.raises(MappingEntryError) as caught:
        model.save()
    assert caught.value.problem.startswith("Row jawOpen: morph target 'jawOpenn'") and "(and 1 more)" in caught.value.problem
    assert model.mapping_path.read_bytes() == original
    assert model.preview_avatar().expr_dirs[:, :, ARKIT_INDEX["jawOpen"]].any()  # the bad row stays automatic in the preview
    with pytest.raises(ValueError, match="row head: a weight is set on an ARKit channel"):
        model.set_weight(model.index[("bone", "head")], 0.5)


def test_an_unreadable_mapping_file_is_kept_beside_the_new_one(tmp_path):
    from studio.avatar.mapping_model import MappingModel

    path = copy_avatar(tmp_path, mapping="arkit: [\n")
    model = MappingModel(path)
    assert "not a readable mapping file" in model.file_problem and "unreadable" in model.summary()
    assert model.row("jawOpen").match == "name"
    model.set_source(model.index[("arkit", "tongueOut")], "jawOpen")
    model.save()
    assert (tmp_path / "humanoid_arkit.mapping.yaml.bad").read_text() == "arkit: [\n"
    assert load_avatar(path).expr_dirs[:, :, ARKIT_INDEX["tongueOut"]].any()


def test_the_preview_frame_drives_only_the_selected_channel(tmp_path):
    from studio.avatar.mapping_model import PREVIEW_TURN_RAD, MappingModel

    model = MappingModel(copy_avatar(tmp_path))
    frame = model.preview_frame(model.index[("arkit", "jawOpen")], 0.75)
    assert frame.weight("jawOpen") == 0.75 and frame.arkit.sum() == 0.75 and not frame.pose.any()
    head = model.index[("bone", "head")]
    turned = model.preview_frame(head, 1.0).pose
    assert np.allclose(turned[JOINT_INDEX["head"]], (0, PREVIEW_TURN_RAD, 0))
    assert np.abs(turned).sum() == pytest.approx(PREVIEW_TURN_RAD)
    assert model.previews_face(head) and not model.previews_face(model.index[("bone", "leftUpperArm")])


def test_an_expression_that_binds_nothing_is_no_source_anywhere(tmp_path):
    """The VRM Add-on for Blender writes lookDown/lookUp/... with no binds: the saved mapping, the dialog's rows and
    choices, and the import summary all leave them out (the mapping once listed `eyeLookDownLeft: lookDown`)."""
    from studio.avatar.imported import current_mapping_text
    from studio.avatar.mapping_model import MappingModel

    path = copy_avatar(tmp_path, "addon_vrm1.vrm")
    empty = {"lookDown", "lookUp", "lookLeft", "lookRight", "angry", "sad", "relaxed", "surprised", "neutral"}
    model = MappingModel(path)
    assert model.row("eyeLookDownLeft").missing and model.row("eyeLookDownLeft").match == "missing"
    named = {name for row in model.rows if row.kind == "arkit" for kind, name, _ in row.sources if kind == "expression"}
    assert named and not named & empty
    assert not {f"expression: {name}" for name in empty} & set(model.choices(0))
    mapped = yaml.safe_load(current_mapping_text(path))["arkit"]
    assert mapped["eyeLookDownLeft"] == "none" and mapped["mouthPucker"] == [{"expression": "ou", "weight": 0.8}]
    saved = {entry["expression"] for value in mapped.values() if value != "none" for entry in value if "expression" in entry}
    assert saved and not saved & empty
    avatar = load_avatar(path)
    summary_fallback = {entry.split("←")[0] for entry in avatar.info["fallback"]}
    assert summary_fallback == {row.channel for row in model.rows if row.match == "fallback"}
    assert set(avatar.info["arkit_missing"]) - summary_fallback == {row.channel for row in model.rows[:52] if row.missing}
    assert summary_fallback | {name for name, value in mapped.items() if value == "none"} == set(avatar.info["arkit_missing"])
