"""The SMPL-X 55-joint kinematic tree: names, order and parents."""

from __future__ import annotations

_FINGERS = ("index", "middle", "pinky", "ring", "thumb")

JOINT_NAMES: tuple[str, ...] = (
    "pelvis", "left_hip", "right_hip", "spine1", "left_knee", "right_knee", "spine2",
    "left_ankle", "right_ankle", "spine3", "left_foot", "right_foot", "neck",
    "left_collar", "right_collar", "head", "left_shoulder", "right_shoulder",
    "left_elbow", "right_elbow", "left_wrist", "right_wrist", "jaw",
    "left_eye_smplhf", "right_eye_smplhf",
) + tuple(f"{side}_{finger}{k}" for side in ("left", "right") for finger in _FINGERS for k in (1, 2, 3))

NUM_JOINTS = len(JOINT_NAMES)
JOINT_INDEX: dict[str, int] = {name: i for i, name in enumerate(JOINT_NAMES)}


def _parents() -> tuple[int, ...]:
    parents = [-1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 12, 13, 14, 16, 17, 18, 19, 15, 15, 15]
    for wrist in (JOINT_INDEX["left_wrist"], JOINT_INDEX["right_wrist"]):
        for _finger in _FINGERS:
            base = len(parents)
            parents += [wrist, base, base + 1]
    return tuple(parents)


PARENTS: tuple[int, ...] = _parents()
NUM_BODY_JOINTS = 21  # joints 1..21, SMPL-X `body_pose`
HAND_JOINTS_LEFT = tuple(range(25, 40))
HAND_JOINTS_RIGHT = tuple(range(40, 55))

assert NUM_JOINTS == 55 and len(PARENTS) == 55
