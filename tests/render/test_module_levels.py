"""The renderer's module levels change counted work: vertices drawn per LOD, cloth springs stepped per level."""

from __future__ import annotations

import numpy as np
import pytest

from render.offscreen import OffscreenRenderer
from studio.avatar.io import default_avatar_path, load_avatar
from studio.avatar.lod import lod_path
from studio.avatar.skeleton import JOINT_INDEX, NUM_JOINTS
from studio.frame import FrameState
from studio.precision import CLOTH_LEVELS


def nodding(count: int = 24, fps: float = 30.0) -> list[FrameState]:
    states = []
    for i in range(count):
        pose = np.zeros((NUM_JOINTS, 3), np.float32)
        pose[JOINT_INDEX["head"]] = (0.35 * np.sin(2 * np.pi * 1.2 * i / fps), 0.3 * np.sin(2 * np.pi * 0.9 * i / fps), 0)
        pose[JOINT_INDEX["spine3"]] = (0.0, 0.2 * np.sin(2 * np.pi * 0.8 * i / fps), 0)
        states.append(FrameState(media_time_s=i / fps, pose=pose, sequence=i))
    return states


@pytest.fixture(scope="module")
def full():
    return load_avatar(default_avatar_path())


def test_lod_levels_draw_fewer_vertices(full):
    drawn = {}
    for lod in ("high", "medium", "low"):
        model = load_avatar(lod_path("default", lod, False)) if lod != "high" else full
        with OffscreenRenderer(model, size=(160, 120)) as renderer:
            for state in nodding(3):
                renderer.render(state)
            drawn[lod] = renderer.view.avatar.vertices_drawn / 3
    assert drawn["high"] > drawn["medium"] > drawn["low"]


def test_cloth_levels_step_springs_and_move_the_hair(full):
    states = nodding()
    results = {}
    for level, regions in CLOTH_LEVELS.items():
        with OffscreenRenderer(full, size=(240, 240), camera="head") as renderer:
            renderer.view.set_cloth(regions)
            images = [renderer.render(state) for state in states]
            results[level] = (renderer.view.avatar.cloth.springs_stepped, images[-1])
    assert results["high"][0] > results["medium"][0] > results["low"][0] == 0
    assert np.abs(results["high"][1].astype(int) - results["low"][1].astype(int)).max() > 40  # the hair swung
