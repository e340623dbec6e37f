"""Importing glTF/GLB/VRM avatars: what is read, how it maps onto the engine, and every bad file refused clearly."""

from __future__ import annotations

import json
import random
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from studio.avatar.arkit import ARKIT_INDEX, ARKIT_NAMES
from studio.avatar.gltf import read_gltf
from studio.avatar.io import load_avatar, load_avatar_or_default
from studio.avatar.model import AvatarFormatError
from studio.avatar.skeleton import JOINT_INDEX
from studio.avatar.skinning import lbs
from studio.avatar.vrm import read_vrm, resolve_expressions

DATA = Path(__file__).resolve().parents[2] / "data" / "avatars"
HUMANOID = DATA / "humanoid_arkit.glb"
OVERRIDES = DATA / "VRMC_vrm_expressions_isBinary_Overrides.vrm"
OVERRIDDEN = DATA / "VRMC_vrm_expressions_isBinary_Overridden.vrm"


def glb_bytes(document: dict | bytes, blob: bytes) -> bytes:
    """A GLB container around a JSON document (or its text) and a binary chunk (both padded to 4 bytes)."""
    text = document if isinstance(document, bytes) else json.dumps(document).encode()
    text += b" " * (-len(text) % 4)
    blob += b"\0" * (-len(blob) % 4)
    body = struct.pack("<I4s", len(text), b"JSON") + text + struct.pack("<I4s", len(blob), b"BIN\0") + blob
    return struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body


def quad() -> tuple[dict, bytes]:
    """A valid two-triangle glTF document with a morph target, and its binary buffer."""
    positions = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], np.float32)
    indices = np.array([0, 1, 2, 0, 2, 3], np.uint16)
    delta = np.array([[0, 0, 0.1]] * 4, np.float32)
    blob = positions.tobytes() + indices.tobytes() + b"\0" * 4 + delta.tobytes()
    document = {
        "asset": {"version": "2.0"},
        "scene": 0, "scenes": [{"nodes": [0]}],
        "nodes": [{"name": "face", "mesh": 0}],
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}, "indices": 1, "targets": [{"POSITION": 2}]}],
                    "extras": {"targetNames": ["JAW_OPEN"]}}],
        "buffers": [{"byteLength": len(blob)}],
        "bufferViews": [{"buffer": 0, "byteOffset": 0, "byteLength": 48}, {"buffer": 0, "byteOffset": 48, "byteLength": 12},
                        {"buffer": 0, "byteOffset": 64, "byteLength": 48}],
        "accessors": [
            {"bufferView": 0, "componentType": 5126, "count": 4, "type": "VEC3", "min": [0, 0, 0], "max": [1, 1, 0]},
            {"bufferView": 1, "componentType": 5123, "count": 6, "type": "SCALAR"},
            {"bufferView": 2, "componentType": 5126, "count": 4, "type": "VEC3"},
        ],
    }
    return document, blob


def write_glb(folder: Path, document: dict, blob: bytes, name: str = "avatar.glb") -> Path:
    path = folder / name
    path.write_bytes(glb_bytes(document, blob))
    return path


def test_the_valid_quad_loads_and_its_morph_maps_by_arkit_name(tmp_path):
    model = load_avatar(write_glb(tmp_path, *quad()))
    assert model.info["mapping"] == "arkit (partial)"  # JAW_OPEN is jawOpen in another spelling
    assert np.allclose(model.expr_dirs[:4, 2, ARKIT_INDEX["jawOpen"]], 0.1)
    assert "jawOpen" not in model.info["arkit_missing"] and len(model.info["arkit_missing"]) == 51


def test_blender_humanoid_reads_skin_morphs_materials_and_texture():
    scene = read_gltf(HUMANOID)
    assert {m.name for m in scene.materials} >= {"Skin", "Cloth", "Eye", "Mouth"}
    skin = next(m for m in scene.materials if m.name == "Skin")
    texture = scene.images[skin.texture_image]
    assert texture.shape == (64, 64, 4)
    red, green, blue = texture[32, 10, :3].astype(int)  # the teal band in the middle rows
    assert green > 150 and blue > 150 and red < 60
    assert texture[5, 10, 0] > texture[5, 10, 2] + 40  # skin tone above it
    skinned = [p for p in scene.primitives if p.joints is not None]
    assert skinned and all(np.allclose(p.weights.sum(axis=1), 1) for p in skinned)
    assert "eyeBlinkLeft" in scene.primitives[0].target_names

    model = load_avatar(HUMANOID)
    assert model.info["format"] == "glTF" and model.info["mapping"] == "arkit (partial)"
    assert set(model.info["humanoid"]) >= {"hips", "spine", "chest", "neck", "head", "leftUpperArm", "rightHand"}
    missing = set(model.info["arkit_missing"])
    assert missing.isdisjoint({"jawOpen", "eyeBlinkLeft", "eyeBlinkRight", "mouthFunnel"}) and len(missing) == 46
    assert model.texture is not None and model.uvs is not None


