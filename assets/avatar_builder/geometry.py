"""Procedural mesh primitives and the part container the default avatar is assembled from."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from studio.avatar.skeleton import JOINT_INDEX, JOINT_NAMES, NUM_JOINTS


def smoothstep(edge0: float, edge1: float, x: np.ndarray) -> np.ndarray:
    """0 below edge0, 1 above edge1 (either order), C1-smooth in between."""
    t = np.clip((np.asarray(x, np.float64) - edge0) / (edge1 - edge0), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def rotation_matrix(axis, angle: float) -> np.ndarray:
    axis = np.asarray(axis, np.float64)
    axis = axis / np.linalg.norm(axis)
    x, y, z = axis
    k = np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * (k @ k)


def grid_faces(rows: int, cols: int, wrap: bool) -> np.ndarray:
    """Two triangles per quad of a rows x cols vertex grid (row-major); `wrap` closes the columns."""
    r, c = np.meshgrid(np.arange(rows - 1), np.arange(cols if wrap else cols - 1), indexing="ij")
    a = r * cols + c
    b = r * cols + (c + 1) % cols
    d = (r + 1) * cols + c
    e = (r + 1) * cols + (c + 1) % cols
    return np.concatenate([np.stack([a, d, b], -1).reshape(-1, 3), np.stack([b, d, e], -1).reshape(-1, 3)])


def cap_faces(ring_start: int, cols: int, pole: int, flip: bool) -> np.ndarray:
    ring = ring_start + np.arange(cols)
    faces = np.stack([np.full(cols, pole), np.roll(ring, -1), ring], -1)
    return faces[:, ::-1] if flip else faces


def loft(centres: np.ndarray, axis_u: np.ndarray, axis_v: np.ndarray, half_u: np.ndarray, half_v: np.ndarray,
         segments: int, exponent: float = 2.0, close_ends: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """A tube through rings of superellipse cross-section; ends closed by pole vertices.

    Ring k lies in the plane spanned by axis_u[k], axis_v[k] around centres[k].
    Returns (vertices, faces); vertices are ring-major, poles last.
    """
    angle = 2 * np.pi * np.arange(segments) / segments
    cos, sin = np.cos(angle), np.sin(angle)
    power = 2.0 / exponent
    cu = np.sign(cos) * np.abs(cos) ** power
    sv = np.sign(sin) * np.abs(sin) ** power
    rings = (centres[:, None, :] + half_u[:, None, None] * cu[None, :, None] * axis_u[:, None, :]
             + half_v[:, None, None] * sv[None, :, None] * axis_v[:, None, :])
    vertices = rings.reshape(-1, 3)
    faces = grid_faces(len(centres), segments, wrap=True)
    if close_ends:
        first, last = len(vertices), len(vertices) + 1
        direction = centres[1] - centres[0]
        start_pole = centres[0] - 0.2 * min(half_u[0], half_v[0]) * direction / np.linalg.norm(direction)
        direction = centres[-1] - centres[-2]
        end_pole = centres[-1] + 0.2 * min(half_u[-1], half_v[-1]) * direction / np.linalg.norm(direction)
        vertices = np.concatenate([vertices, start_pole[None], end_pole[None]])
        faces = np.concatenate([faces, cap_faces(0, segments, first, flip=True),
                                cap_faces((len(centres) - 1) * segments, segments, last, flip=False)])
    return vertices, faces


def signed_volume(vertices: np.ndarray, faces: np.ndarray) -> float:
    tri = vertices[faces]
    return float(np.einsum("ij,ij->i", tri[:, 0], np.cross(tri[:, 1], tri[:, 2])).sum() / 6.0)


def outward(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Faces of a closed surface wound so that normals point outwards."""
    return faces if signed_volume(vertices, faces) > 0 else faces[:, ::-1].copy()


def chain_weights(coordinate: np.ndarray, joints: list[str], boundaries: list[float], widths: list[float]) -> np.ndarray:
    """Skin weights (n, 55) along one axis: joints[k] owns the span before boundaries[k], blended smoothly."""
    weights = np.zeros((len(coordinate), NUM_JOINTS))
    count = len(coordinate)
    ramps = [np.ones(count)] + [smoothstep(b - w, b + w, coordinate) for b, w in zip(boundaries, widths)]
    ramps.append(np.zeros(count))
    for k, joint in enumerate(joints):
        weights[:, JOINT_INDEX[joint]] += ramps[k] - ramps[k + 1]
    return weights


def one_joint(count: int, joint: str) -> np.ndarray:
    weights = np.zeros((count, NUM_JOINTS))
    weights[:, JOINT_INDEX[joint]] = 1.0
    return weights


