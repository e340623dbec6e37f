"""The 52 ARKit blendshapes as smooth, compact-support deformations of the rest head.

Every falloff reaches exactly zero at a finite distance, so the vertices no shape moves
are known exactly and the joint regressor can read only those. Left shapes move the
subject's left (+x); Right shapes are their exact mirror through the vertex mirror map.
"""

from __future__ import annotations

import numpy as np

from studio.avatar.arkit import ARKIT_INDEX, NUM_ARKIT

from .geometry import rotation_matrix, smoothstep
from .head import EYE_Y, LID_SPAN, LID_TOP, MOUTH_HALF_WIDTH, MOUTH_Y, lid_edges, lid_point

JAW_HINGE = np.array([0.0, 1.548, -0.004])
JAW_OPEN_ANGLE = 0.37  # radians, about 21 degrees
FLIP = np.array([-1.0, 1.0, 1.0])


def _zone(points: np.ndarray, centre, radii, plateau: float = 0.35) -> np.ndarray:
    """1 inside `plateau` of the ellipse (x, y[, z]) radii, easing to exactly 0 at its edge."""
    centre = np.asarray(centre, np.float64)
    radii = np.asarray(radii, np.float64)
    k = len(centre)
    r = np.sqrt((((points[:, :k] - centre) / radii) ** 2).sum(axis=1))
    return smoothstep(1.0, plateau, r)


def _rotate_about(points: np.ndarray, pivot: np.ndarray, axis, angles: np.ndarray) -> np.ndarray:
    """Displacement of each point rotated by its own angle about an axis through `pivot`."""
    out = np.zeros_like(points)
    rel = points - pivot
    axis = np.asarray(axis, np.float64) / np.linalg.norm(axis)
    cos, sin = np.cos(angles)[:, None], np.sin(angles)[:, None]
    rotated = rel * cos + np.cross(axis, rel) * sin + axis * (rel @ axis)[:, None] * (1 - cos)
    out[:] = rotated - rel
    return out


class FaceRig:
    """Per-vertex fields (masks, jaw weight, lid parameters) shared by the 52 shapes."""

    def __init__(self, vertices: np.ndarray, labels: np.ndarray, names: tuple[str, ...], tags: dict[str, np.ndarray],
                 twin: np.ndarray, eye_centre: np.ndarray) -> None:
        self.p = vertices
        self.twin = twin
        self.eye = eye_centre
        self.tags = tags
        label = np.asarray(names)[labels]
        self.skin = tags["skin"] > 0
        self.bag = tags["bag_ring"] > 0
        self.teeth = label == "teeth"
        self.tongue = label == "tongue"
        self.throat = (label == "mouth") & ~self.bag
        self.inner = self.teeth | self.tongue | self.throat
        self.brows = label == "brows"
        self.lids = label == "eyelids"
        self.eyeballs = label == "eyes"
        self.surface = self.skin | self.brows
        self.mouth_parts = self.skin | self.bag
        self.jaw = self._jaw_weight()

    def _jaw_weight(self) -> np.ndarray:
        """How much of the jaw rotation each vertex takes (also its `jaw` skinning weight)."""
        p, tags = self.p, self.tags
        x, y, z = p[:, 0], p[:, 1], p[:, 2]
        inside = 1.0 - smoothstep(0.6 * MOUTH_HALF_WIDTH, 1.05 * MOUTH_HALF_WIDTH, np.abs(x))
        smooth = smoothstep(MOUTH_Y + 0.010, MOUTH_Y - 0.016, y)
        skin = (inside * tags["below_seam"] + (1 - inside) * smooth) * smoothstep(-0.012, 0.035, z)
        weight = np.where(self.skin, skin, 0.0)
        weight = np.where(self.bag, smoothstep(0.35, -0.35, tags["bag_alpha"]), weight)
        weight = np.where(self.inner, tags["jaw"], weight)
        return weight

    def lip_zone(self) -> np.ndarray:
        zone = _zone(self.p, (0.0, MOUTH_Y), (0.036, 0.026), plateau=0.45)
        depth = np.where(self.bag, np.interp(self.tags["bag_ring"], [1, 2, 3], [1.0, 0.6, 0.0]), 1.0)
        return np.where(self.mouth_parts, zone * depth, 0.0)

    def left_side(self, width: float = 0.012) -> np.ndarray:
        return smoothstep(-width, width, self.p[:, 0])

    def jaw_rotation(self, weight: np.ndarray, angle: float = JAW_OPEN_ANGLE) -> np.ndarray:
        return _rotate_about(self.p, JAW_HINGE, (1.0, 0, 0), angle * weight)

    def eyeball_rotation(self, axis, angle: float) -> np.ndarray:
        left = self.eyeballs & (self.p[:, 0] > 0)
        delta = np.zeros_like(self.p)
        rotation = rotation_matrix(axis, angle)
        rel = self.p[left] - self.eye
        delta[left] = rel @ rotation.T - rel
        return delta

    def lid_motion(self, upper_shift, lower_shift) -> np.ndarray:
        """Move the left lid edges by elevation shifts (functions of azimuth); rows follow, the top stays."""
        tags = self.tags
        delta = np.zeros_like(self.p)
        for side, shift in ((1.0, upper_shift), (-1.0, lower_shift)):
            rows = self.lids & (tags["lid"] == side) & (self.p[:, 0] > 0)
            a, t, r = tags["lid_a"][rows], tags["lid_t"][rows], tags["lid_r"][rows]
            edge = lid_edges(a)[0 if side > 0 else 1]
            elevation = edge + (side * LID_TOP - edge) * t
            moved = elevation + shift(a) * (1 - t)
            delta[rows] = lid_point(self.eye, r, a, moved) - self.p[rows]
        return delta

    def corner_zone(self, radii=(0.030, 0.026), shift=(0.0, 0.0)) -> np.ndarray:
        corner = (MOUTH_HALF_WIDTH + shift[0], MOUTH_Y + shift[1])
        return np.where(self.mouth_parts, _zone(self.p, corner, radii, 0.2) * smoothstep(-0.004, 0.012, self.p[:, 0]),
                        0.0)

    def along(self, mask: np.ndarray, vector) -> np.ndarray:
        return mask[:, None] * np.asarray(vector, np.float64)[None, :]