def test_humanoid_bones_drive_the_engine_joints():
    """The head joint turns the head (and not the feet); the rest joints sit where the file's bones are."""
    model = load_avatar(HUMANOID)
    joints = model.rest_joints()
    assert joints[JOINT_INDEX["head"], 1] > joints[JOINT_INDEX["neck"], 1] > joints[JOINT_INDEX["pelvis"], 1]
    assert joints[JOINT_INDEX["left_wrist"], 0] > 0.5 > -0.5 > joints[JOINT_INDEX["right_wrist"], 0]  # +X is its left
    pose = np.zeros((55, 3))
    pose[JOINT_INDEX["head"]] = (0, 0.5, 0)
    rest, _ = lbs(model)
    turned, _ = lbs(model, pose=pose)
    moved = np.linalg.norm(turned - rest, axis=1)
    top = rest[:, 1] > joints[JOINT_INDEX["head"], 1] + 0.05
    feet = rest[:, 1] < 0.2
    assert moved[top].max() > 0.03 and moved[feet].max() < 1e-9


def test_jaw_and_blink_shapes_move_the_mouth_and_eyes_and_face_forward():
    model = load_avatar(HUMANOID)
    head = model.rest_joints()[JOINT_INDEX["head"]]
    jaw = np.linalg.norm(model.expr_dirs[:, :, ARKIT_INDEX["jawOpen"]], axis=1) > 1e-4
    blink = np.linalg.norm(model.expr_dirs[:, :, ARKIT_INDEX["eyeBlinkLeft"]], axis=1) > 1e-4
    assert jaw.any() and blink.any()
    assert model.v_template[jaw, 2].mean() > head[2]  # the face is on the +Z side: the studio's front
    assert model.v_template[blink, 0].mean() > 0  # the left eye is on the avatar's left (+X)


def test_vrm_meta_humanoid_and_expression_overrides_as_the_samples_say():
    info = read_vrm(read_gltf(OVERRIDES))
    assert info.version == "1.0" and info.meta["author"] == "pixiv Inc." and "vrm.dev/licenses" in info.meta["licence"]
    assert {"hips", "head", "neck"} <= set(info.humanoid)
    # Overrides: `happy` is binary and blends blink away: above 0.5 it is 1 and blink goes to 0; below, happy is 0.
    assert resolve_expressions(info, {"happy": 0.6, "blink": 1.0}) == {"happy": 1.0, "blink": 0.0}
    assert resolve_expressions(info, {"happy": 0.4, "blink": 1.0}) == {"happy": 0.0, "blink": 1.0}
    # Overridden: `blink` is the binary one; any override effect from a non-binary happy suppresses it completely
    # (the spec's "interaction between override and isBinary", which this sample tests).
    overridden = read_vrm(read_gltf(OVERRIDDEN))
    assert resolve_expressions(overridden, {"happy": 0.25, "blink": 0.8}) == {"happy": 0.25, "blink": 0.0}
    assert resolve_expressions(overridden, {"happy": 0.0, "blink": 0.8}) == {"happy": 0.0, "blink": 1.0}
    assert resolve_expressions(overridden, {"happy": 0.0, "blink": 0.4}) == {"happy": 0.0, "blink": 0.0}


def test_a_model_without_face_morphs_loads_with_a_note_and_its_head_still_turns():
    model = load_avatar(OVERRIDES)
    assert model.info["mapping"] == "none" and not model.has_arkit_expressions
    assert any("only its head and body will move" in note for note in model.info["notes"])
    pose = np.zeros((55, 3))
    pose[JOINT_INDEX["head"]] = (0, 0.5, 0)
    assert np.abs(lbs(model, pose=pose)[0] - lbs(model)[0]).max() > 0.01


