"""The avatar format: SMPL-X-compatible arrays plus an ARKit-52 expression space.

An `AvatarModel` is immutable once built (its arrays are read-only), so the engine,
the renderer and the inspector may share one without copying.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from studio.avatar.arkit import ARKIT_NAMES, NUM_ARKIT
from studio.avatar.emotions import ExpressionDrive, morph_weights
from studio.avatar.skeleton import NUM_JOINTS, PARENTS
from studio.avatar.springs import SpringRig

if TYPE_CHECKING:
    from studio.avatar.material_binds import MaterialBinds

NUM_POSE_CORRECTIVES = (NUM_JOINTS - 1) * 9  # 486, as in SMPL-X


class AvatarFormatError(ValueError):
    """An avatar file or array set that the studio cannot use; the message says why."""


@dataclass(frozen=True)
class Material:
    """Shading of one body part: base colour (display sRGB 0..1) and a Blinn-Phong highlight."""

    color: tuple[float, float, float]  # display (sRGB) values 0..1; the renderer linearises them
    specular: float = 0.15
    shininess: float = 24.0


@dataclass(frozen=True, eq=False)
class AvatarModel:
    """Arrays of one avatar. V vertices, F triangles, 55 joints in SMPL-X order.

    `expr_dirs[:, :, k]` is the full-weight displacement of ARKit shape k; expression
    displacements, like shape ones, are added before the joint regressor, so a shape
    that touched a regressor vertex would move a joint: the format forbids it.
    An imported avatar may carry more columns after the 52 (its VRM emotion expressions); its
    `expression_drive` says how they follow the ARKit weights (`morph_weights`).
    """

    name: str
    v_template: np.ndarray  # (V, 3) float32, metres, y up, facing +z
    faces: np.ndarray  # (F, 3) int32
    joint_regressor: np.ndarray  # (55, V) float32
    skin_weights: np.ndarray  # (V, 55) float32, rows sum to 1
    shape_dirs: np.ndarray  # (V, 3, B) float32
    expr_dirs: np.ndarray  # (V, 3, 52 + E) float32, ARKit order, then E extra expressions (see expression_drive)
    pose_dirs: np.ndarray | None = None  # (V, 3, 486) float32 or None
    parents: tuple[int, ...] = PARENTS
    part_labels: np.ndarray | None = None  # (V,) uint8 index into part_names
    part_names: tuple[str, ...] = ("body",)
    materials: dict[str, Material] = field(default_factory=dict)
    vertex_colors: np.ndarray | None = None  # (V, 3) float32, display sRGB 0..1
    has_arkit_expressions: bool = True
    source: str = "<memory>"
    # Imported glTF/VRM avatars: texture coordinates into one RGBA atlas (sRGB), each vertex's atlas cell
    # (u0, v0, width, height; a texture repeats inside its cell) and (alpha factor, alpha cutoff; cutoff < 0: opaque).
    uvs: np.ndarray | None = None  # (V, 2) float32
    texture: np.ndarray | None = None  # (H, W, 4) uint8
    texture_rects: np.ndarray | None = None  # (V, 4) float32
    alpha: np.ndarray | None = None  # (V, 2) float32
    # Per vertex: shade colour (linear), kind (0 lit as the studio lights, 1 MToon-like toon, 2 unlit), shift, toony.
    shading: np.ndarray | None = None  # (V, 6) float32
    cloth_weights: np.ndarray | None = None  # (V, 4) float32: how much each vertex follows each cloth spring (VRM springs)
    # VRM spring bones: per vertex its chain (index in spring_bones), place along it (in joints), share of its weight.
    spring_place: np.ndarray | None = None  # (V, 3) float32
    # MToon extras per vertex (None: no material asks for them). Rim: colour (linear), fresnel power, lift, lighting mix.
    # Outline: colour (linear), width, mode (1: width in metres, 2: share of the screen height), lighting mix.
    rim: np.ndarray | None = None  # (V, 6) float32
    outline: np.ndarray | None = None  # (V, 6) float32
    # The alpha-blended primitive (glTF alphaMode BLEND) each vertex belongs to, -1 for opaque and masked ones: the
    # renderer draws those after everything opaque, farthest first.
    blend_group: np.ndarray | None = None  # (V,) int32
    # Of a blended vertex's material: its render queue (lower first, before depth) and whether it writes depth (0/1).
    blend_queue: np.ndarray | None = None  # (V, 2) int32
    # MToon UV animation of a vertex's material: scroll x, scroll y (UV units per second), turn (radians per second).
    uv_motion: np.ndarray | None = None  # (V, 3) float32
    # VRM expression material binds: each vertex's row in `material_binds.table` (0: its material has none).
    material_slot: np.ndarray | None = None  # (V,) int32
    material_binds: MaterialBinds | None = None
    expression_drive: ExpressionDrive | None = None  # how expression columns past the 52 ARKit ones are driven
    spring_bones: SpringRig | None = None  # VRM spring bone chains and colliders (studio.avatar.springs)
    info: Mapping[str, object] = field(default_factory=dict)  # what an importer reports: meta, mapping, notes

    def __post_init__(self) -> None:
        validate_arrays(self)
        for value in self.__dict__.values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False

    @property
    def num_vertices(self) -> int:
        return int(self.v_template.shape[0])

    @property
    def num_betas(self) -> int:
        return int(self.shape_dirs.shape[2])

    def morph_weights(self, arkit: np.ndarray) -> np.ndarray:
        """The weights of every `expr_dirs` column for the engine's 52 ARKit weights (FrameState.arkit)."""
        return morph_weights(self.expression_drive, int(self.expr_dirs.shape[2]), arkit)

    def rest_joints(self, betas: np.ndarray | None = None) -> np.ndarray:
        """Joint positions (55, 3) of the shaped rest mesh."""
        vertices = self.v_template
        if betas is not None and self.num_betas:
            b = np.zeros(self.num_betas, np.float32)
            given = np.asarray(betas, np.float32).ravel()[: self.num_betas]
            b[: given.size] = given
            vertices = vertices + self.shape_dirs @ b
        return self.joint_regressor @ vertices

    def part_mask(self, part: str) -> np.ndarray:
        """Boolean mask of the vertices labelled `part`."""
        if self.part_labels is None or part not in self.part_names:
            return np.zeros(self.num_vertices, bool)
        return self.part_labels == self.part_names.index(part)

    def colors(self) -> np.ndarray:
        """Per-vertex base colour (V, 3): explicit vertex colours, else part materials."""
        if self.vertex_colors is not None:
            return np.asarray(self.vertex_colors, np.float32)
        out = np.empty((self.num_vertices, 3), np.float32)
        out[:] = (0.82, 0.66, 0.56)
        if self.part_labels is not None:
            for i, part in enumerate(self.part_names):
                if part in self.materials:
                    out[self.part_labels == i] = self.materials[part].color
        return out

    def regressor_vertices(self) -> np.ndarray:
        """Indices of the vertices the joint regressor reads."""
        return np.flatnonzero(np.abs(self.joint_regressor).sum(axis=0) > 0)


