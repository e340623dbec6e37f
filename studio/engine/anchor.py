"""SCA, the spatial-consistency anchor: keeps an externally driven pose on its rest anchor for hours.

The engine's own motion is a pure function of media time, bounded by construction (motion.py), so it
cannot drift. What drifts is input: a tracker or a remote controller adds head, spine and root offsets
with a bias and a random walk. That input enters here (`pose_input`), is laid over the engine's pose,
and is anchored:

1. each frame's input deviation (axis-angle of the anchored joints, root translation) enters a circular
   buffer (`buffer_frames`); its recency-weighted mean (weights rising linearly 0.1 -> 1.0) is the reference;
2. the reference minus the rest anchor (captured when the buffer first fills, and again on "re-anchor now")
   is the slow component, and it is removed: bias and random walk stay bounded, while nods, beats and speech
   motion, which average out over the buffer, come through;
3. a frame whose stacked pose vector (one unit quaternion per anchored joint, one for the translation) has a
   cosine similarity with the reference below `similarity_threshold` is a glitch: it is blended toward the
   reference (translation by `translation_blend`, rotation by `rotation_blend`, scaled by how far below);
4. every `refresh_min_frames`..`refresh_max_frames` frames (drawn anew each time, so it never beats with a
   periodic motion) the running sums are recomputed exactly from the buffer, so rounding never accumulates,
   and a rest anchor asked for by "re-anchor now" glides in over one such interval;
5. at each refresh, the head's projected position over the last interval is compared with the anchor's
   projection; a residual between `subpixel_px` and one pixel (the reference's lag behind a ramp) is
   removed through the root translation.

Any NaN or infinite value, from the engine or the input, is caught here: the last good pose is held and
the frame counted, never drawn.
"""

from __future__ import annotations

import math
import threading

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator, model_validator

from studio.avatar.arkit import NUM_ARKIT
from studio.avatar.skeleton import JOINT_INDEX
from studio.engine.motion import relaxed_rest_pose

ANCHORED_JOINTS: tuple[str, ...] = ("pelvis", "spine1", "spine2", "spine3", "neck", "head")
ANCHORED_INDEX = np.array([JOINT_INDEX[name] for name in ANCHORED_JOINTS])
ROTATION_DIMS = 3 * len(ANCHORED_JOINTS)
DEVIATION_DIMS = ROTATION_DIMS + 3  # rotations, then the root translation (metres)
TRANSLATION_SCALE_M = 0.05  # in the similarity test, a translation this long counts like a 1 rad turn
# Rest positions (metres, relative to the pelvis) of the anchored chain and of the head's centre, for the
# projected-position step: a typical adult; `SpatialAnchor(rest_joints=...)` takes an avatar's own.
TYPICAL_CHAIN_M = np.array([(0.0, 0.0, 0.0), (0.0, 0.11, -0.01), (0.0, 0.24, 0.0), (0.0, 0.30, 0.01),
                            (0.0, 0.52, -0.02), (0.0, 0.60, 0.01)])
HEAD_CENTRE_ABOVE_HEAD_JOINT_M = np.array((0.0, 0.10, 0.02))

# allowed ranges of the preset's `anchor` section: field -> (low, high, unit)
ANCHOR_RANGES: dict[str, tuple[float, float, str]] = {
    "buffer_frames": (30, 3000, "frames"),
    "similarity_threshold": (0.5, 0.999, ""),
    "translation_blend": (0.0, 1.0, ""),
    "rotation_blend": (0.0, 1.0, ""),
    "refresh_min_frames": (50, 5000, "frames"),
    "refresh_max_frames": (50, 5000, "frames"),
    "subpixel_px": (0.01, 5.0, "px"),
    "px_per_m": (50.0, 20000.0, "px per metre"),
}


def in_range(ranges: dict[str, tuple[float, float, str]], field: str, value: float) -> float:
    """`value` when it lies in `ranges[field]`; otherwise the error pydantic reports with the file and field."""
    low, high, unit = ranges[field]
    if not low <= value <= high:
        raise ValueError(f"allowed {low:g}..{high:g}{' ' + unit if unit else ''}")
    return value


