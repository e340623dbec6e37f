"""What each module level of a preset really does: the one table every part of the studio reads.

A preset names a level (`high`/`medium`/`low`) per module; `plan_for(preset)` turns it into the
concrete work: which face model runs and how often, whether the whole body or only the head and
torso moves and how often, whether fingers articulate, which cloth springs run, and which mesh
level of detail the renderer draws. The engine (`Engine.set_plan`), the renderer (LOD mesh and
cloth) and the bench all take the same `ModulePlan`, so a level costs what it says everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from studio.presets import Preset

Level = Literal["high", "medium", "low"]
LEVELS: tuple[Level, ...] = ("high", "medium", "low")

# face: model variant and update rate (Hz). The model still sees every 10 ms hop; at lower rates it
# runs on batches of hops (fewer inference calls) and the engine emits fewer FrameStates.
FACE_LEVELS: dict[str, tuple[str, float]] = {"high": ("fp32", 100.0), "medium": ("int8", 100.0), "low": ("int8", 50.0)}
# body: which joints move ("full": head, torso and arms; "head_torso": the arms stay at rest) and the rate (Hz).
BODY_LEVELS: dict[str, tuple[str, float]] = {"high": ("full", 100.0), "medium": ("full", 50.0),
                                             "low": ("head_torso", 25.0)}
# hands: "articulated": gesture hand shapes on speech beats over a relaxed curl that varies;
# "relaxed": the varying curl only; "fixed": one relaxed pose, never recomputed.
HANDS_LEVELS: dict[str, str] = {"high": "articulated", "medium": "relaxed", "low": "fixed"}
# cloth: which regions carry damped springs driven by head/torso acceleration.
CLOTH_LEVELS: dict[str, tuple[str, ...]] = {"high": ("hair", "shirt", "left_sleeve", "right_sleeve"),
                                            "medium": ("hair", "shirt"), "low": ()}
# mesh level of detail when the preset says `auto`: it follows the body level.
LOD_FOR_BODY: dict[str, str] = {"high": "high", "medium": "medium", "low": "low"}


@dataclass(frozen=True)
class ModulePlan:
    """The concrete work a preset asks for (see the level tables above)."""

    face_variant: str = "fp32"
    face_rate_hz: float = 100.0
    body_mode: str = "full"
    body_rate_hz: float = 100.0
    hands_mode: str = "articulated"
    cloth_regions: tuple[str, ...] = ()
    lod: str = "high"
    keep_face_detail: bool = True

    @property
    def face_batch_hops(self) -> int:
        """How many 10 ms hops the face model runs on per call."""
        return max(1, round(100.0 / self.face_rate_hz))

    @property
    def body_every_hops(self) -> int:
        """Body motion is recomputed every this many hops and held in between."""
        return max(1, round(100.0 / self.body_rate_hz))


def plan_for(preset: Preset) -> ModulePlan:
    """The module plan of a preset: its levels, with any explicit rates or LOD it sets."""
    modules, rates = preset.modules, preset.rates
    variant, face_hz = FACE_LEVELS[modules.face]
    body_mode, body_hz = BODY_LEVELS[modules.body]
    lod = preset.render.lod if preset.render.lod != "auto" else LOD_FOR_BODY[modules.body]
    return ModulePlan(
        face_variant=variant,
        face_rate_hz=float(rates.face_hz if rates.face_hz is not None else face_hz),
        body_mode=body_mode,
        body_rate_hz=float(rates.body_hz if rates.body_hz is not None else body_hz),
        hands_mode=HANDS_LEVELS[modules.hands],
        cloth_regions=CLOTH_LEVELS[modules.cloth],
        lod=lod,
        keep_face_detail=modules.face == "high",
    )
