"""Our numpy skinning against smplx, the SMPL-X reference implementation."""

from __future__ import annotations

import numpy as np

from studio.avatar.io import save_avatar
from studio.avatar.skinning import batch_rodrigues, lbs
from tests.conftest import make_random_avatar


def test_rodrigues_gives_rotations():
    rotations = batch_rodrigues(np.random.default_rng(1).normal(size=(20, 3)))
    assert np.allclose(rotations @ rotations.transpose(0, 2, 1), np.eye(3), atol=1e-12)
    assert np.allclose(np.linalg.det(rotations), 1.0)
    assert np.allclose(batch_rodrigues(np.zeros((1, 3)))[0], np.eye(3))


def test_rest_pose_leaves_the_mesh_where_it_is(random_avatar):
    vertices, joints = lbs(random_avatar)
    assert np.allclose(vertices, random_avatar.v_template, atol=1e-6)
    assert np.allclose(joints, random_avatar.joint_regressor @ random_avatar.v_template, atol=1e-6)


def test_reference_matches_smplx(tmp_path):
    import smplx  # the `train` extra, which make test installs
    import torch
    avatar = make_random_avatar(vertex_count=9930, seed=5, moving_vertices=300)
    path = tmp_path / "SMPLX_NEUTRAL.npz"
    save_avatar(avatar, path)
    body = smplx.create(str(path), model_type="smplx", ext="npz", use_pca=False, num_expression_coeffs=52, num_betas=10)
    rng = np.random.default_rng(7)
    betas, expression = rng.normal(size=10), rng.random(52)
    pose, transl = rng.normal(size=(55, 3)) * 0.3, rng.normal(size=3) * 0.1
    tensor = lambda a: torch.tensor(np.asarray(a, np.float32)).reshape(1, -1)  # noqa: E731
    output = body(
        betas=tensor(betas), expression=tensor(expression), transl=tensor(transl),
        global_orient=tensor(pose[0]), body_pose=tensor(pose[1:22]), jaw_pose=tensor(pose[22]),
        leye_pose=tensor(pose[23]), reye_pose=tensor(pose[24]),
        left_hand_pose=tensor(pose[25:40]), right_hand_pose=tensor(pose[40:55]),
    )
    vertices, joints = lbs(avatar, betas, expression, pose, transl)
    assert np.abs(output.vertices[0].detach().numpy() - vertices).max() < 1e-4
    assert np.abs(output.joints[0, :55].detach().numpy() - joints).max() < 1e-4