class AnchorSettings(BaseModel):
    """The preset's `anchor` section; every field is range-checked on load."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    buffer_frames: int = 300
    similarity_threshold: float = 0.85
    translation_blend: float = 0.2
    rotation_blend: float = 0.7
    refresh_min_frames: int = 250
    refresh_max_frames: int = 350
    subpixel_px: float = 0.1
    px_per_m: float = 2000.0  # the head framing at 720p: a head ~0.25 m tall fills ~500 px

    @field_validator(*ANCHOR_RANGES, mode="after")
    @classmethod
    def _in_range(cls, value: float, info: ValidationInfo) -> float:
        return in_range(ANCHOR_RANGES, info.field_name, value)

    @model_validator(mode="after")
    def _refresh_order(self) -> AnchorSettings:
        if self.refresh_min_frames > self.refresh_max_frames:
            raise ValueError(f"refresh_min_frames ({self.refresh_min_frames}) must not exceed "
                             f"refresh_max_frames ({self.refresh_max_frames})")
        return self


class AnchorStage:
    """The pipeline's anchor hook: the pose passes through unchanged (what `SpatialAnchor` builds on).

    It works on the arrays before the FrameState is built, so each frame is built once, with
    every stage's timing already in it.
    """

    def process(self, media_time_s: float, arkit: np.ndarray, pose: np.ndarray,
                transl: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return arkit, pose, transl


class PoseInput:
    """External pose offsets laid over the engine's pose: what a tracker or remote controller sends.

    `sample(t)` gives (rotations (6, 3) axis-angle of ANCHORED_JOINTS in radians, root translation (3,) in
    metres) at media time t, or None when there is nothing (yet).
    """

    def sample(self, media_time_s: float) -> tuple[np.ndarray, np.ndarray] | None:
        raise NotImplementedError

    def deviation(self, media_time_s: float) -> np.ndarray | None:
        """The same as one float64 vector (DEVIATION_DIMS,): rotations first, then the translation."""
        sample = self.sample(media_time_s)
        if sample is None:
            return None
        return np.concatenate([np.ravel(sample[0]), np.ravel(sample[1])]).astype(np.float64)


class LatestPose(PoseInput):
    """The newest pose another program pushed (any thread); the anchor reads it every frame."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: tuple[np.ndarray, np.ndarray] | None = None

    def put(self, rotations: np.ndarray, transl: np.ndarray) -> None:
        value = (np.array(rotations, np.float64).reshape(len(ANCHORED_JOINTS), 3), np.array(transl, np.float64).reshape(3))
        with self._lock:
            self._latest = value

    def sample(self, media_time_s: float) -> tuple[np.ndarray, np.ndarray] | None:
        with self._lock:
            return self._latest

    def clear(self) -> None:
        """Nothing laid over the engine's motion any more (a tracker went away)."""
        with self._lock:
            self._latest = None


class DriftingTracker(PoseInput):
    """A head/body tracker as it really behaves: a constant bias rate, a random walk and white noise.

    Rates are per minute (bias) and per square-root second (walk); the walk moves the head, neck and
    pelvis rotations and the root translation, the bias tilts the head forward and slides the root
    sideways and forward. Seeded and stateful: call `sample` with non-decreasing media times.
    """

    def __init__(self, bias_mm_per_min: float = 0.0, bias_deg_per_min: float = 0.0,
                 walk_mm_per_sqrt_s: float = 0.02, walk_deg_per_sqrt_s: float = 0.004,
                 noise_mm: float = 0.2, noise_deg: float = 0.05, seed: int = 0) -> None:
        self.bias = np.zeros(DEVIATION_DIMS)
        head = 3 * ANCHORED_JOINTS.index("head")
        self.bias[head] = np.radians(bias_deg_per_min) / 60.0  # forward tilt (about x)
        self.bias[ROTATION_DIMS:] = np.array((0.8, 0.0, 0.6)) * bias_mm_per_min / 1000.0 / 60.0
        self.walk = np.zeros(DEVIATION_DIMS)
        for name in ("pelvis", "neck", "head"):
            start = 3 * ANCHORED_JOINTS.index(name)
            self.walk[start:start + 3] = np.radians(walk_deg_per_sqrt_s)
        self.walk[ROTATION_DIMS:] = walk_mm_per_sqrt_s / 1000.0
        self.noise = np.where(np.arange(DEVIATION_DIMS) < ROTATION_DIMS, np.radians(noise_deg), noise_mm / 1000.0)
        self.noise[:ROTATION_DIMS] *= self.walk[:ROTATION_DIMS] > 0
        self._rng = np.random.default_rng(seed)
        self._walked = np.zeros(DEVIATION_DIMS)
        self._last_time: float | None = None
        self._normals = np.zeros((0, 2, DEVIATION_DIMS))
        self._drawn = 0

    def deviation(self, media_time_s: float) -> np.ndarray:
        """The whole deviation vector (DEVIATION_DIMS,) at this time."""
        t = float(media_time_s)
        dt = 0.0 if self._last_time is None else max(0.0, t - self._last_time)
        self._last_time = t if self._last_time is None else max(t, self._last_time)
        if self._drawn >= len(self._normals):  # normal draws in blocks: one generator call per 512 frames
            self._normals = self._rng.standard_normal((512, 2, DEVIATION_DIMS))
            self._drawn = 0
        step, noise = self._normals[self._drawn]
        self._drawn += 1
        if dt > 0:
            self._walked += self.walk * (math.sqrt(dt) * step)
        return self.bias * t + self._walked + self.noise * noise

    def sample(self, media_time_s: float) -> tuple[np.ndarray, np.ndarray]:
        value = self.deviation(media_time_s)
        return value[:ROTATION_DIMS].reshape(-1, 3), value[ROTATION_DIMS:]


