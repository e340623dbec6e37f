"""Writing an AvatarModel (the default avatar, a loaded SMPL-X one) as GLB or VRM 1.0.

The file carries what another program needs to drive the avatar as the studio does: the rest mesh (with its
colours as COLOR_0), the 55-joint skeleton as nodes named with VRM humanoid bone names, its skin (4 influences),
and the ARKit shapes the avatar has as morph targets named in ARKit spelling (sparse: only the vertices each one
moves; a shape the avatar lacks is left out rather than written empty, so a reader sees it missing and falls back).
An imported avatar's VRM emotion columns (`expression_drive`) follow as morph targets named after the emotion.
The VRM 1.0 file adds `VRMC_vrm`: meta, the humanoid bone map, the vowel/blink presets bound to the ARKit
morphs, the emotion presets (bound to the avatar's own emotion morph with its isBinary and override rules where it
has one, else to the ARKit shapes), and every ARKit shape as a custom ("perfect sync") expression, so a VRM renderer
driven by our VMC output can wear it. Vertices past the last one a face uses (an imported avatar's joint points)
are not written. JSON and buffers are plain glTF 2.0 written here; `studio.avatar.gltf` reads them back.
"""

from __future__ import annotations

import json
import os
import struct

import numpy as np

from studio import __version__
from studio.avatar.arkit import ARKIT_NAMES
from studio.avatar.imported import HUMANOID_TO_SMPLX
from studio.avatar.model import AvatarModel
from studio.avatar.skeleton import JOINT_INDEX, JOINT_NAMES, NUM_JOINTS
from studio.avatar.skinning import vertex_normals
from studio.fileio import atomic_write

_BONE_OF_JOINT = {JOINT_INDEX[joint]: bone for bone, joint in HUMANOID_TO_SMPLX.items()}
VRM_PRESETS = {  # VRM 1.0 preset -> ARKit morphs (weight) that make it
    "aa": (("jawOpen", 1.0),), "ih": (("mouthStretchLeft", 0.5), ("mouthStretchRight", 0.5)),
    "ou": (("mouthPucker", 1.0),), "ee": (("mouthSmileLeft", 0.3), ("mouthSmileRight", 0.3), ("jawOpen", 0.2)),
    "oh": (("mouthFunnel", 1.0), ("jawOpen", 0.3)), "blink": (("eyeBlinkLeft", 1.0), ("eyeBlinkRight", 1.0)),
    "blinkLeft": (("eyeBlinkLeft", 1.0),), "blinkRight": (("eyeBlinkRight", 1.0),),
    "happy": (("mouthSmileLeft", 1.0), ("mouthSmileRight", 1.0), ("cheekSquintLeft", 0.5), ("cheekSquintRight", 0.5)),
    "sad": (("mouthFrownLeft", 1.0), ("mouthFrownRight", 1.0), ("browInnerUp", 0.8)),
    "angry": (("browDownLeft", 1.0), ("browDownRight", 1.0), ("noseSneerLeft", 0.5), ("noseSneerRight", 0.5)),
    "surprised": (("eyeWideLeft", 1.0), ("eyeWideRight", 1.0), ("browInnerUp", 1.0), ("jawOpen", 0.4)),
}


