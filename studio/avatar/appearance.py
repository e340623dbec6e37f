"""A persona's look on an avatar: colours for skin, lips, hair, brows, eyes and clothing.

Colours are applied as a tint that keeps the avatar's own shading detail (lip border, cheek
warmth, hair strands, a hem): each vertex takes the persona's colour scaled by how light it was
against its part's mean, so the part's mean becomes the persona's colour and a darker seam stays a
darker shade of the new colour instead of swinging to another hue. Eyes tint the iris only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from studio.avatar.model import AvatarModel

PART_GROUPS: dict[str, tuple[str, ...]] = {
    "skin": ("skin", "head", "hands", "eyelids", "body", "face"),
    "lips": ("lips",),
    "hair": ("hair",),
    "brows": ("brows",),
    "eyes": ("eyes", "eye"),
    "shirt": ("shirt",),
    "trousers": ("trousers",),
    "shoes": ("shoes",),
}
_LUMA = np.array([0.299, 0.587, 0.114], np.float32)
_WHITE_MIN_CHANNEL = 0.7  # eye vertices with every channel above this are the white: left alone


def part_color(model: AvatarModel, part: str) -> tuple[float, float, float] | None:
    """Mean colour (sRGB 0..1) of a colour part on this avatar, None if the avatar has no such part."""
    mask = _mask(model, part, model.colors())
    if not mask.any():
        return None
    return tuple(float(c) for c in model.colors()[mask].mean(axis=0))


def _mask(model: AvatarModel, part: str, colors: np.ndarray) -> np.ndarray:
    mask = np.zeros(model.num_vertices, bool)
    for name in PART_GROUPS.get(part, (part,)):
        mask |= model.part_mask(name)
    if part == "eyes":
        mask &= colors.min(axis=1) <= _WHITE_MIN_CHANNEL
    return mask


def with_colors(model: AvatarModel, colors: Mapping[str, tuple[float, float, float]]) -> AvatarModel:
    """A copy of the avatar with these parts tinted; the model itself is unchanged (None: nothing to do)."""
    if not colors:
        return model
    base = model.colors()
    out = base.copy()
    for part, rgb in colors.items():
        mask = _mask(model, part, base)
        if not mask.any():
            continue
        luma = base[mask] @ _LUMA
        relative = luma / max(float(luma.mean()), 1e-3)
        out[mask] = np.clip(relative[:, None] * np.asarray(rgb, np.float32)[None, :], 0.0, 1.0)
    return dataclasses.replace(model, vertex_colors=out.astype(np.float32))
