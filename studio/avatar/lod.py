"""Mesh levels of detail of an avatar: decimated copies that skin, morph and shade like the original.

`decimate(model, ratio, keep)` collapses edges with fast-simplification's quadric decimation
(the library trimesh's own `simplify_quadric_decimation` wraps; called directly because only it
returns the collapse history). Replaying the collapses keeps each surviving vertex at its original
position, so skinning weights, blendshapes, shape directions, colours, texture coordinates and part
labels transfer exactly from it, and the joint regressor sums each collapsed cluster onto its survivor.
Faces touching `keep` vertices are left as they are and the cut along them is held fixed, so the face
stays fully detailed where a preset asks for it.

The shipped default avatar's levels are built by `assets/build_lod.py`; the studio only loads them
(`lod_path`). An imported glTF/VRM avatar has none: `cached_level` decimates it the same way on first
use and keeps the result (indices into the full avatar, see `Reduction`) in the studio's cache folder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import os
from pathlib import Path

import numpy as np

from studio.avatar.model import AvatarModel
from studio.avatar.skeleton import JOINT_INDEX
from studio.paths import asset_path, user_cache_dir

LOD_LEVELS = ("high", "medium", "low")
LOD_RATIOS = {"medium": 0.5, "low": 0.2}  # share of the decimated region's triangles kept
# Where the face itself is decimated (`face` below high): small, expressive parts stay whole and the
# head keeps at least half its triangles, so the lips, eyes and lids still read.
FACE_PART_RATIOS = {"lips": 1.0, "eyes": 1.0, "eyelids": 1.0, "brows": 1.0, "mouth": 1.0, "teeth": 1.0,
                    "tongue": 1.0, "head": 0.5}
# An imported avatar has no named face parts: where its face is decimated, the head (what the ARKit shapes move,
# and what rides on the head joints) keeps this share of its triangles ...
IMPORTED_FACE_RATIO = 0.5
HEAD_JOINTS = ("head", "jaw", "left_eye_smplhf", "right_eye_smplhf")
# ... and a connected part of which the shapes move at least this share (an eye, the lips, a brow) keeps as many
# triangles again, and at least EXPRESSIVE_MIN_TRIANGLES of them (all, if it has fewer).
EXPRESSIVE_PART_SHARE = 0.5
EXPRESSIVE_MIN_TRIANGLES = 400
LOD_CACHE_VERSION = 8  # bump when the decimation changes, so old cached levels are not used
_SMALLEST_PIECE = 64  # triangles; smaller pieces are left as they are
_PLANE_STEPS = 1000  # face normals this close count as one plane when a split vertex is copied again
FACET_DEG = 5.0  # a flat-shaded vertex whose faces all lie this close to their mean normal is drawn smooth once decimated


def _check_lod(lod: str) -> None:
    if lod not in LOD_LEVELS:
        raise ValueError(f"mesh LOD {lod!r} is not known; allowed: {', '.join(LOD_LEVELS)}")


def lod_path(avatar_name: str, lod: str, keep_face: bool):
    """Where the built LOD file of a shipped avatar lives (None for `high`: the original)."""
    _check_lod(lod)
    if lod == "high":
        return None
    return asset_path("avatars", f"{avatar_name}.lod-{lod}{'-face' if keep_face else ''}.npz")


def face_region(model: AvatarModel) -> np.ndarray:
    """(V,) bool: the vertices the ARKit shapes move (what `face: high` keeps at full detail)."""
    return np.abs(model.expr_dirs).reshape(model.num_vertices, -1).max(axis=1) > 1e-7


@dataclasses.dataclass(frozen=True)
class Reduction:
    """A level of detail as indices into its full avatar: the original vertex of each LOD vertex (`rows`), the
    LOD's triangles (indices into `rows`) and its joint regressor. Taking every per-vertex array at `rows` gives
    the level exactly, so this is all a cache keeps; a changed colour or mapping needs no new decimation."""

    rows: np.ndarray  # (V',) int64
    faces: np.ndarray  # (F', 3) int32
    regressor: np.ndarray  # (55, V') float32

    def apply(self, model: AvatarModel, what: str) -> AvatarModel:
        """`model` at this level; `what` is added to its source (e.g. 'decimated to 20%')."""
        taken = {name: np.asarray(array)[self.rows] for name, array in _per_vertex_fields(model).items()}
        return dataclasses.replace(model, **taken, faces=self.faces, joint_regressor=self.regressor,
                                   materials=dict(model.materials), source=f"{model.source} ({what})")


_NOT_PER_VERTEX = ("faces", "joint_regressor", "texture")


def _per_vertex_fields(model: AvatarModel) -> dict[str, np.ndarray]:
    """Every per-vertex array of the avatar by field name, position first: any array field with a row per vertex,
    so that a field the format gains later is carried too."""
    fields = {field.name: getattr(model, field.name) for field in dataclasses.fields(model)
              if field.name not in _NOT_PER_VERTEX}
    return {name: value for name, value in fields.items()
            if isinstance(value, np.ndarray) and value.ndim and value.shape[0] == model.num_vertices}


def _per_vertex_arrays(model: AvatarModel) -> list[np.ndarray]:
    """Every per-vertex array of the avatar (position first), flattened to (V, k)."""
    return [np.asarray(a).reshape(model.num_vertices, -1) for a in _per_vertex_fields(model).values()]


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


def _decimate_pieces(points: np.ndarray, faces: np.ndarray, piece: np.ndarray,
                     ratios: dict[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """Decimate each piece of the mesh on its own (`piece`: one id per face, -1 left as it is) at its ratio.

    Returns (the new faces in original indices, the original vertex each original vertex collapsed onto).
    """
    collapsed_onto = np.arange(len(points))
    pieces = []
    for index in np.unique(piece):
        selected = faces[piece == index]
        ratio = ratios.get(int(index), 1.0)
        if index < 0 or len(selected) < _SMALLEST_PIECE or ratio >= 1.0:
            pieces.append(selected)
            continue
        vertices, onto, new_faces = _collapse(points, selected, ratio)
        collapsed_onto[vertices] = onto
        pieces.append(new_faces)
    return np.concatenate(pieces), collapsed_onto


def _reduction(model: AvatarModel, out_faces: np.ndarray, collapsed_onto: np.ndarray,
               split: np.ndarray | None = None) -> Reduction:
    """The Reduction of decimated faces (original indices). Vertices no original face uses (joint carriers of
    imported avatars) are kept. A `split` vertex (bool per original vertex) gets one copy per plane of the faces
    around it, as a flat-shaded file had it."""
    vertex_count = model.num_vertices
    points = np.asarray(model.v_template, np.float64)
    corners = out_faces.reshape(-1)
    own_copy = split[corners] if split is not None else np.zeros(len(corners), bool)
    shared = np.unique(corners[~own_copy])
    plane = np.cross(points[out_faces[:, 1]] - points[out_faces[:, 0]], points[out_faces[:, 2]] - points[out_faces[:, 0]])
    plane = np.round(plane / np.maximum(np.linalg.norm(plane, axis=1, keepdims=True), 1e-20) * _PLANE_STEPS)
    copies, copy_of_corner = np.unique(np.column_stack([corners, np.repeat(plane, 3, axis=0)])[own_copy], axis=0,
                                       return_inverse=True)
    carriers = np.setdiff1d(np.arange(vertex_count), np.asarray(model.faces).reshape(-1))
    rows = np.concatenate([shared, copies[:, 0], carriers]).astype(np.int64)
    row_of = np.full(vertex_count, -1, np.int64)
    row_of[shared] = np.arange(len(shared))
    new_corners = row_of[corners]
    new_corners[own_copy] = len(shared) + copy_of_corner.reshape(-1)
    row_of[carriers] = len(rows) - len(carriers) + np.arange(len(carriers))
    first_rows, first_at = np.unique(rows, return_index=True)
    row_of[first_rows] = np.where(row_of[first_rows] >= 0, row_of[first_rows], first_at)
    lands_on = row_of[collapsed_onto]  # every original vertex lands on itself or its cluster's survivor
    full_regressor = np.asarray(model.joint_regressor, np.float32)
    regressor = np.zeros((full_regressor.shape[0], len(rows)), np.float32)
    used = lands_on >= 0
    np.add.at(regressor.T, lands_on[used], full_regressor.T[used])
    joints = np.asarray(full_regressor, np.float64) @ points
    if np.abs(regressor.astype(np.float64) @ points[rows] - joints).max() > 0.0:  # imported avatars: exact already
        regressor = _exact_joints(regressor, points[rows], joints)
    return Reduction(rows=rows, faces=new_corners.reshape(-1, 3).astype(np.int32), regressor=regressor)


def _check_ratio(ratio: float) -> None:
    if not 0.0 < ratio < 1.0:
        raise ValueError(f"decimation ratio {ratio} must be between 0 and 1")


def decimate(model: AvatarModel, ratio: float, keep: np.ndarray | None = None,
             part_ratios: dict[str, float] | None = None) -> AvatarModel:
    """A copy of `model` with about `ratio` of the triangles outside `keep` (bool per vertex) left.

    Each part (skin, shirt, hair, ...) is decimated on its own, so colours and materials keep their
    borders; `part_ratios` gives some parts their own ratio (1 leaves a part as it is).
    """
    _check_ratio(ratio)
    faces = np.asarray(model.faces, np.int64)
    kept_faces = keep[faces].any(axis=1) if keep is not None else np.zeros(len(faces), bool)
    labels = model.part_labels if model.part_labels is not None else np.zeros(model.num_vertices, np.uint8)
    piece = np.where(kept_faces, -1, labels[faces[:, 0]].astype(np.int64))
    ratios = {index: (part_ratios or {}).get(part, ratio) for index, part in enumerate(model.part_names)}
    out_faces, collapsed_onto = _decimate_pieces(np.asarray(model.v_template, np.float64), faces, piece, ratios)
    return _reduction(model, out_faces, collapsed_onto).apply(model, f"decimated to {ratio:.0%}")


def _weld(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row of each group of equal rows, group of each row), as trimesh's `unique_rows`.

    Rows are a few hundred numbers wide (weights, 52 shapes): they are grouped by position and two random
    projections of the rest, then each row is checked equal to its group's first (whole rows are grouped
    instead, slowly, should a projection ever group unequal ones).
    """
    from trimesh.grouping import unique_rows

    projections = np.random.default_rng(0).standard_normal((rows.shape[1], 2)).astype(rows.dtype)
    first, group = (np.asarray(a, np.int64) for a in unique_rows(np.column_stack([rows[:, :3], rows @ projections])))
    repeated = np.flatnonzero(first[group] != np.arange(len(rows)))
    if not np.array_equal(rows[repeated], rows[first[group[repeated]]]):
        first, group = (np.asarray(a, np.int64) for a in unique_rows(rows))
    return first, group