class _Buffer:
    """The binary chunk and the bufferViews/accessors that point into it."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.views: list[dict] = []
        self.accessors: list[dict] = []

    def view(self, array: np.ndarray, target: int | None = None) -> int:
        self.data += b"\0" * (-len(self.data) % 4)
        raw = np.ascontiguousarray(array).tobytes()
        spec = {"buffer": 0, "byteOffset": len(self.data), "byteLength": len(raw)}
        if target is not None:
            spec["target"] = target
        self.data += raw
        self.views.append(spec)
        return len(self.views) - 1

    def accessor(self, array: np.ndarray, kind: str, target: int | None = None, bounds: bool = False) -> int:
        component = {np.float32: 5126, np.uint32: 5125, np.uint16: 5123, np.uint8: 5121}[array.dtype.type]
        spec = {"bufferView": self.view(array, target), "componentType": component, "count": int(len(array)), "type": kind}
        if bounds:
            spec["min"] = [float(v) for v in array.min(axis=0)]
            spec["max"] = [float(v) for v in array.max(axis=0)]
        self.accessors.append(spec)
        return len(self.accessors) - 1

    def sparse(self, rows: np.ndarray, values: np.ndarray, count: int) -> int:
        """A VEC3 float accessor of `count` zeros with `values` at `rows` (glTF sparse storage)."""
        spec = {"componentType": 5126, "count": count, "type": "VEC3",
                "min": [float(v) for v in values.min(axis=0)] if len(values) else [0.0] * 3,
                "max": [float(v) for v in values.max(axis=0)] if len(values) else [0.0] * 3}
        if len(rows):
            spec["sparse"] = {"count": int(len(rows)),
                              "indices": {"bufferView": self.view(rows.astype(np.uint32)), "componentType": 5125},
                              "values": {"bufferView": self.view(values.astype(np.float32))}}
        self.accessors.append(spec)
        return len(self.accessors) - 1


def gltf_document(model: AvatarModel, vrm: bool) -> tuple[dict, bytes]:
    """The glTF JSON and binary chunk of an avatar (with `VRMC_vrm` when `vrm`)."""
    buffer = _Buffer()
    count = int(np.max(model.faces)) + 1
    rest = np.asarray(model.v_template[:count], np.float32)
    joints = model.rest_joints().astype(np.float64)
    weights = np.asarray(model.skin_weights[:count], np.float32)
    top = np.argsort(-weights, axis=1)[:, :4]
    top_weights = np.take_along_axis(weights, top, axis=1)
    top_weights /= np.maximum(top_weights.sum(axis=1, keepdims=True), 1e-8)
    linear_colors = np.power(np.clip(model.colors()[:count], 0.0, 1.0), 2.2).astype(np.float32)
    attributes = {
        "POSITION": buffer.accessor(rest, "VEC3", 34962, bounds=True),
        "NORMAL": buffer.accessor(vertex_normals(rest, model.faces), "VEC3", 34962),
        "COLOR_0": buffer.accessor(linear_colors, "VEC3", 34962),
        "JOINTS_0": buffer.accessor(top.astype(np.uint8), "VEC4", 34962),
        "WEIGHTS_0": buffer.accessor(top_weights.astype(np.float32), "VEC4", 34962),
    }
    indices = buffer.accessor(np.asarray(model.faces, np.uint32).ravel(), "SCALAR", 34963)
    targets, target_names = [], []
    emotions = model.expression_drive.emotions if model.expression_drive is not None else ()
    for k, name in enumerate((*ARKIT_NAMES, *emotions)):
        delta = np.asarray(model.expr_dirs[:count, :, k], np.float32)
        rows = np.flatnonzero(np.abs(delta).max(axis=1) > 0)
        if len(rows):
            targets.append({"POSITION": buffer.sparse(rows, delta[rows], len(rest))})
            target_names.append(name)
    inverse_bind = np.tile(np.eye(4, dtype=np.float32), (NUM_JOINTS, 1, 1))
    inverse_bind[:, :3, 3] = -joints  # joints keep the world axes at rest: the inverse bind is a translation
    bind_accessor = buffer.accessor(inverse_bind.transpose(0, 2, 1).reshape(NUM_JOINTS, 16), "MAT4")

    nodes = []
    for j in range(NUM_JOINTS):
        parent = model.parents[j]
        offset = joints[j] - (joints[parent] if parent >= 0 else 0.0)
        node = {"name": _BONE_OF_JOINT.get(j, JOINT_NAMES[j]), "translation": [float(v) for v in offset]}
        children = [c for c in range(NUM_JOINTS) if model.parents[c] == j]
        if children:
            node["children"] = children
        nodes.append(node)
    mesh_node = len(nodes)
    nodes.append({"name": model.name or "avatar", "mesh": 0, "skin": 0})
    document: dict = {
        "asset": {"version": "2.0", "generator": f"Avatar Studio {__version__}"},
        "scene": 0,
        "scenes": [{"nodes": [0, mesh_node]}],
        "nodes": nodes,
        "skins": [{"joints": list(range(NUM_JOINTS)), "inverseBindMatrices": bind_accessor, "skeleton": 0}],
        "meshes": [{"name": model.name or "avatar", "extras": {"targetNames": target_names},
                    "weights": [0.0] * len(target_names),
                    "primitives": [{"attributes": attributes, "indices": indices, "material": 0, "targets": targets}]}],
        "materials": [{"name": "body", "pbrMetallicRoughness": {"baseColorFactor": [1, 1, 1, 1], "metallicFactor": 0.0,
                                                                 "roughnessFactor": 0.8}}],
    }
    if vrm:
        document["extensionsUsed"] = ["VRMC_vrm"]
        document["extensions"] = {"VRMC_vrm": _vrm_extension(model, mesh_node, target_names)}
    document["accessors"] = buffer.accessors
    document["bufferViews"] = buffer.views
    buffer.data += b"\0" * (-len(buffer.data) % 4)
    document["buffers"] = [{"byteLength": len(buffer.data)}]
    return document, bytes(buffer.data)


def _vrm_extension(model: AvatarModel, mesh_node: int, target_names: list[str]) -> dict:
    """`VRMC_vrm`; expressions bind the written morphs (`target_names`); a preset missing any of its shapes is left out."""
    index = {name: k for k, name in enumerate(target_names)}

    def binds(shapes) -> list[dict]:
        return [{"node": mesh_node, "index": index[name], "weight": weight} for name, weight in shapes]

    # A preset made of ARKit shapes only when the avatar has them all: a part of one (surprised as jawOpen alone,
    # ee without its smile) would read back as a shape or emotion the avatar never had.
    shapes_of = {name: shapes for name, shapes in VRM_PRESETS.items() if all(shape in index for shape, _ in shapes)}
    drive = model.expression_drive
    for emotion in drive.emotions if drive is not None else ():
        shapes_of[emotion] = ((emotion, 1.0),)
    preset = {name: {"morphTargetBinds": binds(shapes), "isBinary": False} for name, shapes in shapes_of.items()}
    for k, emotion in enumerate(drive.emotions if drive is not None else ()):
        preset[emotion]["isBinary"] = drive.binary[k]
        preset[emotion].update(drive.overrides[k])
    for name in ("blink", "blinkLeft", "blinkRight"):
        if name in preset:
            preset[name]["overrideLookAt"] = "none"
    custom = {name: {"morphTargetBinds": binds(((name, 1.0),)), "isBinary": False} for name in ARKIT_NAMES if name in index}
    return {
        "specVersion": "1.0",
        "meta": {"name": model.name or "avatar", "version": __version__, "authors": ["Avatar Studio"],
                 "licenseUrl": "https://vrm.dev/licenses/1.0/", "avatarPermission": "everyone",
                 "allowExcessivelyViolentUsage": False, "allowExcessivelySexualUsage": False,
                 "commercialUsage": "personalNonProfit", "allowPoliticalOrReligiousUsage": False,
                 "allowAntisocialOrHateUsage": False, "creditNotation": "required", "allowRedistribution": False,
                 "modification": "prohibited"},
        "humanoid": {"humanBones": {bone: {"node": JOINT_INDEX[joint]} for bone, joint in HUMANOID_TO_SMPLX.items()}},
        "expressions": {"preset": preset, "custom": custom},
        "lookAt": {"type": "bone", "offsetFromHeadBone": [0.0, 0.06, 0.0]},
    }


def export_avatar(model: AvatarModel, path: str | os.PathLike) -> list[str]:
    """Write `.glb` or `.vrm` (VRM 1.0) atomically: a failed write leaves any old file intact. Returns the names of
    the morph targets written (ARKit shapes the avatar has, then its emotions), for the user's summary."""
    suffix = os.fspath(path).lower().rsplit(".", 1)[-1]
    if suffix not in ("glb", "vrm"):
        raise ValueError(f"{path}: export writes .glb or .vrm files, not .{suffix}")
    document, blob = gltf_document(model, vrm=suffix == "vrm")
    text = json.dumps(document, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 4)
    body = struct.pack("<I4s", len(text), b"JSON") + text + struct.pack("<I4s", len(blob), b"BIN\0") + blob
    atomic_write(path, struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body)
    return list(document["meshes"][0]["extras"]["targetNames"])
