"""Each VRM spring chain moves its own vertices on screen: two tails on opposite sides of a head swing opposite ways
after a head turn (averaged into one cloth channel, their lags cancelled and neither moved)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from render.offscreen import OffscreenRenderer
from studio.avatar.io import load_avatar
from studio.avatar.skeleton import JOINT_INDEX, NUM_JOINTS
from studio.frame import FrameState
from studio.precision import CLOTH_LEVELS

FPS = 30.0
MID_TURN = 5
# node: (parent, translation from the parent); the tails hang from the head's back-left and front-right corners
NODES = {"hips": (None, (0, 1.0, 0)), "spine": ("hips", (0, 0.2, 0)), "neck": ("spine", (0, 0.3, 0)),
         "head": ("neck", (0, 0.1, 0)), "tailL_1": ("head", (0.1, -0.02, -0.1)), "tailL_2": ("tailL_1", (0, -0.2, 0)),
         "tailR_1": ("head", (-0.1, -0.02, 0.1)), "tailR_2": ("tailR_1", (0, -0.2, 0))}
NAMES = list(NODES)


def box(low, high) -> tuple[np.ndarray, np.ndarray]:
    corners = np.array([[x, y, z] for x in (low[0], high[0]) for y in (low[1], high[1]) for z in (low[2], high[2])])
    faces = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],
                      [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return corners, faces


def world(name: str) -> np.ndarray:
    parent, offset = NODES[name]
    return np.asarray(offset, float) + (world(parent) if parent else 0.0)


def twin_tails_vrm(path: Path) -> Path:
    """A VRM 1.0 head (grey cube) with two tails (red, blue), each its own spring chain, skinned to its first joint."""
    pieces = []  # (positions, faces, joint index, colour)
    head = world("head")
    pieces.append((*box(head + (-0.05, 0.0, -0.05), head + (0.05, 0.1, 0.05)), NAMES.index("head"), (0.5, 0.5, 0.5)))
    for side, colour in (("L", (0.9, 0.05, 0.05)), ("R", (0.05, 0.05, 0.9))):
        top, bottom = world(f"tail{side}_1"), world(f"tail{side}_2")
        pieces.append((*box(bottom - (0.02, 0, 0.02), top + (0.02, 0, 0.02)), NAMES.index(f"tail{side}_1"), colour))
    blob, views, accessors, primitives = b"", [], [], []

    def add(array: np.ndarray, kind: str, component: int, minmax: bool = False) -> int:
        nonlocal blob
        data = array.tobytes()
        views.append({"buffer": 0, "byteOffset": len(blob), "byteLength": len(data)})
        blob += data + b"\0" * (-len(data) % 4)
        accessor = {"bufferView": len(views) - 1, "componentType": component, "count": len(array), "type": kind}
        if minmax:
            accessor.update(min=array.min(axis=0).tolist(), max=array.max(axis=0).tolist())
        accessors.append(accessor)
        return len(accessors) - 1

    for k, (positions, faces, joint, _) in enumerate(pieces):
        count = len(positions)
        joints = np.zeros((count, 4), np.uint8)
        joints[:, 0] = joint
        weights = np.zeros((count, 4), np.float32)
        weights[:, 0] = 1.0
        primitives.append({"attributes": {
            "POSITION": add(positions.astype(np.float32), "VEC3", 5126, minmax=True),
            "JOINTS_0": add(joints, "VEC4", 5121), "WEIGHTS_0": add(weights, "VEC4", 5126)},
            "indices": add(faces.astype(np.uint32).reshape(-1), "SCALAR", 5125), "material": k})
    inverse = np.stack([np.linalg.inv(np.block([[np.eye(3), world(n)[:, None]], [np.zeros((1, 3)), np.ones((1, 1))]]))
                        for n in NAMES]).astype(np.float32)
    ibm = add(np.ascontiguousarray(inverse.transpose(0, 2, 1)).reshape(len(NAMES), 16), "MAT4", 5126)
    nodes = [{"name": n, "translation": list(map(float, NODES[n][1])),
              "children": [NAMES.index(c) for c in NAMES if NODES[c][0] == n]} for n in NAMES]
    nodes.append({"name": "body", "mesh": 0, "skin": 0})
    joint = lambda name: {"node": NAMES.index(name), "stiffness": 1.0, "dragForce": 0.4, "gravityPower": 0.0}  # noqa: E731
    document = {
        "asset": {"version": "2.0"}, "scene": 0, "scenes": [{"nodes": [0, len(NAMES)]}], "nodes": nodes,
        "meshes": [{"primitives": primitives}], "skins": [{"joints": list(range(len(NAMES))), "inverseBindMatrices": ibm}],
        "materials": [{"pbrMetallicRoughness": {"baseColorFactor": [*c, 1.0]}} for *_, c in pieces],
        "accessors": accessors, "bufferViews": views, "buffers": [{"byteLength": len(blob)}],
        "extensionsUsed": ["VRMC_vrm", "VRMC_springBone"],
        "extensions": {
            "VRMC_vrm": {"specVersion": "1.0", "meta": {"name": "twin tails", "authors": ["Avatar Studio tests"]},
                         "humanoid": {"humanBones": {b: {"node": NAMES.index(b)} for b in ("hips", "spine", "neck", "head")}}},
            "VRMC_springBone": {"specVersion": "1.0", "springs": [
                {"name": "left", "joints": [joint("tailL_1"), joint("tailL_2")]},
                {"name": "right", "joints": [joint("tailR_1"), joint("tailR_2")]}]},
        },
    }
    text = json.dumps(document).encode()
    text += b" " * (-len(text) % 4)
    chunks = struct.pack("<I4s", len(text), b"JSON") + text + struct.pack("<I4s", len(blob), b"BIN\0") + blob
    path.write_bytes(struct.pack("<4sII", b"glTF", 2, 12 + len(chunks)) + chunks)
    return path


def turning(frame: int) -> FrameState:
    """The head turns 0.8 rad in 0.3 s, then holds still."""
    pose = np.zeros((NUM_JOINTS, 3))
    pose[JOINT_INDEX["head"], 1] = 0.8 * min(1.0, frame / FPS / 0.3)
    return FrameState(media_time_s=frame / FPS, pose=pose)


def tail_centres(path: Path, level: str) -> np.ndarray:
    """Screen x of the red and the blue tail's pixels mid-turn, drawn with the cloth level's springs."""
    with OffscreenRenderer(load_avatar(path), size=(240, 240), camera="head") as renderer:
        renderer.view.set_cloth(CLOTH_LEVELS[level])
        for frame in range(MID_TURN + 1):
            image = renderer.render(turning(frame))[..., :3].astype(int)
    red = (image[..., 0] > image[..., 1] + 60) & (image[..., 0] > image[..., 2] + 60)
    blue = (image[..., 2] > image[..., 0] + 60) & (image[..., 2] > image[..., 1] + 60)
    assert red.sum() > 30 and blue.sum() > 30, (red.sum(), blue.sum())
    return np.array([np.flatnonzero(mask.any(axis=0)).mean() for mask in (red, blue)])


def test_two_tails_on_opposite_sides_swing_opposite_ways_after_a_head_turn(tmp_path):
    path = twin_tails_vrm(tmp_path / "twin_tails.vrm")
    model = load_avatar(path)
    assert model.spring_bones.chains == 2
    shift = tail_centres(path, "high") - tail_centres(path, "low")  # swinging minus rigid, pixels
    assert abs(shift[0]) > 2 and abs(shift[1]) > 2 and np.sign(shift[0]) != np.sign(shift[1]), shift


def test_each_tail_vertex_hangs_on_its_own_chain_from_root_to_tip(tmp_path):
    model = load_avatar(twin_tails_vrm(tmp_path / "twin_tails.vrm"))
    place = model.spring_place
    colours = model.vertex_colors
    red, blue = (colours[:, 0] - colours[:, 2] > 0.5), (colours[:, 2] - colours[:, 0] > 0.5)
    for chain, side in ((0, red), (1, blue)):  # red: the left chain, blue: the right one
        assert (place[side, 0] == chain).all() and (place[side, 2] == 1.0).all()
        top = model.v_template[side, 1] == model.v_template[side, 1].max()
        assert place[side][top, 1] == pytest.approx(0.0, abs=0.12) and place[side][~top, 1] == pytest.approx(1.0)
    grey = (colours < 0.9).all(axis=1) & (colours > 0.6).all(axis=1)  # the head: on no chain
    assert grey.sum() == 8 and (place[grey, 2] == 0).all()
