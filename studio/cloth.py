"""Secondary motion for the `cloth` module: damped springs on hair and shirt regions.

Each region (hair, the shirt's body, each sleeve) hangs a point mass on a damped spring from an
anchor that rides on one joint (the head, the upper spine, a shoulder). When the head or torso
accelerates, the mass lags and swings back; the region's vertices are pushed by that lag times their
own weight (0 where the cloth is attached, 1 at its free edge), as a vertex offset the renderer adds
after skinning. Springs are integrated in fixed substeps, so the motion does not depend on the frame
rate, and the lag is clamped, so nothing flies off after a jump cut.

An imported avatar with VRM spring bones brings its own chains (`studio.avatar.springs`): given the joint
matrices, `ClothSim` runs those chains instead, with their own stiffness, gravity, drag and colliders, and each
region's offset is its chains' tip displacement. The precision level still says which regions run (hair: chains on
the head; shirt: the others). The chains step on a thread of their own, one frame behind (SpringBoneThread): the
caller only hands over the joint matrices.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np

from studio.avatar.model import AvatarModel
from studio.avatar.skeleton import JOINT_INDEX
from studio.avatar.springs import SpringBoneSim, SpringBoneThread, SpringRig

CLOTH_REGIONS = ("hair", "shirt", "left_sleeve", "right_sleeve")
SUBSTEP_S = 1.0 / 120.0
MAX_LAG_M = 0.012
JUMP_S = 1.0  # a longer step between frames is a cut: the springs start again at rest


@dataclass(frozen=True)
class SpringSpec:
    joint: str
    omega: float  # natural frequency, rad/s
    damping: float  # ratio: < 1 swings back a little
    gain: float  # how far the vertices follow the mass's lag


SPRINGS = {
    "hair": SpringSpec("head", 14.0, 0.35, 1.0),
    "shirt": SpringSpec("spine3", 11.0, 0.5, 0.8),
    "left_sleeve": SpringSpec("left_shoulder", 13.0, 0.45, 1.0),
    "right_sleeve": SpringSpec("right_shoulder", 13.0, 0.45, 1.0),
}


def region_weights(model: AvatarModel) -> np.ndarray:
    """(V, 4) float32: how much each vertex follows each region's spring (CLOTH_REGIONS order).

    Hair follows more towards its ends (held at the crown, free at the nape); the shirt more towards its hem; a sleeve
    (shirt skinned mostly to a shoulder or elbow) more towards its cuff.
    """
    if model.cloth_weights is not None:  # an imported avatar's spring bones say which vertices swing
        return np.array(model.cloth_weights, np.float32)
    weights = np.zeros((model.num_vertices, len(CLOTH_REGIONS)), np.float32)
    if model.part_labels is None:
        return weights
    rest = np.asarray(model.v_template, np.float64)
    joints = model.rest_joints()
    names = list(model.part_names)
    if "hair" in names:
        hair = model.part_labels == names.index("hair")
        weights[hair, 0] = _ramp(rest[hair, 1].max() - rest[hair, 1])
    if "shirt" in names:
        shirt = model.part_labels == names.index("shirt")
        skin = np.asarray(model.skin_weights)
        sides = []
        for side in ("left", "right"):
            arm = [JOINT_INDEX[f"{side}_{j}"] for j in ("shoulder", "elbow", "wrist")]
            sides.append(shirt & (skin[:, arm].sum(axis=1) > 0.5))
        body = shirt & ~sides[0] & ~sides[1]
        weights[body, 1] = _ramp(rest[body, 1].max() - rest[body, 1]) if body.any() else 0.0
        for column, (side, sleeve) in enumerate(zip(("left", "right"), sides), start=2):
            if sleeve.any():
                reach = np.linalg.norm(rest[sleeve] - joints[JOINT_INDEX[f"{side}_shoulder"]], axis=1)
                weights[sleeve, column] = _ramp(reach)
    return weights


def anchor_points(model: AvatarModel, weights: np.ndarray) -> np.ndarray:
    """(4, 3) rest positions the springs hang from: each region's weighted centre (the joint where empty).

    Riding on the region's joint, a point away from the joint moves when the joint turns, so a nod
    swings the hair and a turn of the torso swings the shirt.
    """
    rest = np.asarray(model.v_template, np.float64)
    joints = model.rest_joints()
    points = np.zeros((len(CLOTH_REGIONS), 3))
    for column, region in enumerate(CLOTH_REGIONS):
        total = float(weights[:, column].sum())
        points[column] = (weights[:, column] @ rest / total if total > 0
                          else joints[JOINT_INDEX[SPRINGS[region].joint]])
    return points


def _ramp(distance: np.ndarray) -> np.ndarray:
    """0 at the nearest vertex, 1 at the farthest, eased so attached edges barely move."""
    span = float(distance.max() - distance.min())
    x = (distance - distance.min()) / span if span > 0 else np.zeros_like(distance)
    return (x * x).astype(np.float32)


class ClothSim:
    """The springs of the enabled regions; `offsets` are the (4, 3) world-space vertex offsets per region, and with
    VRM spring bones `chain_offsets` each chain joint's (C, L, 3) displacement from a rigid chain.

    `springs_stepped` counts spring integration substeps (regions x substeps, or with spring bones the bones
    moved x steps): the work the level costs.
    """

    def __init__(self, regions: tuple[str, ...] = (), spring_bones: SpringRig | None = None) -> None:
        self.springs_stepped = 0
        self.bones: SpringBoneSim | None = None
        self._thread: SpringBoneThread | None = None
        self._bone_steps = 0  # springs_stepped before the current chains' thread
        self.set_regions(regions)
        self.set_spring_bones(spring_bones)

    def set_spring_bones(self, rig: SpringRig | None) -> None:
        """Use an avatar's VRM spring chains (None: the region springs); they start again at rest."""
        self._stop_thread()
        self.bones = None if rig is None else SpringBoneSim(rig)
        self._enable_chains()
        self.offsets[:] = 0.0
        self.chain_offsets = None if rig is None else np.zeros(rig.rest.shape, np.float32)

    def _stop_thread(self) -> None:
        if self._thread is not None:
            self._stop_at_exit.detach()
            self._thread.stop()
            self._thread = None
            self._bone_steps = self.springs_stepped

    def _enable_chains(self) -> None:
        if self.bones is not None:
            enabled = [CLOTH_REGIONS.index(region) for region in self.regions]
            self.bones.enabled = np.isin(self.bones.rig.channel, enabled)
            self.bones.steps_taken = 0
            self.bones.reset()

    def set_regions(self, regions: tuple[str, ...]) -> None:
        """Turn regions on or off (the springs start again at rest; the step count carries on)."""
        unknown = set(regions) - set(CLOTH_REGIONS)
        if unknown:
            raise ValueError(f"cloth regions {sorted(unknown)} are not known; allowed: {', '.join(CLOTH_REGIONS)}")
        self._stop_thread()
        self.regions = tuple(regions)
        self.offsets = np.zeros((len(CLOTH_REGIONS), 3), np.float32)
        self.chain_offsets = None if self.bones is None else np.zeros(self.bones.rig.rest.shape, np.float32)
        self._mass: dict[str, np.ndarray] = {}
        self._velocity: dict[str, np.ndarray] = {}
        self._time: float | None = None
        if self.bones is not None:
            self._enable_chains()

    def step(self, time_s: float, anchors: np.ndarray, joint_rows: np.ndarray | None = None) -> np.ndarray:
        """Advance to `time_s` with the regions' anchors (4, 3) at their world positions now; returns `offsets`.

        With spring bones, `joint_rows` (the avatar's skinning matrices now, (55, 3, 4)) moves their chains; the
        offsets returned are then those of the frame before (the chains step on their own thread meanwhile).
        """
        if not self.regions:
            return self.offsets
        if self.bones is not None and joint_rows is not None:
            if self._thread is None:
                self._thread = SpringBoneThread(self.bones, len(CLOTH_REGIONS))
                self._stop_at_exit = weakref.finalize(self, self._thread.stop)  # the thread ends with this ClothSim
            result = self._thread.exchange(time_s, joint_rows)
            if result is not None:
                self.offsets[:], steps, self.chain_offsets = result
                self.springs_stepped = self._bone_steps + steps
            return self.offsets
        previous, self._time = self._time, float(time_s)
        if previous is None or not 0.0 < time_s - previous <= JUMP_S:  # first frame, time went back, or a jump
            for region in self.regions:
                self._mass[region] = np.asarray(anchors[CLOTH_REGIONS.index(region)], np.float64).copy()
                self._velocity[region] = np.zeros(3)
            self.offsets[:] = 0.0
            return self.offsets
        substeps = max(1, math.ceil((time_s - previous) / SUBSTEP_S))
        dt = (time_s - previous) / substeps
        for region in self.regions:
            spec = SPRINGS[region]
            anchor = np.asarray(anchors[CLOTH_REGIONS.index(region)], np.float64)
            mass, velocity = self._mass[region], self._velocity[region]
            for _ in range(substeps):  # semi-implicit Euler: stable at these stiffnesses and steps
                stretch = mass - anchor
                velocity += (-spec.omega * spec.omega * stretch - 2.0 * spec.damping * spec.omega * velocity) * dt
                mass += velocity * dt
            self.springs_stepped += substeps
            lag = mass - anchor
            length = float(np.linalg.norm(lag))
            if length > MAX_LAG_M:
                lag *= MAX_LAG_M / length
                mass[:] = anchor + lag
            self.offsets[CLOTH_REGIONS.index(region)] = lag * spec.gain
        return self.offsets