def _lid_shape(a: np.ndarray) -> np.ndarray:
    return np.cos(np.clip(a / LID_SPAN, -1, 1) * np.pi / 2)


def _seal(rig: FaceRig, closed: np.ndarray) -> np.ndarray:
    """The upper lip's extra move that makes jawOpen + mouthClose (equal weights) meet the lower lip exactly.

    `closed` is the displacement of jawOpen + mouthClose at full weight. Where the two seam rows (the mouth
    line and its lower copy) still differ, most near the corners where the jaw's pull fades, the difference
    is taken up by the upper lip and its inner roll, fading out above the lip: no gap shows the mouth inside.
    """
    p, tags = rig.p, rig.tags
    seam = (tags["seam"] > 0) & rig.skin
    upper_seam = np.flatnonzero(seam & (tags["below_seam"] == 0))
    lower_seam = np.flatnonzero(seam & (tags["below_seam"] > 0))
    gaps = ((p[lower_seam, None, :] - p[None, upper_seam, :]) ** 2).sum(axis=2)
    partner = upper_seam[np.argmin(gaps, axis=1)]
    mismatch = closed[lower_seam] - closed[partner]
    order = np.argsort(p[lower_seam, 0])
    xs = p[lower_seam, 0][order]
    corners = p[upper_seam, 0].min(), p[upper_seam, 0].max()  # shared by both lips: no mismatch there
    knots = np.r_[corners[0], xs, corners[1]]
    along = np.stack([np.interp(p[:, 0], knots, np.r_[0.0, mismatch[order, c], 0.0], left=0.0, right=0.0)
                      for c in range(3)], -1)
    above = np.where(rig.skin & (tags["below_seam"] == 0), smoothstep(0.016, 0.0, p[:, 1] - MOUTH_Y), 0.0)
    inner_roll = np.where(rig.bag & (tags["bag_alpha"] > 0), np.interp(tags["bag_ring"], [1, 2, 3], [1.0, 0.6, 0.0]), 0.0)
    return along * np.maximum(above, inner_roll)[:, None]


