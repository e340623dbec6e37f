"""Finger motion for the `hands` module: fixed relaxed hands, a relaxed curl that varies, or gesture shapes.

Coordinates as in motion.py: joint rotations are axis-angle in the parent's rest (T-pose) frame,
where the left arm points +x with the palm down. Curling a left finger towards the palm turns it
about -z; a right finger about +z. The thumb folds about the forearm axis (x) instead.
"""

from __future__ import annotations

import math

import numpy as np

from studio.avatar.skeleton import HAND_JOINTS_LEFT, HAND_JOINTS_RIGHT

HAND_MODES = ("articulated", "relaxed", "fixed")
_FINGERS = ("index", "middle", "pinky", "ring", "thumb")  # skeleton order, three joints each
# Relaxed curl per finger (radians at the first knuckle; the next two joints bend 1.1x and 0.8x that).
_RELAXED = {"index": 0.22, "middle": 0.30, "pinky": 0.42, "ring": 0.36, "thumb": 0.12}
# Gesture hand shapes (per-finger curl), picked per beat: open palm, a precision pinch, a loose point.
GESTURE_SHAPES: tuple[dict[str, float], ...] = (
    {"index": 0.02, "middle": 0.04, "pinky": 0.08, "ring": 0.06, "thumb": -0.05},
    {"index": 0.55, "middle": 0.25, "pinky": 0.35, "ring": 0.30, "thumb": 0.45},
    {"index": 0.05, "middle": 0.85, "pinky": 1.0, "ring": 0.95, "thumb": 0.40},
)
_JOINT_SCALE = (1.0, 1.1, 0.8)


def _curl_rows(curls: dict[str, float], side: str) -> np.ndarray:
    """(15, 3) axis-angle rows of one hand for these per-finger curls."""
    sign = -1.0 if side == "left" else 1.0
    rows = np.zeros((15, 3), np.float32)
    for f, finger in enumerate(_FINGERS):
        for k, scale in enumerate(_JOINT_SCALE):
            angle = curls[finger] * scale
            rows[3 * f + k] = (sign * angle, 0.0, 0.0) if finger == "thumb" else (0.0, 0.0, sign * angle)
    return rows


class HandMotion:
    """Writes the 30 finger joints into a pose; `joints_updated` counts the finger joints computed."""

    def __init__(self, mode: str = "articulated", seed: int = 0) -> None:
        if mode not in HAND_MODES:
            raise ValueError(f"hands mode {mode!r} is not known; allowed: {', '.join(HAND_MODES)}")
        self.mode = mode
        rng = np.random.default_rng([seed, 4242])
        self._freqs = rng.uniform(0.05, 0.22, (2, 2))
        self._phases = rng.uniform(0.0, 2.0 * math.pi, (2, 2))
        self._fixed = np.concatenate([_curl_rows(_RELAXED, "left"), _curl_rows(_RELAXED, "right")])
        self._shape = [0, 0]  # gesture shape per hand (left, right)
        self._lifting = [False, False]  # whether that hand is in a beat
        self.joints_updated = 0

    def _variation(self, side: int, t: float) -> float:
        """-1..1: a slow, smooth wander of how curled the relaxed hand is."""
        f, p = self._freqs[side], self._phases[side]
        return 0.6 * math.sin(2 * math.pi * f[0] * t + p[0]) + 0.4 * math.sin(2 * math.pi * f[1] * t + p[1])

    def apply(self, pose: np.ndarray, t: float, gesture: tuple[float, float] = (0.0, 0.0),
              shape_seed: int = 0) -> None:
        """Set the finger joints of `pose` (55, 3) in place for time t and the arms' gesture lift (0..1.2)."""
        if self.mode == "fixed":
            pose[HAND_JOINTS_LEFT[0]:HAND_JOINTS_RIGHT[-1] + 1] = self._fixed
            return
        for side, (name, joints) in enumerate((("left", HAND_JOINTS_LEFT), ("right", HAND_JOINTS_RIGHT))):
            relax = 1.0 + 0.45 * self._variation(side, t)
            curls = {finger: base * relax for finger, base in _RELAXED.items()}
            if self.mode == "articulated":
                lift = min(max(float(gesture[side]), 0.0), 1.0)
                lifting = lift > 0.05
                if lifting and not self._lifting[side]:  # a new beat: pick its hand shape
                    self._shape[side] = (shape_seed + side) % len(GESTURE_SHAPES)
                self._lifting[side] = lifting
                target = GESTURE_SHAPES[self._shape[side]]
                curls = {finger: curls[finger] + (target[finger] - curls[finger]) * lift for finger in curls}
            pose[joints[0]:joints[-1] + 1] = _curl_rows(curls, name)
            self.joints_updated += len(joints)