def decimate_welded(model: AvatarModel, ratio: float, keep_face: bool) -> Reduction:
    """An imported avatar decimated to about `ratio` of its triangles: its face whole when `keep_face`, else the
    head at `IMPORTED_FACE_RATIO` or more and the parts the shapes mostly move (eyes, lips, brows) with at least
    `EXPRESSIVE_MIN_TRIANGLES`, much as the default avatar's `FACE_PART_RATIOS` keep them.

    Exporters split a vertex wherever a normal breaks (flat shading, hard edges), so a Blender mesh can arrive as
    loose quads that no edge collapse can join. Vertices equal in position and every attribute the studio reads
    are welded first (UV seams and material borders stay apart, as their attributes differ); the studio computes
    its own normals, so after decimation a vertex the file had split gets one copy per plane again where its facets
    or hard edges showed (`_faceted`). Each connected part (head, eye, sleeve, ponytail) is decimated on its own,
    its border held, so small parts keep their shape instead of vanishing.
    """
    from trimesh.graph import connected_component_labels

    _check_ratio(ratio)
    first, group = _weld(np.hstack([a.astype(np.float32) for a in _per_vertex_arrays(model)]))
    representative = first[group]
    welded = representative[np.asarray(model.faces, np.int64)]
    welded = welded[(welded[:, 0] != welded[:, 1]) & (welded[:, 1] != welded[:, 2]) & (welded[:, 0] != welded[:, 2])]
    moved = face_region(model)
    face = moved[welded].any(axis=1)
    component = connected_component_labels(np.vstack([welded[:, [0, 1]], welded[:, [1, 2]]]), model.num_vertices)
    in_use = np.unique(welded)
    share_moved = (np.bincount(component[in_use], weights=moved[in_use], minlength=component.max() + 1)
                   / np.maximum(np.bincount(component[in_use], minlength=component.max() + 1), 1))
    face_component = component[welded[:, 0]].astype(np.int64)
    expressive = face & (share_moved[face_component] >= EXPRESSIVE_PART_SHARE)
    on_head = np.asarray(model.skin_weights)[:, [JOINT_INDEX[j] for j in HEAD_JOINTS]].sum(axis=1)[welded].mean(axis=1) >= 0.5
    kind = np.where(expressive, 2, np.where(face | on_head, 1, 0))
    piece = 3 * face_component + kind  # each part on its own (so none vanishes whole), by kind
    if keep_face:
        piece[face] = -1
    head_ratio = ratio if keep_face else max(ratio, IMPORTED_FACE_RATIO)
    ratios = {}
    for index, count in zip(*np.unique(piece, return_counts=True)):
        ratios[int(index)] = (ratio, head_ratio, min(1.0, max(IMPORTED_FACE_RATIO, EXPRESSIVE_MIN_TRIANGLES / count)))[index % 3]
    out_faces, collapsed_onto = _decimate_pieces(np.asarray(model.v_template, np.float64), welded, piece, ratios)
    was_split = np.bincount(group, minlength=len(first))[group] > 1
    faceted = _faceted(np.asarray(model.v_template, np.float64), welded)[representative]
    return _reduction(model, out_faces, collapsed_onto[representative], split=was_split & faceted)