def test_vrm0_vowels_and_blink_drive_the_arkit_channels(tmp_path):
    """A VRM 0.x file with only the preset A and Blink groups: jawOpen drives A, eyeBlinkLeft half the Blink."""
    document, blob = quad()
    document["meshes"][0]["extras"] = {"targetNames": ["Fcl_MTH_A"]}
    document["extensions"] = {"VRM": {
        "meta": {"title": "Vowels", "author": "me", "licenseName": "CC0"},
        "humanoid": {"humanBones": [{"bone": "head", "node": 0}]},
        "blendShapeMaster": {"blendShapeGroups": [
            {"name": "A", "presetName": "a", "binds": [{"mesh": 0, "index": 0, "weight": 100}]},
            {"name": "Blink", "presetName": "blink", "binds": [{"mesh": 0, "index": 0, "weight": 50}]},
        ]},
    }}
    model = load_avatar(write_glb(tmp_path, document, blob, "vowels.vrm"))
    assert model.info["format"] == "VRM 0.x" and model.info["meta"]["title"] == "Vowels"
    assert model.info["mapping"] == "vowels"
    column = model.expr_dirs[:4, :, ARKIT_INDEX["jawOpen"]]
    assert np.allclose(np.abs(column[:, 2]), 0.1)  # VRM 0.x faces -Z: turned to face +Z, so the push flips sign
    assert np.allclose(np.abs(model.expr_dirs[:4, 2, ARKIT_INDEX["eyeBlinkLeft"]]), 0.5 * 0.5 * 0.1)
    assert "jawOpen←aa" in model.info["fallback"]


def test_a_vrm0_humanoid_faces_forward_and_its_face_runs_on_the_vowel_fallback():
    model = load_avatar(DATA / "humanoid_vrm0.vrm")
    assert model.info["format"] == "VRM 0.x" and model.info["meta"]["licence"] == "CC0"
    assert model.info["mapping"] == "vowels" and len(model.info["arkit_missing"]) == 52
    assert {"jawOpen←aa", "eyeBlinkLeft←blinkLeft", "eyeBlinkRight←blinkRight"} <= set(model.info["fallback"])
    head = model.rest_joints()[JOINT_INDEX["head"]]
    jaw = np.linalg.norm(model.expr_dirs[:, :, ARKIT_INDEX["jawOpen"]], axis=1) > 1e-4
    blink = np.linalg.norm(model.expr_dirs[:, :, ARKIT_INDEX["eyeBlinkLeft"]], axis=1) > 1e-4
    assert model.v_template[jaw, 2].mean() > head[2]  # turned from VRM 0.x's -Z to face +Z
    assert model.v_template[blink, 0].mean() > 0  # Blink_L closes the eye on the avatar's left


def test_vrm0_spring_bones_become_the_hair_cloth_region():
    from studio.cloth import region_weights

    model = load_avatar(DATA / "humanoid_vrm0.vrm")
    weights = region_weights(model)
    follows = weights[:, 0] > 0
    head = model.rest_joints()[JOINT_INDEX["head"]]
    assert follows.sum() > 20 and not weights[:, 1:].any()
    assert (model.v_template[follows, 2] < head[2] - 0.1).all()  # only the ponytail, behind the head (-Z)
    ponytail = (model.v_template[:, 2] < head[2] - 0.1) & (model.v_template[:, 1] > head[1] - 0.2)
    top, bottom = (ponytail & (model.v_template[:, 1] == f(model.v_template[ponytail, 1])) for f in (np.max, np.min))
    assert top.any() and bottom.any()
    assert weights[top, 0].max() == 0.0 and weights[bottom, 0].min() == 1.0  # held at the root, free at the tip
    assert load_avatar(HUMANOID).cloth_weights is None  # plain glTF: no spring bones, nothing swings


def test_a_persona_may_name_a_vrm_file():
    from studio.avatar.look import persona_model
    from studio.presets import Persona

    persona = Persona(name="Vee", avatar=str(DATA / "humanoid_vrm0.vrm"), colors={"skin": (0.2, 0.3, 0.4)})
    model = persona_model(persona)
    assert model.info["format"] == "VRM 0.x" and model.texture is not None
    assert np.array_equal(model.vertex_colors, load_avatar(DATA / "humanoid_vrm0.vrm").vertex_colors)  # no parts to tint


