"""An imported VRM's spring bones reach the screen: the viewport runs the avatar's own chains, after a quick head
turn its ponytail's tip is drawn lagging behind where a rigid ponytail would be, and once the head holds still it
is drawn where the rigid one is."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from render.offscreen import OffscreenRenderer
from studio.avatar.io import load_avatar
from studio.avatar.skeleton import JOINT_INDEX, NUM_JOINTS
from studio.frame import FrameState
from studio.precision import CLOTH_LEVELS

VRM1 = Path(__file__).resolve().parents[1] / "data" / "avatars" / "humanoid_vrm1.vrm"
FPS = 30.0
MID_TURN, HELD = 6, 120


def turning(frame: int) -> FrameState:
    """The head turns 0.8 rad in 0.3 s, then holds still."""
    pose = np.zeros((NUM_JOINTS, 3))
    pose[JOINT_INDEX["head"], 1] = 0.8 * min(1.0, frame / FPS / 0.3)
    return FrameState(media_time_s=frame / FPS, pose=pose)


def renders(level: str) -> tuple[dict[int, np.ndarray], np.ndarray, int]:
    """Frames 0..HELD drawn in turn with the cloth level's springs, seen from behind: the mid-turn and held ones,
    where the ponytail's tip is on screen mid-turn (rigid, pixels), and how many spring bone steps ran."""
    model = load_avatar(VRM1)
    head = model.rest_joints()[JOINT_INDEX["head"]]
    rest = model.v_template
    ponytail = (rest[:, 2] < head[2] - 0.1) & (rest[:, 1] > head[1] - 0.2)
    tip_ring = ponytail & (rest[:, 1] == rest[ponytail, 1].min())
    out = {}
    with OffscreenRenderer(model, size=(200, 200), camera="head") as renderer:
        renderer.view.set_cloth(CLOTH_LEVELS[level])
        renderer.view.orbit(180.0)
        for frame in range(HELD + 1):
            image = renderer.render(turning(frame))
            if frame in (MID_TURN, HELD):
                out[frame] = image
        tip = renderer.view.project(renderer.view.posed_vertices(turning(MID_TURN))[tip_ring]).mean(axis=0)
        cloth = renderer.view.avatar.cloth
        bone_steps = cloth.bones.steps_taken if cloth.bones is not None else 0
    return out, tip, bone_steps


def test_the_ponytail_lags_a_head_turn_on_screen_and_comes_to_rest():
    (swinging, _, steps), (rigid, tip, rigid_steps) = renders("high"), renders("low")
    assert steps >= HELD and rigid_steps == 0  # the avatar's chain ran (about two 60 Hz steps a frame), or not at all

    def differ(frame: int, around: np.ndarray | None = None) -> int:
        mask = np.abs(swinging[frame][..., :3].astype(int) - rigid[frame][..., :3].astype(int)).max(axis=-1) > 24
        if around is not None:
            x, y = np.round(around).astype(int)
            mask = mask[y - 6:y + 7, x - 6:x + 7]
        return int(mask.sum())

    assert differ(MID_TURN, tip) > 20, "the ponytail's tip is drawn where a rigid one would be mid-turn"
    assert differ(HELD) <= 2, f"{differ(HELD)} pixels still differ after the head held still for 3.8 s"
