"""Build tests/data/avatars/humanoid_vrm1.vrm: the Blender-written humanoid_arkit.glb dressed as a VRM 1.0 file.

    .venv/bin/python tests/data/avatars/make_vrm1.py

Geometry, skin, texture and morph targets stay Blender's bytes. What changes is the JSON, as VRM 1.0 exporters
write it: VRoid-style morph names that are not ARKit names, a `VRMC_vrm` extension (meta, humanoid bones,
expressions aa, oh, blink, blinkLeft, blinkRight and `happy` — binary, blocking the blinks and blending the
mouth, as VRoid's emotions are often set), and a `VRMC_springBone` extension: the ponytail (hair_1 → hair_2) as
one spring with a sphere collider on the head.
"""

import json
import struct
from pathlib import Path

import numpy as np

from studio.avatar.gltf import read_gltf

HERE = Path(__file__).resolve().parent
BONES = {"hips": "hips", "spine": "spine", "chest": "chest", "neck": "neck", "head": "head"}
for side, word in (("L", "left"), ("R", "right")):
    BONES.update({f"upper_arm.{side}": f"{word}UpperArm", f"forearm.{side}": f"{word}LowerArm",
                  f"hand.{side}": f"{word}Hand", f"thigh.{side}": f"{word}UpperLeg",
                  f"shin.{side}": f"{word}LowerLeg", f"foot.{side}": f"{word}Foot"})
NAMES = {"jawOpen": "Fcl_MTH_A", "eyeBlinkLeft": "Fcl_EYE_Close_L", "eyeBlinkRight": "Fcl_EYE_Close_R",
         "mouthFunnel": "Fcl_MTH_O", "mouthSmileLeft": "Fcl_MTH_Joy_L", "mouthSmileRight": "Fcl_MTH_Joy_R"}
HEAD_CENTRE = np.array([0.0, 1.62, 0.0])  # world; the head sphere's centre and radius
HEAD_RADIUS = 0.11


def main() -> None:
    source = HERE / "humanoid_arkit.glb"
    world = read_gltf(source).world
    data = source.read_bytes()
    json_length = struct.unpack("<I", data[12:16])[0]
    document = json.loads(data[20:20 + json_length])
    blob_chunk = data[20 + json_length:]
    mesh = 0
    old = document["meshes"][mesh]["extras"]["targetNames"]
    document["meshes"][mesh]["extras"]["targetNames"] = [NAMES[n] for n in old]
    morph = {NAMES[n]: i for i, n in enumerate(old)}
    nodes = document["nodes"]
    node = {n.get("name"): i for i, n in enumerate(nodes)}
    body = next(i for i, n in enumerate(nodes) if n.get("mesh") == mesh)

    def expression(*morphs, **rules):
        return {"morphTargetBinds": [{"node": body, "index": morph[m], "weight": 1.0} for m in morphs], **rules}

    head_offset = np.linalg.inv(world[node["head"]]) @ np.append(HEAD_CENTRE, 1.0)
    document["extensionsUsed"] = sorted(set(document.get("extensionsUsed", [])) | {"VRMC_vrm", "VRMC_springBone"})
    document["extensions"] = {
        "VRMC_vrm": {
            "specVersion": "1.0",
            "meta": {"name": "Blender humanoid (VRM 1.0 test)", "version": "1", "authors": ["Avatar Studio tests"],
                     "licenseUrl": "https://vrm.dev/licenses/1.0/", "avatarPermission": "everyone",
                     "allowRedistribution": True, "commercialUsage": "corporation",
                     "modification": "allowModificationRedistribution"},
            "humanoid": {"humanBones": {bone: {"node": node[name]} for name, bone in BONES.items()}},
            "expressions": {"preset": {
                "aa": expression("Fcl_MTH_A"), "oh": expression("Fcl_MTH_O"),
                "blink": expression("Fcl_EYE_Close_L", "Fcl_EYE_Close_R"),
                "blinkLeft": expression("Fcl_EYE_Close_L"), "blinkRight": expression("Fcl_EYE_Close_R"),
                "happy": expression("Fcl_MTH_Joy_L", "Fcl_MTH_Joy_R", isBinary=True, overrideBlink="block",
                                    overrideMouth="blend"),
            }},
            "lookAt": {"type": "bone"},
        },
        "VRMC_springBone": {
            "specVersion": "1.0",
            "colliders": [{"node": node["head"], "shape": {"sphere": {
                "offset": [round(float(v), 6) for v in head_offset[:3]], "radius": HEAD_RADIUS}}}],
            "colliderGroups": [{"name": "head", "colliders": [0]}],
            "springs": [{"name": "ponytail", "colliderGroups": [0], "joints": [
                {"node": node["hair_1"], "hitRadius": 0.02, "stiffness": 1.0, "gravityPower": 0.0,
                 "gravityDir": [0.0, -1.0, 0.0], "dragForce": 0.4},
                {"node": node["hair_2"], "hitRadius": 0.02, "stiffness": 1.0, "gravityPower": 0.0,
                 "gravityDir": [0.0, -1.0, 0.0], "dragForce": 0.4},
            ]}],
        },
    }
    text = json.dumps(document, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 4)
    chunk = struct.pack("<I4s", len(text), b"JSON") + text + blob_chunk
    (HERE / "humanoid_vrm1.vrm").write_bytes(struct.pack("<4sII", b"glTF", 2, 12 + len(chunk)) + chunk)


main()
