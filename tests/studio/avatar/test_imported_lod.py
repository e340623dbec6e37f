"""Levels of detail of imported avatars: decimated with the default avatar's tool, every attribute carried, cached."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from studio.avatar import lod as lod_module
from studio.avatar.arkit import ARKIT_INDEX
from studio.avatar.io import load_avatar
from studio.avatar.lod import cached_level, lod_cache_dir
from studio.avatar.look import has_levels, level_of_detail

DATA = Path(__file__).resolve().parents[2] / "data" / "avatars"
LEVELS = [("medium", True), ("low", True), ("medium", False), ("low", False)]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AVATAR_STUDIO_HOME", str(tmp_path / "home"))


@pytest.fixture(scope="module")
def glb():
    """The Blender-made humanoid: textured skin, ARKit shape keys, flat-shaded (split) vertices."""
    return load_avatar(DATA / "humanoid_arkit.glb")


def _by_position(model) -> dict[bytes, list[int]]:
    where: dict[bytes, list[int]] = {}
    for i, row in enumerate(np.asarray(model.v_template, np.float32)):
        where.setdefault(row.tobytes(), []).append(i)
    return where


@pytest.mark.parametrize(("lod", "keep_face"), LEVELS)
def test_each_level_has_fewer_triangles_and_carries_every_attribute_of_an_original_vertex(glb, lod, keep_face):
    level = level_of_detail(glb, lod, keep_face)
    assert len(level.faces) < len(glb.faces)
    assert level.texture is glb.texture  # the atlas is shared, not copied
    where = _by_position(glb)
    arrays = ("skin_weights", "expr_dirs", "uvs", "texture_rects", "alpha", "vertex_colors")
    for j in range(level.num_vertices):
        candidates = where[np.asarray(level.v_template[j], np.float32).tobytes()]
        assert any(all(np.array_equal(getattr(glb, a)[i], getattr(level, a)[j]) for a in arrays) for i in candidates), \
            f"{lod} vertex {j} carries attributes no original vertex at its position has"
    assert np.allclose(level.rest_joints(), glb.rest_joints(), atol=1e-6)
    if keep_face:  # every vertex a face shape moves is still there
        kept = {row.tobytes() for row in np.asarray(level.v_template, np.float32)}
        moved = np.abs(glb.expr_dirs).reshape(glb.num_vertices, -1).max(axis=1) > 1e-7
        assert all(row.tobytes() in kept for row in np.asarray(glb.v_template, np.float32)[moved])


@pytest.mark.parametrize(("lod", "keep_face"), LEVELS)
def test_jaw_open_still_opens_the_mouth_and_the_texture_is_still_mapped(glb, lod, keep_face):
    level = level_of_detail(glb, lod, keep_face)
    jaw = ARKIT_INDEX["jawOpen"]
    drop = -level.expr_dirs[:, 1, jaw]  # y is up: the lower lip and chin move down
    assert drop.max() > 0.75 * -glb.expr_dirs[:, 1, jaw].min() and (drop > 0.01).sum() >= 20
    textured = np.asarray(level.texture_rects)[:, 2] > 0  # vertices in a texture's atlas cell (not the white texel)
    assert textured.sum() > 0.3 * (np.asarray(glb.texture_rects)[:, 2] > 0).sum()
    assert np.ptp(np.asarray(level.uvs)[textured], axis=0).min() > 0.5  # the UVs still span the texture


def test_the_low_levels_order_by_size(glb):
    triangles = {key: len(level_of_detail(glb, *key).faces) for key in LEVELS}
    assert triangles[("low", True)] < triangles[("medium", True)]
    assert triangles[("low", False)] < triangles[("medium", False)] < len(glb.faces)
    assert triangles[("low", False)] < triangles[("low", True)]


def test_spring_weights_ride_along(tmp_path):
    vrm = load_avatar(DATA / "humanoid_vrm0.vrm")
    level = level_of_detail(vrm, "low", False)
    assert level.cloth_weights is not None and len(level.faces) < len(vrm.faces)
    assert level.cloth_weights[:, 0].max() == pytest.approx(vrm.cloth_weights[:, 0].max())  # the ponytail's tip


def test_a_level_is_decimated_once_and_cached_in_the_studio_cache_not_beside_the_file(tmp_path, monkeypatch):
    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copy(DATA / "humanoid_arkit.glb", folder / "me.glb")
    model = load_avatar(folder / "me.glb")
    assert has_levels(model)
    first = level_of_detail(model, "low", False)
    assert sorted(p.name for p in folder.iterdir()) == ["me.glb"]
    cached = list(lod_cache_dir().glob("*.npz"))
    assert len(cached) == 1 and lod_cache_dir().is_relative_to(tmp_path / "home")

    def no_decimation(*_args):
        raise AssertionError("decimated again although the level is cached")

    monkeypatch.setattr(lod_module, "decimate_welded", no_decimation)
    again = level_of_detail(load_avatar(folder / "me.glb"), "low", False)
    assert np.array_equal(again.faces, first.faces) and np.array_equal(again.v_template, first.v_template)

    cached[0].write_bytes(b"not a cache file")  # damaged: built anew, never used
    monkeypatch.undo()
    monkeypatch.setenv("AVATAR_STUDIO_HOME", str(tmp_path / "home"))
    rebuilt = level_of_detail(model, "low", False)
    assert np.array_equal(rebuilt.faces, first.faces)


def test_a_cache_for_another_mesh_is_not_used(glb, tmp_path):
    """The cache key follows the mesh: a level cached for one avatar is never applied to another."""
    vrm = load_avatar(DATA / "humanoid_vrm0.vrm")
    level = cached_level(glb, "low", False, tmp_path)
    other = cached_level(vrm, "low", False, tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 2
    assert level.source != other.source and other.num_vertices <= vrm.num_vertices


def test_an_unknown_level_is_refused(glb):
    with pytest.raises(ValueError, match="mesh LOD 'tiny' is not known; allowed: high, medium, low"):
        cached_level(glb, "tiny", True)
