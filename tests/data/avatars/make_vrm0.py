"""Build tests/data/avatars/humanoid_vrm0.vrm: the Blender-written humanoid_arkit.glb dressed as a VRM 0.x file.

    .venv/bin/python tests/data/avatars/make_vrm0.py

(VRM0_IN=/tmp/big.glb VRM0_OUT=/tmp/big.vrm VRM0_MTOON=1 dresses another GLB from the Blender script, the ~60k-triangle
one for `avatar-studio bench --avatar`, and gives each material MToon properties with a rim light and a 2 mm outline,
as VRoid Studio's exports have.)

Geometry, skin, texture and morph targets stay Blender's bytes. What changes is the JSON, as VRM 0.x
exporters write it: the model turned to face -Z (a root node rotated 180° about Y), the morph targets given
VRoid-style names that are not ARKit names (so the studio must fall back to the VRM vowels and blinks), and a
`VRM` extension with meta, the humanoid bone map, blend shape groups (A, O, Blink, Blink_L, Blink_R, Joy) and
the ponytail (hair_1, hair_2) as a secondaryAnimation spring bone group.
"""

import json
import os
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = Path(os.environ.get("VRM0_IN") or HERE / "humanoid_arkit.glb")
TARGET = Path(os.environ.get("VRM0_OUT") or HERE / "humanoid_vrm0.vrm")
BONES = {"hips": "hips", "spine": "spine", "chest": "chest", "neck": "neck", "head": "head"}
for side, word in (("L", "left"), ("R", "right")):
    BONES.update({f"upper_arm.{side}": f"{word}UpperArm", f"forearm.{side}": f"{word}LowerArm",
                  f"hand.{side}": f"{word}Hand", f"thigh.{side}": f"{word}UpperLeg",
                  f"shin.{side}": f"{word}LowerLeg", f"foot.{side}": f"{word}Foot"})
NAMES = {"jawOpen": "Fcl_MTH_A", "eyeBlinkLeft": "Fcl_EYE_Close_L", "eyeBlinkRight": "Fcl_EYE_Close_R",
         "mouthFunnel": "Fcl_MTH_O", "mouthSmileLeft": "Fcl_MTH_Joy_L", "mouthSmileRight": "Fcl_MTH_Joy_R"}


def mtoon(material: dict) -> dict:
    """VRM 0.x MToon properties as UniVRM writes them: shade a darker tone of the base colour, a soft rim, and a
    world-space outline 0.2 cm wide in a dark tone (none on the eyes and mouth), the base colour texture kept."""
    base = material.get("pbrMetallicRoughness", {})
    color = [c ** (1 / 2.2) for c in base.get("baseColorFactor", [1, 1, 1, 1])[:3]] + [1.0]
    textures = {"_MainTex": base["baseColorTexture"]["index"]} if "baseColorTexture" in base else {}
    return {"name": material["name"], "shader": "VRM/MToon", "renderQueue": 2000, "keywordMap": {}, "tagMap": {},
            "floatProperties": {"_ShadeShift": 0.0, "_ShadeToony": 0.9, "_RimFresnelPower": 3.0, "_RimLift": 0.0,
                                "_RimLightingMix": 0.5, "_OutlineWidth": 0.2,
                                "_OutlineWidthMode": 0 if material["name"] in ("Eye", "Mouth") else 1,
                                "_OutlineColorMode": 1, "_OutlineLightingMix": 1.0},
            "vectorProperties": {"_Color": color, "_ShadeColor": [c * 0.7 for c in color[:3]] + [1.0],
                                 "_RimColor": [0.3, 0.3, 0.35, 1.0], "_OutlineColor": [0.2, 0.15, 0.15, 1.0]},
            "textureProperties": textures}


def main() -> None:
    data = SOURCE.read_bytes()
    json_length = struct.unpack("<I", data[12:16])[0]
    document = json.loads(data[20:20 + json_length])
    blob_chunk = data[20 + json_length:]
    mesh = 0
    old = document["meshes"][mesh]["extras"]["targetNames"]
    document["meshes"][mesh]["extras"]["targetNames"] = [NAMES[n] for n in old]
    morph = {NAMES[n]: i for i, n in enumerate(old)}
    nodes = document["nodes"]
    scene = document["scenes"][document.get("scene", 0)]
    nodes.append({"name": "Root", "rotation": [0.0, 1.0, 0.0, 0.0], "children": scene["nodes"]})
    scene["nodes"] = [len(nodes) - 1]

    def group(name, preset, *morphs, weight=100):
        return {"name": name, "presetName": preset, "isBinary": False, "materialValues": [],
                "binds": [{"mesh": mesh, "index": morph[m], "weight": weight} for m in morphs]}

    document["extensionsUsed"] = sorted(set(document.get("extensionsUsed", [])) | {"VRM"})
    document["extensions"] = {"VRM": {
        "exporterVersion": "avatar-studio tests/data/avatars/make_vrm0.py",
        "specVersion": "0.0",
        "meta": {"title": "Blender humanoid (VRM 0.x test)", "version": "1", "author": "Avatar Studio tests",
                 "licenseName": "CC0", "allowedUserName": "Everyone", "commercialUssageName": "Allow"},
        "humanoid": {"humanBones": [{"bone": bone, "node": i, "useDefaultValues": True}
                                    for i, node in enumerate(nodes) for name, bone in BONES.items()
                                    if node.get("name") == name]},
        "blendShapeMaster": {"blendShapeGroups": [
            group("A", "a", "Fcl_MTH_A"), group("O", "o", "Fcl_MTH_O"),
            group("Blink", "blink", "Fcl_EYE_Close_L", "Fcl_EYE_Close_R"),
            group("Blink_L", "blink_l", "Fcl_EYE_Close_L"), group("Blink_R", "blink_r", "Fcl_EYE_Close_R"),
            group("Joy", "joy", "Fcl_MTH_Joy_L", "Fcl_MTH_Joy_R"),
        ]},
        "firstPerson": {"lookAtTypeName": "Bone"},
        "secondaryAnimation": {"boneGroups": [{
            "comment": "ponytail", "stiffiness": 1.0, "gravityPower": 0.0, "gravityDir": {"x": 0, "y": -1, "z": 0},
            "dragForce": 0.4, "center": -1, "hitRadius": 0.02, "colliderGroups": [],
            "bones": [i for i, node in enumerate(nodes) if node.get("name") == "hair_1"],
        }], "colliderGroups": []},
    }}
    if os.environ.get("VRM0_MTOON") == "1":
        document["extensions"]["VRM"]["materialProperties"] = [mtoon(material) for material in document["materials"]]
    text = json.dumps(document, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 4)
    body = struct.pack("<I4s", len(text), b"JSON") + text + blob_chunk
    TARGET.write_bytes(struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body)


main()