MIRROR_JOINT = np.array([
    JOINT_INDEX[name.replace("left_", "\0").replace("right_", "left_").replace("\0", "right_")]
    for name in JOINT_NAMES
])


@dataclass
class Part:
    """One surface of the avatar: geometry, colour, skinning and the tags the face shapes read."""

    label: str
    vertices: np.ndarray
    faces: np.ndarray
    colors: np.ndarray
    weights: np.ndarray
    tags: dict[str, np.ndarray] = field(default_factory=dict)

    def mirrored(self, label: str | None = None) -> Part:
        """The x -> -x twin: left joints become right joints, winding reversed."""
        flip = np.array([-1.0, 1.0, 1.0])
        tags = {key: (value * flip if value.ndim == 2 else value.copy()) for key, value in self.tags.items()}
        return Part(label or self.label, self.vertices * flip, self.faces[:, ::-1].copy(), self.colors.copy(),
                    self.weights[:, MIRROR_JOINT], tags)


def mirror_pairs(vertices: np.ndarray) -> np.ndarray:
    """For a part built symmetric about x=0: index of each vertex's mirror twin (nearest neighbour)."""
    target = vertices * np.array([-1.0, 1.0, 1.0])
    twin = np.empty(len(vertices), np.int64)
    for start in range(0, len(vertices), 512):
        chunk = target[start:start + 512]
        d2 = ((chunk[:, None, :] - vertices[None, :, :]) ** 2).sum(axis=2)
        twin[start:start + 512] = np.argmin(d2, axis=1)
    gap = np.abs(vertices[twin] - target).max()
    if gap > 1e-6 or not np.array_equal(twin[twin], np.arange(len(vertices))):
        raise ValueError(f"part is not mirror-symmetric (worst gap {gap:.2e} m)")
    return twin


def symmetrise(part: Part) -> np.ndarray:
    """Make a self-symmetric part exactly symmetric in floats; returns its mirror map."""
    twin = mirror_pairs(part.vertices)
    lead = np.arange(len(twin)) <= twin
    follower = twin[lead]
    flip = np.array([-1.0, 1.0, 1.0])
    part.vertices[follower] = part.vertices[lead] * flip
    self_twins = twin == np.arange(len(twin))
    part.vertices[self_twins, 0] = 0.0
    part.colors[follower] = part.colors[lead]
    part.weights[follower] = part.weights[lead][:, MIRROR_JOINT]
    for value in part.tags.values():
        value[follower] = value[lead] * flip if value.ndim == 2 else value[lead]
    return twin


def centroid_weights(points: np.ndarray, target: np.ndarray, iterations: int = 200) -> np.ndarray:
    """Non-negative weights summing to 1 whose weighted mean of `points` is `target`: of all such weights, the
    nearest to the uniform mean (a ring around a limb's joint is already centred, so it barely changes).

    Being the unique minimum of a strictly convex problem, the weights move continuously with the points: a CPU's
    last-bit rounding cannot flip them to another solution, so every machine builds the same avatar. Solved in
    its four-dimensional dual, w = max(0, uniform + A^T l) with A w = b, by Newton's method with backtracking.
    """
    rel = (points - target).T
    scale = max(float(np.sqrt((rel ** 2).mean())), 1e-12)
    system = np.vstack([rel / scale, np.ones(len(points))])
    rhs = np.array([0.0, 0.0, 0.0, 1.0])
    uniform = np.full(len(points), 1.0 / len(points))

    def weights_for(multipliers: np.ndarray) -> np.ndarray:
        return np.maximum(uniform + system.T @ multipliers, 0.0)

    def dual(multipliers: np.ndarray, weights: np.ndarray) -> float:
        return 0.5 * float(weights @ weights) - float(rhs @ multipliers)

    multipliers = np.zeros(4)
    for _ in range(iterations):
        weights = weights_for(multipliers)
        gradient = system @ weights - rhs
        if np.abs(gradient).max() < 1e-14:
            break
        free = system[:, weights > 0]
        direction = -np.linalg.lstsq(free @ free.T, gradient, rcond=None)[0]
        step, start = 1.0, dual(multipliers, weights)
        while (dual(trial := multipliers + step * direction, weights_for(trial))
               > start + 1e-4 * step * float(gradient @ direction)):
            step *= 0.5
            if step < 1e-12:
                break
        multipliers = multipliers + step * direction
    weights = weights_for(multipliers)
    weights = weights / weights.sum()
    miss = np.linalg.norm(weights @ points - target)
    if miss > 1e-5:
        raise ValueError(f"target {target} lies outside the candidate vertices' hull (miss {miss:.2e} m)")
    return weights
