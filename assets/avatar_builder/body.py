"""Torso, neck, arms, hands, legs and shoes of the default avatar (left side built, right mirrored).

Units metres, y up, facing +z, the avatar's left at +x, T-pose with palms down.
"""

from __future__ import annotations

import numpy as np

from .geometry import Part, chain_weights, loft, outward, smoothstep
from .head import CENTRE, HEAD_BOTTOM_Y, LOWER_FACE_SCALE, SEMI_AXES
from .palette import COLORS

SHOULDER = np.array([0.175, 1.405, -0.02])
ELBOW = np.array([0.44, 1.405, -0.025])
WRIST = np.array([0.685, 1.405, -0.02])
HIP = np.array([0.088, 0.905, 0.0])
KNEE = np.array([0.094, 0.50, 0.012])
ANKLE = np.array([0.10, 0.085, -0.012])
FOOT = np.array([0.102, 0.03, 0.095])
SLEEVE_END_X = 0.34

# name: (knuckle offset from the wrist, direction in the x-z plane, segment lengths, radius)
FINGERS = {
    "index": (np.array([0.092, 0.002, 0.026]), 0.10, (0.040, 0.024, 0.021), 0.0085),
    "middle": (np.array([0.095, 0.003, 0.008]), 0.02, (0.044, 0.028, 0.022), 0.0088),
    "ring": (np.array([0.091, 0.002, -0.010]), -0.07, (0.041, 0.026, 0.021), 0.0083),
    "pinky": (np.array([0.083, 0.0, -0.027]), -0.16, (0.032, 0.020, 0.019), 0.0074),
}
THUMB_BASE = np.array([0.022, -0.010, 0.022])
THUMB_DIRECTION = np.array([0.75, -0.28, 0.60])
THUMB_LENGTHS = (0.040, 0.032, 0.027)


def _profile(samples: np.ndarray, keys: list[tuple[float, float, float]]) -> tuple[np.ndarray, np.ndarray]:
    at, a, b = (np.array(column) for column in zip(*sorted(keys)))  # np.interp needs increasing sample points
    return np.interp(samples, at, a), np.interp(samples, at, b)


def _axis_tag(centres: np.ndarray, segments: int) -> np.ndarray:
    return np.concatenate([np.repeat(centres, segments, axis=0), centres[[0, -1]]])


def _tube(label: str, centres: np.ndarray, axis_u, axis_v, half_u, half_v, segments: int, color, exponent=2.0):
    k = len(centres)
    vertices, faces = loft(centres, np.tile(axis_u, (k, 1)), np.tile(axis_v, (k, 1)), half_u, half_v, segments, exponent)
    colors = np.tile(np.asarray(color, np.float64), (len(vertices), 1))
    return Part(label, vertices, outward(vertices, faces), colors, np.zeros((len(vertices), 55)),
                {"axis": _axis_tag(centres, segments)})


def torso() -> Part:
    """Shirt over the chest, trousers below the belt; one closed superellipse loft."""
    y = np.concatenate([np.linspace(0.80, 0.86, 4), np.linspace(0.875, 1.40, 36), np.linspace(1.41, 1.485, 6)])
    keys = [(0.80, 0.04, 0.04), (0.83, 0.10, 0.075), (0.87, 0.145, 0.090), (0.90, 0.152, 0.096), (0.96, 0.150, 0.098),
            (1.05, 0.142, 0.094), (1.12, 0.146, 0.097), (1.22, 0.158, 0.106), (1.30, 0.166, 0.108),
            (1.36, 0.170, 0.100), (1.40, 0.165, 0.090), (1.43, 0.150, 0.078), (1.45, 0.100, 0.062),
            (1.46, 0.055, 0.048), (1.485, 0.04, 0.04)]
    half_x, half_z = _profile(y, keys)
    centres = np.stack([np.zeros_like(y), y, -0.012 + 0.012 * np.sin((y - 0.8) * 4.0)], -1)
    part = _tube("shirt", centres, (1.0, 0, 0), (0, 0, 1.0), half_x, half_z, 48, COLORS["shirt"], exponent=2.4)
    v = part.vertices
    lower = v[:, 1] < 1.02
    part.colors[lower] = COLORS["trousers"]
    belt = (v[:, 1] >= 1.02) & (v[:, 1] < 1.045)
    part.colors[belt] = COLORS["belt"]
    part.tags["trousers"] = lower.astype(np.float64)
    height = v[:, 1]
    weights = chain_weights(height, ["pelvis", "spine1", "spine2", "spine3", "neck"],
                            [1.01, 1.13, 1.25, 1.45], [0.04, 0.04, 0.04, 0.03])
    for side, sign in (("left", 1.0), ("right", -1.0)):
        across = sign * v[:, 0]
        collar = smoothstep(0.06, 0.13, across) * smoothstep(1.27, 1.36, height)
        shoulder = smoothstep(0.13, 0.19, across) * smoothstep(1.30, 1.38, height)
        hip = smoothstep(0.02, 0.10, across) * smoothstep(0.93, 0.86, height)
        for joint, amount in ((f"{side}_collar", collar - shoulder), (f"{side}_shoulder", shoulder),
                              (f"{side}_hip", hip)):
            weights *= (1.0 - amount)[:, None]
            weights[:, _joint(joint)] += amount
    part.weights = weights
    return part


