"""Persona colours tint the avatar's parts and keep its shading detail; eyes keep their whites."""

from __future__ import annotations

import numpy as np

from studio.avatar.appearance import part_color, with_colors
from studio.avatar.io import load_avatar_or_default


def test_colours_move_each_part_mean_and_leave_the_rest():
    model, _ = load_avatar_or_default(None)
    tinted = with_colors(model, {"shirt": (0.8, 0.1, 0.2), "eyes": (0.1, 0.5, 0.1)})
    assert np.allclose(part_color(tinted, "shirt"), (0.8, 0.1, 0.2), atol=0.03)
    assert np.allclose(part_color(tinted, "eyes"), (0.1, 0.5, 0.1), atol=0.03)
    assert part_color(tinted, "hair") == part_color(model, "hair")
    whites = model.part_mask("eyes") & (model.colors().mean(axis=1) > 0.8)
    assert whites.any() and np.array_equal(tinted.colors()[whites], model.colors()[whites])
    shirt = model.part_mask("shirt")
    assert tinted.colors()[shirt].std(axis=0).sum() > 0, "the tint keeps the variation within a part"
    assert with_colors(model, {}) is model
