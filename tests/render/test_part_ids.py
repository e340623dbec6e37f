"""The part-ID render mode: every pixel names the part that covers it, exactly."""

from __future__ import annotations

import numpy as np
import pytest

from render.offscreen import OffscreenRenderer
from render.part_ids import BACKGROUND_ID, decode, face_labels, id_color
from studio.avatar.arkit import ARKIT_NAMES
from studio.frame import FrameState


def test_id_colours_are_distinct_and_background_is_black():
    colours = {tuple(id_color(k)) for k in range(256)}
    assert len(colours) == 256
    assert tuple(id_color(BACKGROUND_ID)) == (0, 0, 0)


def test_a_triangle_takes_the_label_most_of_its_corners_carry(ellipsoid_avatar):
    labels = face_labels(ellipsoid_avatar)
    corners = ellipsoid_avatar.part_labels[ellipsoid_avatar.faces]
    unanimous = (corners == corners[:, :1]).all(axis=1)
    assert np.array_equal(labels[unanimous], corners[unanimous, 0])
    two_to_one = (corners[:, 1] == corners[:, 2]) & (corners[:, 0] != corners[:, 1])
    assert two_to_one.any() and np.array_equal(labels[two_to_one], corners[two_to_one, 1])


def test_part_id_frames_hold_only_part_colours_where_the_shaded_frame_shows_the_avatar(ellipsoid_avatar):
    jaw = np.zeros(len(ARKIT_NAMES), np.float32)
    jaw[ARKIT_NAMES.index("jawOpen")] = 1.0
    state = FrameState(arkit=jaw)
    with OffscreenRenderer(ellipsoid_avatar, size=(320, 180), camera="head", mode="part_id") as renderer:
        ids = decode(renderer.render(state), ellipsoid_avatar)
    with OffscreenRenderer(ellipsoid_avatar, size=(320, 180), camera="head", background="transparent") as renderer:
        shaded = renderer.render(state)
    names = ellipsoid_avatar.part_names
    assert np.array_equal(ids > 0, shaded[..., 3] > 0), "the ID render covers exactly the pixels the avatar covers"
    seen = {names[k - 1] for k in np.unique(ids) if k}
    assert {"skin", "lips", "eyes"} <= seen


def test_part_id_mode_refuses_supersampling_and_unknown_modes(ellipsoid_avatar):
    with pytest.raises(ValueError, match="supersampled"):
        OffscreenRenderer(ellipsoid_avatar, size=(64, 64), mode="part_id", supersample=2)
    with pytest.raises(ValueError, match="allowed: shaded, part_id"):
        OffscreenRenderer(ellipsoid_avatar, size=(64, 64), mode="normals")


def test_decode_refuses_a_shaded_frame(ellipsoid_avatar):
    with OffscreenRenderer(ellipsoid_avatar, size=(64, 64), camera="head") as renderer:
        shaded = renderer.render()
    with pytest.raises(ValueError, match="not part IDs"):
        decode(shaded, ellipsoid_avatar)
