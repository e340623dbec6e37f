"""The committed default avatar: format, face shapes, symmetry, rig, determinism and smplx parity."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from studio.avatar.arkit import ARKIT_INDEX, ARKIT_NAMES, mirror_name
from studio.avatar.io import default_avatar_path, load_avatar
from studio.avatar.skeleton import JOINT_INDEX
from studio.avatar.skinning import lbs

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "assets" / "build_default_avatar.py"
FLIP = np.array([-1.0, 1.0, 1.0])


@pytest.fixture(scope="module")
def model():
    return load_avatar(default_avatar_path())


@pytest.fixture(scope="module")
def twin():
    spec = importlib.util.spec_from_file_location("build_default_avatar", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.mirror_map()


def test_has_enough_vertices_for_smplx_keypoints(model):
    assert model.num_vertices >= 9930
    assert model.has_arkit_expressions
    assert model.num_betas >= 10


def test_every_shape_moves_the_face_and_no_joint(model):
    regressor_vertices = model.regressor_vertices()
    for k, name in enumerate(ARKIT_NAMES):
        delta = np.abs(model.expr_dirs[:, :, k])
        assert delta.max() > 0.003, f"{name} moves at most {delta.max():.4f} m"
        assert not delta[regressor_vertices].any(), f"{name} moves a joint-regressor vertex"


def test_left_and_right_shapes_mirror_each_other(model, twin):
    assert np.array_equal(twin[twin], np.arange(model.num_vertices))
    np.testing.assert_allclose(model.v_template[twin], model.v_template * FLIP, atol=1e-6)
    for name in ARKIT_NAMES:
        left, right = ARKIT_INDEX[name], ARKIT_INDEX[mirror_name(name)]
        np.testing.assert_allclose(model.expr_dirs[twin, :, left] * FLIP, model.expr_dirs[:, :, right], atol=1e-7,
                                   err_msg=name)
    assert "Left" in ARKIT_NAMES[0]


def test_left_is_the_subjects_left(model):
    regressor_joints = model.rest_joints()
    assert regressor_joints[JOINT_INDEX["left_hip"], 0] > 0
    assert regressor_joints[JOINT_INDEX["left_eye_smplhf"], 0] > 0
    smile = model.expr_dirs[:, 1, ARKIT_INDEX["mouthSmileLeft"]]
    assert model.v_template[np.argmax(smile), 0] > 0


def test_eyeballs_turn_with_the_eye_joints(model):
    eyes = model.part_mask("eyes")
    left = eyes & (model.v_template[:, 0] > 0)
    right = eyes & (model.v_template[:, 0] < 0)
    assert left.sum() > 100 and right.sum() == left.sum()
    np.testing.assert_allclose(model.skin_weights[left, JOINT_INDEX["left_eye_smplhf"]], 1.0)
    np.testing.assert_allclose(model.skin_weights[right, JOINT_INDEX["right_eye_smplhf"]], 1.0)
    centre = model.rest_joints()[JOINT_INDEX["left_eye_smplhf"]]
    radius = np.linalg.norm(model.v_template[left] - centre, axis=1)
    assert radius.max() - radius.min() < 0.002, "the left eye joint is not at the eyeball's centre"


def test_regressor_and_weights_are_convex(model):
    np.testing.assert_allclose(model.joint_regressor.sum(axis=1), 1.0, atol=1e-5)
    assert model.joint_regressor.min() >= 0
    np.testing.assert_allclose(model.skin_weights.sum(axis=1), 1.0, atol=1e-5)
    assert ((model.skin_weights > 1e-6).sum(axis=1) <= 4).all(), "a vertex has more than four skinning joints"


def test_jaw_open_parts_the_lips_and_shows_teeth(model):
    jaw = model.expr_dirs[:, :, ARKIT_INDEX["jawOpen"]]
    teeth = model.part_mask("teeth")
    moving = teeth & np.any(jaw != 0, axis=1)
    still = teeth & ~moving
    assert moving.sum() == still.sum() > 0, "lower teeth follow the jaw, upper teeth stay"
    assert (jaw[moving, 1] < -0.008).all()
    assert model.v_template[moving, 1].mean() < model.v_template[still, 1].mean()
    closed = jaw + model.expr_dirs[:, :, ARKIT_INDEX["mouthClose"]]
    lips = model.part_mask("lips")
    assert np.abs(closed[lips, 1]).max() < np.abs(jaw[lips, 1]).max() * 0.7


def test_generator_reproduces_the_committed_file(tmp_path):
    """Byte for byte, except the joint regressor's weights: only the joints they place are reproducible.

    A fingertip joint's nearest still vertices lie nearly in a plane, so the weights that centre them on the
    joint are ill-conditioned: OpenBLAS's AVX-512 kernels (OPENBLAS_CORETYPE=SkylakeX) round differently from
    its Haswell and Zen ones and move single thumb weights by up to 0.03, while the joint moves 0.25 um on the
    template and under 5 um per unit of a body shape.
    """
    out = tmp_path / "default.npz"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    subprocess.run([sys.executable, str(GENERATOR), "--out", str(out)], check=True, env=env, timeout=300)
    with np.load(out) as fresh, np.load(default_avatar_path()) as committed:
        assert sorted(fresh.files) == sorted(committed.files)
        for key in committed.files:
            if key != "J_regressor":
                assert np.array_equal(fresh[key], committed[key]), key
        change = fresh["J_regressor"].astype(np.float64) - committed["J_regressor"]
        template = committed["v_template"].astype(np.float64)
        shapes = committed["shapedirs"][:, :, : int(committed["num_betas"])].astype(np.float64)
        assert np.abs(change @ template).max() < 1e-6, "a joint moved on the template"
        assert np.abs(np.einsum("jv,vcb->jcb", change, shapes)).max() < 2e-5, "a joint moved under a body shape"


def test_smplx_loads_it_unpatched_and_agrees_with_our_skinning(model, tmp_path):
    import smplx  # the `train` extra, which make test installs
    import torch
    # smplx takes the model type from a file's name, or reads <dir>/smplx/SMPLX_NEUTRAL.npz for a folder
    (tmp_path / "smplx").mkdir()
    (tmp_path / "smplx" / "SMPLX_NEUTRAL.npz").symlink_to(default_avatar_path())
    body = smplx.create(str(tmp_path), model_type="smplx", ext="npz", use_pca=False,
                        num_expression_coeffs=52, num_betas=10)
    rng = np.random.default_rng(7)
    betas = rng.normal(0, 1, 10)
    expression = rng.uniform(0, 1, 52)
    pose = rng.normal(0, 0.25, (55, 3))
    transl = rng.normal(0, 0.1, 3)

    def tensor(array):
        return torch.tensor(np.asarray(array, np.float32)[None])

    with torch.no_grad():
        output = body(betas=tensor(betas), expression=tensor(expression), global_orient=tensor(pose[0]),
                      body_pose=tensor(pose[1:22].ravel()), jaw_pose=tensor(pose[22]), leye_pose=tensor(pose[23]),
                      reye_pose=tensor(pose[24]), left_hand_pose=tensor(pose[25:40].ravel()),
                      right_hand_pose=tensor(pose[40:55].ravel()), transl=tensor(transl))
    ours, _ = lbs(model, betas, expression, pose, transl)
    np.testing.assert_allclose(output.vertices[0].numpy(), ours, atol=1e-4)


def _pieces(faces: np.ndarray, vertex_count: int) -> np.ndarray:
    """Connected-component label of each face (union-find over shared vertices)."""
    parent = np.arange(vertex_count)

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b, c in faces:
        ra, rb, rc = root(a), root(b), root(c)
        parent[rb] = ra
        parent[root(rc)] = ra
    return np.array([root(a) for a in faces[:, 0]])


def test_closed_pieces_are_wound_outward(model):
    faces = model.faces.astype(np.int64)
    vertices = model.v_template.astype(np.float64)
    pieces = _pieces(faces, len(vertices))
    closed = 0
    for piece in np.unique(pieces):
        selected = faces[pieces == piece]
        directed = selected[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2)
        undirected, counts = np.unique(np.sort(directed, axis=1), axis=0, return_counts=True)
        if (counts == 1).any():
            continue  # an open sheet (eyelid shell): drawn from both sides
        closed += 1
        parts = sorted(set(np.asarray(model.part_names)[model.part_labels[np.unique(selected)]]))
        assert len(np.unique(directed, axis=0)) == len(directed), f"{parts}: neighbouring faces wind opposite ways"
        tri = vertices[selected]
        volume = np.einsum("ij,ij->i", tri[:, 0], np.cross(tri[:, 1], tri[:, 2])).sum() / 6.0
        assert volume > 0, f"{parts}: wound inward (signed volume {volume:.2e} m³)"
    assert closed >= 30
