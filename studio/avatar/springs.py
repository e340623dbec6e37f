"""VRM spring bones: hair, skirt and accessory chains that swing with the body, and colliders they cannot enter.

Each chain (VRM 1.0 `VRMC_springBone.springs`, VRM 0.x `secondaryAnimation.boneGroups`) is a line of joints hanging
from a root that rides on one of the avatar's SMPL-X joints. Every joint past the root is a point integrated as the
VRM specification does it (verlet, at a fixed 60 Hz step, the rate its parameters are tuned for):

    next = now + (now − before)·(1 − dragForce) + dt·stiffness·(rest direction, carried by the parent bone)
           + dt·gravityPower·gravityDir
    then kept at its bone length from its parent, pushed out of every collider of the chain
    (sphere or capsule, radius + the joint's hitRadius), and kept at its bone length again.

The studio's avatar format has no per-bone skinning for these chains (their vertices ride on the nearest humanoid
joint). What reaches the screen is each joint's displacement from where a rigid chain would be (`joint_offsets`):
a vertex moves by its own chain's displacement at its place along the chain (`AvatarModel.spring_place`), so chains
on either side of a head swing apart. (`region_offsets`, the mean tip displacement per cloth region, is what the
cloth-region path takes where an avatar has no places.)

The cost is bounded: at most MAX_STEPS steps per drawn frame (a slower display makes the hair move in slow motion
rather than cost more), and one vectorised pass per chain depth for all chains together. `SpringBoneThread` runs
the steps on a thread of their own, one frame behind the caller, so the GUI thread that draws only hands over the
joint matrices and takes the previous frame's result: the same result every run, whatever the timing.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
from dataclasses import dataclass

import numpy as np

STEP_S = 1.0 / 60.0
MAX_STEPS = 4
JUMP_S = 1.0  # a longer gap between frames is a cut: the chains start again at rest


@dataclass(frozen=True, eq=False)
class SpringRig:
    """The chains and colliders of one avatar, in its rest space (metres), padded to the longest chain.

    Chain c has `count[c]` joints; bone l runs from joint l to joint l + 1 and uses that joint's parameters.
    `ride` is the SMPL-X joint a chain root (or a collider) moves with; `channel` the cloth region the chain drives.
    Colliders are capsules from `collider_head` to `collider_tail` (equal for a sphere).
    """

    rest: np.ndarray  # (C, L, 3)
    count: np.ndarray  # (C,) int, >= 2
    ride: np.ndarray  # (C,) int
    channel: np.ndarray  # (C,) int
    stiffness: np.ndarray  # (C, L)
    gravity_power: np.ndarray  # (C, L)
    gravity_dir: np.ndarray  # (C, L, 3)
    drag: np.ndarray  # (C, L)
    hit_radius: np.ndarray  # (C, L)
    collider_head: np.ndarray  # (K, 3)
    collider_tail: np.ndarray  # (K, 3)
    collider_radius: np.ndarray  # (K,)
    collider_ride: np.ndarray  # (K,) int
    collides: np.ndarray  # (C, K) bool: the chain's collider groups hold that collider

    def __post_init__(self) -> None:
        for value in self.__dict__.values():
            value.flags.writeable = False

    @property
    def chains(self) -> int:
        return int(len(self.count))

    def moved(self, skinning: np.ndarray) -> SpringRig:
        """The rig with each chain and collider carried by its joint's skinning matrix (J, 4, 4): a re-posed rest."""
        def carry(points: np.ndarray, ride: np.ndarray) -> np.ndarray:
            matrices = skinning[ride]  # (N, 4, 4)
            return np.einsum("nab,n...b->n...a", matrices[:, :3, :3], points) + (
                matrices[:, :3, 3] if points.ndim == 2 else matrices[:, None, :3, 3])
        return dataclasses.replace(self, rest=carry(self.rest, self.ride),
                                   collider_head=carry(self.collider_head, self.collider_ride),
                                   collider_tail=carry(self.collider_tail, self.collider_ride))


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


