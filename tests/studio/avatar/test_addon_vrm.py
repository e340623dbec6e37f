"""VRM files written by other software: the VRM Add-on for Blender's own exporters (VRM 1.0 through Khronos' glTF
exporter, VRM 0.x through the add-on's own writer), from tests/data/avatars/make_vrm_addon.py.

What the add-on wrote (see SOURCES.md) is read back as written: the humanoid map, the expressions or blend shape groups
bound to ARKit-named shape keys on several meshes, MToon parameters, the ponytail spring and its head collider, meta.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from studio.avatar.arkit import ARKIT_INDEX
from studio.avatar.gltf import read_gltf
from studio.avatar.imported import load_gltf_avatar
from studio.avatar.skeleton import JOINT_INDEX
from studio.avatar.skinning import lbs
from studio.avatar.vrm import read_vrm, resolve_expressions

DATA = Path(__file__).resolve().parents[2] / "data" / "avatars"
FILES = ["addon_vrm1.vrm", "addon_vrm0.vrm"]
BONES = {"hips": "hips", "spine": "spine", "chest": "chest", "neck": "neck", "head": "head",
         "leftUpperArm": "upper_arm.L", "leftLowerArm": "forearm.L", "leftHand": "hand.L",
         "rightUpperArm": "upper_arm.R", "rightLowerArm": "forearm.R", "rightHand": "hand.R",
         "leftUpperLeg": "thigh.L", "leftLowerLeg": "shin.L", "leftFoot": "foot.L",
         "rightUpperLeg": "thigh.R", "rightLowerLeg": "shin.R", "rightFoot": "foot.R"}
HEAD_CENTRE = np.array([0.0, 1.62, 0.0])  # make_humanoid_glb.HEAD in glTF axes, facing +Z


@pytest.fixture(scope="module", params=FILES)
def addon_file(request):
    path = DATA / request.param
    scene = read_gltf(path)
    return request.param, scene, read_vrm(scene), load_gltf_avatar(path)


def bound_shapes(scene, expression) -> set[tuple[str, str, float]]:
    """(mesh node name, morph target name, weight) of each bind."""
    names = {}
    for primitive in scene.primitives:
        names.setdefault(primitive.node, primitive.target_names)
    return {(scene.node_names[node], names[node][index], round(weight, 3)) for node, index, weight in expression.binds}


def test_the_add_on_files_load_with_their_meta(addon_file):
    name, scene, vrm, model = addon_file
    assert vrm.version == ("1.0" if name == "addon_vrm1.vrm" else "0.x") and model.info["format"] == f"VRM {vrm.version}"
    assert model.info["meta"]["title"] == "Addon Humanoid" and model.info["meta"]["author"] == "Avatar Studio tests"
    if vrm.version == "1.0":
        assert model.info["meta"]["licence"] == "https://vrm.dev/licenses/1.0/"
        assert model.info["meta"]["redistribution"] == "allowed"
    else:
        assert model.info["meta"]["licence"] == "CC0"
    assert not model.info["notes"] and scene.notes == []


def test_the_humanoid_map_names_the_bones_the_add_on_was_given(addon_file):
    _, scene, vrm, model = addon_file
    assert {bone: scene.node_names[node] for bone, node in vrm.humanoid.items()} == BONES
    joints = model.rest_joints()
    assert joints[JOINT_INDEX["head"], 1] == pytest.approx(1.5, abs=1e-4)
    assert joints[JOINT_INDEX["left_wrist"], 0] == pytest.approx(0.7, abs=1e-4)  # the avatar's left is +X
    assert joints[JOINT_INDEX["right_ankle"], 0] == pytest.approx(-0.09, abs=1e-4)


def test_expressions_bind_the_arkit_shape_keys_on_each_mesh_that_has_them(addon_file):
    _, scene, vrm, _ = addon_file
    expressions = vrm.expressions
    assert {"aa", "ih", "ou", "ee", "oh", "blink", "blinkLeft", "blinkRight", "happy"} <= set(expressions)
    assert bound_shapes(scene, expressions["aa"]) == {("Skin", "jawOpen", 1.0), ("Mouth", "jawOpen", 1.0)}
    assert bound_shapes(scene, expressions["blinkLeft"]) == {("Skin", "eyeBlinkLeft", 1.0), ("Eye", "eyeBlinkLeft", 1.0)}
    assert ("Mouth", "mouthFunnel", 0.7) in bound_shapes(scene, expressions["oh"])
    assert expressions["blink"].is_binary and not expressions["aa"].is_binary
    if vrm.version == "1.0":  # happy blends blinks and blocks the mouth, as the add-on was told
        assert expressions["happy"].overrides["overrideBlink"] == "blend"
        assert resolve_expressions(vrm, {"happy": 1.0, "aa": 1.0})["aa"] == 0.0


def test_the_arkit_shape_keys_drive_the_face_directly(addon_file):
    """Perfect sync: the six ARKit-named shape keys are matched by name, the vowels only fill the shapes missing."""
    _, _, _, model = addon_file
    assert model.info["mapping"] == "arkit+vowels"
    have = {"jawOpen", "eyeBlinkLeft", "eyeBlinkRight", "mouthFunnel", "mouthSmileLeft", "mouthSmileRight"}
    assert have.isdisjoint(model.info["arkit_missing"]) and len(model.info["arkit_missing"]) == 52 - len(have)
    head = model.rest_joints()[JOINT_INDEX["head"]]
    jaw = np.linalg.norm(model.expr_dirs[:, :, ARKIT_INDEX["jawOpen"]], axis=1) > 1e-4
    blink = np.linalg.norm(model.expr_dirs[:, :, ARKIT_INDEX["eyeBlinkLeft"]], axis=1) > 1e-4
    assert model.v_template[jaw, 2].mean() > head[2]  # the mouth is on the front (+Z), VRM 0.x's -Z turned
    assert model.v_template[jaw, 1].mean() < model.v_template[blink, 1].mean()  # below the eyes
    assert model.v_template[blink, 0].mean() > 0  # the left eye on the avatar's left
    down = model.expr_dirs[jaw, 1, ARKIT_INDEX["jawOpen"]]
    assert down.min() < -0.01  # jawOpen lowers the chin and the lower lip
    lids = model.expr_dirs[blink, :, ARKIT_INDEX["eyeBlinkLeft"]]
    assert np.abs(lids[:, 1]).max() > 0.005  # and the blink squashes the eye vertically


def test_the_head_turns_with_the_head_joint(addon_file):
    _, _, _, model = addon_file
    pose = np.zeros((55, 3))
    pose[JOINT_INDEX["head"]] = (0, 0.5, 0)
    rest, _ = lbs(model)
    turned, _ = lbs(model, pose=pose)
    moved = np.linalg.norm(turned - rest, axis=1)
    face = (rest[:, 1] > 1.55) & (rest[:, 2] > 0.08)
    assert moved[face].min() > 0.02 and moved[rest[:, 1] < 1.0].max() < 1e-6


def test_mtoon_parameters_are_read_as_the_add_on_wrote_them(addon_file):
    """VRM 1.0 values as authored; VRM 0.x ones as the add-on wrote them (gamma colours, its own shift/toony
    downgrade), converted back as three-vrm does."""
    _, scene, vrm, model = addon_file
    materials = {m.name: m for m in scene.materials}
    skin, cloth = materials["Skin"], materials["Cloth"]
    assert skin.texture_image is not None and scene.images[skin.texture_image].shape == (64, 64, 4)
    assert skin.toon[0] == pytest.approx((0.75, 0.45, 0.45), abs=0.01)
    assert cloth.toon[0] == pytest.approx((0.05, 0.08, 0.3), abs=0.01)
    assert skin.rim.color == pytest.approx((0.3, 0.2, 0.1), abs=0.01) and skin.rim.fresnel_power == pytest.approx(4.0)
    assert cloth.outline.mode == "world" and cloth.outline.width == pytest.approx(0.004)
    assert cloth.outline.color == pytest.approx((0.02, 0.02, 0.05), abs=0.005)
    assert all(materials[name].outline is None and materials[name].rim is None for name in ("Eye", "Mouth", "Hair"))
    if vrm.version == "1.0":
        assert skin.toon[1:] == pytest.approx((-0.1, 0.85)) and skin.rim.lift == pytest.approx(0.1)
        assert skin.rim.lighting_mix == pytest.approx(0.5)
    assert model.rim is not None and model.outline is not None and model.texture is not None
    drawn = np.unique(model.faces)  # not the never-drawn vertices that carry the joints
    assert (model.shading[drawn, 3] == 1).all()  # every material is MToon: toon-shaded, not its KHR_materials_unlit fallback


def test_the_ponytail_spring_and_its_head_collider(addon_file):
    """One chain hair_1 -> hair_2 with the add-on's parameters; a 0.12 m sphere at the head's centre. The VRM 0.x
    writer leaves gravityDir (0, 0, 0) when nobody sets it: no gravity, not a crash (it was a TypeError)."""
    _, scene, vrm, model = addon_file
    (chain,) = vrm.spring_chains
    assert [scene.node_names[joint.node] for joint in chain.joints] == ["hair_1", "hair_2"]
    joint = chain.joints[0]
    assert (joint.stiffness, joint.gravity_power, joint.drag, joint.hit_radius) == pytest.approx((0.8, 0.3, 0.4, 0.02))
    (collider,) = vrm.colliders
    assert scene.node_names[collider.node] == "head" and collider.radius == pytest.approx(0.12)
    assert chain.colliders == (0,)
    rig = model.spring_bones
    assert rig.chains == 1 and rig.collides.all()
    assert rig.collider_head[0] == pytest.approx(HEAD_CENTRE, abs=1e-4)
    assert rig.collider_radius[0] == pytest.approx(0.12)
    assert rig.rest[0, 0] == pytest.approx((0.0, 1.66, -0.15), abs=1e-4)  # the ponytail's root behind the head (-Z)
    expected = (0.0, -1.0, 0.0) if vrm.version == "1.0" else (0.0, 0.0, 0.0)
    assert rig.gravity_dir[0, 0] == pytest.approx(expected)
    assert np.isfinite(rig.gravity_dir).all()


def sparse_morph_copy(source: Path, copy: Path) -> int:
    """Write `copy`: `source` with every morph target's POSITION rewritten as a sparse accessor without a
    bufferView (only the moving vertices stored), as UniVRM and other exporters write them. Returns how many
    accessors were rewritten."""
    import json
    import struct

    data = source.read_bytes()
    length = struct.unpack_from("<I", data, 12)[0]
    document = json.loads(data[20:20 + length])
    blob = bytearray(data[20 + length + 8:])
    rewritten = 0
    for mesh in document["meshes"]:
        for primitive in mesh["primitives"]:
            for target in primitive.get("targets", []):
                spec = document["accessors"][target["POSITION"]]
                view = document["bufferViews"][spec["bufferView"]]
                start = view.get("byteOffset", 0) + spec.get("byteOffset", 0)
                values = np.frombuffer(bytes(blob[start:start + 12 * spec["count"]]), "<f4").reshape(-1, 3)
                rows = np.flatnonzero(np.abs(values).max(axis=1) > 0).astype("<u4")
                views = []
                for part in (rows.tobytes(), values[rows].astype("<f4").tobytes()):
                    blob.extend(b"\0" * (-len(blob) % 4))
                    views.append(len(document["bufferViews"]))
                    document["bufferViews"].append({"buffer": 0, "byteOffset": len(blob), "byteLength": len(part)})
                    blob.extend(part)
                del spec["bufferView"]
                spec.pop("byteOffset", None)
                spec["sparse"] = {"count": int(len(rows)), "indices": {"bufferView": views[0], "componentType": 5125},
                                  "values": {"bufferView": views[1]}}
                rewritten += 1
    blob.extend(b"\0" * (-len(blob) % 4))
    document["buffers"][0]["byteLength"] = len(blob)
    text = json.dumps(document).encode()
    text += b" " * (-len(text) % 4)
    body = struct.pack("<I4s", len(text), b"JSON") + text + struct.pack("<I4s", len(blob), b"BIN\0") + bytes(blob)
    copy.write_bytes(struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body)
    return rewritten


@pytest.mark.parametrize("name", FILES)
def test_sparse_morph_targets_read_as_the_dense_ones(tmp_path, name):
    """The same file with its morph targets stored sparse (no bufferView, only the moving vertices) drives the face
    exactly as the add-on's dense ones."""
    assert sparse_morph_copy(DATA / name, tmp_path / name) >= 12
    dense, sparse = load_gltf_avatar(DATA / name), load_gltf_avatar(tmp_path / name)
    assert np.array_equal(sparse.expr_dirs, dense.expr_dirs) and np.abs(dense.expr_dirs).max() > 0.01
