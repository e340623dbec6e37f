"""Levels of detail of imported avatars: decimated with the default avatar's tool, every attribute carried, cached."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from studio.avatar import lod as lod_module
from studio.avatar.arkit import ARKIT_INDEX
from studio.avatar.io import load_avatar
from studio.avatar.lod import cached_level, decimate_welded, lod_cache_dir
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


def _flat_shaded_sphere(segments: int):
    """A UV sphere written as a flat-shading exporter writes it: every quad with its own four vertices."""
    from studio.avatar.model import AvatarModel
    from studio.avatar.skeleton import NUM_JOINTS

    rings = segments // 2
    theta, phi = np.linspace(0, np.pi, rings + 1), np.linspace(0, 2 * np.pi, segments + 1)
    grid = np.stack(np.meshgrid(theta, phi, indexing="ij"), -1)
    point = lambda t, p: (np.sin(t) * np.cos(p), np.cos(t), np.sin(t) * np.sin(p))  # noqa: E731
    vertices, faces = [], []
    for r in range(rings):
        for s in range(segments):
            base = len(vertices)
            vertices += [point(*grid[r, s]), point(*grid[r + 1, s]), point(*grid[r + 1, s + 1]), point(*grid[r, s + 1])]
            faces += [(base, base + 1, base + 2), (base, base + 2, base + 3)]
    count = len(vertices)
    weights = np.zeros((count, NUM_JOINTS), np.float32)
    weights[:, 0] = 1.0
    return AvatarModel(name="sphere", v_template=np.asarray(vertices, np.float32), faces=np.asarray(faces, np.int32),
                       joint_regressor=np.zeros((NUM_JOINTS, count), np.float32), skin_weights=weights,
                       shape_dirs=np.zeros((count, 3, 0), np.float32), expr_dirs=np.zeros((count, 3, 52), np.float32),
                       has_arkit_expressions=False, source="sphere.glb")


def test_a_dense_flat_shaded_mesh_turns_smooth_when_decimated_and_a_coarse_one_keeps_its_facets():
    """Flat shading on a dense mesh reads as smooth; on bigger decimated triangles it would show every facet."""
    for segments, faceted in ((96, False), (12, True)):
        model = _flat_shaded_sphere(segments)
        level = decimate_welded(model, 0.3, keep_face=True).apply(model, "test")
        assert len(level.faces) < 0.5 * len(model.faces)
        positions = len(np.unique(np.asarray(level.v_template), axis=0))
        assert (level.num_vertices > positions) is faceted, (segments, level.num_vertices, positions)


def test_every_per_vertex_field_rides_along_mtoon_rim_outline_and_blend_groups_too(glb):
    import dataclasses

    count = glb.num_vertices
    model = dataclasses.replace(glb, rim=np.tile(np.linspace(0, 1, count, dtype=np.float32)[:, None], (1, 6)),
                                outline=np.full((count, 6), 0.5, np.float32),
                                blend_group=(np.arange(count) % 3 - 1).astype(np.int32))
    reduction = decimate_welded(model, 0.2, keep_face=False)
    level = reduction.apply(model, "low")
    for name in ("v_template", "skin_weights", "expr_dirs", "uvs", "texture_rects", "rim", "outline", "blend_group"):
        assert np.array_equal(getattr(level, name), getattr(model, name)[reduction.rows]), name
