"""Head, eyes, blinks, breathing and body motion that follow speech prosody.

Bounded by construction: the idle layer is a pure function of media time (sums of sinusoids,
blink and gaze schedules drawn per time slot from a seeded generator), and the speech layer is
critically damped springs chasing bounded targets, clamped. Nothing integrates without a
restoring force, so nothing drifts over a long session, and the same seed and input give the
same motion.

Coordinates (SMPL-X): x is the subject's left, y up, z forward. Joint rotations are axis-angle
in the parent's rest frame, so the default avatar's T-pose needs a "relaxed arms" offset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from studio.avatar.arkit import ARKIT_INDEX, NUM_ARKIT
from studio.avatar.skeleton import JOINT_INDEX, NUM_JOINTS

HOP_S = 0.01
AUDIBLE_DB = -50.0  # below this a hop counts as silence

# Relaxed A-pose: upper arms ~66 degrees down from the T-pose, elbows a little bent forward.
SHOULDER_DOWN_RAD = math.radians(66.0)
ELBOW_BEND_RAD = math.radians(14.0)
# ARKit eyeLook* weight 1.0 corresponds to this eye rotation.
EYE_LOOK_FULL_RAD = 0.45

_J = JOINT_INDEX
_EYE_CHANNELS = tuple(
    ARKIT_INDEX[f"eye{part}{side}"] for side in ("Left", "Right") for part in ("Blink", "LookDown", "LookIn", "LookOut",
                                                                             "LookUp")
)


@dataclass(frozen=True)
class MotionStyle:
    """Persona-controlled intensity of the non-verbal motion."""

    head_gain: float = 1.0
    blink_rate_per_min: float = 17.0
    gesture_energy: float = 0.5
    sway: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        limits = {"head_gain": (0.0, 3.0), "blink_rate_per_min": (0.0, 40.0), "gesture_energy": (0.0, 2.0),
                  "sway": (0.0, 3.0)}
        for name, (low, high) in limits.items():
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or not low <= value <= high:
                raise ValueError(f"MotionStyle.{name}={value!r} is out of range; allowed {low}..{high}")
        if not isinstance(self.seed, int):
            raise ValueError(f"MotionStyle.seed={self.seed!r} must be an integer")


@dataclass(frozen=True)
class Prosody:
    """What motion needs to know about one 10 ms hop of speech."""

    energy: float = 0.0  # 0..1 loudness relative to the speaker's recent peak
    pitch: float = 0.0  # -1..1 relative pitch (semitones / 6 around the speaker's median), 0 when unvoiced
    voiced: bool = False
    speaking: float = 0.0  # 0..1 voice activity
    level_db: float = -120.0  # absolute loudness, dBFS over the last 20 ms


SILENCE = Prosody()


@dataclass(frozen=True)
class MotionFrame:
    """The body pose and eye weights for one instant."""

    pose: np.ndarray  # (55, 3) axis-angle
    transl: np.ndarray  # (3,)
    eye_weights: np.ndarray  # (52,) ARKit, only the eye channels are meaningful

    def apply(self, arkit: np.ndarray) -> np.ndarray:
        """Face weights with blinks and gaze laid over them (blink = the stronger of face and motion)."""
        out = np.array(arkit, np.float32, copy=True)
        for index in _EYE_CHANNELS:
            out[index] = self.eye_weights[index]
        for name in ("eyeBlinkLeft", "eyeBlinkRight"):
            index = ARKIT_INDEX[name]
            out[index] = max(float(arkit[index]), float(self.eye_weights[index]))
        return out


# ---------------------------------------------------------------- rotation helpers

def axis_angle_to_matrix(rotvec: np.ndarray) -> np.ndarray:
    rotvec = np.asarray(rotvec, np.float64)
    angle = float(np.linalg.norm(rotvec))
    if angle < 1e-12:
        return np.eye(3)
    k = rotvec / angle
    kx = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + math.sin(angle) * kx + (1.0 - math.cos(angle)) * (kx @ kx)


def matrix_to_axis_angle(matrix: np.ndarray) -> np.ndarray:
    cos_angle = min(1.0, max(-1.0, (float(np.trace(matrix)) - 1.0) / 2.0))
    angle = math.acos(cos_angle)
    if angle < 1e-9:
        return np.zeros(3)
    axis = np.array([matrix[2, 1] - matrix[1, 2], matrix[0, 2] - matrix[2, 0], matrix[1, 0] - matrix[0, 1]])
    norm = float(np.linalg.norm(axis))
    if norm < 1e-9:  # angle near pi: take the axis from the symmetric part
        diag = np.sqrt(np.maximum((np.diag(matrix) + 1.0) / 2.0, 0.0))
        axis = diag * np.sign(np.where(diag == 0, 1.0, [1.0, matrix[0, 1] + 1e-12, matrix[0, 2] + 1e-12]))
        norm = float(np.linalg.norm(axis))
    return axis / norm * angle


def _compose(*rotvecs: np.ndarray) -> np.ndarray:
    """Axis-angle of R(rotvecs[0]) @ R(rotvecs[1]) @ ..."""
    matrix = np.eye(3)
    for rotvec in rotvecs:
        matrix = matrix @ axis_angle_to_matrix(rotvec)
    return matrix_to_axis_angle(matrix)


def relaxed_rest_pose() -> np.ndarray:
    """(55, 3) pose with arms hanging relaxed at the sides instead of the T-pose."""
    pose = np.zeros((NUM_JOINTS, 3))
    pose[_J["left_shoulder"]] = (0.0, 0.0, -SHOULDER_DOWN_RAD)
    pose[_J["right_shoulder"]] = (0.0, 0.0, SHOULDER_DOWN_RAD)
    pose[_J["left_elbow"]] = (0.0, -ELBOW_BEND_RAD, 0.0)
    pose[_J["right_elbow"]] = (0.0, ELBOW_BEND_RAD, 0.0)
    pose[_J["left_wrist"]] = (0.0, 0.0, 0.08)
    pose[_J["right_wrist"]] = (0.0, 0.0, -0.08)
    return pose


_REST_POSE = relaxed_rest_pose()
_REST_POSE.flags.writeable = False


# ---------------------------------------------------------------- idle layer (pure functions of time)

def _smoothstep(x: float) -> float:
    x = min(max(x, 0.0), 1.0)
    return x * x * (3.0 - 2.0 * x)


class _Wander:
    """A smooth, bounded (-1..1) signal: a few sinusoids with seeded, incommensurate frequencies."""

    def __init__(self, seed: int, stream: int, low_hz: float, high_hz: float, terms: int = 3) -> None:
        rng = _rng(seed, stream, 7919)
        self.freqs = rng.uniform(low_hz, high_hz, terms)
        self.phases = rng.uniform(0.0, 2.0 * math.pi, terms)
        amps = rng.uniform(0.5, 1.0, terms)
        self.amps = amps / amps.sum()

    def __call__(self, t: float) -> float:
        return float(np.dot(self.amps, np.sin(2.0 * math.pi * self.freqs * t + self.phases)))


def _rng(*keys: int) -> np.random.Generator:
    """A generator for a tuple of (possibly negative) integer keys: slots before t=0 and any seed work."""
    return np.random.default_rng([2 * k if k >= 0 else -2 * k - 1 for k in keys])


@lru_cache(maxsize=256)
def _blink_slot(seed: int, slot_s: float, slot: int) -> tuple[float, bool]:
    rng = _rng(seed, 101, slot)
    return float(rng.uniform(0.1, 0.85) * slot_s), bool(rng.random() < 0.12)


@lru_cache(maxsize=256)
def _gaze_slot(seed: int, slot: int) -> tuple[float, float, float]:
    rng = _rng(seed, 202, slot)
    at_camera = rng.random() < 0.4
    yaw = 0.0 if at_camera else float(np.clip(rng.normal(0.0, 0.12), -0.3, 0.3))
    pitch = 0.0 if at_camera else float(np.clip(rng.normal(0.0, 0.05), -0.15, 0.15))
    return float(rng.uniform(0.0, 0.75)), yaw, pitch


def blink_shape(since_start_s: float) -> float:
    """Eyelid closure 0..1 of one blink: fast close (70 ms), short hold, slower open (150 ms)."""
    if since_start_s < 0.0 or since_start_s > 0.25:
        return 0.0
    if since_start_s < 0.07:
        return _smoothstep(since_start_s / 0.07)
    if since_start_s < 0.10:
        return 1.0
    return 1.0 - _smoothstep((since_start_s - 0.10) / 0.15)


GAZE_SLOT_S = 1.6
BREATH_PERIOD_S = 4.3


class IdleMotion:
    """The idle layer: breathing, sway, head wander, blinks and gaze, all pure functions of time."""

    def __init__(self, style: MotionStyle) -> None:
        self.style = style
        seed = style.seed
        self.head = [_Wander(seed, axis, 0.05, 0.35) for axis in range(3)]  # yaw, pitch, roll
        self.head_speech = [_Wander(seed, 10 + axis, 0.3, 0.9) for axis in range(3)]
        self.sway = [_Wander(seed, 20 + axis, 0.04, 0.18) for axis in range(3)]  # x shift, spine yaw, spine roll
        self.breath_rate = _Wander(seed, 30, 0.01, 0.03)
        self.arms = [_Wander(seed, 40 + side, 0.05, 0.2) for side in range(2)]

    @property
    def blink_slot_s(self) -> float:
        return 60.0 / self.style.blink_rate_per_min if self.style.blink_rate_per_min > 0 else math.inf

    def blink(self, t: float) -> float:
        slot_s = self.blink_slot_s
        if not math.isfinite(slot_s):
            return 0.0
        current = math.floor(t / slot_s)
        value = 0.0
        for slot in (current - 1, current):
            offset, double = _blink_slot(self.style.seed, slot_s, slot)
            start = slot * slot_s + offset
            value = max(value, blink_shape(t - start))
            if double:
                value = max(value, blink_shape(t - start - 0.32))
        return value

    def gaze(self, t: float, transition_s: float = 0.045) -> tuple[float, float]:
        """Gaze (yaw, pitch) in radians: fixations joined by quick saccades."""
        slot = math.floor(t / GAZE_SLOT_S)
        offset, yaw, pitch = _gaze_slot(self.style.seed, slot)
        prev_offset, prev_yaw, prev_pitch = _gaze_slot(self.style.seed, slot - 1)
        _, prev2_yaw, prev2_pitch = _gaze_slot(self.style.seed, slot - 2)
        # before this slot's saccade the eyes may still be finishing the previous one
        done = _smoothstep((t - (slot - 1) * GAZE_SLOT_S - prev_offset) / transition_s)
        prev_yaw = prev2_yaw + (prev_yaw - prev2_yaw) * done
        prev_pitch = prev2_pitch + (prev_pitch - prev2_pitch) * done
        blend = _smoothstep((t - slot * GAZE_SLOT_S - offset) / transition_s)
        return prev_yaw + (yaw - prev_yaw) * blend, prev_pitch + (pitch - prev_pitch) * blend

    def breath(self, t: float) -> float:
        """0..1 chest expansion, ~14 breaths a minute; a bounded phase wobble keeps it from looking mechanical."""
        phase = 2.0 * math.pi * t / BREATH_PERIOD_S + 0.8 * self.breath_rate(t)
        return 0.5 - 0.5 * math.cos(phase)


# ---------------------------------------------------------------- speech layer

class _Spring:
    """Critically damped spring toward a target, integrated exactly (stable for any step)."""

    def __init__(self, omega: float, size: int = 1) -> None:
        self.omega = omega
        self.x = np.zeros(size)
        self.v = np.zeros(size)

    def step(self, target, dt: float) -> np.ndarray:
        w = self.omega
        x0 = self.x - target
        decay = math.exp(-w * dt)
        c = self.v + w * x0
        self.x = target + (x0 + c * dt) * decay
        self.v = (self.v - w * c * dt) * decay
        return self.x

    def reset(self) -> None:
        self.x[:] = 0.0
        self.v[:] = 0.0


class MotionGenerator:
    """Streams a MotionFrame per hop from prosody: idle layer + speech-driven head, blinks, beats."""

    HEAD_LIMIT_RAD = 0.35
    GESTURE_REFRACTORY_S = 0.45

    def __init__(self, style: MotionStyle | None = None) -> None:
        self.style = style or MotionStyle()
        self.idle = IdleMotion(self.style)
        self.reset()

    def reset(self) -> None:
        """Back to rest (a new source starts): springs relax, no pending gestures."""
        self._speaking = _Spring(6.0)
        self._head = _Spring(9.0, 3)
        self._gesture = _Spring(11.0, 2)
        self._energy_slow = 0.0
        self._last_time: float | None = None
        self._speech_run_s = 0.0
        self._extra_blink_at = -math.inf
        self._gesture_at = -math.inf
        self._gesture_side = 0
        self._gesture_amount = np.zeros(2)
        self._rng = _rng(self.style.seed, 303)

    def set_style(self, style: MotionStyle) -> None:
        self.style = style
        self.idle = IdleMotion(style)

    def step(self, media_time_s: float, prosody: Prosody = SILENCE) -> MotionFrame:
        dt = HOP_S if self._last_time is None else min(max(media_time_s - self._last_time, 0.0), 0.1)
        self._last_time = media_time_s
        t = media_time_s
        speaking = float(np.clip(self._speaking.step(float(np.clip(prosody.speaking, 0, 1)), dt)[0], 0.0, 1.0))

        # accents: loudness rising above its own slow average (stressed syllables)
        energy = float(np.clip(prosody.energy, 0.0, 1.0))
        self._energy_slow += (energy - self._energy_slow) * min(1.0, dt / 0.35)
        accent = max(0.0, energy - self._energy_slow) * (prosody.speaking > 0.3)

        gain = self.style.head_gain
        pitch_up = float(np.clip(prosody.pitch, -1.0, 1.0)) if prosody.voiced else 0.0
        head_target = np.array([
            0.05 * speaking * self.idle.head_speech[0](t),
            0.22 * accent - 0.03 * pitch_up + 0.02 * speaking * self.idle.head_speech[1](t),
            0.03 * speaking * self.idle.head_speech[2](t),
        ]) * gain
        head_speech = self._head.step(head_target, dt)

        # a blink at the end of a phrase, unless one happened just now
        if speaking > 0.5:
            self._speech_run_s += dt
        elif speaking < 0.2 and self._speech_run_s > 0.8:
            if t - self._extra_blink_at > 1.0 and self.style.blink_rate_per_min > 0:
                self._extra_blink_at = t
            self._speech_run_s = 0.0

        if accent > 0.18 and t - self._gesture_at > self.GESTURE_REFRACTORY_S and self.style.gesture_energy > 0:
            self._gesture_at = t
            self._gesture_side = int(self._rng.integers(0, 3))  # 0 left, 1 right, 2 both
            strength = float(np.clip(accent * 3.0, 0.3, 1.0))
            self._gesture_amount = np.array([self._gesture_side != 1, self._gesture_side != 0], float) * strength
        beat_on = (t - self._gesture_at) < 0.22
        gesture = np.clip(self._gesture.step(self._gesture_amount * beat_on, dt), 0.0, 1.2)

        return self._frame(t, speaking, head_speech, gesture)

    def idle_frame(self, media_time_s: float) -> MotionFrame:
        """The idle layer alone: a pure function of time."""
        return compose_motion(self.idle, media_time_s, 0.0, np.zeros(3), np.zeros(2), -math.inf)

    def _frame(self, t: float, speaking: float, head_speech: np.ndarray, gesture: np.ndarray) -> MotionFrame:
        return compose_motion(self.idle, t, speaking, head_speech, gesture, self._extra_blink_at)


def compose_motion(idle: IdleMotion, t: float, speaking: float, head_speech: np.ndarray, gesture: np.ndarray,
                   extra_blink_at: float) -> MotionFrame:
    """Lay the speech layer over the idle layer and turn it into joint rotations and eye weights."""
    style = idle.style
    gain = style.head_gain
    pose = _REST_POSE.copy()

    gaze_yaw, gaze_pitch = idle.gaze(t)
    quiet = 1.0 - 0.5 * speaking  # a speaker looks at the listener more
    gaze_yaw *= quiet
    gaze_pitch *= quiet
    follow_yaw, follow_pitch = idle.gaze(t, transition_s=0.6)  # the head follows the eyes, slowly

    head = np.array([
        0.045 * idle.head[0](t) + 0.35 * follow_yaw * quiet,
        0.03 * idle.head[1](t) + 0.25 * follow_pitch * quiet,
        0.025 * idle.head[2](t),
    ]) * gain + head_speech
    head = np.clip(head, -MotionGenerator.HEAD_LIMIT_RAD, MotionGenerator.HEAD_LIMIT_RAD)
    yaw, pitch, roll = head
    pose[_J["neck"]] = (0.4 * pitch, 0.4 * yaw, 0.4 * roll)
    pose[_J["head"]] = (0.6 * pitch, 0.6 * yaw, 0.6 * roll)

    # the eyes counter-rotate a little against the head to keep looking where they look
    eye_yaw = float(np.clip(gaze_yaw - 0.3 * yaw, -EYE_LOOK_FULL_RAD, EYE_LOOK_FULL_RAD))
    eye_pitch = float(np.clip(gaze_pitch - 0.3 * pitch, -EYE_LOOK_FULL_RAD, EYE_LOOK_FULL_RAD))
    pose[_J["left_eye_smplhf"]] = (eye_pitch, eye_yaw, 0.0)
    pose[_J["right_eye_smplhf"]] = (eye_pitch, eye_yaw, 0.0)

    breath = idle.breath(t) * (1.0 - 0.6 * speaking)
    sway = style.sway
    pose[_J["spine1"]] = (0.0, 0.012 * sway * idle.sway[1](t), 0.010 * sway * idle.sway[2](t))
    pose[_J["spine3"]] = (-0.018 * breath, 0.0, 0.0)
    pose[_J["left_collar"]] = (0.0, 0.0, 0.025 * breath)
    pose[_J["right_collar"]] = (0.0, 0.0, -0.025 * breath)

    energy = style.gesture_energy
    for side, (shoulder, elbow, sign) in enumerate((("left_shoulder", "left_elbow", 1.0),
                                                     ("right_shoulder", "right_elbow", -1.0))):
        idle_swing = 0.025 * sway * idle.arms[side](t)
        lift = float(gesture[side]) * energy
        ready = 0.15 * speaking * energy
        forward = idle_swing + 0.25 * lift + ready
        pose[_J[shoulder]] = _compose(np.array([-forward, 0.0, 0.0]), _REST_POSE[_J[shoulder]])
        pose[_J[elbow]] = (0.0, -sign * (ELBOW_BEND_RAD + 0.55 * lift + 1.5 * ready), 0.0)

    transl = np.array([0.004 * sway * idle.sway[0](t), 0.0, 0.0])

    blink = max(idle.blink(t), blink_shape(t - extra_blink_at))
    eyes = np.zeros(NUM_ARKIT, np.float32)
    eyes[ARKIT_INDEX["eyeBlinkLeft"]] = blink
    eyes[ARKIT_INDEX["eyeBlinkRight"]] = blink
    look_side = eye_yaw / EYE_LOOK_FULL_RAD  # + = towards the subject's left
    look_down = eye_pitch / EYE_LOOK_FULL_RAD  # + = down
    eyes[ARKIT_INDEX["eyeLookOutLeft"]] = max(0.0, look_side)
    eyes[ARKIT_INDEX["eyeLookInRight"]] = max(0.0, look_side)
    eyes[ARKIT_INDEX["eyeLookInLeft"]] = max(0.0, -look_side)
    eyes[ARKIT_INDEX["eyeLookOutRight"]] = max(0.0, -look_side)
    for side in ("Left", "Right"):
        eyes[ARKIT_INDEX[f"eyeLookDown{side}"]] = max(0.0, look_down)
        eyes[ARKIT_INDEX[f"eyeLookUp{side}"]] = max(0.0, -look_down)
    return MotionFrame(pose=pose.astype(np.float32), transl=transl.astype(np.float32), eye_weights=eyes)


# ---------------------------------------------------------------- prosody from audio

class ProsodyTracker:
    """Per-hop loudness and pitch from 16 kHz mono audio (cheap autocorrelation pitch)."""

    WINDOW = 512  # 32 ms: two periods of a 60 Hz voice

    def __init__(self, sample_rate: int = 16000, hop: int = 160) -> None:
        self.sample_rate = sample_rate
        self.hop = hop
        self.min_lag = sample_rate // 400
        self.max_lag = sample_rate // 60
        self.reset()

    def reset(self) -> None:
        self._buffer = np.zeros(self.WINDOW)
        self._pending = np.zeros(0)
        self._peak_db = -40.0
        self._log_f0_median = math.log(150.0)

    def push(self, samples: np.ndarray, speaking: np.ndarray | None = None) -> list[Prosody]:
        """Prosody for every complete hop in the samples so far; `speaking` gives voice activity per hop."""
        data = np.concatenate([self._pending, np.asarray(samples, np.float64)])
        hops = len(data) // self.hop
        self._pending = data[hops * self.hop:]
        out = []
        for i in range(hops):
            chunk = data[i * self.hop:(i + 1) * self.hop]
            self._buffer = np.concatenate([self._buffer[self.hop:], chunk])
            vad = None if speaking is None or i >= len(speaking) else float(speaking[i])
            out.append(self._analyse(vad))
        return out

    def _analyse(self, vad: float | None) -> Prosody:
        frame = self._buffer - self._buffer.mean()
        rms = math.sqrt(float(np.mean(frame[-320:] ** 2)) + 1e-12)
        level_db = 20.0 * math.log10(rms)
        self._peak_db = max(level_db, self._peak_db - 0.02)  # decays 2 dB/s
        audible = level_db > AUDIBLE_DB
        energy = float(np.clip((level_db - (self._peak_db - 30.0)) / 30.0, 0.0, 1.0)) if audible else 0.0
        pitch, voiced = 0.0, False
        if audible:
            spectrum = np.fft.rfft(frame * np.hanning(len(frame)), 2 * len(frame))
            corr = np.fft.irfft(np.abs(spectrum) ** 2)[: self.max_lag + 1]
            if corr[0] > 0:
                lag = self.min_lag + int(np.argmax(corr[self.min_lag:self.max_lag + 1]))
                if corr[lag] / corr[0] > 0.45:
                    voiced = True
                    log_f0 = math.log(self.sample_rate / lag)
                    self._log_f0_median += 0.01 * math.copysign(1.0, log_f0 - self._log_f0_median) * 0.5
                    semitones = 12.0 * (log_f0 - self._log_f0_median) / math.log(2.0)
                    pitch = float(np.clip(semitones / 6.0, -1.0, 1.0))
        speaking = vad if vad is not None else float(energy > 0.15)
        return Prosody(energy=energy, pitch=pitch, voiced=voiced, speaking=speaking, level_db=level_db)
