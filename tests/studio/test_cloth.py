"""Cloth springs: regions weighted on the default avatar, lag under acceleration, off costs nothing."""

from __future__ import annotations

import numpy as np

from studio.avatar.io import default_avatar_path, load_avatar
from studio.cloth import CLOTH_REGIONS, MAX_LAG_M, ClothSim, region_weights


def test_default_avatar_has_weighted_hair_shirt_and_sleeves():
    weights = region_weights(load_avatar(default_avatar_path()))
    assert (weights.max(axis=0) > 0.9).all()  # every region has a free edge
    assert (weights.sum(axis=1) <= 1.0 + 1e-6).all()  # a vertex follows one region


def _shake(sim: ClothSim, seconds: float = 1.0, fps: float = 30.0):
    lags = []
    for i in range(int(seconds * fps)):
        t = i / fps
        anchors = np.zeros((len(CLOTH_REGIONS), 3))
        anchors[:, 0] = 0.05 * np.sin(2 * np.pi * 1.5 * t)  # head and torso swaying 5 cm
        lags.append(np.abs(sim.step(t, anchors)).max())
    return np.array(lags)


def test_springs_lag_a_moving_anchor_bounded_and_count_their_steps():
    everything, hair_only, off = ClothSim(CLOTH_REGIONS), ClothSim(("hair", "shirt")), ClothSim()
    lag_all, lag_some, lag_off = _shake(everything), _shake(hair_only), _shake(off)
    assert lag_all.max() > 0.002 and lag_all.max() <= MAX_LAG_M * 2
    assert lag_some.max() > 0.002 and lag_off.max() == 0.0 and off.springs_stepped == 0
    assert everything.springs_stepped == 2 * hair_only.springs_stepped > 0


def test_a_jump_in_time_resets_instead_of_flinging():
    sim = ClothSim(CLOTH_REGIONS)
    _shake(sim)
    far = np.full((len(CLOTH_REGIONS), 3), 5.0)
    assert np.abs(sim.step(100.0, far)).max() == 0.0