def _quaternions(rotations: np.ndarray) -> np.ndarray:
    """Unit quaternions (w, x, y, z) of axis-angle rows (n, 3)."""
    angle = np.sqrt(np.einsum("ij,ij->i", rotations, rotations))
    half = 0.5 * angle
    scale = np.where(angle > 1e-12, np.sin(half) / np.maximum(angle, 1e-12), 0.5)
    return np.concatenate([np.cos(half)[:, None], rotations * scale[:, None]], axis=1)


def stacked_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two deviation vectors as stacked unit 4-vectors (a quaternion per joint, one
    built from the translation): 1 when equal, cos(theta/2) averaged over the blocks otherwise."""
    def stack(deviation: np.ndarray) -> np.ndarray:
        rotations = deviation[:ROTATION_DIMS].reshape(-1, 3)
        translation = _quaternions(deviation[None, ROTATION_DIMS:] / TRANSLATION_SCALE_M)
        return np.concatenate([_quaternions(rotations), translation]).ravel()

    x, y = stack(a), stack(b)
    return float(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y)))


def head_lever_matrix(chain_m: np.ndarray = TYPICAL_CHAIN_M) -> np.ndarray:
    """(3, DEVIATION_DIMS): how the head's centre moves (metres) for small deviations, linearised at rest."""
    centre = chain_m[-1] + HEAD_CENTRE_ABOVE_HEAD_JOINT_M
    lever = np.zeros((3, DEVIATION_DIMS))
    for joint, position in enumerate(chain_m):
        arm = centre - position  # d(centre) = omega x arm = -[arm]x omega
        x, y, z = arm
        lever[:, 3 * joint:3 * joint + 3] = -np.array(((0.0, -z, y), (z, 0.0, -x), (-y, x, 0.0)))
    lever[:, ROTATION_DIMS:] = np.eye(3)
    return lever


