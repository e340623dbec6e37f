"""The built-in idle animation: what the avatar does when nobody is speaking.

A pure function of time, so the GUI at display rate and `avatar-studio render` at any fps
show exactly the same motion for the same instant.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from studio.avatar.arkit import NUM_ARKIT
from studio.engine.hands import HandMotion
from studio.engine.motion import IdleMotion, MotionStyle, compose_motion
from studio.frame import FrameState

_NO_SPEECH_HEAD = (0.0, 0.0, 0.0)
_NO_GESTURE = (0.0, 0.0)


class IdleAnimator:
    """Breathing, blinks, gaze, small head motion and relaxed arms, deterministic for a seed."""

    def __init__(self, style: MotionStyle | None = None, seed: int | None = None, hands_mode: str | None = None) -> None:
        """`hands_mode` (studio.engine.hands) adds finger motion; None leaves the fingers at the rest pose."""
        style = style or MotionStyle()
        if seed is not None:
            style = dataclasses.replace(style, seed=int(seed))
        self.style = style
        self._idle = IdleMotion(style)
        self.hands = None if hands_mode is None else HandMotion(hands_mode, style.seed)

    def frame_at(self, media_time_s: float) -> FrameState:
        """The avatar at this instant, mouth at rest."""
        t = float(media_time_s)
        motion = compose_motion(self._idle, t, 0.0, _NO_SPEECH_HEAD, _NO_GESTURE, float("-inf"))
        if self.hands is not None:
            self.hands.apply(motion.pose, t)
        return FrameState(
            media_time_s=t,
            arkit=motion.apply(np.zeros(NUM_ARKIT, np.float32)),
            pose=motion.pose,
            transl=motion.transl,
            sequence=int(round(t * 1000.0)),
        )