def _turn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, 3, 3) rotations taking unit vectors a to unit vectors b (I + [v]x + [v]x^2 / (1 + a.b), v = a x b);
    the identity where b is (nearly) opposite a, which a bone cannot reach in one 60 Hz step but noise can."""
    v = np.cross(a, b)
    opposite = 1.0 + np.einsum("na,na->n", a, b) < 1e-3
    v[opposite] = 0.0
    scale = np.where(opposite, 0.0, 1.0 / np.maximum(1.0 + np.einsum("na,na->n", a, b), 1e-3))
    skew = np.zeros((len(a), 3, 3))
    skew[:, 0, 1], skew[:, 0, 2], skew[:, 1, 2] = -v[:, 2], v[:, 1], -v[:, 0]
    skew[:, 1, 0], skew[:, 2, 0], skew[:, 2, 1] = v[:, 2], -v[:, 1], v[:, 0]
    return np.eye(3) + skew + (skew @ skew) * scale[:, None, None]


class SpringBoneSim:
    """The chains of one rig, stepped with the avatar's joint matrices; `tips` / `region_offsets` after each step.

    `steps_taken` counts bone updates (bones × steps): the work the cloth level costs.
    """

    def __init__(self, rig: SpringRig) -> None:
        self.rig = rig
        bones = rig.rest[:, 1:] - rig.rest[:, :-1]
        self._length = np.linalg.norm(bones, axis=2)  # (C, L-1)
        self._rest_dir = _unit(bones)
        self._active = np.arange(1, rig.rest.shape[1])[None, :] < rig.count[:, None]  # (C, L-1): bone l is real
        self.enabled = np.ones(rig.chains, bool)
        self.steps_taken = 0
        self.reset()

    def reset(self) -> None:
        self._time: float | None = None
        self._pending = 0.0
        self._rows: np.ndarray | None = None
        self.positions = np.array(self.rig.rest, np.float64)  # (C, L, 3) world, now
        self._before = self.positions.copy()

    def _rigid(self, rows: np.ndarray) -> np.ndarray:
        """(C, L, 3) where the chains' joints would be if they did not swing."""
        matrices = rows[self.rig.ride]
        return np.einsum("cab,clb->cla", matrices[:, :, :3], self.rig.rest) + matrices[:, None, :, 3]

    def step(self, time_s: float, rows: np.ndarray) -> None:
        """Advance to `time_s` with the avatar's skinning matrices now (55, 3, 4) or (55, 4, 4)."""
        rows = np.asarray(rows, np.float64)[:, :3, :]
        previous, self._time = self._time, float(time_s)
        if previous is None or not 0.0 < time_s - previous <= JUMP_S:
            self.positions = self._rigid(rows)
            self._before = self.positions.copy()
            self._rows, self._pending = rows, 0.0
            return
        self._pending += time_s - previous
        steps = min(int(self._pending / STEP_S), MAX_STEPS)
        self._pending = 0.0 if steps == MAX_STEPS else self._pending - steps * STEP_S
        start = self._rows
        for k in range(1, steps + 1):  # the joints move smoothly from last frame's matrices to this frame's
            self._integrate(start + (rows - start) * (k / steps), STEP_S)
        self._rows = rows

    def _integrate(self, rows: np.ndarray, dt: float) -> None:
        rig = self.rig
        matrices = rows[rig.ride]  # (C, 3, 4)
        parent = matrices[:, :, :3] / np.linalg.norm(matrices[:, :, :3], axis=1, keepdims=True)
        head = np.einsum("cab,cb->ca", matrices[:, :, :3], rig.rest[:, 0]) + matrices[:, :, 3]
        colliders = len(rig.collider_radius) > 0
        if colliders:
            placed = rows[rig.collider_ride]
            c_head = np.einsum("kab,kb->ka", placed[:, :, :3], rig.collider_head) + placed[:, :, 3]
            segment = np.einsum("kab,kb->ka", placed[:, :, :3], rig.collider_tail - rig.collider_head)
            segment_sq = np.maximum(np.einsum("ka,ka->k", segment, segment), 1e-12)
        now, before = self.positions, self._before
        after = now.copy()
        after[:, 0] = head
        keep = 1.0 - rig.drag
        pull = dt * rig.gravity_power[:, :, None] * rig.gravity_dir  # (C, L, 3)
        for bone in range(now.shape[1] - 1):
            moving = self._active[:, bone] & self.enabled
            if not moving.any():
                break
            rigid_dir = np.einsum("cab,cb->ca", parent, self._rest_dir[:, bone])
            tip = now[:, bone + 1]
            tip = (tip + (tip - before[:, bone + 1]) * keep[:, bone, None]
                   + (dt * rig.stiffness[:, bone, None]) * rigid_dir + pull[:, bone])
            length = self._length[:, bone, None]
            offset = tip - head
            tip = head + offset * (length / np.maximum(np.linalg.norm(offset, axis=1, keepdims=True), 1e-12))
            if colliders:  # pushed out of every collider it is inside (capsules: from the nearest point of the axis)
                along = np.clip(np.einsum("cka,ka->ck", tip[:, None] - c_head, segment) / segment_sq, 0.0, 1.0)
                away = tip[:, None] - (c_head + along[:, :, None] * segment)
                distance = np.maximum(np.linalg.norm(away, axis=2), 1e-12)
                depth = np.where(rig.collides, rig.collider_radius + rig.hit_radius[:, bone, None] - distance, 0.0)
                tip = tip + np.einsum("cka,ck->ca", away, np.maximum(depth, 0.0) / distance)
                offset = tip - head
                tip = head + offset * (length / np.maximum(np.linalg.norm(offset, axis=1, keepdims=True), 1e-12))
            tip = np.where(moving[:, None], tip, now[:, bone + 1])
            after[:, bone + 1] = tip
            actual = (tip - head) / length
            parent = _turn(rigid_dir, actual) @ parent
            head = tip
            self.steps_taken += int(moving.sum())
        self._before, self.positions = now, after

    def tips(self) -> np.ndarray:
        """(C, 3) where each chain's last joint is now."""
        return self.positions[np.arange(self.rig.chains), self.rig.count - 1]

    def joint_offsets(self) -> np.ndarray:
        """(C, L, 3) float32: each joint's displacement from a rigid chain (0 for disabled chains and before a step)."""
        if self._rows is None:
            return np.zeros(self.rig.rest.shape, np.float32)
        lag = self.positions - self._rigid(self._rows)
        return np.where(self.enabled[:, None, None], lag, 0.0).astype(np.float32)

    def region_offsets(self, regions: int) -> np.ndarray:
        """(regions, 3): per cloth region, the mean displacement of its enabled chains' tips from a rigid chain."""
        out = np.zeros((regions, 3), np.float32)
        if self._rows is None:
            return out
        rigid = self._rigid(self._rows)[np.arange(self.rig.chains), self.rig.count - 1]
        lag = self.tips() - rigid
        for region in range(regions):
            chains = (self.rig.channel == region) & self.enabled
            if chains.any():
                out[region] = lag[chains].mean(axis=0)
        return out


