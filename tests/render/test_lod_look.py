"""Every mesh level the viewport draws is the avatar in the current look: colours and body shape included."""

from __future__ import annotations

import numpy as np
import pytest

from render.lod import LodLibrary
from studio.avatar.io import default_avatar_path, load_avatar
from studio.avatar.lod import lod_path
from studio.avatar.look import Look, drawn_model, level_of_detail, with_betas


@pytest.fixture(scope="module")
def shipped_avatar():
    return load_avatar(default_avatar_path())


def test_a_level_of_detail_is_built_in_the_look_and_a_new_look_replaces_it(shipped_avatar):
    teal = Look.of({"shirt": (0.1, 0.6, 0.6)}, [1.0])
    library = LodLibrary(shipped_avatar, teal)
    key = library.request("medium", True)
    assert key == ("medium", True) and library.wait(key, 120), library.error(key)
    model, mesh = library.get(key)
    level = load_avatar(lod_path("default", "medium", True))
    assert model.num_vertices == level.num_vertices < shipped_avatar.num_vertices
    shirt = model.part_mask("shirt")
    assert np.allclose(model.colors()[shirt].mean(axis=0), (0.1, 0.6, 0.6), atol=0.02)
    taller = level.v_template + level.shape_dirs[:, :, 0]
    assert np.allclose(mesh.rest, taller[mesh.order], atol=1e-5)  # what the GPU skins: the shaped rest mesh

    orange = Look.of({"shirt": (0.9, 0.5, 0.1)})
    library.set_look(orange)
    assert library.get(key) is None  # the teal mesh is never handed out for the orange look
    assert library.wait(library.request("medium", True), 120)
    model, _ = library.get(key)
    assert np.allclose(model.colors()[model.part_mask("shirt")].mean(axis=0), (0.9, 0.5, 0.1), atol=0.02)
    assert np.allclose(model.v_template, level.v_template)


def test_the_drawn_model_is_one_function_of_avatar_look_and_level(shipped_avatar):
    look = Look.of({"skin": (0.5, 0.35, 0.25)}, [0.0, 1.5, 0.0])
    assert look.betas == (0.0, 1.5)  # trailing zeros say nothing
    full = drawn_model(shipped_avatar, look)
    assert np.allclose(full.v_template, with_betas(shipped_avatar, [0.0, 1.5]).v_template)
    low = drawn_model(shipped_avatar, look, "low", False)
    assert low.num_vertices == level_of_detail(shipped_avatar, "low", False).num_vertices < full.num_vertices
    assert drawn_model(shipped_avatar) is shipped_avatar  # the bare look at full detail is the avatar itself