def _fail(model: AvatarModel, what: str) -> None:
    raise AvatarFormatError(f"{model.source}: {what}")


def _check_array(model: AvatarModel, key: str, array: np.ndarray, shape: tuple, kinds: str = "f") -> None:
    if not isinstance(array, np.ndarray):
        _fail(model, f"{key!r} is {type(array).__name__}, expected an array of shape {_shape_text(shape)}")
    if array.dtype.kind not in kinds:
        _fail(model, f"{key!r} has dtype {array.dtype}, expected {'floats' if kinds == 'f' else 'integers'}")
    if array.ndim != len(shape) or any(want is not None and got != want for got, want in zip(array.shape, shape)):
        _fail(model, f"{key!r} has shape {array.shape}, expected {_shape_text(shape)}")
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        bad = int((~np.isfinite(array)).sum())
        _fail(model, f"{key!r} holds {bad} NaN or infinite values; all values must be finite")


def _shape_text(shape: tuple) -> str:
    return "(" + ", ".join("N" if s is None else str(s) for s in shape) + ")"


def validate_arrays(model: AvatarModel) -> None:
    """Raise AvatarFormatError naming the source, key and problem of the first defect."""
    _check_array(model, "v_template", model.v_template, (None, 3))
    vertex_count = model.v_template.shape[0]
    if vertex_count < 4:
        _fail(model, f"'v_template' has {vertex_count} vertices; an avatar needs at least 4")
    _check_array(model, "faces", model.faces, (None, 3), kinds="iu")
    if model.faces.size == 0:
        _fail(model, "'faces' is empty; an avatar needs triangles")
    low, high = int(model.faces.min()), int(model.faces.max())
    if low < 0 or high >= vertex_count:
        _fail(model, f"'faces' indexes vertex {high if high >= vertex_count else low}; allowed 0..{vertex_count - 1}")
    _check_array(model, "J_regressor", model.joint_regressor, (NUM_JOINTS, vertex_count))
    _check_array(model, "weights", model.skin_weights, (vertex_count, NUM_JOINTS))
    row_sums = model.skin_weights.sum(axis=1)
    worst = int(np.argmax(np.abs(row_sums - 1)))
    if abs(row_sums[worst] - 1) > 1e-3:
        _fail(model, f"'weights' row {worst} sums to {row_sums[worst]:.4f}; skinning weights must sum to 1")
    _check_array(model, "shapedirs", model.shape_dirs, (vertex_count, 3, None))
    _check_array(model, "expression dirs", model.expr_dirs, (vertex_count, 3, None))
    drive = model.expression_drive
    columns = NUM_ARKIT if drive is None else drive.columns
    if model.expr_dirs.shape[2] != columns:
        _fail(model, f"'expression dirs' has {model.expr_dirs.shape[2]} columns, expected {columns} "
                     f"(52 ARKit shapes{'' if drive is None else ' and ' + ', '.join(drive.emotions)})")
    if model.pose_dirs is not None:
        _check_array(model, "posedirs", model.pose_dirs, (vertex_count, 3, NUM_POSE_CORRECTIVES))
    if len(model.parents) != NUM_JOINTS or model.parents[0] != -1 or any(
        not 0 <= p < j for j, p in enumerate(model.parents) if j
    ):
        _fail(model, "'kintree_table' is not a 55-joint tree with parents before children")
    if model.part_labels is not None:
        _check_array(model, "part_labels", model.part_labels, (vertex_count,), kinds="iu")
        if int(model.part_labels.max()) >= len(model.part_names):
            highest = int(model.part_labels.max())
            _fail(model, f"'part_labels' refers to part {highest}; only {len(model.part_names)} parts are named")
    if model.vertex_colors is not None:
        _check_array(model, "vertex_colors", model.vertex_colors, (vertex_count, 3))
    if model.texture is not None:
        _check_array(model, "texture", model.texture, (None, None, 4), kinds="u")
        for key, array, width in (("uvs", model.uvs, 2), ("texture_rects", model.texture_rects, 4),
                                  ("alpha", model.alpha, 2)):
            _check_array(model, key, array, (vertex_count, width))
    if model.shading is not None:
        _check_array(model, "shading", model.shading, (vertex_count, 6))
    if model.cloth_weights is not None:
        _check_array(model, "cloth_weights", model.cloth_weights, (vertex_count, 4))
    if model.spring_place is not None:
        _check_array(model, "spring_place", model.spring_place, (vertex_count, 3))
    for key, array in (("rim", model.rim), ("outline", model.outline)):
        if array is not None:
            _check_array(model, key, array, (vertex_count, 6))
    if model.blend_group is not None:
        _check_array(model, "blend_group", model.blend_group, (vertex_count,), kinds="i")
    if model.blend_queue is not None:
        _check_array(model, "blend_queue", model.blend_queue, (vertex_count, 2), kinds="i")
    if model.uv_motion is not None:
        _check_array(model, "uv_motion", model.uv_motion, (vertex_count, 3))
    if model.material_slot is not None:
        _check_array(model, "material_slot", model.material_slot, (vertex_count,), kinds="i")
        rows = 1 + (0 if model.material_binds is None else len(model.material_binds.materials))
        if not 0 <= int(model.material_slot.min()) <= int(model.material_slot.max()) < rows:
            _fail(model, f"'material_slot' holds {int(model.material_slot.max())}; allowed 0..{rows - 1}")


__all__ = ["ARKIT_NAMES", "AvatarFormatError", "AvatarModel", "Material", "validate_arrays"]
