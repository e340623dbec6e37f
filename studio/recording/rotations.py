"""Axis-angle, rotation matrices and the Euler angles that Live Link Face CSV and BVH files carry."""

from __future__ import annotations

import numpy as np

from studio.avatar.skinning import batch_rodrigues


def axis(name: str, angles: np.ndarray) -> np.ndarray:
    """Rotation matrices (N, 3, 3) about the x, y or z axis by `angles` (radians)."""
    angles = np.asarray(angles, np.float64).ravel()
    c, s = np.cos(angles), np.sin(angles)
    one, zero = np.ones_like(c), np.zeros_like(c)
    rows = {
        "x": [one, zero, zero, zero, c, -s, zero, s, c],
        "y": [c, zero, s, zero, one, zero, -s, zero, c],
        "z": [c, -s, zero, s, c, zero, zero, zero, one],
    }[name.lower()]
    return np.stack(rows, axis=1).reshape(-1, 3, 3)


def euler_to_matrix(angles: np.ndarray, order: str) -> np.ndarray:
    """Matrices R = R_order[0] @ R_order[1] @ R_order[2] from (N, 3) angles (radians) in that order."""
    angles = np.asarray(angles, np.float64).reshape(-1, 3)
    out = axis(order[0], angles[:, 0])
    for k in (1, 2):
        out = out @ axis(order[k], angles[:, k])
    return out


def matrix_to_euler(matrices: np.ndarray, order: str) -> np.ndarray:
    """(N, 3) radians such that `euler_to_matrix(result, order)` gives `matrices` back; order "yxz" or "zyx"."""
    r = np.asarray(matrices, np.float64).reshape(-1, 3, 3)
    if order == "yxz":  # R = Ry(a) Rx(b) Rz(c)
        b = np.arcsin(np.clip(-r[:, 1, 2], -1.0, 1.0))
        return np.stack([np.arctan2(r[:, 0, 2], r[:, 2, 2]), b, np.arctan2(r[:, 1, 0], r[:, 1, 1])], axis=1)
    if order == "zyx":  # R = Rz(a) Ry(b) Rx(c)
        b = np.arcsin(np.clip(-r[:, 2, 0], -1.0, 1.0))
        return np.stack([np.arctan2(r[:, 1, 0], r[:, 0, 0]), b, np.arctan2(r[:, 2, 1], r[:, 2, 2])], axis=1)
    raise ValueError(f"Euler order {order!r} is not supported; use 'yxz' or 'zyx'")


def rotvec_to_matrix(rotvecs: np.ndarray) -> np.ndarray:
    return batch_rodrigues(rotvecs)


def matrix_to_rotvec(matrices: np.ndarray) -> np.ndarray:
    """Axis-angle (N, 3) of rotation matrices, through the quaternion (stable near 0 and π)."""
    r = np.asarray(matrices, np.float64).reshape(-1, 3, 3)
    trace = np.trace(r, axis1=1, axis2=2)
    candidates = np.stack([trace, r[:, 0, 0], r[:, 1, 1], r[:, 2, 2]], axis=1)
    choice = np.argmax(candidates, axis=1)
    quats = np.empty((len(r), 4))  # w, x, y, z
    for i, (m, k) in enumerate(zip(r, choice)):
        if k == 0:
            w = np.sqrt(max(1.0 + m[0, 0] + m[1, 1] + m[2, 2], 0.0)) / 2
            quats[i] = [w, (m[2, 1] - m[1, 2]) / (4 * w), (m[0, 2] - m[2, 0]) / (4 * w), (m[1, 0] - m[0, 1]) / (4 * w)]
        else:
            a = k - 1
            b, c = (a + 1) % 3, (a + 2) % 3
            s = np.sqrt(max(1.0 + m[a, a] - m[b, b] - m[c, c], 0.0)) * 2
            q = np.empty(4)
            q[0] = (m[c, b] - m[b, c]) / s
            q[1 + a] = s / 4
            q[1 + b] = (m[b, a] + m[a, b]) / s
            q[1 + c] = (m[c, a] + m[a, c]) / s
            quats[i] = q
    quats *= np.where(quats[:, :1] < 0, -1.0, 1.0)
    vector_norm = np.linalg.norm(quats[:, 1:], axis=1)
    angle = 2 * np.arctan2(vector_norm, quats[:, 0])
    scale = np.where(vector_norm > 1e-12, angle / np.maximum(vector_norm, 1e-12), 2.0)
    return quats[:, 1:] * scale[:, None]