# ---------------------------------------------------------------- bad input


def refused(path: Path) -> str:
    with pytest.raises(AvatarFormatError) as caught:
        load_avatar(path)
    message = str(caught.value)
    assert str(path) in message and "\n" not in message
    return message


def test_bad_json_is_refused_with_the_position(tmp_path):
    gltf = tmp_path / "broken.gltf"
    gltf.write_text('{"asset": {"version": "2.0"}, "nodes": [')
    assert "not valid glTF JSON" in refused(gltf) and "line 1" in refused(gltf)
    data = bytearray(glb_bytes(*quad()))
    data[20:22] = b"{{"
    (tmp_path / "bad.glb").write_bytes(bytes(data))
    assert "not valid glTF JSON" in refused(tmp_path / "bad.glb")


@pytest.mark.parametrize("change, expected", [
    (lambda d: d["meshes"][0]["primitives"][0]["attributes"].update(POSITION=9), "refers to accessor 9"),
    (lambda d: d["accessors"][0].update(count=5), "runs past the end of bufferView"),
    (lambda d: d["bufferViews"][0].update(byteLength=4000), "runs past the end of its buffer"),
    (lambda d: d["accessors"][0].update(byteOffset=40), "runs past the end of bufferView"),
    (lambda d: d["accessors"][0].update(count=10**8), "claims 100000000 elements"),
    (lambda d: d["buffers"][0].update(byteLength=10**6), "claims 1000000 bytes"),
    (lambda d: d.update(extensionsRequired=["KHR_draco_mesh_compression"]), "Draco"),
    (lambda d: d.update(extensionsUsed=["EXT_meshopt_compression"]), "meshopt"),
    (lambda d: d["nodes"][0].update(children=[0]), "has child 0"),
    (lambda d: d["asset"].update(version="1.0"), "glTF 2.x"),
])
def test_malformed_documents_are_refused_naming_the_reason(tmp_path, change, expected):
    document, blob = quad()
    change(document)
    assert expected in refused(write_glb(tmp_path, document, blob))


def test_indices_past_the_vertex_count_and_nan_positions_are_refused(tmp_path):
    document, blob = quad()
    bad_index = bytearray(blob)
    bad_index[48:50] = struct.pack("<H", 4)
    assert "index 4 ≥ its vertex count 4" in refused(write_glb(tmp_path, document, bytes(bad_index), "index.glb"))
    nan = bytearray(blob)
    nan[0:4] = struct.pack("<f", float("nan"))
    assert "NaN" in refused(write_glb(tmp_path, document, bytes(nan), "nan.glb"))


def test_a_claim_of_a_hundred_million_vertices_allocates_nothing_big(tmp_path):
    document, blob = quad()
    document["accessors"][0]["count"] = 10**8
    document["bufferViews"][0]["byteLength"] = 12 * 10**8
    document["buffers"][0]["byteLength"] = 12 * 10**8
    path = write_glb(tmp_path, document, blob)
    tracemalloc.start()
    try:
        refused(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20  # the claim is 1.2 GB of positions


def test_external_uris_outside_the_folder_or_on_the_network_are_refused(tmp_path):
    document, blob = quad()
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "quad.bin").write_bytes(blob)
    (tmp_path / "secret.bin").write_bytes(blob)
    (tmp_path / "model" / "link.bin").symlink_to(tmp_path / "secret.bin")

    def gltf(uri: str, name: str) -> Path:
        document["buffers"][0]["uri"] = uri
        path = tmp_path / "model" / name
        path.write_text(json.dumps(document))
        return path

    assert load_avatar(gltf("quad.bin", "inside.gltf")).num_vertices == 4 + 55  # a file beside the model is read
    for uri, name in (("http://example.com/quad.bin", "web.gltf"), ("../secret.bin", "up.gltf"),
                      (str(tmp_path / "secret.bin"), "absolute.gltf"), ("link.bin", "link.gltf"),
                      ("file:///etc/passwd", "scheme.gltf")):
        message = refused(gltf(uri, name))
        assert "refused" in message or "only files inside the model's folder" in message, message