def left_and_centre_shapes(rig: FaceRig) -> dict[str, np.ndarray]:
    """Full-weight displacements of every Left and centre shape, keyed by ARKit name."""
    p = rig.p
    x, y = p[:, 0], p[:, 1]
    lips = rig.lip_zone()
    lower = rig.jaw
    upper = np.where(rig.mouth_parts, 1.0 - lower, 0.0)
    left = rig.left_side()
    surface = rig.surface | rig.bag
    shapes: dict[str, np.ndarray] = {}

    def gap(a):
        upper_edge, lower_edge = lid_edges(a)
        return upper_edge - lower_edge

    shapes["eyeBlinkLeft"] = rig.lid_motion(
        lambda a: lid_edges(a)[1] + 0.32 * gap(a) - 0.02 - lid_edges(a)[0],
        lambda a: 0.32 * gap(a) + 0.03)
    shapes["eyeLookDownLeft"] = rig.eyeball_rotation((1.0, 0, 0), 0.36) + rig.lid_motion(
        lambda a: -0.30 * _lid_shape(a), lambda a: -0.07 * _lid_shape(a))
    shapes["eyeLookInLeft"] = rig.eyeball_rotation((0, 1.0, 0), -0.42) + rig.lid_motion(
        lambda a: 0.02 * _lid_shape(a), lambda a: 0.0 * a)
    shapes["eyeLookOutLeft"] = rig.eyeball_rotation((0, 1.0, 0), 0.42) + rig.lid_motion(
        lambda a: 0.02 * _lid_shape(a), lambda a: 0.0 * a)
    shapes["eyeLookUpLeft"] = rig.eyeball_rotation((1.0, 0, 0), -0.32) + rig.lid_motion(
        lambda a: 0.13 * _lid_shape(a), lambda a: 0.06 * _lid_shape(a))
    under_eye = np.where(surface, _zone(p, (0.036, EYE_Y - 0.024), (0.030, 0.016), 0.2), 0.0)
    shapes["eyeSquintLeft"] = rig.lid_motion(lambda a: -0.07 * _lid_shape(a), lambda a: 0.30 * gap(a)) + rig.along(
        under_eye, (0.0, 0.0030, 0.0010))
    shapes["eyeWideLeft"] = rig.lid_motion(lambda a: 0.24 * _lid_shape(a), lambda a: -0.06 * _lid_shape(a))

    jaw_parts = rig.jaw * (rig.mouth_parts | rig.inner)
    shapes["jawForward"] = rig.along(jaw_parts, (0.0, 0.0, 0.008))
    shapes["jawLeft"] = rig.along(jaw_parts, (0.009, 0.0, 0.0))
    shapes["jawOpen"] = rig.jaw_rotation(jaw_parts)
    full = rig.jaw_rotation(np.ones(len(p)))
    # only the lips close, the chin stays with the open jaw (else the lower teeth show below the lip)
    # teeth, tongue and throat ride with the skin around them, so the sealed lip still covers the lower teeth
    lip_seal = np.where(rig.mouth_parts | rig.inner, _zone(p, (0.0, MOUTH_Y), (0.036, 0.018), plateau=0.5), 0.0)
    lip_seal *= np.where(rig.bag, np.interp(rig.tags["bag_ring"], [1, 2, 3], [1.0, 0.6, 0.0]), 1.0)
    # the chin follows the sealing lips part of the way, so a closed mouth over an open jaw does not hang long
    chin_lift = np.where(rig.mouth_parts, _zone(p, (0.0, MOUTH_Y - 0.020), (0.045, 0.040), plateau=0.3), 0.0)
    lower_follow = np.maximum(0.6 * lip_seal, 0.30 * chin_lift)
    # the upper lip comes down without tucking back behind the upper teeth
    upper_drop = 0.4 * full * np.array([1.0, 1.0, 0.0])
    shapes["mouthClose"] = (lip_seal * upper)[:, None] * upper_drop - (lower_follow * lower)[:, None] * shapes["jawOpen"]
    shapes["mouthClose"] += _seal(rig, shapes["jawOpen"] + shapes["mouthClose"])

    narrow = -x * lips
    rise = np.where(rig.mouth_parts, upper * 0.004 - lower * 0.006, 0.0) * lips
    forward = 0.007 * lips * smoothstep(0.036, 0.0, np.abs(x))
    shapes["mouthFunnel"] = np.stack([0.22 * narrow, rise, forward], -1)
    squeeze = -(y - MOUTH_Y) * lips
    shapes["mouthPucker"] = np.stack([0.38 * narrow, 0.30 * squeeze, 1.5 * forward], -1)
    wide = np.where(rig.mouth_parts, _zone(p, (0.0, MOUTH_Y - 0.004), (0.055, 0.040), 0.35), 0.0)
    shapes["mouthLeft"] = rig.along(wide, (0.010, 0.0, 0.0))

    corner = rig.corner_zone()
    cheek = np.where(surface, _zone(p, (0.042, 1.548), (0.026, 0.022), 0.2), 0.0)
    shapes["mouthSmileLeft"] = rig.along(corner, (0.005, 0.0080, -0.0025)) + rig.along(cheek, (0.0, 0.003, 0.001))
    shapes["mouthFrownLeft"] = rig.along(corner, (0.0015, -0.0075, -0.001))
    dimple = rig.corner_zone((0.018, 0.018), (0.004, 0.0))
    shapes["mouthDimpleLeft"] = rig.along(dimple, (0.004, 0.001, -0.0055))
    stretch = rig.corner_zone((0.034, 0.030), (0.0, -0.004))
    shapes["mouthStretchLeft"] = rig.along(stretch, (0.0085, -0.0035, -0.003))

    shapes["mouthRollLower"] = rig.along(lips * lower * (rig.mouth_parts), (0.0, 0.0030, -0.0055))
    shapes["mouthRollUpper"] = rig.along(lips * upper, (0.0, -0.0028, -0.0055))
    chin = np.where(rig.mouth_parts, _zone(p, (0.0, MOUTH_Y - 0.016), (0.036, 0.034), 0.35), 0.0) * lower
    shapes["mouthShrugLower"] = rig.along(chin, (0.0, 0.0045, 0.0030))
    shapes["mouthShrugUpper"] = rig.along(lips * upper, (0.0, 0.0035, 0.0020))
    press = lips * left
    shapes["mouthPressLeft"] = np.stack([0.0015 * press, -0.35 * (y - MOUTH_Y) * press, -0.0015 * press], -1)
    shapes["mouthLowerDownLeft"] = rig.along(lips * lower * left, (0.0, -0.0075, 0.001))
    shapes["mouthUpperUpLeft"] = rig.along(lips * upper * left, (0.0, 0.0065, 0.001))

    brow_y = EYE_Y + 0.024
    brow = np.where(surface, _zone(p, (0.036, brow_y), (0.036, 0.024), 0.3), 0.0)
    shapes["browDownLeft"] = rig.along(brow, (-0.0015, -0.0050, -0.0008))
    inner = np.where(surface, _zone(p, (0.017, brow_y), (0.026, 0.026), 0.3)
                     + _zone(p, (-0.017, brow_y), (0.026, 0.026), 0.3), 0.0)
    shapes["browInnerUp"] = rig.along(np.clip(inner, 0, 1), (0.0, 0.0070, 0.0))
    outer = np.where(surface, _zone(p, (0.052, brow_y), (0.030, 0.026), 0.3), 0.0)
    shapes["browOuterUpLeft"] = rig.along(outer, (0.0, 0.0070, 0.0))

    puff = np.where(rig.mouth_parts, _zone(np.abs(p), (0.040, 1.522), (0.034, 0.032), 0.3), 0.0)
    radial = p * np.array([1.0, 0.0, 0.6])
    radial /= np.maximum(np.linalg.norm(radial, axis=1, keepdims=True), 1e-9)
    shapes["cheekPuff"] = 0.009 * puff[:, None] * radial
    squint_cheek = np.where(surface, _zone(p, (0.040, 1.560), (0.030, 0.022), 0.25), 0.0)
    shapes["cheekSquintLeft"] = rig.along(squint_cheek, (0.0005, 0.0045, 0.0008))
    sneer = np.where(surface, _zone(p, (0.012, 1.546), (0.014, 0.022), 0.25), 0.0)
    shapes["noseSneerLeft"] = rig.along(sneer, (0.0008, 0.0040, 0.0006))

    tongue_out = 0.35 * shapes["jawOpen"]
    t = rig.tags["tongue_t"] * rig.tongue
    tongue_out += np.stack([np.zeros_like(t), -0.004 * t * rig.tongue, (0.010 + 0.020 * t) * rig.tongue], -1)
    shapes["tongueOut"] = tongue_out
    return shapes


def expression_dirs(rig: FaceRig) -> np.ndarray:
    """(V, 3, 52) in ARKit order; Right shapes mirrored from Left, centre shapes made exactly symmetric."""
    shapes = left_and_centre_shapes(rig)
    dirs = np.zeros((len(rig.p), 3, NUM_ARKIT))

    def mirrored(delta):
        return delta[rig.twin] * FLIP

    for name, delta in shapes.items():
        if name.endswith("Left") and name not in ("jawLeft", "mouthLeft"):
            dirs[:, :, ARKIT_INDEX[name]] = delta
            dirs[:, :, ARKIT_INDEX[name[:-4] + "Right"]] = mirrored(delta)
        elif name in ("jawLeft", "mouthLeft"):
            dirs[:, :, ARKIT_INDEX[name]] = delta
            dirs[:, :, ARKIT_INDEX[name[:-4] + "Right"]] = mirrored(delta)
        else:
            dirs[:, :, ARKIT_INDEX[name]] = 0.5 * (delta + mirrored(delta))
    missing = [name for name in ARKIT_INDEX if not np.any(dirs[:, :, ARKIT_INDEX[name]])]
    if missing:
        raise ValueError(f"shapes without any displacement: {missing}")
    return dirs