class SpatialAnchor(AnchorStage):
    """The SCA stage (see the module docstring). `raw_deviation`/`shown_deviation` and the per-second
    sums from `take_sums()` feed the drift monitor; `re_anchor()` captures a new rest anchor."""

    def __init__(self, settings: AnchorSettings | None = None, pose_input: PoseInput | None = None,
                 rest_chain_m: np.ndarray | None = None, seed: int = 0) -> None:
        self.settings = settings or AnchorSettings()
        self.pose_input = pose_input
        size = self.settings.buffer_frames
        self._buffer = np.zeros((size, DEVIATION_DIMS))
        self._lever = head_lever_matrix(TYPICAL_CHAIN_M if rest_chain_m is None else np.asarray(rest_chain_m, float))
        self._rng = np.random.default_rng(seed)
        self._rest_pose = relaxed_rest_pose().astype(np.float32)
        self._lock = threading.Lock()
        # a similarity below the threshold needs some block turned (or moved) by more than 2*acos(threshold)/sqrt(3)
        # in one coordinate; a max coordinate difference below that skips the exact test
        bound = 2.0 * math.acos(self.settings.similarity_threshold) / math.sqrt(3.0)
        self._similar_within = bound * min(1.0, TRANSLATION_SCALE_M)
        self.reset()

    def reset(self) -> None:
        """A new session: empty buffer, no rest anchor yet, counters at zero."""
        self._buffer[:] = 0.0
        self._filled = 0
        self._write = 0
        self._sum = np.zeros(DEVIATION_DIMS)
        self._order_sum = np.zeros(DEVIATION_DIMS)  # sum of k * x_k, k = 0 for the oldest entry
        self.rest: np.ndarray | None = None
        self._rest_from: np.ndarray | None = None
        self._rest_glide = (0, 0)  # (frames done, frames total) of a rest anchor gliding in
        self._reanchor = False
        self._since_refresh = 0
        self._refresh_every = self._draw_refresh()
        self._interval_shown = np.zeros(DEVIATION_DIMS)
        self._interval_frames = 0
        self.raw_deviation = np.zeros(DEVIATION_DIMS)
        self.shown_deviation = np.zeros(DEVIATION_DIMS)
        self.subpixel_m = np.zeros(3)
        self.frames = 0
        self.nonfinite_frames = 0
        self.glitch_frames = 0
        self._last_good: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._sums = self._empty_sums()

    @staticmethod
    def _empty_sums() -> dict:
        return {"frames": 0, "raw": np.zeros(DEVIATION_DIMS), "shown": np.zeros(DEVIATION_DIMS)}

    def _draw_refresh(self) -> int:
        return int(self._rng.integers(self.settings.refresh_min_frames, self.settings.refresh_max_frames + 1))

    # ------------------------------------------------------------ control (any thread)

    def re_anchor(self) -> None:
        """Take where the input sits now as the new rest anchor (it glides in over one refresh interval)."""
        self._reanchor = True

    def take_sums(self) -> dict:
        """Sums of raw and shown deviations and the frame count since the last call (for per-second means)."""
        with self._lock:
            sums, self._sums = self._sums, self._empty_sums()
        return sums

    # ------------------------------------------------------------ engine thread

    def process(self, media_time_s: float, arkit: np.ndarray, pose: np.ndarray,
                transl: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raw = None if self.pose_input is None else self.pose_input.deviation(media_time_s)
        # one sum per array: finite exactly when every element is (pose-sized values cannot overflow)
        total = float(np.add.reduce(arkit, axis=None)) + float(np.add.reduce(pose, axis=None)) \
            + float(np.add.reduce(transl, axis=None))
        if raw is not None:
            total += float(np.add.reduce(raw)) if raw.shape == (DEVIATION_DIMS,) else math.nan
        if not math.isfinite(total):
            return self._hold()
        self.frames += 1
        if raw is None:  # nothing laid over the engine's own motion, which cannot drift
            self._last_good = (arkit, pose, transl)
            return arkit, pose, transl
        if self.settings.enabled:
            shown = self._anchor(raw)
        else:
            self._track(raw)
            shown = raw
        self.raw_deviation, self.shown_deviation = raw, shown
        with self._lock:
            sums = self._sums
            sums["frames"] += 1
            sums["raw"] += raw
            sums["shown"] += shown
        out_pose = np.array(pose, np.float32)
        out_pose[ANCHORED_INDEX] += shown[:ROTATION_DIMS].reshape(-1, 3)
        out_transl = np.asarray(transl, np.float32) + shown[ROTATION_DIMS:]
        self._last_good = (arkit, out_pose, out_transl)
        return arkit, out_pose, out_transl

    def _hold(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A non-finite frame: count it and show the last good pose again (or the rest pose before any)."""
        self.nonfinite_frames += 1
        if self._last_good is None:
            return np.zeros(NUM_ARKIT, np.float32), self._rest_pose.copy(), np.zeros(3, np.float32)
        return self._last_good

    def reference(self) -> np.ndarray:
        """Recency-weighted mean of the buffered deviations (weights 0.1 for the oldest -> 1.0 for the newest)."""
        n = self._filled
        if n == 0:
            return np.zeros(DEVIATION_DIMS)
        if n == 1:
            return self._sum.copy()
        weighted = 0.1 * self._sum + 0.9 * self._order_sum / (n - 1)
        return weighted / (0.55 * n)

    def _push(self, value: np.ndarray) -> None:
        size = len(self._buffer)
        if self._filled < size:
            self._order_sum += self._filled * value
            self._sum += value
            self._filled += 1
        else:
            oldest = self._buffer[self._write]
            self._order_sum += (size - 1) * value - (self._sum - oldest)
            self._sum += value - oldest
        self._buffer[self._write] = value
        self._write = (self._write + 1) % size

    def _replace_newest(self, value: np.ndarray) -> None:
        """The glitch enters the buffer as blended, so it does not drag the reference along."""
        newest = (self._write - 1) % len(self._buffer)
        change = value - self._buffer[newest]
        self._buffer[newest] = value
        self._sum += change
        self._order_sum += (self._filled - 1) * change

    def _recompute_sums(self) -> None:
        """Exact sums from the buffer, oldest first: hours of incremental updates leave no rounding behind."""
        n, size = self._filled, len(self._buffer)
        ordered = self._buffer[:n] if n < size else np.roll(self._buffer, -self._write, axis=0)
        self._sum = ordered.sum(axis=0)
        self._order_sum = np.arange(n) @ ordered

    def _track(self, raw: np.ndarray) -> np.ndarray:
        """Buffer, reference, rest anchor and refresh bookkeeping; returns the reference."""
        self._push(raw)
        reference = self.reference()
        size = len(self._buffer)
        if self.rest is None and self._filled == size:
            self.rest = reference.copy()
        if self._reanchor and self.rest is not None:
            self._reanchor = False
            self._rest_from = self.rest.copy()
            self._rest_glide = (0, self._refresh_every)
        if self._rest_from is not None:
            done, total = self._rest_glide
            done += 1
            self.rest = self._rest_from + (reference - self._rest_from) * min(1.0, done / total)
            self._rest_glide = (done, total)
            if done >= total:
                self._rest_from = None
        self._since_refresh += 1
        if self._since_refresh >= self._refresh_every:
            self._since_refresh = 0
            self._refresh_every = self._draw_refresh()
            self._recompute_sums()
        return reference

    def _anchor(self, raw: np.ndarray) -> np.ndarray:
        settings = self.settings
        reference = self._track(raw)
        value = raw
        # blocks closer than this always have a similarity above the threshold: skip the quaternions
        if float(np.abs(raw - reference).max()) > self._similar_within:
            similarity = stacked_similarity(raw, reference)
            if similarity < settings.similarity_threshold:  # a glitch: pull it toward the reference
                self.glitch_frames += 1
                amount = min(1.0, (settings.similarity_threshold - similarity) / (1.0 - settings.similarity_threshold))
                blend = np.full(DEVIATION_DIMS, settings.rotation_blend * amount)
                blend[ROTATION_DIMS:] = settings.translation_blend * amount
                value = raw + (reference - raw) * blend
                self._replace_newest(value)
                reference = self.reference()
        shown = value - (reference - self.rest) if self.rest is not None else value.copy()
        self._interval_shown += shown
        self._interval_frames += 1
        if self._since_refresh == 0:  # a refresh just happened: re-evaluate the sub-pixel step
            self._subpixel_step(self._interval_shown / self._interval_frames)
            self._interval_shown = np.zeros(DEVIATION_DIMS)
            self._interval_frames = 0
        shown[ROTATION_DIMS:] -= self.subpixel_m
        return shown

    def _subpixel_step(self, interval_mean: np.ndarray) -> None:
        """The head's projected offset from the anchor's projection over the last interval: a residual
        between `subpixel_px` and one pixel is removed through the root translation for the next interval.
        A larger one is a transient the anchor is still pulling back, and is left to it."""
        self.subpixel_m = np.zeros(3)
        if self.rest is None:
            return
        shift = self._lever @ (interval_mean - self.rest)
        pixels = float(np.hypot(shift[0], shift[1])) * self.settings.px_per_m
        if self.settings.subpixel_px < pixels <= 1.0:
            self.subpixel_m = np.array((shift[0], shift[1], 0.0))