def _faceted(points: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """(V,) bool: vertices whose faces turn more than `FACET_DEG` from their mean normal (a hard edge or facets one
    sees). A dense flat-shaded mesh reads as smooth; decimated, its facets would grow visible, so it is smoothed."""
    normals = np.cross(points[faces[:, 1]] - points[faces[:, 0]], points[faces[:, 2]] - points[faces[:, 0]])
    normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-20)
    corners, corner_normals = faces.reshape(-1), np.repeat(normals, 3, axis=0)
    mean = np.zeros_like(points)
    np.add.at(mean, corners, corner_normals)
    mean /= np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-20)
    closest = np.ones(len(points))
    np.minimum.at(closest, corners, np.einsum("ij,ij->i", corner_normals, mean[corners]))
    return closest < np.cos(np.radians(FACET_DEG))


def level_key(model: AvatarModel, lod: str, keep_face: bool) -> str:
    """The cache name of a level: a hash of everything its decimation reads (the file's geometry and attributes,
    as imported, so a new file version or mapping makes a new level) and of how it decimates."""
    digest = hashlib.blake2b(digest_size=20)
    digest.update(f"lod v{LOD_CACHE_VERSION} {lod} {LOD_RATIOS.get(lod)} face={keep_face} "
                  f"{IMPORTED_FACE_RATIO} {EXPRESSIVE_PART_SHARE} {EXPRESSIVE_MIN_TRIANGLES} {FACET_DEG}".encode())
    for array in (*_per_vertex_arrays(model), np.asarray(model.faces), np.asarray(model.joint_regressor)):
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(np.ascontiguousarray(array).data)
    return digest.hexdigest()


