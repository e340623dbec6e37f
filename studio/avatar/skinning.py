"""Shape, expression and linear blend skinning in numpy.

`lbs` is the reference (float64, every term, SMPL-X semantics, tested against smplx).
`Poser` is the per-frame path: the shaped rest mesh and joints are cached, the
expression morph touches only the vertices some shape moves, and skinning reads each
vertex's four strongest joints.
"""

from __future__ import annotations

from typing import NamedTuple

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
    shaped = shaped + model.expr_dirs.astype(np.float64) @ _padded(expression, NUM_ARKIT)
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


class PosedMesh(NamedTuple):
    vertices: np.ndarray  # (V, 3) float32
    joint_transforms: np.ndarray  # (55, 4, 4) float32 skinning matrices (rest → posed)
    joints: np.ndarray  # (55, 3) float32 posed joint positions


class Poser:
    """Per-frame posing of one avatar at one body shape."""

    def __init__(self, model: AvatarModel, betas: np.ndarray | None = None) -> None:
        self.model = model
        shaped = model.v_template.astype(np.float64) + model.shape_dirs.astype(np.float64) @ _padded(
            betas, model.num_betas
        )
        self.rest_vertices = shaped.astype(np.float32)
        self.rest_joints = model.joint_regressor.astype(np.float64) @ shaped
        self.kinematics = Kinematics(model.parents, self.rest_joints)
        expr = model.expr_dirs.astype(np.float32)
        moved = np.flatnonzero(np.abs(expr).reshape(expr.shape[0], -1).max(axis=1) > 0)
        self.morph_vertices = moved
        self._morph_basis = np.ascontiguousarray(expr[moved].reshape(-1, NUM_ARKIT))
        self._joint_expr = np.einsum("jv,vck->jck", model.joint_regressor[:, moved].astype(np.float64), expr[moved])
        self._joints_follow_expression = bool(np.abs(self._joint_expr).max(initial=0.0) > 1e-9)
        self._pose_dirs = None
        if model.pose_dirs is not None and np.any(model.pose_dirs):
            self._pose_dirs = np.ascontiguousarray(model.pose_dirs.reshape(-1, model.pose_dirs.shape[2]), np.float32)
        self._top_index, self._top_weight = _top_joints(model.skin_weights, 4)

    def top_joints(self, k: int = 4) -> tuple[np.ndarray, np.ndarray]:
        """Each vertex's k strongest joints and their renormalised weights, for GPU skinning."""
        if k == 4:
            return self._top_index, self._top_weight
        return _top_joints(self.model.skin_weights, k)

    def morph(self, arkit: np.ndarray | None) -> np.ndarray:
        """Shaped rest vertices with the expression applied (V, 3) float32, a fresh array."""
        out = self.rest_vertices.copy()
        if arkit is not None and self.morph_vertices.size:
            weights = np.asarray(arkit, np.float32).reshape(NUM_ARKIT)
            out[self.morph_vertices] += (self._morph_basis @ weights).reshape(-1, 3)
        return out

    def joint_transforms(self, pose: np.ndarray | None, transl: np.ndarray | None = None, arkit=None):
        """Skinning matrices (55, 4, 4) and posed joints (55, 3), with the root translation applied."""
        joints = self.rest_joints
        if arkit is not None and self._joints_follow_expression:
            joints = joints + self._joint_expr @ np.asarray(arkit, np.float64)
        full_pose = np.zeros((NUM_JOINTS, 3)) if pose is None else np.asarray(pose, np.float64).reshape(NUM_JOINTS, 3)
        rotmats = batch_rodrigues(full_pose)
        skinning, posed_joints = self.kinematics.transforms(rotmats, _padded(transl, 3), joints)
        return skinning.astype(np.float32), posed_joints.astype(np.float32), rotmats

    def pose(self, arkit: np.ndarray | None, pose: np.ndarray | None, transl: np.ndarray | None = None) -> PosedMesh:
        """Posed vertices, skinning matrices and joints for one frame."""
        vertices = self.morph(arkit)
        skinning, joints, rotmats = self.joint_transforms(pose, transl, arkit)
        if self._pose_dirs is not None:
            feature = (rotmats[1:] - np.eye(3)).reshape(-1).astype(np.float32)
            vertices += (self._pose_dirs @ feature).reshape(-1, 3)
        per_vertex = np.einsum("vk,vkab->vab", self._top_weight, skinning[self._top_index][:, :, :3, :])
        posed = np.einsum("vab,vb->va", per_vertex[:, :, :3], vertices) + per_vertex[:, :, 3]
        return PosedMesh(posed.astype(np.float32), skinning, joints)


def _top_joints(weights: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(-weights, axis=1)[:, :k]
    top = np.take_along_axis(weights, order, axis=1).astype(np.float32)
    top /= np.maximum(top.sum(axis=1, keepdims=True), 1e-12)
    return order.astype(np.int32), top


def vertex_normals(positions: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Area-weighted smooth vertex normals (V, 3) float32."""
    f = faces.astype(np.int64)
    face_normals = np.cross(positions[f[:, 1]] - positions[f[:, 0]], positions[f[:, 2]] - positions[f[:, 0]])
    corners = f.ravel()
    corner_normals = np.repeat(face_normals, 3, axis=0)
    summed = np.stack([np.bincount(corners, corner_normals[:, c], minlength=len(positions)) for c in range(3)], 1)
    return (summed / np.maximum(np.linalg.norm(summed, axis=1, keepdims=True), 1e-12)).astype(np.float32)