class SpringBoneThread:
    """Steps one SpringBoneSim on its own thread, one frame behind: `exchange` hands over this frame's joint matrices
    and returns the (region offsets, steps taken so far, joint offsets) of the frame before (None on the first).

    It waits only when the thread has not finished the previous frame yet. Stop it before touching the sim.
    """

    def __init__(self, sim: SpringBoneSim, regions: int) -> None:
        self.sim = sim
        self._regions = regions
        self._inbox: queue.Queue = queue.Queue()  # holds one frame at most; unbounded so that stop never waits on it
        self._outbox: queue.Queue = queue.Queue(maxsize=1)
        self._waiting = False
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="spring-bones", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping and (work := self._inbox.get()) is not None:
            time_s, rows = work
            try:
                self.sim.step(time_s, rows)
                self._outbox.put((self.sim.region_offsets(self._regions), self.sim.steps_taken, self.sim.joint_offsets()))
            except Exception as error:  # handed to the caller, which raises it on its own thread
                self._outbox.put(error)

    def exchange(self, time_s: float, rows: np.ndarray) -> tuple[np.ndarray, int, np.ndarray] | None:
        result = self._outbox.get() if self._waiting else None
        self._inbox.put((float(time_s), np.array(rows, np.float64)))
        self._waiting = True
        if isinstance(result, Exception):
            raise result
        return result

    def stop(self) -> None:
        """End the thread once it has finished what it was given."""
        self._stopping = True
        if threading.current_thread() is self._thread:
            return  # a finalizer the thread itself ran (a garbage collection there): it ends after this step
        if self._thread.is_alive():
            self._inbox.put(None)
            self._thread.join()


__all__ = ["JUMP_S", "MAX_STEPS", "STEP_S", "SpringBoneSim", "SpringBoneThread", "SpringRig"]