def lod_cache_dir() -> Path:
    """Where decimated levels of imported avatars are kept: the studio's cache folder, never beside the user's file."""
    return user_cache_dir() / "lod"


def _read_cached(path: Path, model: AvatarModel) -> Reduction | None:
    """The cached reduction of `model`, or None when absent, unreadable or not fitting (then it is built anew)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            reduction = Reduction(rows=data["rows"].astype(np.int64), faces=data["faces"].astype(np.int32),
                                  regressor=data["regressor"].astype(np.float32))
    except (OSError, ValueError, KeyError, EOFError):
        return None
    rows, faces = reduction.rows, reduction.faces
    fits = (rows.ndim == 1 and rows.size and faces.ndim == 2 and faces.shape[1] == 3 and faces.size
            and 0 <= rows.min() and rows.max() < model.num_vertices and 0 <= faces.min() and faces.max() < rows.size
            and reduction.regressor.shape == (model.joint_regressor.shape[0], rows.size))
    return reduction if fits else None


def cached_level(model: AvatarModel, lod: str, keep_face: bool, cache_dir: str | os.PathLike | None = None) -> AvatarModel:
    """An imported avatar at this level: decimated once (`decimate_welded`), then read back from the cache."""
    _check_lod(lod)
    if lod == "high":
        return model
    from studio.fileio import atomic_write

    path = Path(cache_dir if cache_dir is not None else lod_cache_dir()) / f"{level_key(model, lod, keep_face)}.npz"
    reduction = _read_cached(path, model)
    if reduction is None:
        reduction = decimate_welded(model, LOD_RATIOS[lod], keep_face)
        buffer = io.BytesIO()
        np.savez_compressed(buffer, rows=reduction.rows, faces=reduction.faces, regressor=reduction.regressor)
        with contextlib.suppress(OSError):  # a cache that cannot be written only costs the decimation next time
            atomic_write(path, buffer.getvalue())
    return reduction.apply(model, f"{lod} level of detail{', face whole' if keep_face else ''}")
