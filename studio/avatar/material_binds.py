"""VRM expression material binds: a material's base colour and texture scale/offset, moved by expression weights.

VRM 1.0 `materialColorBinds` / `textureTransformBinds` (and 0.x `materialValues`, read into the same terms by
`studio.avatar.vrm`) give a material's value at an expression's full weight; at weight w the value is
`initial + (target - initial) · w`, summed over expressions, as three-vrm applies them. The expression weights come
from the engine's 52 ARKit weights: an emotion (happy, ...) as `studio.avatar.emotions` reads it, any other
expression from the ARKit shapes that the avatar's mapping drives with it (blink from eyeBlink, aa from jawOpen, ...);
then `isBinary` and the overrides apply.

The renderer reads `MaterialBinds.table`: one row per bound material (row 0: no binds), three RGBA values each —
the colour added, the share of the vertex colour (and alpha factor) kept, and the texture (scale x, scale y, offset x,
offset y).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from studio.avatar.arkit import NUM_ARKIT
from studio.avatar.emotions import EMOTIONS, emotion_weights
from studio.avatar.vrm import Expression, resolve_weights

DRAWN_COLOR_TYPES = ("color",)  # the renderer moves the base colour factor; shade, rim, emission and outline colours not


@dataclass(frozen=True, eq=False)
class MaterialBinds:
    materials: tuple[int, ...]  # the glTF material of table row k + 1
    expressions: Mapping[str, Expression]  # every expression of the avatar, for its isBinary and override rules
    sources: Mapping[str, tuple[tuple[int, float], ...]]  # non-emotion expression -> (ARKit column, weight) read
    # Per bound material, its texture's own scale and offset (KHR_texture_transform; x, y, x, y), which the importer
    # leaves out of the texture coordinates so that the table applies it and the binds move from it.
    initial: tuple[tuple[float, float, float, float], ...] = ()

    def expression_weights(self, arkit: np.ndarray) -> dict[str, float]:
        """Weights 0..1 of the expressions with material binds, after isBinary and the overrides."""
        arkit = np.asarray(arkit, np.float32)[:NUM_ARKIT]
        emotions = emotion_weights(arkit)
        raw = {}
        for name in self.expressions:
            emotion = name.lower() if name.lower() in EMOTIONS else None
            raw[name] = emotions[emotion] if emotion else sum(float(arkit[c]) * w for c, w in self.sources.get(name, ()))
        return resolve_weights(self.expressions, raw)

    def table(self, arkit: np.ndarray) -> np.ndarray:
        """(1 + materials, 3, 4) float32: per row the colour added (linear RGBA), the share of the vertex colour and
        alpha factor kept (RGBA), and the texture's scale and offset (x, y, x, y)."""
        rows = np.zeros((1 + len(self.materials), 3, 4), np.float32)
        rows[:, 1] = 1.0
        rows[:, 2] = (1.0, 1.0, 0.0, 0.0)
        if self.initial:
            rows[1:, 2] = self.initial
        initial = rows[:, 2].copy()
        slot = {material: k + 1 for k, material in enumerate(self.materials)}
        for name, weight in self.expression_weights(arkit).items():
            if weight == 0.0:
                continue
            expression = self.expressions[name]
            for material, kind, target in expression.colors:
                if kind in DRAWN_COLOR_TYPES and material in slot:
                    rows[slot[material], 0] += weight * np.asarray(target, np.float32)
                    rows[slot[material], 1] -= weight
            for material, scale, offset in expression.transforms:
                if material in slot:
                    k = slot[material]
                    rows[k, 2] += weight * (np.array([*scale, *offset], np.float32) - initial[k])
        return rows


def bound_materials(expressions: Mapping[str, Expression]) -> tuple[int, ...]:
    """The materials some expression changes in a way the renderer draws, in order."""
    found = {material for x in expressions.values() for material, kind, _ in x.colors if kind in DRAWN_COLOR_TYPES}
    found |= {material for x in expressions.values() for material, _, _ in x.transforms}
    return tuple(sorted(found))


def undrawn_binds(expressions: Mapping[str, Expression]) -> list[str]:
    """Colour binds the renderer does not draw, as 'expression: type' (for the avatar's notes)."""
    return sorted({f"{x.name}: {kind}" for x in expressions.values() for _, kind, _ in x.colors
                   if kind not in DRAWN_COLOR_TYPES})


__all__ = ["DRAWN_COLOR_TYPES", "MaterialBinds", "bound_materials", "undrawn_binds"]
