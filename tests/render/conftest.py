"""A small synthetic avatar (sphere head, ellipsoid body and legs) with real ARKit shapes for render tests."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from studio.avatar.arkit import ARKIT_NAMES  # noqa: E402
from studio.avatar.model import AvatarModel, Material  # noqa: E402
from studio.avatar.skeleton import JOINT_INDEX, NUM_JOINTS  # noqa: E402

HEAD_CENTER = np.array([0.0, 1.58, 0.0])
HEAD_RADIUS = 0.11
LEFT_EYE_DIR = np.array([0.33, 0.2, 0.92])  # the subject's left is +x when facing +z
RIGHT_EYE_DIR = LEFT_EYE_DIR * [-1, 1, 1]
MOUTH_DIR = np.array([0.0, -0.42, 0.91])


def _ellipsoid(center, radii, rings=24, segments=32):
    theta = np.linspace(0, np.pi, rings + 1)
    phi = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    t, p = np.meshgrid(theta, phi, indexing="ij")
    unit = np.stack([np.sin(t) * np.sin(p), np.cos(t), np.sin(t) * np.cos(p)], -1).reshape(-1, 3)
    faces = []
    for r in range(rings):
        for s in range(segments):
            a, b = r * segments + s, r * segments + (s + 1) % segments
            c, d = a + segments, b + segments
            faces += [(a, c, b), (b, c, d)]
    return np.asarray(center) + unit * radii, unit, np.array(faces)


def make_ellipsoid_avatar() -> AvatarModel:
    """A figure of ellipsoids (head with eyes and mouth, torso, legs) with part colours and smooth jaw, blink and
    smile shapes: something a camera frames and whose regions the render tests can find on screen."""
    pieces = [
        ("head", *_ellipsoid(HEAD_CENTER, HEAD_RADIUS, 40, 64)),
        ("torso", *_ellipsoid((0, 1.18, 0), (0.19, 0.3, 0.12))),
        ("left_leg", *_ellipsoid((0.09, 0.46, 0), (0.075, 0.46, 0.075))),
        ("right_leg", *_ellipsoid((-0.09, 0.46, 0), (0.075, 0.46, 0.075))),
    ]
    verts, faces, units, piece_of = [], [], [], []
    for i, (_, v, u, f) in enumerate(pieces):
        faces.append(f + sum(len(x) for x in verts))
        verts.append(v)
        units.append(u)
        piece_of.append(np.full(len(v), i))
    v = np.concatenate(verts).astype(np.float32)
    f = np.concatenate(faces).astype(np.int32)
    unit = np.concatenate(units)
    piece = np.concatenate(piece_of)
    count = len(v)
    head = piece == 0

    part_names = ("skin", "lips", "eyes", "shirt", "trousers")
    labels = np.zeros(count, np.uint8)
    labels[piece == 1] = 3
    labels[piece >= 2] = 4
    left_eye = head & (unit @ (LEFT_EYE_DIR / np.linalg.norm(LEFT_EYE_DIR)) > 0.97)
    right_eye = head & (unit @ (RIGHT_EYE_DIR / np.linalg.norm(RIGHT_EYE_DIR)) > 0.97)
    mouth = head & (unit @ (MOUTH_DIR / np.linalg.norm(MOUTH_DIR)) > 0.96)
    labels[left_eye | right_eye] = 2
    labels[mouth] = 1
    colors = np.array([[0.8, 0.55, 0.45], [0.6, 0.15, 0.15], [0.95, 0.95, 0.95], [0.1, 0.25, 0.6], [0.15, 0.15, 0.2]])
    vertex_colors = colors[labels].astype(np.float32)
    for eye, direction in ((left_eye, LEFT_EYE_DIR), (right_eye, RIGHT_EYE_DIR)):
        pupil = eye & (unit @ (direction / np.linalg.norm(direction)) > 0.993)
        vertex_colors[pupil] = (0.05, 0.03, 0.02)

    expr = np.zeros((count, 3, len(ARKIT_NAMES)), np.float32)
    # Smooth falloffs, like a sculpted shape: no step at the edge of the moving region.
    jaw = np.clip((-0.2 - unit[:, 1]) * 3, 0, 1) * np.clip((unit[:, 2] - 0.3) * 4, 0, 1) * head
    expr[:, 1, ARKIT_NAMES.index("jawOpen")] = -0.035 * jaw
    lid = np.clip((unit @ (LEFT_EYE_DIR / np.linalg.norm(LEFT_EYE_DIR)) - 0.9) / 0.05, 0, 1) * head
    expr[:, 1, ARKIT_NAMES.index("eyeBlinkLeft")] = -0.015 * lid
    smile = np.clip((unit @ (MOUTH_DIR / np.linalg.norm(MOUTH_DIR)) - 0.9) / 0.06, 0, 1) * head * (unit[:, 0] > 0)
    expr[:, 0, ARKIT_NAMES.index("mouthSmileLeft")] = 0.01 * smile

    targets = {name: (0.0, 1.0, 0.0) for name in ("pelvis",)}
    targets.update({
        "spine1": (0, 1.0, 0), "spine2": (0, 1.15, 0), "spine3": (0, 1.3, 0), "neck": (0, 1.45, 0),
        "head": (0, 1.5, 0), "jaw": (0, 1.52, 0.03), "left_hip": (0.09, 0.9, 0), "right_hip": (-0.09, 0.9, 0),
        "left_knee": (0.09, 0.5, 0), "right_knee": (-0.09, 0.5, 0), "left_ankle": (0.09, 0.08, 0),
        "right_ankle": (-0.09, 0.08, 0), "left_eye_smplhf": (0.035, 1.6, 0.09),
        "right_eye_smplhf": (-0.035, 1.6, 0.09),
    })
    moving = np.abs(expr).reshape(count, -1).max(1) > 0
    candidates = np.flatnonzero(~moving)
    regressor = np.zeros((NUM_JOINTS, count), np.float32)
    for j in range(NUM_JOINTS):
        name = next((n for n, k in JOINT_INDEX.items() if k == j), "")
        target = np.asarray(targets.get(name, (0.3 if "left" in name else -0.3, 1.35, 0.0)))
        regressor[j, candidates[np.argmin(np.linalg.norm(v[candidates] - target, axis=1))]] = 1.0

    weights = np.zeros((count, NUM_JOINTS), np.float32)
    weights[head, JOINT_INDEX["head"]] = 1.0
    torso = piece == 1
    upper = np.clip((v[:, 1] - 0.95) / 0.45, 0, 1)
    weights[torso, JOINT_INDEX["spine3"]] = upper[torso]
    weights[torso, JOINT_INDEX["pelvis"]] = 1 - upper[torso]
    weights[piece == 2, JOINT_INDEX["left_hip"]] = 1.0
    weights[piece == 3, JOINT_INDEX["right_hip"]] = 1.0

    shape_dirs = np.zeros((count, 3, 2), np.float32)
    shape_dirs[:, 1, 0] = v[:, 1] * 0.05
    return AvatarModel(
        name="synthetic",
        v_template=v,
        faces=f,
        joint_regressor=regressor,
        skin_weights=weights,
        shape_dirs=shape_dirs,
        expr_dirs=expr,
        part_labels=labels,
        part_names=part_names,
        materials={"eyes": Material((0.95, 0.95, 0.95), 0.9, 160.0), "skin": Material((0.8, 0.55, 0.45))},
        vertex_colors=vertex_colors,
        source="<synthetic test avatar>",
    )


@pytest.fixture(scope="session")
def ellipsoid_avatar() -> AvatarModel:
    return make_ellipsoid_avatar()


@pytest.fixture
def make_ellipsoid():
    """Builder of an ellipsoid mesh: (center, radii, rings, segments) -> (points, unit normals, faces)."""
    return _ellipsoid


def changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pixels whose colour moved by more than 24 levels in any channel between two renders."""
    return np.abs(a[..., :3].astype(int) - b[..., :3].astype(int)).max(axis=-1) > 24


def teal(image: np.ndarray) -> np.ndarray:
    """Pixels of the skin texture's teal band (lit): green and blue well above red."""
    rgb = image[..., :3].astype(int)
    return (rgb[..., 1] > rgb[..., 0] + 50) & (rgb[..., 2] > rgb[..., 0] + 50)


def dark_eyes(image: np.ndarray) -> np.ndarray:
    """Dark pixels inside the teal band across the face (where the eyes are drawn; the background is outside it)."""
    band = np.argwhere(teal(image))
    (top, left), (bottom, right) = band.min(axis=0), band.max(axis=0)
    out = np.zeros(image.shape[:2], bool)
    out[top:bottom, left:right] = image[top:bottom, left:right, :3].max(axis=-1) < 80
    return out
