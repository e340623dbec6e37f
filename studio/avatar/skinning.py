"""Shape, expression and linear blend skinning in numpy.

`lbs` is the reference (float64, every term, SMPL-X semantics, tested against smplx);
the renderer's per-frame path (`render.avatar_visual.AvatarMesh`) is tested against it.
`Kinematics` and `vertex_normals` are shared by both.
"""

from __future__ import annotations

import numpy as np

from studio.avatar.arkit import NUM_ARKIT
from studio.avatar.model import AvatarModel
from studio.avatar.skeleton import NUM_JOINTS


def batch_rodrigues(rotvecs: np.ndarray) -> np.ndarray:
    """Rotation matrices (N, 3, 3) from axis-angle vectors (N, 3)."""
    rotvecs = np.asarray(rotvecs, np.float64).reshape(-1, 3)
    angle = np.linalg.norm(rotvecs, axis=1, keepdims=True)
    axis = rotvecs / np.maximum(angle, 1e-12)
    x, y, z = axis.T
    zeros = np.zeros_like(x)
    k = np.stack([zeros, -z, y, z, zeros, -x, -y, x, zeros], axis=1).reshape(-1, 3, 3)
    sin = np.sin(angle)[:, :, None]
    cos = np.cos(angle)[:, :, None]
    return np.eye(3)[None] + sin * k + (1 - cos) * (k @ k)


class Kinematics:
    """Forward kinematics of one skeleton, batched per tree depth (a dozen small matmuls, not 55)."""

    def __init__(self, parents: tuple[int, ...], rest_joints: np.ndarray) -> None:
        self.parents = np.asarray(parents)
        self.rest_joints = np.asarray(rest_joints, np.float64)
        depth = np.zeros(len(parents), int)
        for j in range(1, len(parents)):
            depth[j] = depth[parents[j]] + 1
        self.levels = [np.flatnonzero(depth == d) for d in range(1, depth.max() + 1)]

    def transforms(
        self, rotmats: np.ndarray, transl: np.ndarray | None = None, joints: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(skinning matrices (J, 4, 4) mapping rest-pose points to posed ones, posed joints (J, 3)).

        The skinning matrices are SMPL-X lbs' `A` plus the root translation; `joints`
        overrides the rest joints for models whose expressions move them.
        """
        rest = self.rest_joints if joints is None else np.asarray(joints, np.float64)
        count = len(self.parents)
        local = np.zeros((count, 4, 4))
        local[:, 3, 3] = 1.0
        local[:, :3, :3] = rotmats
        local[0, :3, 3] = rest[0]
        local[1:, :3, 3] = rest[1:] - rest[self.parents[1:]]
        world = np.empty_like(local)
        world[0] = local[0]
        for level in self.levels:
            world[level] = world[self.parents[level]] @ local[level]
        offset = np.zeros(3) if transl is None else np.asarray(transl, np.float64)
        posed_joints = world[:, :3, 3] + offset
        skinning = world
        skinning[:, :3, 3] += offset - np.einsum("jab,jb->ja", world[:, :3, :3], rest)
        return skinning, posed_joints

    def skinning_matrices(self, pose: np.ndarray, transl: np.ndarray | None = None, joints: np.ndarray | None = None):
        """Skinning matrices (J, 4, 4) for an axis-angle pose (J, 3)."""
        return self.transforms(batch_rodrigues(pose), transl, joints)[0]


def _padded(values: np.ndarray | None, size: int) -> np.ndarray:
    out = np.zeros(size, np.float64)
    if values is not None:
        given = np.asarray(values, np.float64).ravel()[:size]
        out[: given.size] = given
    return out


def lbs(
    model: AvatarModel,
    betas: np.ndarray | None = None,
    expression: np.ndarray | None = None,
    pose: np.ndarray | None = None,
    transl: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Reference forward pass: (vertices (V, 3), joints (55, 3)) in float64.

    `expression` holds the 52 ARKit weights; `pose` is (55, 3) axis-angle, joint 0 the root.
    """
    shaped = model.v_template.astype(np.float64)
    shaped = shaped + model.shape_dirs.astype(np.float64) @ _padded(betas, model.num_betas)
    shaped = shaped + model.expr_dirs.astype(np.float64) @ model.morph_weights(_padded(expression, NUM_ARKIT))
    joints = model.joint_regressor.astype(np.float64) @ shaped
    full_pose = np.zeros((NUM_JOINTS, 3)) if pose is None else np.asarray(pose, np.float64).reshape(NUM_JOINTS, 3)
    rotmats = batch_rodrigues(full_pose)
    if model.pose_dirs is not None:
        feature = (rotmats[1:] - np.eye(3)).reshape(-1)
        shaped = shaped + model.pose_dirs.astype(np.float64) @ feature
    skinning, posed_joints = Kinematics(model.parents, joints).transforms(rotmats, _padded(transl, 3))
    per_vertex = (model.skin_weights.astype(np.float64) @ skinning.reshape(NUM_JOINTS, 16)).reshape(-1, 4, 4)
    vertices = np.einsum("vab,vb->va", per_vertex[:, :3, :3], shaped) + per_vertex[:, :3, 3]
    return vertices, posed_joints


def vertex_normals(positions: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Area-weighted smooth vertex normals (V, 3) float32."""
    f = faces.astype(np.int64)
    face_normals = np.cross(positions[f[:, 1]] - positions[f[:, 0]], positions[f[:, 2]] - positions[f[:, 0]])
    corners = f.ravel()
    corner_normals = np.repeat(face_normals, 3, axis=0)
    summed = np.stack([np.bincount(corners, corner_normals[:, c], minlength=len(positions)) for c in range(3)], 1)
    return (summed / np.maximum(np.linalg.norm(summed, axis=1, keepdims=True), 1e-12)).astype(np.float32)