def test_a_refused_file_keeps_the_default_avatar_and_says_why(tmp_path):
    path = tmp_path / "bad.vrm"
    path.write_bytes(b"glTF" + b"\0" * 40)
    model, problem = load_avatar_or_default(path)
    assert model.name and problem is not None and str(path) in problem


def test_fuzzed_glb_is_refused_or_loaded_never_crashes(tmp_path):
    """1,000 mutations of a real GLB (byte flips, truncations, inserted runs, JSON number changes)."""
    original = HUMANOID.read_bytes()
    json_length = struct.unpack("<I", original[12:16])[0]
    rng = random.Random(39)
    outcomes = {"loaded": 0, "refused": 0}
    for trial in range(1000):
        data = bytearray(original)
        kind = trial % 4
        if kind == 0:
            for _ in range(rng.randint(1, 20)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif kind == 1:
            data = data[: rng.randrange(len(data))]
        elif kind == 2:
            at = rng.randrange(20, 20 + json_length)
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        else:
            text = data[20:20 + json_length].decode()
            digits = [i for i, c in enumerate(text) if c.isdigit()]
            for _ in range(rng.randint(1, 4)):
                i = rng.choice(digits)
                text = text[:i] + rng.choice(["9", "99999999", "-1", "0"]) + text[i + 1:]
            data = bytearray(glb_bytes(text.encode(), original[20 + json_length + 8:]))
        path = tmp_path / f"fuzz{trial % 8}.glb"
        path.write_bytes(bytes(data))
        try:
            load_avatar(path)
            outcomes["loaded"] += 1
        except AvatarFormatError as error:
            assert str(path) in str(error)
            outcomes["refused"] += 1
    assert outcomes["refused"] > 300 and sum(outcomes.values()) == 1000


def test_quantized_positions_are_read_through_the_node_scale(tmp_path):
    """KHR_mesh_quantization: int16 positions, dequantized by the node's scale."""
    document, blob = quad()
    positions = (np.frombuffer(blob[:48], np.float32).reshape(4, 3) * 1000).astype(np.int16)
    blob = positions.tobytes() + b"\0" * 24 + blob[48:]
    document["accessors"][0].update(componentType=5122, byteOffset=0)
    document["bufferViews"][0]["byteLength"] = 48
    document["nodes"][0]["scale"] = [0.001, 0.001, 0.001]
    document["extensionsUsed"] = document["extensionsRequired"] = ["KHR_mesh_quantization"]
    model = load_avatar(write_glb(tmp_path, document, blob))
    assert np.allclose(model.v_template[:4], [[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]])


def test_a_texture_in_a_format_the_studio_cannot_decode_leaves_a_note_not_a_refusal(tmp_path):
    document, blob = quad()
    ktx2 = b"\xabKTX 20\xbb\r\n\x1a\n" + bytes(40)
    document["bufferViews"].append({"buffer": 0, "byteOffset": len(blob), "byteLength": len(ktx2)})
    blob += ktx2
    document["buffers"][0]["byteLength"] = len(blob)
    document["images"] = [{"bufferView": 3, "mimeType": "image/ktx2"}]
    document["textures"] = [{"source": 0}]
    document["materials"] = [{"pbrMetallicRoughness": {"baseColorTexture": {"index": 0}, "baseColorFactor": [1, 0, 0, 1]}}]
    document["meshes"][0]["primitives"][0]["material"] = 0
    model = load_avatar(write_glb(tmp_path, document, blob))
    assert any("image 0" in note and "base colour" in note for note in model.info["notes"])
    assert np.allclose(model.vertex_colors[:4], (1, 0, 0))  # drawn in the material's base colour


def test_arkit_names_in_other_spellings_are_matched(tmp_path):
    document, blob = quad()
    document["meshes"][0]["primitives"][0]["targets"] = [{"POSITION": 2}] * 3
    document["meshes"][0]["extras"] = {"targetNames": ["eye_blink_L", "EyeBlinkRight", "blendShape1.mouthSmile_L"]}
    model = load_avatar(write_glb(tmp_path, document, blob))
    found = set(ARKIT_NAMES) - set(model.info["arkit_missing"])
    assert found == {"eyeBlinkLeft", "eyeBlinkRight", "mouthSmileLeft"}


@pytest.mark.parametrize("names, expected", [
    (["Hips", "Spine", "Spine1", "Spine2", "Neck", "Head", "LeftEye", "LeftShoulder", "LeftArm", "LeftForeArm",
      "LeftHand", "RightUpLeg", "RightLeg", "RightFoot", "RightToeBase"],  # Ready Player Me
     {"hips": "Hips", "chest": "Spine1", "upperChest": "Spine2", "leftEye": "LeftEye", "leftUpperArm": "LeftArm",
      "leftLowerArm": "LeftForeArm", "rightUpperLeg": "RightUpLeg", "rightLowerLeg": "RightLeg", "rightToes": "RightToeBase"}),
    (["mixamorig:Hips", "mixamorig:Neck", "mixamorig:Head", "mixamorig:RightArm", "mixamorig:RightHand"],  # Mixamo
     {"hips": "mixamorig:Hips", "head": "mixamorig:Head", "rightUpperArm": "mixamorig:RightArm",
      "rightHand": "mixamorig:RightHand"}),
    (["J_Bip_C_Hips", "J_Bip_C_Head", "J_Bip_L_UpperArm", "J_Bip_R_LowerLeg"],  # VRoid without its VRM extension
     {"hips": "J_Bip_C_Hips", "head": "J_Bip_C_Head", "leftUpperArm": "J_Bip_L_UpperArm", "rightLowerLeg": "J_Bip_R_LowerLeg"}),
    (["pelvis", "neck", "head", "upper_arm.L", "forearm.R", "thigh.L", "shin_R"],  # Blender rigs
     {"hips": "pelvis", "head": "head", "leftUpperArm": "upper_arm.L", "rightLowerArm": "forearm.R",
      "leftUpperLeg": "thigh.L", "rightLowerLeg": "shin_R"}),
])
def test_humanoid_bones_are_guessed_from_common_rig_names(names, expected):
    from types import SimpleNamespace

    from studio.avatar.vrm import guess_humanoid

    found = guess_humanoid(SimpleNamespace(node_names=names), set(range(len(names))))
    assert {bone: names[node] for bone, node in found.items() if bone in expected} == expected


# ---------------------------------------------------------------- the mapping file beside the avatar


def vrm0_copy(folder: Path, mapping: str | None = None) -> Path:
    path = folder / "vee.vrm"
    path.write_bytes((DATA / "humanoid_vrm0.vrm").read_bytes())
    if mapping is not None:
        (folder / "vee.mapping.yaml").write_text(mapping)
    return path


def test_a_mapping_file_beside_the_avatar_replaces_the_channels_it_names(tmp_path):
    automatic = load_avatar(vrm0_copy(tmp_path))
    assert automatic.info["mapping_file"] is None
    path = vrm0_copy(tmp_path, "schema_version: 1\narkit:\n  jawOpen: none\n"
                               "  mouthSmileLeft: {expression: happy, weight: 0.5}\n  cheekPuff: Fcl_MTH_O\n")
    model = load_avatar(path)
    assert model.info["mapping_file"] == str(tmp_path / "vee.mapping.yaml")
    assert not model.expr_dirs[:, :, ARKIT_INDEX["jawOpen"]].any()  # 'none' drives nothing
    happy = automatic.expr_dirs[:, :, ARKIT_INDEX["mouthSmileLeft"]]
    assert not happy.any() and model.expr_dirs[:, :, ARKIT_INDEX["mouthSmileLeft"]].any()
    assert model.expr_dirs[:, :, ARKIT_INDEX["cheekPuff"]].any()  # a morph target by its name
    assert np.array_equal(model.expr_dirs[:, :, ARKIT_INDEX["eyeBlinkLeft"]],
                          automatic.expr_dirs[:, :, ARKIT_INDEX["eyeBlinkLeft"]])  # channels not named stay automatic


def test_the_written_mapping_reloads_as_the_automatic_one(tmp_path):
    from studio.avatar.imported import current_mapping_text

    path = vrm0_copy(tmp_path)
    automatic = load_avatar(path)
    (tmp_path / "vee.mapping.yaml").write_text(current_mapping_text(path))
    pinned = load_avatar(path)
    assert np.array_equal(pinned.expr_dirs, automatic.expr_dirs) and pinned.info["humanoid"] == automatic.info["humanoid"]


@pytest.mark.parametrize("text, expected", [
    ("arkit:\n  jawOpenn: aa\n", "arkit.jawOpenn: not an ARKit shape"),
    ("arkit:\n  jawOpen: {morph: Nope}\n", "morph target 'Nope' is not in the avatar"),
    ("arkit:\n  jawOpen: Nope\n", "'Nope' is neither a morph target nor an expression"),
    ("arkit:\n  jawOpen: {expression: aa, weight: lots}\n", "weight 'lots'; expected a number"),
    ("bones:\n  head: nowhere\n", "bones.head: node 'nowhere' is not in the avatar"),
    ("bones:\n  noggin: head\n", "bones.noggin: not a humanoid bone"),
    ("schema_version: 7\n", "schema_version: 7"),
    ("arkit: [\n", "not a readable mapping file"),
])
def test_a_bad_mapping_file_is_refused_naming_file_and_field(tmp_path, text, expected):
    path = vrm0_copy(tmp_path, text)
    with pytest.raises(AvatarFormatError) as caught:
        load_avatar(path)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'vee.mapping.yaml'}: ") and expected in message and "\n" not in message


