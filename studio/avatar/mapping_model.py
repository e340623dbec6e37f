"""The mapping of an imported avatar as the mapping dialog edits it: one row per engine channel, with no Qt.

A row is one of the 52 ARKit shapes (driven by morph targets or VRM expressions, with weights) or one humanoid
bone the engine turns (driven through a node of the file). Each says how it was matched: by ARKit `name`, by
`perfect sync` (a VRM expression of that name), the VRM vowel/blink `fallback`, the humanoid map of the `VRM`,
a `guess` from node names, the mapping `file`, `edited` here, or `missing`. The dialog binds to it: a widget
edit calls `set_source`/`set_weight`, the widget redraws a row on `row_changed`. Saving writes only the rows
from the file or edited here (`studio.avatar.mapping_file.write_mapping`); every other row stays automatic.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
from psygnal import Signal

from studio.avatar.arkit import ARKIT_INDEX, ARKIT_NAMES, NUM_ARKIT
from studio.avatar.gltf import read_gltf
from studio.avatar.imported import HUMANOID_TO_SMPLX, automatic_humanoid, automatic_mapping, avatar_from_scene, binds_anything
from studio.avatar.mapping_file import (
    UNMAPPED,
    MappingEntryError,
    Source,
    mapping_path,
    parse_mapping,
    read_mapping,
    write_mapping,
)
from studio.avatar.model import AvatarFormatError, AvatarModel
from studio.avatar.skeleton import JOINT_INDEX, NUM_JOINTS
from studio.avatar.vrm import read_vrm
from studio.frame import FrameState

NONE = "none"
EXPRESSION_PREFIX = "expression: "  # how a VRM expression reads in a row's choices, beside the morph targets
BONE_NAMES = tuple(HUMANOID_TO_SMPLX)
PREVIEW_TURN_RAD = 0.7  # a bone's test slider at 1 turns it this far
_FACE_BONES = {"neck", "head", "jaw", "leftEye", "rightEye"}


@dataclasses.dataclass(frozen=True)
class MappingRow:
    """One engine channel and what drives it. `sources`: (kind, name, weight), kind `morph`, `expression` or
    `node` (a bone's); empty when nothing does."""

    channel: str
    kind: str  # "arkit" or "bone"
    sources: tuple[Source, ...]
    match: str

    @property
    def missing(self) -> bool:
        return not self.sources

    @property
    def source_text(self) -> str:
        """What drives it, as the table shows it: `jawOpen`, `expression: aa ×0.5`, `a + b ×0.5`, `none`."""
        if not self.sources:
            return NONE
        return " + ".join((EXPRESSION_PREFIX if kind == "expression" else "") + name
                          + ("" if weight == 1.0 else f" ×{weight:g}") for kind, name, weight in self.sources)

    @property
    def choice(self) -> str:
        """The first source as a choice of `MappingModel.choices` (`none` when nothing drives it)."""
        if not self.sources:
            return NONE
        kind, name, _ = self.sources[0]
        return EXPRESSION_PREFIX + name if kind == "expression" else name

    @property
    def weight(self) -> float | None:
        """The one source's weight; None when a weight cannot be set alone (no source, several, or a bone)."""
        return self.sources[0][2] if len(self.sources) == 1 and self.kind == "arkit" else None

    def matches(self, text: str) -> bool:
        """Whether the filter `text` (any case) is in the channel, its sources or how it was matched."""
        text = text.strip().lower()
        return not text or any(text in part.lower() for part in (self.channel, self.source_text, self.match))


class MappingModel:
    """The editable mapping of one `.glb`/`.gltf`/`.vrm` avatar file.

    `row_changed(index)` after an edit of that row; `dirty_changed(bool)` when unsaved edits appear or go;
    `saved(path)` after the mapping file was written. `file_problem` says why an existing mapping file could not
    be read (the rows are then the automatic mapping, and saving keeps that file as `NAME.mapping.yaml.bad`).
    """

    row_changed = Signal(int)
    dirty_changed = Signal(bool)
    saved = Signal(object)

    def __init__(self, avatar_path: str | os.PathLike) -> None:
        self.avatar_path = Path(avatar_path)
        self.scene = read_gltf(self.avatar_path)
        self.vrm = read_vrm(self.scene)
        self.file_problem: str | None = None
        arkit_file: dict[str, list[Source]] = {}
        bones_file: dict[str, int] = {}
        if self.mapping_path.is_file():
            try:
                arkit_file, bones_file = read_mapping(self.mapping_path, self.scene, self.vrm, BONE_NAMES)
            except AvatarFormatError as error:
                self.file_problem = str(error)
        self.morph_names = tuple(sorted({name for piece in self.scene.primitives for name in piece.target_names}))
        self.node_names = tuple(self.scene.node_names)
        self.rows: list[MappingRow] = self._arkit_rows(arkit_file) + self._bone_rows(bones_file)
        self._saved_rows = list(self.rows)
        self.index = {(row.kind, row.channel): i for i, row in enumerate(self.rows)}

    @property
    def mapping_path(self) -> Path:
        return mapping_path(self.avatar_path)

    def _arkit_rows(self, from_file: dict[str, list[Source]]) -> list[MappingRow]:
        by_name, fallback = automatic_mapping(self.scene, self.vrm)
        rows = []
        for shape in ARKIT_NAMES:
            if shape in from_file:
                sources, match = from_file[shape], "file"
            elif shape in by_name:
                sources = by_name[shape]
                match = "perfect sync" if any(kind == "expression" for kind, _, _ in sources) else "name"
            elif shape in fallback:
                sources, match = fallback[shape], "fallback"
            else:
                sources, match = [], "missing"
            rows.append(MappingRow(shape, "arkit", tuple(sources), match))
        return rows

    def _bone_rows(self, from_file: dict[str, int]) -> list[MappingRow]:
        automatic = automatic_humanoid(self.scene, self.vrm)
        rows = []
        for bone in BONE_NAMES:
            if bone in from_file:
                node, match = from_file[bone], "file"
            elif bone in automatic:
                node, match = automatic[bone], "VRM" if self.vrm.humanoid else "guess"
            else:
                node, match = UNMAPPED, "missing"
            sources = () if node == UNMAPPED else (("node", self.node_names[node], 1.0),)
            rows.append(MappingRow(bone, "bone", sources, match))
        return rows

    # ---- reading

    def row(self, channel: str) -> MappingRow:
        """The row of an ARKit shape or a humanoid bone (the names do not overlap)."""
        kind = "arkit" if channel in ARKIT_INDEX else "bone"
        return self.rows[self.index[(kind, channel)]]

    def choices(self, index: int) -> list[str]:
        """What a row may be driven by: `none`, then the morph targets and expressions, or the nodes."""
        if self.rows[index].kind == "bone":
            return [NONE, *self.node_names]
        return [NONE, *self.morph_names, *(EXPRESSION_PREFIX + name for name, expression in sorted(self.vrm.expressions.items())
                                            if binds_anything(expression))]

    def filtered(self, text: str, missing_only: bool = False) -> list[int]:
        """Indices of the rows the filter shows."""
        return [i for i, row in enumerate(self.rows) if row.matches(text) and (row.missing or not missing_only)]

    @property
    def dirty(self) -> bool:
        return self.rows != self._saved_rows

    def summary(self) -> str:
        """One line: how many of the 52 shapes and of the engine's bones are driven, and from where."""
        broken = {problem.split(":", 1)[0].removeprefix("Row ") for problem in self.problems()}
        shapes = sum(not row.missing and row.channel not in broken for row in self.rows if row.kind == "arkit")
        bones = sum(not row.missing and row.channel not in broken for row in self.rows if row.kind == "bone")
        where = (f"mapping file {self.mapping_path.name} (unreadable: the automatic mapping is shown)" if self.file_problem
                 else f"mapping file {self.mapping_path.name}" if self.mapping_path.is_file() else "no mapping file yet")
        return f"{shapes} of {NUM_ARKIT} ARKit shapes and {bones} of {len(BONE_NAMES)} bones driven; {where}"

    # ---- editing

    def set_source(self, index: int, choice: str) -> None:
        """Drive row `index` by one choice (as `choices` spells it, or a name typed in): the weight of a single
        source is kept. An unknown name is kept too, and `problems` names the row, so nothing typed is lost."""
        row = self.rows[index]
        choice = choice.strip()
        if not choice or choice == NONE:
            sources: tuple[Source, ...] = ()
        elif row.kind == "bone":
            sources = (("node", choice, 1.0),)
        else:
            weight = row.weight if row.weight is not None else 1.0
            if choice.startswith(EXPRESSION_PREFIX):
                sources = (("expression", choice.removeprefix(EXPRESSION_PREFIX).strip(), weight),)
            else:
                sources = (("morph", choice, weight),)
        self._replace(index, sources)

    def set_weight(self, index: int, weight: float) -> None:
        """The weight of a row's one ARKit source (ValueError for a bone, a row with none or several)."""
        row = self.rows[index]
        if row.weight is None:
            raise ValueError(f"row {row.channel}: a weight is set on an ARKit channel driven by exactly one source")
        kind, name, _ = row.sources[0]
        self._replace(index, ((kind, name, float(weight)),))

    def _replace(self, index: int, sources: tuple[Source, ...]) -> None:
        row = self.rows[index]
        if sources == row.sources:
            return
        was_dirty = self.dirty
        self.rows[index] = dataclasses.replace(row, sources=sources, match="edited")
        self.row_changed.emit(index)
        if self.dirty != was_dirty:
            self.dirty_changed.emit(self.dirty)

    # ---- checking, previewing, saving

    def _entries(self, rows: list[MappingRow] | None = None) -> tuple[dict[str, list[Source]], dict[str, str | None]]:
        """The mapping-file entries: the rows from the file or edited here."""
        arkit, bones = {}, {}
        for row in rows if rows is not None else self.rows:
            if row.match not in ("file", "edited"):
                continue
            if row.kind == "arkit":
                arkit[row.channel] = list(row.sources)
            else:
                bones[row.channel] = row.sources[0][1] if row.sources else None
        return arkit, bones

    def _row_data(self, row: MappingRow) -> dict:
        arkit, bones = self._entries([row])
        items = {shape: [{kind: name, "weight": weight} for kind, name, weight in sources] or NONE
                 for shape, sources in arkit.items()}
        return {"arkit": items, "bones": {bone: node or NONE for bone, node in bones.items()}}

    def problems(self) -> list[str]:
        """One line per row the avatar cannot be driven by, naming the row: `Row jawOpen: morph target ...`."""
        out = []
        for row in self.rows:
            if row.match not in ("file", "edited"):
                continue
            try:
                parse_mapping(self._row_data(row), "", self.scene, self.vrm, BONE_NAMES)
            except MappingEntryError as error:
                out.append(f"Row {row.channel}: {error.problem}")
        return out

    def preview_avatar(self) -> AvatarModel:
        """The avatar as these rows drive it (rows that cannot be read left automatic), for the preview."""
        arkit: dict[str, list[Source]] = {}
        bones: dict[str, int] = {}
        for row in self.rows:
            if row.match not in ("file", "edited"):
                continue
            try:
                found_arkit, found_bones = parse_mapping(self._row_data(row), "", self.scene, self.vrm, BONE_NAMES)
            except MappingEntryError:
                continue
            arkit.update(found_arkit)
            bones.update(found_bones)
        return avatar_from_scene(self.scene, self.vrm, arkit, bones)

    def preview_frame(self, index: int, amount: float) -> FrameState:
        """Rest, with row `index`'s channel at `amount` (0..1): the ARKit weight, or the bone turned by up to
        PREVIEW_TURN_RAD (the jaw opens, legs swing forward, arms and fingers bend, the rest turn sideways)."""
        row = self.rows[index]
        amount = float(np.clip(amount, 0.0, 1.0))
        if row.kind == "arkit":
            weights = np.zeros(NUM_ARKIT, np.float32)
            weights[ARKIT_INDEX[row.channel]] = amount
            return FrameState(arkit=weights)
        pose = np.zeros((NUM_JOINTS, 3), np.float32)
        axis = (1, 0, 0) if row.channel == "jaw" or "Leg" in row.channel or "Foot" in row.channel or "Toes" in row.channel \
            else (0, 0, 1) if row.channel.startswith(("left", "right")) and not row.channel.endswith("Eye") else (0, 1, 0)
        pose[JOINT_INDEX[HUMANOID_TO_SMPLX[row.channel]]] = np.asarray(axis, np.float32) * amount * PREVIEW_TURN_RAD
        return FrameState(pose=pose)

    def previews_face(self, index: int) -> bool:
        """Whether row `index` is best seen with the camera on the head (face shapes, head, neck, eyes, jaw)."""
        row = self.rows[index]
        return row.kind == "arkit" or row.channel in _FACE_BONES

    def save(self) -> Path:
        """Write the mapping file beside the avatar. MappingEntryError (its message naming the row, the file left
        as it was) when a row cannot be saved; an unreadable earlier file is kept as `NAME.mapping.yaml.bad`."""
        problems = self.problems()
        if problems:
            first = problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
            raise MappingEntryError(str(self.mapping_path), "not saved", first)
        arkit, bones = self._entries()
        keep = self.mapping_path.name + ".bad" if self.file_problem else None
        path = write_mapping(self.avatar_path, arkit, bones, self.scene, self.vrm, BONE_NAMES, keep_previous_as=keep)
        self.file_problem = None
        was_dirty = self.dirty
        self._saved_rows = list(self.rows)
        if was_dirty:
            self.dirty_changed.emit(False)
        self.saved.emit(path)
        return path


__all__ = ["BONE_NAMES", "EXPRESSION_PREFIX", "NONE", "MappingModel", "MappingRow"]