def _joint(name: str) -> int:
    from studio.avatar.skeleton import JOINT_INDEX
    return JOINT_INDEX[name]


def neck() -> Part:
    y = np.unique(np.r_[np.linspace(1.37, 1.585, 14), HEAD_BOTTOM_Y - 0.003, HEAD_BOTTOM_Y + 0.004])
    centres = np.stack([np.zeros_like(y), y, np.interp(y, [1.37, 1.46, 1.585], [-0.018, -0.020, -0.030])], -1)
    radius = np.interp(y, [1.37, 1.45, 1.50, 1.585], [0.058, 0.049, 0.046, 0.036])
    part = _tube("skin", centres, (1.0, 0, 0), (0, 0, 1.0), radius, radius * 1.06, 32, COLORS["skin"])
    head_space = (part.vertices - CENTRE) / (SEMI_AXES * np.array([0.9, LOWER_FACE_SCALE, 1.0]))
    facing = (part.vertices[:, 2] - part.tags["axis"][:, 2]) / (radius.max() * 1.06)
    depth_in_head = (head_space ** 2).sum(axis=1)
    under_chin = (part.vertices[:, 1] > HEAD_BOTTOM_Y + 0.006) & (facing > 0.75) & (depth_in_head < 1.0)
    inside_head = (depth_in_head < 0.75) | under_chin  # seen only through an open mouth: throat
    part.colors[inside_head] = COLORS["throat"]
    part.weights = chain_weights(part.vertices[:, 1], ["spine3", "neck", "head"], [1.43, 1.535], [0.03, 0.03])
    return part


def left_arm() -> Part:
    x = np.concatenate([np.linspace(0.10, SLEEVE_END_X, 14), [SLEEVE_END_X + 0.002],
                        np.linspace(SLEEVE_END_X + 0.01, WRIST[0] + 0.02, 16)])
    keys = [(0.10, 0.048, 0.044), (0.14, 0.058, 0.050), (0.175, 0.060, 0.053), (0.26, 0.056, 0.052),
            (SLEEVE_END_X, 0.054, 0.050), (SLEEVE_END_X + 0.002, 0.046, 0.042), (0.44, 0.041, 0.038),
            (0.52, 0.043, 0.038), (0.66, 0.031, 0.024), (WRIST[0] + 0.02, 0.028, 0.020)]
    half_z, half_y = _profile(x, keys)
    centres = np.stack([x, np.interp(x, [0.1, 0.175, 0.7], [1.385, 1.397, 1.405]),
                        np.interp(x, [0.1, 0.44, 0.7], [-0.02, -0.025, -0.02])], -1)
    part = _tube("shirt", centres, (0, 0, 1.0), (0, 1.0, 0), half_z, half_y, 28, COLORS["shirt"])
    skin = part.vertices[:, 0] > SLEEVE_END_X + 0.001
    part.colors[skin] = COLORS["skin"]
    part.tags["bare"] = skin.astype(np.float64)
    part.weights = chain_weights(part.vertices[:, 0], ["left_collar", "left_shoulder", "left_elbow", "left_wrist"],
                                 [SHOULDER[0] - 0.03, ELBOW[0], WRIST[0]], [0.05, 0.04, 0.02])
    return part


def _finger(joint_prefix: str, base: np.ndarray, direction: np.ndarray, lengths, radius: float,
            thickness: float = 0.82) -> Part:
    direction = direction / np.linalg.norm(direction)
    total = sum(lengths)
    joints_at = [0.0, lengths[0], lengths[0] + lengths[1]]
    s = np.unique(np.concatenate([np.linspace(-0.012, total, 16), joints_at]))
    side = np.cross(direction, (0, 1.0, 0))
    side /= np.linalg.norm(side)
    up = np.cross(side, direction)
    taper = np.interp(s, [-0.012, 0.0, total * 0.8, total], [1.05, 1.0, 0.80, 0.72]) * radius
    tip = smoothstep(total - 0.35 * radius, total, s)
    half = taper * np.sqrt(np.clip(1.0 - tip * 0.85, 0.05, 1.0))
    centres = base + s[:, None] * direction
    vertices, faces = loft(centres, np.tile(side, (len(s), 1)), np.tile(up, (len(s), 1)), half, half * thickness, 14)
    colors = np.tile(np.asarray(COLORS["skin"], np.float64), (len(vertices), 1))
    along = (vertices - base) @ direction
    names = ["left_wrist"] + [f"left_{joint_prefix}{k}" for k in (1, 2, 3)]
    weights = chain_weights(along, names, joints_at, [0.008, 0.006, 0.005])
    part = Part("hands", vertices, outward(vertices, faces), colors, weights, {"axis": _axis_tag(centres, 14)})
    part.tags["finger_joints"] = base + np.array(joints_at)[:, None] * direction
    return part


