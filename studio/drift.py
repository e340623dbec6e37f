"""The drift monitor: every long-session drift figure, its threshold from the preset, and why it warns.

Fed by the engine side (anchor sums, frames, the media clock, memory, identity renders) and read by the
drift dock and the soak report. Every series is bounded: long-range history is downsampled (pairs of
points merge, keeping min, max and mean), so ten hours cost as little as ten minutes.

Drift is measured with intended motion removed: the anchor sees only the input's deviation from the
engine's own motion (which is a pure function of time), and the input's intended motion (nods, beats,
0.3-5 Hz) averages out over `drift_window_s` (10 s). What is left, minus the rest anchor, is drift.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from studio.avatar.arkit import ARKIT_NAMES
from studio.engine.anchor import ROTATION_DIMS, head_lever_matrix, in_range

# the face's own channels: the eye channels carry blinks and gaze, which idle motion drives on purpose
FACE_CHANNELS = np.array([i for i, name in enumerate(ARKIT_NAMES) if not name.startswith("eye")])
SILENT_VOICE = 0.05  # voice activity below this counts as a silent frame
SKEW_SIGMAS = 3.0  # a skew is told only this many standard errors clear of zero (or of its limit, to warn)

DRIFT_RANGES: dict[str, tuple[float, float, str]] = {
    "max_av_offset_ms": (0.1, 1000.0, "ms"),
    "max_skew_ppm": (1.0, 10000.0, "ppm"),
    "max_root_drift_mm": (0.01, 1000.0, "mm"),
    "max_head_drift_deg": (0.001, 90.0, "degrees"),
    "max_neutral_bias": (0.0, 1.0, ""),
    "min_identity_ssim": (0.0, 1.0, ""),
    "max_rss_growth_pct": (0.1, 1000.0, "%"),
    "max_frame_p99_ms": (0.1, 1000.0, "ms"),
    "identity_interval_s": (10.0, 3600.0, "s"),
    "drift_window_s": (2.0, 600.0, "s"),
}


class DriftThresholds(BaseModel):
    """The preset's `drift` section: when each drift figure warns."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_av_offset_ms: float = 10.0
    max_skew_ppm: float = 300.0
    max_root_drift_mm: float = 0.5
    max_head_drift_deg: float = 0.1
    max_neutral_bias: float = 0.05
    min_identity_ssim: float = 0.98
    max_rss_growth_pct: float = 2.0
    max_frame_p99_ms: float = 20.0
    identity_interval_s: float = 300.0
    drift_window_s: float = 10.0

    @field_validator(*DRIFT_RANGES, mode="after")
    @classmethod
    def _in_range(cls, value: float, info: ValidationInfo) -> float:
        return in_range(DRIFT_RANGES, info.field_name, value)


class DownsampledSeries:
    """A time series that never holds more than `capacity` points: when full, neighbours merge in pairs
    (time of the first, min of mins, max of maxes, mean of means), so the maximum stays exact."""

    def __init__(self, capacity: int = 1024) -> None:
        if capacity < 4 or capacity % 2:
            raise ValueError(f"DownsampledSeries capacity={capacity} must be an even number >= 4")
        self.capacity = capacity
        self._data = np.zeros((capacity, 4))  # time, min, max, mean
        self._count = 0
        self._span = 1  # samples per point
        self._pending: list[float] = []
        self._pending_time = 0.0
        self.last: float | None = None

    def __len__(self) -> int:
        return self._count

    def add(self, time_s: float, value: float) -> None:
        value = float(value)
        self.last = value
        if not self._pending:
            self._pending_time = float(time_s)
        self._pending.append(value)
        if len(self._pending) < self._span:
            return
        pending, self._pending = self._pending, []
        if self._count == self.capacity:
            data = self._data
            half = self.capacity // 2
            merged = np.column_stack([data[0::2, 0], np.minimum(data[0::2, 1], data[1::2, 1]),
                                      np.maximum(data[0::2, 2], data[1::2, 2]), 0.5 * (data[0::2, 3] + data[1::2, 3])])
            data[:half] = merged
            self._count = half
            self._span *= 2
        self._data[self._count] = (self._pending_time, min(pending), max(pending), sum(pending) / len(pending))
        self._count += 1

    def arrays(self) -> dict[str, np.ndarray]:
        data = self._data[:self._count]
        return {"time_s": data[:, 0].copy(), "min": data[:, 1].copy(), "max": data[:, 2].copy(), "mean": data[:, 3].copy()}

    def maximum(self) -> float | None:
        values = [*self._data[:self._count, 2], *self._pending]
        return max(values) if values else None

    def minimum(self) -> float | None:
        values = [*self._data[:self._count, 1], *self._pending]
        return min(values) if values else None


SERIES = ("root_drift_mm", "head_drift_deg", "head_position_drift_mm", "raw_root_drift_mm", "raw_head_drift_deg",
          "raw_head_position_drift_mm", "av_offset_ms", "skew_ppm", "neutral_bias", "identity_ssim", "rss_mb",
          "rss_growth_pct", "frame_p99_ms")


