"""The shipped LOD meshes: fewer vertices, attributes carried exactly, the face whole where face is high."""

from __future__ import annotations

import numpy as np
import pytest

from studio.avatar.io import default_avatar_path, load_avatar
from studio.avatar.lod import decimate, face_region, lod_path


@pytest.fixture(scope="module")
def full():
    return load_avatar(default_avatar_path())


def _assert_attributes_carried(full, model) -> None:
    """1500 LOD vertices each are an original vertex: same position, skinning, shapes and part."""
    where: dict[bytes, list[int]] = {}
    for i, row in enumerate(np.asarray(full.v_template, np.float32)):
        where.setdefault(row.tobytes(), []).append(i)
    positions = np.asarray(model.v_template, np.float32)
    for j in np.random.default_rng(0).choice(len(positions), 1500, replace=False):
        candidates = where[positions[j].tobytes()]
        same = [i for i in candidates if np.array_equal(full.expr_dirs[i], model.expr_dirs[j])
                and np.array_equal(full.skin_weights[i], model.skin_weights[j])
                and full.part_labels[i] == model.part_labels[j]]
        assert same, f"LOD vertex {j} carries attributes no original vertex at its position has"


@pytest.mark.parametrize(("lod", "keep_face"), [("medium", True), ("low", True), ("medium", False), ("low", False)])
def test_lod_files_carry_weights_and_shapes_of_the_vertices_they_keep(full, lod, keep_face):
    model = load_avatar(lod_path("default", lod, keep_face))
    assert model.num_vertices < full.num_vertices and len(model.faces) < len(full.faces)
    _assert_attributes_carried(full, model)
    joints = model.joint_regressor @ model.v_template
    assert np.abs(joints - full.joint_regressor @ full.v_template).max() < 1e-4
    if keep_face:  # every face vertex is still there
        kept = {row.tobytes() for row in np.asarray(model.v_template, np.float32)}
        face = np.asarray(full.v_template, np.float32)[face_region(full)]
        assert all(row.tobytes() in kept for row in face)


def test_lod_levels_order_by_size_and_low_without_the_face_is_smallest():
    sizes = {(lod, keep): load_avatar(lod_path("default", lod, keep)).num_vertices
             for lod in ("medium", "low") for keep in (True, False)}
    assert sizes[("low", True)] < sizes[("medium", True)]
    assert sizes[("low", False)] < sizes[("low", True)]


def test_decimate_refuses_a_ratio_outside_0_to_1(full):
    with pytest.raises(ValueError, match="between 0 and 1"):
        decimate(full, 1.5)