def left_hand() -> list[Part]:
    """Palm (wrist joint) plus five three-joint fingers, as separate overlapping tubes."""
    x = np.linspace(WRIST[0] - 0.02, WRIST[0] + 0.098, 14)
    keys = [(WRIST[0] - 0.02, 0.026, 0.019), (WRIST[0], 0.030, 0.017), (WRIST[0] + 0.05, 0.043, 0.016),
            (WRIST[0] + 0.085, 0.044, 0.013), (WRIST[0] + 0.098, 0.036, 0.010)]
    half_z, half_y = _profile(x, keys)
    centres = np.stack([x, np.full_like(x, WRIST[1]), np.full_like(x, WRIST[2] + 0.002)], -1)
    palm = _tube("hands", centres, (0, 0, 1.0), (0, 1.0, 0), half_z, half_y, 24, COLORS["skin"], exponent=2.6)
    palm.weights = chain_weights(palm.vertices[:, 0], ["left_wrist"], [], [])
    fingers = []
    for name, (offset, yaw, lengths, radius) in FINGERS.items():
        direction = np.array([np.cos(yaw), -0.05, np.sin(yaw)])
        fingers.append(_finger(name, WRIST + offset, direction, lengths, radius))
        knuckle = WRIST + offset
        near = smoothstep(knuckle[0] - 0.02, knuckle[0], palm.vertices[:, 0]) * (
            np.abs(palm.vertices[:, 2] - knuckle[2]) < 0.009)
        palm.weights *= (1.0 - 0.5 * near)[:, None]
        palm.weights[:, _joint(f"left_{name}1")] += 0.5 * near
    fingers.append(_finger("thumb", WRIST + THUMB_BASE, THUMB_DIRECTION, THUMB_LENGTHS, 0.0105, thickness=0.85))
    return [palm, *fingers]


def left_leg() -> Part:
    y = np.concatenate([np.linspace(1.0, 0.06, 40)])
    keys = [(1.0, 0.080, 0.090), (0.90, 0.080, 0.090), (0.80, 0.077, 0.084), (0.70, 0.070, 0.076),
            (0.55, 0.058, 0.062), (0.50, 0.056, 0.060), (0.42, 0.059, 0.064), (0.30, 0.053, 0.056),
            (0.15, 0.046, 0.048), (0.06, 0.044, 0.046)]
    half_x, half_z = _profile(y, keys)
    centres = np.stack([np.interp(y, [0.06, 0.5, 1.0], [ANKLE[0], KNEE[0], 0.082]), y,
                        np.interp(y, [0.06, 0.5, 1.0], [ANKLE[2], KNEE[2], 0.0])], -1)
    part = _tube("trousers", centres, (1.0, 0, 0), (0, 0, 1.0), half_x, half_z, 28, COLORS["trousers"])
    depth = -part.vertices[:, 1]
    part.weights = chain_weights(depth, ["pelvis", "left_hip", "left_knee", "left_ankle"],
                                 [-0.95, -KNEE[1], -ANKLE[1] - 0.03], [0.04, 0.05, 0.03])
    return part


def left_shoe() -> Part:
    z = np.linspace(-0.065, 0.175, 22)
    top = np.interp(z, [-0.065, -0.03, 0.03, 0.10, 0.175], [0.075, 0.115, 0.115, 0.06, 0.040])
    half_x = np.interp(z, [-0.065, -0.045, 0.0, 0.09, 0.15, 0.175], [0.02, 0.040, 0.042, 0.050, 0.040, 0.018])
    ends = np.interp(z, [-0.065, -0.055, 0.165, 0.175], [0.5, 1.0, 1.0, 0.55])
    centres = np.stack([np.full_like(z, FOOT[0]), top / 2, z], -1)
    part = _tube("shoes", centres, (1.0, 0, 0), (0, 1.0, 0), half_x * ends, top / 2 * ends, 24, COLORS["shoes"],
                 exponent=3.0)
    part.vertices[:, 1] = np.maximum(part.vertices[:, 1], 0.0)
    sole = part.vertices[:, 1] < 0.012
    part.colors[sole] = COLORS["sole"]
    part.weights = chain_weights(part.vertices[:, 2], ["left_ankle", "left_foot"], [FOOT[2] - 0.02], [0.03])
    return part
