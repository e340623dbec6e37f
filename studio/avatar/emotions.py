"""VRM emotion expressions (happy, angry, sad, relaxed, surprised) driven live by the engine's ARKit weights.

The engine carries a face as the 52 ARKit weights of FrameState (an operator trigger such as the persona's
`smile` is a set of ARKit weights that fades in; its name in `FrameState.expression` is the persona's own word and
says nothing about its level). So the avatar adapts: `emotion_weights` is the one place that reads emotions from
ARKit weights, and an imported avatar whose VRM has an emotion expression carries that expression's morph binds as
an extra column of `expr_dirs` after the 52 ARKit ones. `ExpressionDrive.weights` turns 52 ARKit weights into the
weights of all columns, every frame, applying the VRM rules:

- `isBinary`: an emotion above 0.5 is 1, else 0.
- Overrides: an emotion with `overrideBlink` / `overrideMouth` / `overrideLookAt` set to `block` (and a weight
  above 0) silences the avatar's blinks / mouth vowels / eye-look shapes; `blend` scales them by (1 − weight).
  The ARKit columns stand for those VRM groups: eyeBlink* for blink, the eyeLook* shapes for look-at, and the
  jaw/mouth shapes that articulate vowels for the mouth (on a vowels-only avatar they *are* the vowels).
- No double-up: an emotion replaces the ARKit shapes it is read from. Those shapes' weights are scaled by
  (1 − emotion weight), so at full `happy` the smile comes from the avatar's own happy shape alone. An avatar whose
  own ARKit shapes cover all of an emotion's sources (perfect sync) already shows it: that emotion is not driven.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from studio.avatar.arkit import ARKIT_INDEX, NUM_ARKIT

EMOTIONS: tuple[str, ...] = ("happy", "angry", "sad", "relaxed", "surprised")
# The ARKit shapes each emotion is read from: they make way for it (see the module note).
EMOTION_SOURCES: dict[str, tuple[str, ...]] = {
    "happy": ("mouthSmileLeft", "mouthSmileRight", "cheekSquintLeft", "cheekSquintRight"),
    "angry": ("browDownLeft", "browDownRight", "noseSneerLeft", "noseSneerRight"),
    "sad": ("mouthFrownLeft", "mouthFrownRight", "browInnerUp"),
    "relaxed": ("mouthSmileLeft", "mouthSmileRight", "eyeSquintLeft", "eyeSquintRight"),
    "surprised": ("eyeWideLeft", "eyeWideRight", "browInnerUp", "browOuterUpLeft", "browOuterUpRight"),
}
# The ARKit shapes that stand for each VRM override group.
OVERRIDE_SHAPES: dict[str, tuple[str, ...]] = {
    "overrideBlink": ("eyeBlinkLeft", "eyeBlinkRight"),
    "overrideLookAt": tuple(f"eyeLook{d}{s}" for d in ("Up", "Down", "In", "Out") for s in ("Left", "Right")),
    "overrideMouth": ("jawOpen", "mouthFunnel", "mouthPucker", "mouthStretchLeft", "mouthStretchRight",
                      "mouthLowerDownLeft", "mouthLowerDownRight", "mouthUpperUpLeft", "mouthUpperUpRight"),
}
_SOURCE_COLUMNS = {name: np.array([ARKIT_INDEX[s] for s in shapes]) for name, shapes in EMOTION_SOURCES.items()}
_GROUP_COLUMNS = {key: np.array([ARKIT_INDEX[s] for s in shapes]) for key, shapes in OVERRIDE_SHAPES.items()}


def _mean(arkit: np.ndarray, *names: str) -> float:
    return float(sum(arkit[ARKIT_INDEX[n]] for n in names)) / len(names)


def _ramp(value: float, low: float, high: float) -> float:
    return min(1.0, max(0.0, (value - low) / (high - low)))


def emotion_weights(arkit: np.ndarray) -> dict[str, float]:
    """Emotion weights 0..1 read from 52 ARKit weights: the one place that says what face means which emotion.

    - happy: a smile (mouthSmile past 0.15, full at 0.6) with raised cheeks (cheekSquint, full at 0.3). Speech
      alone smiles a little for "ee" but does not raise the cheeks, so talking does not flicker `happy`.
    - relaxed: the same smile with narrowed eyes (eyeSquint) but cheeks down: the calm, eyes-half-shut smile.
    - sad: the mouth corners down (mouthFrown) and the inner brows up (browInnerUp), both.
    - angry: brows down on both sides (or a sneer), and no smile.
    - surprised: eyes wide (eyeWide) and brows up (browInnerUp or browOuterUp), both.
    The built-in personas' triggers read so: `smile`/`big smile`/`warm smile` → happy 1, `concerned` → sad 0.67,
    `excited` → surprised 1, `thinking` → nothing.
    """
    arkit = np.asarray(arkit, np.float32)
    smile = _ramp(_mean(arkit, "mouthSmileLeft", "mouthSmileRight"), 0.15, 0.6)
    cheeks = _ramp(_mean(arkit, "cheekSquintLeft", "cheekSquintRight"), 0.05, 0.3)
    brows_up = max(float(arkit[ARKIT_INDEX["browInnerUp"]]), _mean(arkit, "browOuterUpLeft", "browOuterUpRight"))
    frown = max(_mean(arkit, "browDownLeft", "browDownRight"), _mean(arkit, "noseSneerLeft", "noseSneerRight"))
    return {
        "happy": smile * cheeks,
        "angry": _ramp(frown, 0.25, 0.6) * (1.0 - smile),
        "sad": _ramp(_mean(arkit, "mouthFrownLeft", "mouthFrownRight"), 0.1, 0.4)
        * _ramp(float(arkit[ARKIT_INDEX["browInnerUp"]]), 0.1, 0.5),
        "relaxed": smile * (1.0 - cheeks) * _ramp(_mean(arkit, "eyeSquintLeft", "eyeSquintRight"), 0.1, 0.4),
        "surprised": _ramp(_mean(arkit, "eyeWideLeft", "eyeWideRight"), 0.15, 0.5) * _ramp(brows_up, 0.2, 0.6),
    }


@dataclass(frozen=True)
class ExpressionDrive:
    """How an avatar's extra expression columns (after the 52 ARKit ones) follow the engine's ARKit weights.

    `emotions[k]` names column 52 + k; `binary[k]` and `overrides[k]` (overrideBlink/LookAt/Mouth → none, block
    or blend) are that VRM expression's rules.
    """

    emotions: tuple[str, ...]
    binary: tuple[bool, ...]
    overrides: tuple[Mapping[str, str], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        unknown = [name for name in self.emotions if name not in EMOTIONS]
        if unknown or len(self.binary) != len(self.emotions) or len(self.overrides) != len(self.emotions):
            raise ValueError(f"an expression drive needs one rule per emotion of {', '.join(EMOTIONS)}; got {self}")

    @property
    def columns(self) -> int:
        return NUM_ARKIT + len(self.emotions)

    def weights(self, arkit: np.ndarray) -> np.ndarray:
        """(52 + emotions,) float32: the ARKit weights after the emotions took their sources and overrides, then
        the emotion weights (isBinary applied)."""
        out = np.zeros(self.columns, np.float32)
        read = emotion_weights(arkit)
        keep = np.ones(NUM_ARKIT, np.float32)  # several emotions on the same shapes: the strongest effect wins
        for k, name in enumerate(self.emotions):
            value = read[name]
            if self.binary[k]:
                value = 1.0 if value > 0.5 else 0.0
            out[NUM_ARKIT + k] = value
            if value <= 0.0:
                continue
            sources = _SOURCE_COLUMNS[name]
            keep[sources] = np.minimum(keep[sources], 1.0 - value)
            for key, columns in _GROUP_COLUMNS.items():
                rule = self.overrides[k].get(key, "none")
                if rule in ("block", "blend"):
                    keep[columns] = np.minimum(keep[columns], 0.0 if rule == "block" else 1.0 - value)
        out[:NUM_ARKIT] = np.asarray(arkit, np.float32) * keep
        return out

def morph_weights(drive: ExpressionDrive | None, columns: int, arkit: np.ndarray) -> np.ndarray:
    """Weights of an avatar's `columns` expression columns for 52 ARKit weights (extra columns without a drive: 0)."""
    arkit = np.asarray(arkit, np.float32)
    if drive is not None and drive.columns == columns:
        return drive.weights(arkit)
    if columns == NUM_ARKIT:
        return arkit
    out = np.zeros(columns, np.float32)
    out[:NUM_ARKIT] = arkit[:NUM_ARKIT]
    return out


__all__ = ["EMOTIONS", "EMOTION_SOURCES", "OVERRIDE_SHAPES", "ExpressionDrive", "emotion_weights", "morph_weights"]
