"""Mesh levels of detail of an avatar: decimated copies that skin, morph and shade like the original.

`decimate(model, keep, ratio)` collapses edges with fast-simplification's quadric decimation
(the library trimesh's own `simplify_quadric_decimation` wraps; called directly because only it
returns the collapse history). Replaying the collapses keeps each surviving vertex at its original
position, so skinning weights, blendshapes, shape directions, colours and part labels transfer
exactly from it, and the joint regressor sums each collapsed cluster onto its survivor. Faces
touching `keep` vertices are left as they are and the cut along them is held fixed, so the face
stays fully detailed where a preset asks for it.

The shipped files are built by `assets/build_lod.py`; the studio only loads them (`lod_path`).
"""

from __future__ import annotations

import numpy as np

from studio.avatar.model import AvatarModel
from studio.paths import asset_path

LOD_LEVELS = ("high", "medium", "low")
LOD_RATIOS = {"medium": 0.5, "low": 0.2}  # share of the decimated region's triangles kept
# Where the face itself is decimated (`face` below high): small, expressive parts stay whole and the
# head keeps at least half its triangles, so the lips, eyes and lids still read.
FACE_PART_RATIOS = {"lips": 1.0, "eyes": 1.0, "eyelids": 1.0, "brows": 1.0, "mouth": 1.0, "teeth": 1.0,
                    "tongue": 1.0, "head": 0.5}


def lod_path(avatar_name: str, lod: str, keep_face: bool):
    """Where the built LOD file of a shipped avatar lives (None for `high`: the original)."""
    if lod not in LOD_LEVELS:
        raise ValueError(f"mesh LOD {lod!r} is not known; allowed: {', '.join(LOD_LEVELS)}")
    if lod == "high":
        return None
    return asset_path("avatars", f"{avatar_name}.lod-{lod}{'-face' if keep_face else ''}.npz")


def face_region(model: AvatarModel) -> np.ndarray:
    """(V,) bool: the vertices the ARKit shapes move (what `face: high` keeps at full detail)."""
    return np.abs(model.expr_dirs).reshape(model.num_vertices, -1).max(axis=1) > 1e-7


def _exact_joints(regressor: np.ndarray, vertices: np.ndarray, joints: np.ndarray) -> np.ndarray:
    """The smallest change to each regressor row (on its own vertices) that puts the joint back exactly."""
    out = regressor.astype(np.float64)
    for j, row in enumerate(out):
        nearest = np.argsort(np.linalg.norm(vertices - joints[j], axis=1))[:8]  # spans 3D where the row alone may not
        support = np.union1d(np.flatnonzero(row), nearest)
        a = np.vstack([vertices[support].T, np.ones(support.size)])  # (4, S): position and affine sum
        residual = np.append(joints[j], 1.0) - a @ row[support]
        row[support] += a.T @ (np.linalg.pinv(a @ a.T) @ residual)
    return out.astype(np.float32)


def _collapse(points: np.ndarray, faces: np.ndarray, ratio: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decimate one piece (faces in original vertex indices), its border held fixed.

    Returns (its vertices, the original vertex each one collapsed onto, the new faces in original indices).
    """
    import fast_simplification

    vertices = np.unique(faces)
    local = np.full(len(points), -1, np.int64)
    local[vertices] = np.arange(len(vertices))
    sub_faces = local[faces]
    _, _, collapses = fast_simplification.simplify(
        points[vertices], sub_faces, target_reduction=1.0 - ratio, preserve_border=True, return_collapses=True)
    new_points, new_faces, mapping = fast_simplification.replay_simplification(
        points[vertices].astype(np.float32), sub_faces.astype(np.int32), collapses)
    # each decimated vertex stands at one original vertex of its collapsed cluster: find it
    survivor = np.full(len(new_points), -1, np.int64)
    distance = np.linalg.norm(points[vertices] - new_points[mapping], axis=1)
    order = np.argsort(distance, kind="stable")[::-1]  # the closest one of a cluster is written last
    survivor[mapping[order]] = vertices[order]
    return vertices, survivor[mapping], survivor[new_faces]


def decimate(model: AvatarModel, ratio: float, keep: np.ndarray | None = None,
             part_ratios: dict[str, float] | None = None) -> AvatarModel:
    """A copy of `model` with about `ratio` of the triangles outside `keep` (bool per vertex) left.

    Each part (skin, shirt, hair, ...) is decimated on its own, so colours and materials keep their
    borders; `part_ratios` gives some parts their own ratio (1 leaves a part as it is).
    """
    if not 0.0 < ratio < 1.0:
        raise ValueError(f"decimation ratio {ratio} must be between 0 and 1")
    faces = np.asarray(model.faces, np.int64)
    points = np.asarray(model.v_template, np.float64)
    kept_faces = keep[faces].any(axis=1) if keep is not None else np.zeros(len(faces), bool)
    labels = model.part_labels if model.part_labels is not None else np.zeros(len(points), np.uint8)
    face_part = labels[faces[:, 0]]
    collapsed_onto = np.arange(len(points))
    pieces = [faces[kept_faces]]
    for index, part in enumerate(model.part_names):
        selected = faces[(face_part == index) & ~kept_faces]
        part_ratio = (part_ratios or {}).get(part, ratio)
        if len(selected) < 64 or part_ratio >= 1.0:
            pieces.append(selected)
            continue
        vertices, onto, new_faces = _collapse(points, selected, part_ratio)
        collapsed_onto[vertices] = onto
        pieces.append(new_faces)
    out_faces = np.concatenate(pieces)
    originals = np.unique(out_faces)
    final_index = np.full(len(points), -1, np.int64)
    final_index[originals] = np.arange(len(originals))
    lands_on = final_index[collapsed_onto]  # every original vertex lands on itself or its cluster's survivor
    regressor = np.zeros((model.joint_regressor.shape[0], len(originals)), np.float32)
    used = lands_on >= 0
    np.add.at(regressor.T, lands_on[used], np.asarray(model.joint_regressor, np.float32).T[used])
    regressor = _exact_joints(regressor, points[originals], np.asarray(model.joint_regressor, np.float64) @ points)
    return AvatarModel(
        name=model.name,
        v_template=np.asarray(model.v_template, np.float32)[originals],
        faces=final_index[out_faces].astype(np.int32),
        joint_regressor=regressor,
        skin_weights=np.asarray(model.skin_weights, np.float32)[originals],
        shape_dirs=np.asarray(model.shape_dirs, np.float32)[originals],
        expr_dirs=np.asarray(model.expr_dirs, np.float32)[originals],
        pose_dirs=None if model.pose_dirs is None else np.asarray(model.pose_dirs, np.float32)[originals],
        parents=model.parents,
        part_labels=None if model.part_labels is None else model.part_labels[originals],
        part_names=model.part_names,
        materials=dict(model.materials),
        vertex_colors=None if model.vertex_colors is None else model.vertex_colors[originals],
        has_arkit_expressions=model.has_arkit_expressions,
        source=f"{model.source} (decimated to {ratio:.0%})",
    )