def pose_drift(deviation: np.ndarray, lever: np.ndarray) -> tuple[float, float, float]:
    """(root translation mm, head orientation degrees, head position mm) of a deviation from the rest anchor.
    The head's orientation composes the chain's small rotations by adding them (exact to second order)."""
    rotations = deviation[:ROTATION_DIMS].reshape(-1, 3)
    head_deg = math.degrees(float(np.linalg.norm(rotations.sum(axis=0))))
    root_mm = 1000.0 * float(np.linalg.norm(deviation[ROTATION_DIMS:]))
    return root_mm, head_deg, 1000.0 * float(np.linalg.norm(lever @ deviation))


class DriftMonitor:
    """Live drift figures against the preset's thresholds; `warnings()` says what is wrong in plain words."""

    def __init__(self, thresholds: DriftThresholds | None = None, capacity: int = 1024) -> None:
        self.thresholds = thresholds or DriftThresholds()
        self.series = {name: DownsampledSeries(capacity) for name in SERIES}
        self._lever = head_lever_matrix()
        window = max(2, int(round(self.thresholds.drift_window_s)))
        self._raw_window: deque[np.ndarray] = deque(maxlen=window)
        self._shown_window: deque[np.ndarray] = deque(maxlen=window)
        self._minute_frame_ms = np.zeros(24_000)  # one minute of frames at up to 400 fps, reused every minute
        self._minute_frames = 0
        self._minute_started: float | None = None
        self._silent_sum = 0.0
        self._silent_frames = 0
        self._resting_face = np.zeros(len(ARKIT_NAMES))  # silent frames' weights summed, for the identity render
        self._resting_frames = 0
        self.session_s = 0.0
        self.current: dict[str, float] = {}
        self.skew_error_ppm = 0.0  # standard error of the current skew
        self.shown_drift: np.ndarray | None = None  # the latest drift vectors from the rest anchor
        self.raw_drift: np.ndarray | None = None
        self.anchoring = True
        self.baseline_rss_mb: float | None = None
        self.events: deque[str] = deque(maxlen=50)  # housekeeping and precision changes, newest last
        self.nonfinite_frames = 0
        self.dropped_frames = 0
        self.underruns = 0

    # ------------------------------------------------------------ feeding

    def _record(self, name: str, time_s: float, value: float) -> None:
        self.current[name] = float(value)
        self.series[name].add(time_s, value)

    def update_anchor(self, time_s: float, sums: dict, rest: np.ndarray | None) -> None:
        """One second's anchor sums (SpatialAnchor.take_sums()) and its rest anchor."""
        self.session_s = max(self.session_s, time_s)
        if not sums["frames"]:
            return
        self._raw_window.append(sums["raw"] / sums["frames"])
        self._shown_window.append(sums["shown"] / sums["frames"])
        if rest is None or len(self._raw_window) < self._raw_window.maxlen:
            return
        self.raw_drift = np.mean(self._raw_window, axis=0) - rest
        self.shown_drift = np.mean(self._shown_window, axis=0) - rest
        for prefix, drift in (("raw_", self.raw_drift), ("", self.shown_drift)):
            root_mm, head_deg, head_mm = pose_drift(drift, self._lever)
            self._record(f"{prefix}root_drift_mm", time_s, root_mm)
            self._record(f"{prefix}head_drift_deg", time_s, head_deg)
            self._record(f"{prefix}head_position_drift_mm", time_s, head_mm)

    def update_frames(self, frames: Iterable) -> None:
        """FrameStates as they came out of the engine: neutral bias in silence and frame times per minute."""
        for frame in frames:
            t = frame.media_time_s
            self.session_s = max(self.session_s, t)
            if self._minute_started is None:
                self._minute_started = t
            if self._minute_frames < len(self._minute_frame_ms):
                self._minute_frame_ms[self._minute_frames] = sum(frame.timings_ms.values())
                self._minute_frames += 1
            if frame.voice_activity < SILENT_VOICE:
                self._silent_sum += float(frame.arkit[FACE_CHANNELS].mean())
                self._silent_frames += 1
                self._resting_face += frame.arkit
                self._resting_frames += 1
            if t - self._minute_started >= 60.0:
                self._record("frame_p99_ms", t, float(np.percentile(self._minute_frame_ms[:self._minute_frames], 99)))
                if self._silent_frames:
                    self._record("neutral_bias", t, self._silent_sum / self._silent_frames)
                self._minute_frames = 0
                self._silent_sum, self._silent_frames = 0.0, 0
                self._minute_started = t

    def update_clock(self, time_s: float, av_offset_ms: float, skew_ppm: float | None,
                     skew_error_ppm: float = 0.0) -> None:
        """The A/V offset of what plays now, and its clock's skew (None: too little data to tell) with the
        skew's standard error: a skew warns only when it is past its limit by more than SKEW_SIGMAS of those."""
        self._record("av_offset_ms", time_s, av_offset_ms)
        if skew_ppm is None:
            self.forget("skew_ppm")
            return
        self._record("skew_ppm", time_s, skew_ppm)
        self.skew_error_ppm = float(skew_error_ppm)

    def clear_clock(self) -> None:
        """Nothing plays (or a new source starts): no A/V offset or skew is current until it is measured anew."""
        self.forget("av_offset_ms", "skew_ppm")
        self.skew_error_ppm = 0.0

    def forget(self, *names: str) -> None:
        """These figures are no longer current (their history stays in `series`)."""
        for name in names:
            self.current.pop(name, None)

    def mark_prewarmed(self, rss_mb: float) -> None:
        """Memory growth is measured from here (models, shaders and voice are loaded)."""
        self.baseline_rss_mb = float(rss_mb)

    def update_memory(self, time_s: float, rss_mb: float) -> None:
        self._record("rss_mb", time_s, rss_mb)
        if self.baseline_rss_mb:
            self._record("rss_growth_pct", time_s, 100.0 * (rss_mb / self.baseline_rss_mb - 1.0))

    def update_identity(self, time_s: float, ssim: float) -> None:
        self._record("identity_ssim", time_s, ssim)

    def identity_frame(self):
        """The neutral pose as the session shows it now, for the identity render: the resting face (mean of
        the silent frames since the last call, eyes open and ahead) and the shown pose's drift from the rest
        anchor laid on the rest pose."""
        from studio.engine.anchor import ANCHORED_INDEX
        from studio.engine.motion import relaxed_rest_pose
        from studio.frame import FrameState

        arkit = np.zeros(len(ARKIT_NAMES), np.float32)
        if self._resting_frames:
            arkit[FACE_CHANNELS] = (self._resting_face / self._resting_frames)[FACE_CHANNELS]
        self._resting_face[:] = 0.0
        self._resting_frames = 0
        pose = relaxed_rest_pose().astype(np.float32)
        transl = np.zeros(3, np.float32)
        if self.shown_drift is not None:
            pose[ANCHORED_INDEX] += self.shown_drift[:ROTATION_DIMS].reshape(-1, 3).astype(np.float32)
            transl += self.shown_drift[ROTATION_DIMS:].astype(np.float32)
        return FrameState(arkit=arkit, pose=pose, transl=transl)

    def note(self, message: str) -> None:
        self.events.append(message)

    # ------------------------------------------------------------ reading

    def warnings(self) -> list[str]:
        """What exceeds its threshold now, each as one plain sentence."""
        limits, now, out = self.thresholds, self.current, []
        offset = now.get("av_offset_ms")
        skew = now.get("skew_ppm")
        measured_skew = skew is not None and abs(skew) > SKEW_SIGMAS * self.skew_error_ppm
        if offset is not None and abs(offset) > limits.max_av_offset_ms:
            side = "behind" if offset < 0 else "ahead of"
            cause = f": audio clock {abs(skew):.0f} ppm {'fast' if skew > 0 else 'slow'}" if measured_skew else ""
            out.append(f"lips {abs(offset):.0f} ms {side} the voice{cause}")
        elif skew is not None and abs(skew) - SKEW_SIGMAS * self.skew_error_ppm > limits.max_skew_ppm:
            out.append(f"audio clock {abs(skew):.0f} ppm off the system clock (compensated; check the device)")
        for key, limit, what, unit in (("root_drift_mm", limits.max_root_drift_mm, "body", "mm"),
                                        ("head_drift_deg", limits.max_head_drift_deg, "head", "°")):
            value = now.get(key)
            if value is not None and value > limit:
                cause = "anchoring is off" if not self.anchoring else "the input drifts faster than anchoring corrects"
                out.append(f"{what} {value:.2f}{'' if unit == '°' else ' '}{unit} off its rest anchor ({cause}): re-anchor now?")
        bias = now.get("neutral_bias")
        if bias is not None and bias > limits.max_neutral_bias:
            out.append(f"the resting face is not neutral (mean weight {bias:.2f} in silence)")
        ssim = now.get("identity_ssim")
        if ssim is not None and ssim < limits.min_identity_ssim:
            out.append(f"the avatar no longer looks as it did at the start (identity SSIM {ssim:.3f})")
        growth = now.get("rss_growth_pct")
        if growth is not None and growth > limits.max_rss_growth_pct:
            out.append(f"memory up {growth:.1f} % since the start ({now['rss_mb']:.0f} MB)")
        p99 = now.get("frame_p99_ms")
        if p99 is not None and p99 > limits.max_frame_p99_ms:
            out.append(f"frames slow: p99 {p99:.1f} ms over the last minute (limit {limits.max_frame_p99_ms:.0f} ms)")
        if self.nonfinite_frames:
            out.append(f"{self.nonfinite_frames} frames with NaN or infinite poses were held, not drawn")
        return out

    def worst(self, name: str) -> float | None:
        """The worst value so far: the minimum for SSIM, the largest magnitude otherwise."""
        series = self.series[name]
        if name == "identity_ssim":
            return series.minimum()
        high, low = series.maximum(), series.minimum()
        if high is None:
            return None
        return max(abs(high), abs(low))
