"""The 52 ARKit face blendshapes in the project's canonical order (see REFERENCE.md)."""

from __future__ import annotations

import re

ARKIT_NAMES: tuple[str, ...] = (
    "eyeBlinkLeft", "eyeLookDownLeft", "eyeLookInLeft", "eyeLookOutLeft", "eyeLookUpLeft",
    "eyeSquintLeft", "eyeWideLeft",
    "eyeBlinkRight", "eyeLookDownRight", "eyeLookInRight", "eyeLookOutRight", "eyeLookUpRight",
    "eyeSquintRight", "eyeWideRight",
    "jawForward", "jawLeft", "jawRight", "jawOpen",
    "mouthClose", "mouthFunnel", "mouthPucker", "mouthLeft", "mouthRight",
    "mouthSmileLeft", "mouthSmileRight", "mouthFrownLeft", "mouthFrownRight",
    "mouthDimpleLeft", "mouthDimpleRight", "mouthStretchLeft", "mouthStretchRight",
    "mouthRollLower", "mouthRollUpper", "mouthShrugLower", "mouthShrugUpper",
    "mouthPressLeft", "mouthPressRight", "mouthLowerDownLeft", "mouthLowerDownRight",
    "mouthUpperUpLeft", "mouthUpperUpRight",
    "browDownLeft", "browDownRight", "browInnerUp", "browOuterUpLeft", "browOuterUpRight",
    "cheekPuff", "cheekSquintLeft", "cheekSquintRight", "noseSneerLeft", "noseSneerRight",
    "tongueOut",
)
NUM_ARKIT = len(ARKIT_NAMES)
ARKIT_INDEX: dict[str, int] = {name: i for i, name in enumerate(ARKIT_NAMES)}


def _normalise(name: str) -> str:
    """Lower-case, no separators, `_L`/`_R` suffixes spelled out as Left/Right."""
    lowered = name.strip()
    match = re.fullmatch(r"(.*?)[_\-. ]?([LR])", lowered)
    if match and not lowered.lower().endswith(("left", "right")):
        lowered = match.group(1) + ("Left" if match.group(2) == "L" else "Right")
    return re.sub(r"[^a-z0-9]", "", lowered.lower())


_BY_NORMALISED = {_normalise(n): i for i, n in enumerate(ARKIT_NAMES)}


def arkit_index(name: str) -> int:
    """Index of an ARKit name, matching peers' spellings (`EyeBlinkLeft`, `eyeBlink_L`).

    Raises KeyError naming the unknown value.
    """
    try:
        return _BY_NORMALISED[_normalise(name)]
    except KeyError:
        raise KeyError(f"unknown ARKit blendshape name {name!r}; expected one of the 52 ARKit names") from None


def mirror_name(name: str) -> str:
    """The left/right counterpart of a shape name (itself for centre shapes)."""
    if name.endswith("Left"):
        return name[:-4] + "Right"
    if name.endswith("Right"):
        return name[:-5] + "Left"
    if name == "jawLeft":
        return "jawRight"
    if name == "jawRight":
        return "jawLeft"
    if name == "mouthLeft":
        return "mouthRight"
    if name == "mouthRight":
        return "mouthLeft"
    return name
