"""CPU side of the avatar visual: sparse morph, blended normals, culling groups, forward kinematics."""

from __future__ import annotations

import numpy as np

from render.avatar_visual import AvatarMesh, two_sided_faces
from studio.avatar.arkit import ARKIT_NAMES
from studio.avatar.skeleton import JOINT_INDEX, NUM_JOINTS, PARENTS
from studio.avatar.skinning import Kinematics, lbs, vertex_normals
from studio.frame import FrameState


def _weights(**named: float) -> np.ndarray:
    out = np.zeros(len(ARKIT_NAMES), np.float32)
    for name, value in named.items():
        out[ARKIT_NAMES.index(name)] = value
    return out


def _angle_cos(mesh: AvatarMesh) -> np.ndarray:
    exact = vertex_normals(mesh.positions, mesh.faces)[: mesh.num_shading]
    return np.einsum("ij,ij->i", exact, mesh.normals[: mesh.num_shading])


def test_morph_moves_only_the_prefix_and_blended_normals_track_the_exact_ones(ellipsoid_avatar):
    mesh = AvatarMesh(ellipsoid_avatar)
    still = mesh.positions[mesh.num_moving :].copy()
    assert 0 < mesh.num_moving < mesh.num_shading < ellipsoid_avatar.num_vertices
    assert mesh.morph(_weights(jawOpen=1.0))
    assert np.array_equal(mesh.positions[mesh.num_moving :], still)
    assert _angle_cos(mesh).min() > 0.9999  # one shape at full weight: exact
    assert mesh.morph(_weights(jawOpen=0.4, eyeBlinkLeft=0.7, mouthSmileLeft=0.5))
    assert np.percentile(_angle_cos(mesh), 1) > 0.97  # mixes: close for all but a few folded vertices
    assert not mesh.morph(_weights(jawOpen=0.4, eyeBlinkLeft=0.7, mouthSmileLeft=0.5))  # unchanged: no work


def test_closed_outward_pieces_are_culled_and_others_keep_both_sides(make_ellipsoid):
    points, _, faces = make_ellipsoid((0, 0, 0), 1.0, 12, 16)
    outward = faces if np.linalg.det(points[faces[100]]) > 0 else faces[:, ::-1]
    assert not two_sided_faces(outward, points).any()
    assert two_sided_faces(outward[:, ::-1].copy(), points).all()  # inward-wound
    sheet = outward[np.einsum("ij,ij->i", points[outward[:, 0]], [[0, 0, 1]] * len(outward)) > 0.3]
    assert two_sided_faces(sheet, points).all()  # a cap is open and far from a solid
    mixed = outward.copy()
    mixed[:10] = mixed[:10, ::-1]
    assert two_sided_faces(mixed, points).all()  # inconsistent winding


def test_ellipsoid_avatar_draws_mostly_with_back_faces_culled(ellipsoid_avatar):
    assert (~AvatarMesh(ellipsoid_avatar).two_sided).mean() > 0.9


def test_kinematics_rotates_children_about_their_parent_joint():
    rest = np.zeros((NUM_JOINTS, 3))
    rest[JOINT_INDEX["neck"]] = (0, 1.4, 0)
    rest[JOINT_INDEX["head"]] = (0, 1.5, 0)
    rest[JOINT_INDEX["jaw"]] = (0, 1.5, 0.05)
    pose = np.zeros((NUM_JOINTS, 3))
    pose[JOINT_INDEX["neck"]] = (0, 0, np.pi / 2)  # roll 90 degrees about z
    matrices = Kinematics(PARENTS, rest).skinning_matrices(pose, np.array([1.0, 0, 0]))
    head_top = matrices[JOINT_INDEX["head"]] @ np.array([0, 1.6, 0, 1.0])
    np.testing.assert_allclose(head_top[:3], [1.0 - 0.2, 1.4, 0], atol=1e-9)


def test_cpu_posing_matches_the_numpy_reference(ellipsoid_avatar):
    """The renderer's per-frame path (sparse morph, four joints per vertex) against `lbs`."""
    rng = np.random.default_rng(3)
    betas, arkit = rng.normal(size=10), rng.random(52)
    pose, transl = rng.normal(size=(55, 3)) * 0.4, rng.normal(size=3)
    reference, _ = lbs(ellipsoid_avatar, betas, arkit, pose, transl)
    posed = AvatarMesh(ellipsoid_avatar, betas).posed_vertices(FrameState(arkit=arkit, pose=pose, transl=transl))
    assert np.abs(posed - reference).max() < 1e-4
