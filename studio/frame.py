"""FrameState: the one immutable value handed from the engine to everything downstream."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from studio.avatar.arkit import ARKIT_NAMES, NUM_ARKIT
from studio.avatar.skeleton import JOINT_INDEX, NUM_JOINTS


def _frozen(array: np.ndarray | None, shape: tuple[int, ...], name: str) -> np.ndarray:
    out = np.zeros(shape, np.float32) if array is None else np.array(array, np.float32, copy=True)
    if out.shape != shape:
        raise ValueError(f"FrameState.{name} has shape {out.shape}, expected {shape}")
    out.flags.writeable = False
    return out


@dataclass(frozen=True, eq=False)
class FrameState:
    """What the avatar looks like at one instant of the media clock.

    Stamped with the media time of the audio it depicts, not the time it was computed.
    Arrays are private copies and read-only, so a consumer may keep a FrameState as long
    as it likes while the engine goes on producing new ones.
    """

    media_time_s: float = 0.0
    arkit: np.ndarray = field(default=None)  # (52,) weights 0..1, ARKit order
    pose: np.ndarray = field(default=None)  # (55, 3) axis-angle per SMPL-X joint; joint 0 is the root
    transl: np.ndarray = field(default=None)  # (3,) root translation, metres
    visemes: np.ndarray | None = None  # (15,) OVR viseme probabilities, when a face model gave them
    voice_activity: float = 0.0
    expression: str = ""
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    sequence: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "arkit", _frozen(self.arkit, (NUM_ARKIT,), "arkit"))
        object.__setattr__(self, "pose", _frozen(self.pose, (NUM_JOINTS, 3), "pose"))
        object.__setattr__(self, "transl", _frozen(self.transl, (3,), "transl"))
        if self.visemes is not None:
            object.__setattr__(self, "visemes", _frozen(self.visemes, (len(self.visemes),), "visemes"))
        object.__setattr__(self, "timings_ms", MappingProxyType(dict(self.timings_ms)))

    def weight(self, name: str) -> float:
        return float(self.arkit[ARKIT_NAMES.index(name)])

    def joint_pose(self, joint: str) -> np.ndarray:
        return self.pose[JOINT_INDEX[joint]]

    def replace(self, **changes) -> FrameState:
        """A new FrameState with some fields changed (the original stays as it was)."""
        values = {name: getattr(self, name) for name in self.__dataclass_fields__}
        values.update(changes)
        return FrameState(**values)

    def to_dict(self) -> dict:
        """Plain JSON-able form for recording and the API."""
        return {
            "media_time_s": self.media_time_s,
            "sequence": self.sequence,
            "arkit": dict(zip(ARKIT_NAMES, map(float, self.arkit))),
            "pose": self.pose.tolist(),
            "transl": self.transl.tolist(),
            "voice_activity": self.voice_activity,
            "expression": self.expression,
            "timings_ms": dict(self.timings_ms),
        }


def interpolate(a: FrameState, b: FrameState, t: float) -> FrameState:
    """Blend two states at fraction t (0 → a, 1 → b); poses blend per joint by slerp-free lerp.

    Consecutive engine frames are 10–17 ms apart, where the axis-angle lerp is within
    display precision of a slerp and cheaper.
    """
    t = float(min(max(t, 0.0), 1.0))
    return FrameState(
        media_time_s=a.media_time_s + (b.media_time_s - a.media_time_s) * t,
        arkit=a.arkit + (b.arkit - a.arkit) * t,
        pose=a.pose + (b.pose - a.pose) * t,
        transl=a.transl + (b.transl - a.transl) * t,
        visemes=b.visemes,
        voice_activity=a.voice_activity + (b.voice_activity - a.voice_activity) * t,
        expression=b.expression,
        timings_ms=b.timings_ms,
        sequence=b.sequence,
    )