def test_a_mapping_file_names_bones_the_studio_cannot_guess(tmp_path):
    document, blob = quad()
    document["nodes"][0]["name"] = "Bone.042"
    path = write_glb(tmp_path, document, blob, "odd.glb")
    pose = np.zeros((55, 3))
    pose[JOINT_INDEX["head"]] = (0, 0.5, 0)
    unguessed = load_avatar(path)
    assert np.allclose(lbs(unguessed, pose=pose)[0], lbs(unguessed)[0])  # the head joint carries nothing
    (tmp_path / "odd.mapping.yaml").write_text("bones:\n  head: Bone.042\n")
    mapped = load_avatar(path)
    assert "head" in mapped.info["humanoid"]
    assert np.abs(lbs(mapped, pose=pose)[0] - lbs(mapped)[0]).max() > 0.1


def test_an_a_posed_avatar_is_turned_to_a_t_pose_at_load(tmp_path):
    """The humanoid with its upper arms turned 40° down in the file (an A-pose): the studio levels them, so the
    engine's T-pose-relative arm rotations put the arms where they mean to."""
    data = HUMANOID.read_bytes()
    json_length = struct.unpack("<I", data[12:16])[0]
    document = json.loads(data[20:20 + json_length])
    world = read_gltf(HUMANOID).world
    parents = {child: index for index, node in enumerate(document["nodes"]) for child in node.get("children", [])}
    for name, angle in (("upper_arm.L", -0.7), ("upper_arm.R", 0.7)):
        index = next(i for i, node in enumerate(document["nodes"]) if node["name"] == name)
        parent = world[parents[index]][:3, :3]
        parent = parent / np.linalg.norm(parent, axis=0)
        down = np.array([[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0], [0, 0, 1]])
        x, y, z, w = document["nodes"][index].get("rotation", [0, 0, 0, 1])
        local = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                          [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                          [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
        turned = parent.T @ down @ parent @ local
        qw = np.sqrt(max(1e-12, 1 + np.trace(turned))) / 2
        document["nodes"][index]["rotation"] = [float((turned[2, 1] - turned[1, 2]) / (4 * qw)),
                                                float((turned[0, 2] - turned[2, 0]) / (4 * qw)),
                                                float((turned[1, 0] - turned[0, 1]) / (4 * qw)), float(qw)]
    path = write_glb(tmp_path, document, data[20 + json_length + 8:], "a_pose.glb")
    a_posed = read_gltf(path)
    hand = a_posed.world[next(i for i, n in enumerate(a_posed.node_names) if n == "hand.L")][:3, 3]
    shoulder = a_posed.world[next(i for i, n in enumerate(a_posed.node_names) if n == "upper_arm.L")][:3, 3]
    assert shoulder[1] - hand[1] > 0.3  # the file really is A-posed

    model = load_avatar(path)
    reference = load_avatar(HUMANOID)
    joints, level = model.rest_joints(), reference.rest_joints()
    for joint in ("left_elbow", "left_wrist", "right_elbow", "right_wrist"):
        assert np.abs(joints[JOINT_INDEX[joint]] - level[JOINT_INDEX[joint]]).max() < 0.01, joint
    assert np.abs(model.v_template - reference.v_template).max() < 0.01  # the arm meshes came up with them
    assert any("turned level at load" in note for note in model.info["notes"])
