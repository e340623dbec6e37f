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
from collections import deque
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from studio.avatar.arkit import ARKIT_INDEX, NUM_ARKIT
from studio.avatar.skeleton import JOINT_INDEX, NUM_JOINTS
from studio.engine.hands import HandMotion

HOP_S = 0.01
AUDIBLE_DB = -50.0  # below this a hop counts as silence
# ... and so does a hop less than ABOVE_FLOOR_DB above the room's noise floor: the quietest 20 ms level of the
# last NOISE_FLOOR_WINDOW_HOPS (a minimum tracker: it finds the floor in the first pause, even one between
# syllables). For its first FLOOR_SETTLE_HOPS a stream has no floor yet and only AUDIBLE_DB applies, so a
# recording that starts in the middle of a word is not gated shut.
ABOVE_FLOOR_DB = 10.0
NOISE_FLOOR_WINDOW_HOPS = 200
FLOOR_SETTLE_HOPS = 20

# Relaxed A-pose: upper arms ~66 degrees down from the T-pose, elbows a little bent forward.
SHOULDER_DOWN_RAD = math.radians(66.0)
ELBOW_BEND_RAD = math.radians(14.0)
# ARKit eyeLook* weight 1.0 corresponds to this eye rotation.
EYE_LOOK_FULL_RAD = 0.45

_J = JOINT_INDEX
_EYE_CHANNELS = np.array([ARKIT_INDEX[f"eye{part}{side}"] for side in ("Left", "Right")
                          for part in ("Blink", "LookDown", "LookIn", "LookOut", "LookUp")])
_BLINK_CHANNELS = np.array([ARKIT_INDEX["eyeBlinkLeft"], ARKIT_INDEX["eyeBlinkRight"]])
# eye channels written per frame, in this order: blink L/R, then gaze (out L, in R, in L, out R, down L/R, up L/R)
_EYE_FRAME_CHANNELS = np.array([ARKIT_INDEX[name] for name in (
    "eyeBlinkLeft", "eyeBlinkRight", "eyeLookOutLeft", "eyeLookInRight", "eyeLookInLeft", "eyeLookOutRight",
    "eyeLookDownLeft", "eyeLookDownRight", "eyeLookUpLeft", "eyeLookUpRight")])


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
    audible: bool = False  # above AUDIBLE_DB and ABOVE_FLOOR_DB over the noise floor: sound, not the room


SILENCE = Prosody()


@dataclass(frozen=True)
class MotionFrame:
    """The body pose and eye weights for one instant.

    Gaze travels as the ARKit eyeLook* weights only; the eye joints stay at rest in `pose`.
    The default avatar's eyeLook* shapes turn the eyeball *and* move the lids with it, and its
    eyeballs are also skinned to the eye joints, so driving both would turn the eyes twice.
    The weights are the one gaze signal every consumer understands (renderer, CSV, API, VMC
    perfect sync); an exporter that needs eye-bone angles reads them back with `gaze_angles`.
    """

    pose: np.ndarray  # (55, 3) axis-angle; the eye joints stay at rest (gaze is in eye_weights)
    transl: np.ndarray  # (3,)
    eye_weights: np.ndarray  # (52,) ARKit, only the blink and eyeLook channels are meaningful

    def apply(self, arkit: np.ndarray) -> np.ndarray:
        """Face weights with blinks and gaze laid over them (blink = the stronger of face and motion)."""
        return lay_eyes(arkit, self.eye_weights)


def lay_eyes(arkit: np.ndarray, eye_weights: np.ndarray) -> np.ndarray:
    """Face weights (..., 52) with the motion's gaze and blinks (..., 52) laid over them, as a new float32 array."""
    face = np.asarray(arkit, np.float32)
    out = face.copy()
    out[..., _EYE_CHANNELS] = eye_weights[..., _EYE_CHANNELS]
    out[..., _BLINK_CHANNELS] = np.maximum(face[..., _BLINK_CHANNELS], eye_weights[..., _BLINK_CHANNELS])
    return out


def gaze_angles(arkit: np.ndarray) -> tuple[float, float]:
    """(yaw, pitch) of the eyes in radians from the eyeLook* weights (yaw + = subject's left, pitch + = down)."""
    w = np.asarray(arkit, np.float32)
    look_side = float(w[ARKIT_INDEX["eyeLookOutLeft"]] - w[ARKIT_INDEX["eyeLookInLeft"]])
    look_down = float(w[ARKIT_INDEX["eyeLookDownLeft"]] - w[ARKIT_INDEX["eyeLookUpLeft"]])
    return look_side * EYE_LOOK_FULL_RAD, look_down * EYE_LOOK_FULL_RAD


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
_REST_POSE32 = _REST_POSE.astype(np.float32)
_REST_POSE32.flags.writeable = False


# ---------------------------------------------------------------- idle layer (pure functions of time)

def _smoothstep(x: float) -> float:
    x = min(max(x, 0.0), 1.0)
    return x * x * (3.0 - 2.0 * x)


def _clamp(x: float, low: float, high: float) -> float:
    """min/max on Python floats: ~20x cheaper than np.clip on a scalar, which matters at 100 steps/s."""
    return low if x < low else high if x > high else x


class _Wander:
    """A smooth, bounded (-1..1) signal: a few sinusoids with seeded, incommensurate frequencies."""

    def __init__(self, seed: int, stream: int, low_hz: float, high_hz: float, terms: int = 3) -> None:
        rng = _rng(seed, stream, 7919)
        self.freqs = rng.uniform(low_hz, high_hz, terms)
        self.phases = rng.uniform(0.0, 2.0 * math.pi, terms)
        amps = rng.uniform(0.5, 1.0, terms)
        self.amps = amps / amps.sum()
        # plain floats, unrolled: a 3-term sum in Python beats numpy's per-call overhead several times over
        self._terms = tuple((float(a), 2.0 * math.pi * float(f), float(p))
                            for a, f, p in zip(self.amps, self.freqs, self.phases))

    def __call__(self, t: float) -> float:
        if len(self._terms) == 3:
            (a0, w0, p0), (a1, w1, p1), (a2, w2, p2) = self._terms
            return a0 * math.sin(w0 * t + p0) + a1 * math.sin(w1 * t + p1) + a2 * math.sin(w2 * t + p2)
        return sum(a * math.sin(w * t + p) for a, w, p in self._terms)

    def at(self, times: np.ndarray) -> np.ndarray:
        """The signal at many times at once (float64), the terms summed in __call__'s order."""
        total = np.zeros(np.shape(times))
        for a, w, p in self._terms:
            total += a * np.sin(w * times + p)
        return total


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


def _smoothsteps(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3.0 - 2.0 * x)


def blink_shapes(since_start_s: np.ndarray) -> np.ndarray:
    """`blink_shape` of many instants at once."""
    s = np.asarray(since_start_s, np.float64)
    # the clipped smoothsteps give blink_shape's 0 before the start and after the end, and its hold at 1
    return np.where(s < 0.10, _smoothsteps(s / 0.07), 1.0 - _smoothsteps((s - 0.10) / 0.15))


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

    def blinks(self, times: np.ndarray) -> np.ndarray:
        """`blink` at many times at once (a block of frames)."""
        slot_s = self.blink_slot_s
        times = np.asarray(times, np.float64)
        if not math.isfinite(slot_s) or not times.size:
            return np.zeros(times.shape)
        current = np.floor(times / slot_s).astype(np.int64)
        first = int(current.min()) - 1
        slots = [_blink_slot(self.style.seed, slot_s, slot) for slot in range(first, int(current.max()) + 1)]
        offsets = np.array([offset for offset, _ in slots])
        doubles = np.array([double for _, double in slots])
        since = []  # the blinks of this slot and the one before, and their doubles where they have one
        for slot in (current - 1, current):
            start = slot * slot_s + offsets[slot - first]
            since += [times - start, np.where(doubles[slot - first], times - start - 0.32, -1.0)]
        return blink_shapes(np.stack(since)).max(axis=0)

    def gazes(self, times: np.ndarray, transition_s: float = 0.045) -> tuple[np.ndarray, np.ndarray]:
        """`gaze` at many times at once: (yaw, pitch) arrays."""
        times = np.asarray(times, np.float64)
        slot = np.floor(times / GAZE_SLOT_S).astype(np.int64)
        first = int(slot.min()) - 2 if times.size else 0
        table = np.array([_gaze_slot(self.style.seed, n) for n in range(first, int(slot.max()) + 1)]
                         if times.size else np.zeros((0, 3)))
        offset, yaw, pitch = table[slot - first].T
        prev_offset, prev_yaw, prev_pitch = table[slot - 1 - first].T
        _, prev2_yaw, prev2_pitch = table[slot - 2 - first].T
        done = _smoothsteps((times - (slot - 1) * GAZE_SLOT_S - prev_offset) / transition_s)
        prev_yaw = prev2_yaw + (prev_yaw - prev2_yaw) * done
        prev_pitch = prev2_pitch + (prev_pitch - prev2_pitch) * done
        blend = _smoothsteps((times - slot * GAZE_SLOT_S - offset) / transition_s)
        return prev_yaw + (yaw - prev_yaw) * blend, prev_pitch + (pitch - prev_pitch) * blend

    def breath(self, t: float) -> float:
        """0..1 chest expansion, ~14 breaths a minute; a bounded phase wobble keeps it from looking mechanical."""
        phase = 2.0 * math.pi * t / BREATH_PERIOD_S + 0.8 * self.breath_rate(t)
        return 0.5 - 0.5 * math.cos(phase)


# ---------------------------------------------------------------- speech layer

class Spring:
    """Critically damped spring on one float toward a target, integrated exactly (stable for any step).

    Scalar on purpose: the engine steps a handful of these 100 times a second, where Python
    floats cost a fraction of one-element numpy arrays.
    """

    def __init__(self, omega: float, value: float = 0.0) -> None:
        self.omega = float(omega)
        self.x = float(value)
        self.v = 0.0

    def step(self, target: float, dt: float) -> float:
        w = self.omega
        x0 = self.x - target
        decay = math.exp(-w * dt)
        c = self.v + w * x0
        self.x = target + (x0 + c * dt) * decay
        self.v = (self.v - w * c * dt) * decay
        return self.x

    def reset(self, value: float = 0.0) -> None:
        self.x = float(value)
        self.v = 0.0


class MouthGate:
    """Holds an audio model's mouth shut in silence, where it may murmur on noise.

    Opens fast when sound is near (a short attack, so the mouth is not late on a word's onset)
    and closes gently (a longer release). `audible` looks at hops LOOK_BEHIND before to
    LOOK_AHEAD after the current one: the face model lags its input by its lookahead, so the
    streamed engine already has the prosody of that many of those hops when it emits this one
    (the live model's 1 hop: its gate needs the faster `attack_for_warning(1)`). A file has the whole
    future, and looks FILE_LOOK_AHEAD hops ahead.
    """

    LOOK_BEHIND = 1
    LOOK_AHEAD = 3
    FILE_LOOK_AHEAD = 12
    """A word's first hops are often too quiet to count as heard (below AUDIBLE_DB, or within ABOVE_FLOOR_DB of a
    noisy room's floor), so a gate that opened only 3 hops before the first heard one showed the mouth opening
    after the sound: `lipsync` on the human dev set opened 16.9 ms later than the target after pauses, 31 ms in
    room noise 20 dB below the speech and 59 ms at 10 dB. Looking 12 hops ahead: -1.9, 14.4 and 31.3 ms (the
    model's own, ungated: -3.6 ms as recorded), rest in pauses 99.1 -> 99.0 %, nothing else moved
    (the experiment log, fourteenth round)."""
    VOICE_OPENS = 0.5
    """Live, the future is one hop, so the engine also opens the gate where the model itself hears a voice (its
    voice activity above this) before the level counts as heard. The live engine on the human dev set opened the
    mouth 15.9 ms later than the target after pauses, 37.9 ms in room noise 20 dB below the speech and 64.4 ms at
    10 dB; with the model's voice: 4.7, 32.5 and 44.3 ms (ungated: 3.2 ms as recorded, 44.1 at 10 dB), rest in
    pauses 99.1 / 99.5 / 99.6 -> 99.0 / 99.5 / 99.5 % (the experiment log, fourteenth round).
    Not in digital silence, though (every hop of the window below `level.SPEECH_MIN_DBFS`): a model that heard
    game dialogue, whose lines end in breaths, kept its voice up and the mouth moving for 200 ms after a sound
    stopped dead (twenty-first round)."""
    OPEN_WT = 3.89  # a critically damped spring from rest is 90 % open after omega * t = 3.89: 1 - (1 + wt) e^-wt

    def __init__(self, attack_omega: float = 120.0, release_omega: float = 40.0, opened: bool = False) -> None:
        self.attack_omega = attack_omega
        self.release_omega = release_omega
        self._spring = Spring(release_omega, 1.0 if opened else 0.0)

    @classmethod
    def attack_for_warning(cls, hops: int) -> float:
        """The attack omega that opens the gate 90 % in `hops` hops (at least one). A stream that hears sound
        only `hops` hops before it shows it (the live engine: the face model's lookahead) must open that
        fast, or the onset is shown with the mouth still half gated shut; the default attack (120/s) opens
        it in about 3 hops, well within the FILE_LOOK_AHEAD hops a file gives."""
        return cls.OPEN_WT / (max(1, hops) * HOP_S)

    @property
    def value(self) -> float:
        """The gate of the last hop (0 shut .. 1 open)."""
        return _clamp(self._spring.x, 0.0, 1.0)

    def step(self, audible: bool, dt: float = HOP_S) -> float:
        """The gate (0 shut .. 1 open) for this hop."""
        target = 1.0 if audible else 0.0
        self._spring.omega = self.attack_omega if target > self._spring.x else self.release_omega
        return _clamp(self._spring.step(target, dt), 0.0, 1.0)

    def run(self, audible: list[bool], dt: float = HOP_S) -> np.ndarray:
        """`step` over consecutive hops (the same arithmetic, inlined): the gates as float32."""
        spring = self._spring
        x, v = spring.x, spring.v
        gates = np.empty(len(audible), np.float32)
        for k, heard in enumerate(audible):
            target = 1.0 if heard else 0.0
            w = self.attack_omega if target > x else self.release_omega
            x0 = x - target
            decay = math.exp(-w * dt)
            c = v + w * x0
            x = target + (x0 + c * dt) * decay
            v = (v - w * c * dt) * decay
            gates[k] = _clamp(x, 0.0, 1.0)
        spring.x, spring.v = x, v
        if len(audible):
            spring.omega = w
        return gates

    def reset(self, opened: bool = False) -> None:
        self._spring.reset(1.0 if opened else 0.0)


BODY_MODES = ("full", "head_torso")


class MotionGenerator:
    """Streams a MotionFrame per hop from prosody: idle layer + speech-driven head, blinks, beats.

    `body_mode` "head_torso" leaves the arms at rest (no gestures, no arm sway); `hands_mode` is the
    finger motion (see hands.py). `steps` counts the frames computed.
    """

    HEAD_LIMIT_RAD = 0.35
    GESTURE_REFRACTORY_S = 0.45

    def __init__(self, style: MotionStyle | None = None, body_mode: str = "full",
                 hands_mode: str = "articulated") -> None:
        self.style = style or MotionStyle()
        self.idle = IdleMotion(self.style)
        self.steps = 0
        self.hands = HandMotion(hands_mode, self.style.seed)
        self.configure(body_mode, hands_mode)
        self.reset()

    def configure(self, body_mode: str, hands_mode: str) -> None:
        """Switch the body and hands levels (takes effect at the next step, springs kept)."""
        if body_mode not in BODY_MODES:
            raise ValueError(f"body mode {body_mode!r} is not known; allowed: {', '.join(BODY_MODES)}")
        self.body_mode = body_mode
        if hands_mode != self.hands.mode:
            counted = self.hands.joints_updated
            self.hands = HandMotion(hands_mode, self.style.seed)
            self.hands.joints_updated = counted

    def reset(self) -> None:
        """Back to rest (a new source starts): springs relax, no pending gestures."""
        self._speaking = Spring(6.0)
        self._head = [Spring(9.0) for _ in range(3)]
        self._gesture = [Spring(11.0) for _ in range(2)]
        self._energy_slow = 0.0
        self._last_time: float | None = None
        self._speech_run_s = 0.0
        self._extra_blink_at = -math.inf
        self._gesture_at = -math.inf
        self._gesture_side = 0
        self._gesture_amount = (0.0, 0.0)
        self._gestures = 0
        self._rng = _rng(self.style.seed, 303)

    def set_style(self, style: MotionStyle) -> None:
        self.style = style
        self.idle = IdleMotion(style)

    def step(self, media_time_s: float, prosody: Prosody = SILENCE) -> MotionFrame:
        dt = HOP_S if self._last_time is None else _clamp(media_time_s - self._last_time, 0.0, 0.1)
        self._last_time = media_time_s
        t = media_time_s
        speaking = _clamp(self._speaking.step(_clamp(prosody.speaking, 0.0, 1.0), dt), 0.0, 1.0)

        # accents: loudness rising above its own slow average (stressed syllables)
        energy = _clamp(prosody.energy, 0.0, 1.0)
        self._energy_slow += (energy - self._energy_slow) * min(1.0, dt / 0.35)
        accent = max(0.0, energy - self._energy_slow) if prosody.speaking > 0.3 else 0.0

        gain = self.style.head_gain
        pitch_up = _clamp(prosody.pitch, -1.0, 1.0) if prosody.voiced else 0.0
        wander = self.idle.head_speech
        head_speech = (
            self._head[0].step(0.05 * speaking * wander[0](t) * gain, dt),
            self._head[1].step((0.22 * accent - 0.03 * pitch_up + 0.02 * speaking * wander[1](t)) * gain, dt),
            self._head[2].step(0.03 * speaking * wander[2](t) * gain, dt),
        )

        # a blink at the end of a phrase, unless one happened just now
        if speaking > 0.5:
            self._speech_run_s += dt
        elif speaking < 0.2 and self._speech_run_s > 0.8:
            if t - self._extra_blink_at > 1.0 and self.style.blink_rate_per_min > 0:
                self._extra_blink_at = t
            self._speech_run_s = 0.0

        arms = self.body_mode == "full"
        if (arms and accent > 0.18 and t - self._gesture_at > self.GESTURE_REFRACTORY_S
                and self.style.gesture_energy > 0):
            self._gesture_at = t
            self._gestures += 1
            self._gesture_side = int(self._rng.integers(0, 3))  # 0 left, 1 right, 2 both
            strength = _clamp(accent * 3.0, 0.3, 1.0)
            self._gesture_amount = (strength * (self._gesture_side != 1), strength * (self._gesture_side != 0))
        beat_on = (t - self._gesture_at) < 0.22
        left, right = self._gesture_amount if beat_on else (0.0, 0.0)
        gesture = (_clamp(self._gesture[0].step(left, dt), 0.0, 1.2), _clamp(self._gesture[1].step(right, dt), 0.0, 1.2))

        self.steps += 1
        frame = compose_motion(self.idle, t, speaking, head_speech, gesture, self._extra_blink_at, arms=arms)
        self.hands.apply(frame.pose, t, gesture, shape_seed=self._gestures)
        return frame

    def eye_weights_block(self, times: np.ndarray, energy: np.ndarray, pitch: np.ndarray, voiced: np.ndarray,
                          speaking: np.ndarray) -> np.ndarray:
        """The (k, 52) eye weights `step` would give for k consecutive frames, at a fraction of its cost.

        For a face-only export (a CSV): only the springs the eyes depend on run frame by frame, the
        idle layer (a pure function of time) is computed for the whole block at once. Head and torso
        angles, gestures and hands are not computed, so a generator driven this way serves eyes only.
        Arguments are per-frame arrays of the Prosody fields (`voiced` booleans).
        """
        times = np.asarray(times, np.float64)
        count = len(times)
        dts = np.clip(np.diff(times, prepend=times[:1] if self._last_time is None else self._last_time), 0.0, 0.1)
        if count and self._last_time is None:
            dts[0] = HOP_S  # as step(): the first frame after a reset advances one hop
        raw_speaking = np.asarray(speaking, np.float64)
        heard = np.clip(raw_speaking, 0.0, 1.0)
        energy = np.clip(np.asarray(energy, np.float64), 0.0, 1.0)
        pitch_up = np.where(np.asarray(voiced, bool), np.clip(np.asarray(pitch, np.float64), -1.0, 1.0), 0.0)
        gain = self.style.head_gain
        blinking = self.style.blink_rate_per_min > 0
        spring, yaw_spring, pitch_spring = self._speaking, self._head[0], self._head[1]
        speak_x, speak_v = spring.x, spring.v
        energy_slow, run_s, extra_at = self._energy_slow, self._speech_run_s, self._extra_blink_at
        said = np.empty(count)
        extra = np.empty(count)
        slow = np.empty(count)
        w = spring.omega
        for k, (t, dt, target, loud) in enumerate(zip(times.tolist(), dts.tolist(), heard.tolist(), energy.tolist())):
            # Spring.step inlined: the same arithmetic, so the same values as step()
            x0 = speak_x - target
            decay = math.exp(-w * dt)
            c = speak_v + w * x0
            speak_x = target + (x0 + c * dt) * decay
            speak_v = (speak_v - w * c * dt) * decay
            said_now = _clamp(speak_x, 0.0, 1.0)
            said[k] = said_now
            energy_slow += (loud - energy_slow) * min(1.0, dt / 0.35)
            slow[k] = energy_slow
            if said_now > 0.5:
                run_s += dt
            elif said_now < 0.2 and run_s > 0.8:
                if t - extra_at > 1.0 and blinking:
                    extra_at = t
                run_s = 0.0
            extra[k] = extra_at
        spring.x, spring.v = speak_x, speak_v
        self._energy_slow, self._speech_run_s, self._extra_blink_at = energy_slow, run_s, extra_at
        if count:
            self._last_time = float(times[-1])
        self.steps += count
        accent = np.where(raw_speaking > 0.3, np.maximum(0.0, energy - slow), 0.0)
        wander = self.idle.head_speech
        yaw_target = 0.05 * said * wander[0].at(times) * gain
        pitch_target = (0.22 * accent - 0.03 * pitch_up + 0.02 * said * wander[1].at(times)) * gain
        head_yaw = _spring_run(yaw_spring, yaw_target.tolist(), dts.tolist())
        head_pitch = _spring_run(pitch_spring, pitch_target.tolist(), dts.tolist())
        return _eye_weights(self.idle, times, said, head_yaw, head_pitch, extra)

    def idle_frame(self, media_time_s: float) -> MotionFrame:
        """The idle layer alone: a pure function of time."""
        return compose_motion(self.idle, media_time_s, 0.0, (0.0, 0.0, 0.0), (0.0, 0.0), -math.inf)


# Flat (row * 3 + axis) pose entries compose_motion writes, in the order of the values it computes.
_MOTION_ENTRIES = np.array([3 * _J[name] + axis for name in (
    "neck", "head", "spine1", "spine3", "left_collar", "right_collar",
    "left_shoulder", "left_elbow", "right_shoulder", "right_elbow") for axis in range(3)])
# Half-angle sin/cos of each shoulder's rest rotation about z (quaternion form, for composing with the swing).
_SHOULDER_REST_HALF = tuple((math.cos(angle / 2.0), math.sin(angle / 2.0))
                            for angle in (-SHOULDER_DOWN_RAD, SHOULDER_DOWN_RAD))


def _swing_then_rest(forward: float, side: int) -> tuple[float, float, float]:
    """Axis-angle of R_x(-forward) @ R_rest(shoulder), in closed form through quaternions."""
    c1, s1 = math.cos(-forward / 2.0), math.sin(-forward / 2.0)
    c2, s2 = _SHOULDER_REST_HALF[side]
    w, x, y, z = c1 * c2, c2 * s1, -s1 * s2, c1 * s2  # (c1 + s1 i)(c2 + s2 k)
    norm = math.sqrt(x * x + y * y + z * z)
    if norm < 1e-12:
        return 0.0, 0.0, 0.0
    scale = 2.0 * math.atan2(norm, w) / norm
    return x * scale, y * scale, z * scale


def compose_motion(idle: IdleMotion, t: float, speaking: float, head_speech, gesture,
                   extra_blink_at: float, arms: bool = True) -> MotionFrame:
    """Lay the speech layer over the idle layer and turn it into joint rotations and eye weights.

    `head_speech` is (yaw, pitch, roll) in radians and `gesture` (left, right) lift, as sequences of floats.
    With `arms` False only the head and torso move; the arms stay at the relaxed rest pose.
    """
    style = idle.style
    gain = style.head_gain
    speaking = float(speaking)

    gaze_yaw, gaze_pitch = idle.gaze(t)
    quiet = 1.0 - 0.5 * speaking  # a speaker looks at the listener more
    gaze_yaw *= quiet
    gaze_pitch *= quiet
    follow_yaw, follow_pitch = idle.gaze(t, transition_s=0.6)  # the head follows the eyes, slowly

    limit = MotionGenerator.HEAD_LIMIT_RAD
    yaw = _clamp((0.045 * idle.head[0](t) + 0.35 * follow_yaw * quiet) * gain + float(head_speech[0]), -limit, limit)
    pitch = _clamp((0.03 * idle.head[1](t) + 0.25 * follow_pitch * quiet) * gain + float(head_speech[1]),
                   -limit, limit)
    roll = _clamp(0.025 * idle.head[2](t) * gain + float(head_speech[2]), -limit, limit)

    # the eyes counter-rotate a little against the head to keep looking where they look
    eye_yaw = _clamp(gaze_yaw - 0.3 * yaw, -EYE_LOOK_FULL_RAD, EYE_LOOK_FULL_RAD)
    eye_pitch = _clamp(gaze_pitch - 0.3 * pitch, -EYE_LOOK_FULL_RAD, EYE_LOOK_FULL_RAD)

    breath = idle.breath(t) * (1.0 - 0.6 * speaking)
    sway = style.sway
    energy = style.gesture_energy
    ready = 0.15 * speaking * energy
    values = [
        0.4 * pitch, 0.4 * yaw, 0.4 * roll,  # neck
        0.6 * pitch, 0.6 * yaw, 0.6 * roll,  # head
        0.0, 0.012 * sway * idle.sway[1](t), 0.010 * sway * idle.sway[2](t),  # spine1
        -0.018 * breath, 0.0, 0.0,  # spine3
        0.0, 0.0, 0.025 * breath,  # left collar
        0.0, 0.0, -0.025 * breath,  # right collar
    ]
    pose = _REST_POSE32.copy()
    if arms:
        for side, sign in ((0, 1.0), (1, -1.0)):  # shoulder, then elbow
            lift = float(gesture[side]) * energy
            forward = 0.025 * sway * idle.arms[side](t) + 0.25 * lift + ready
            values.extend(_swing_then_rest(forward, side))
            values.extend((0.0, -sign * (ELBOW_BEND_RAD + 0.55 * lift + 1.5 * ready), 0.0))
        pose.reshape(-1)[_MOTION_ENTRIES] = values
    else:
        pose.reshape(-1)[_MOTION_ENTRIES[:len(values)]] = values
    transl = np.array((0.004 * sway * idle.sway[0](t), 0.0, 0.0), np.float32)

    blink = max(idle.blink(t), blink_shape(t - extra_blink_at))
    look_side = eye_yaw / EYE_LOOK_FULL_RAD  # + = towards the subject's left
    look_down = eye_pitch / EYE_LOOK_FULL_RAD  # + = down
    side_pos, side_neg = max(0.0, look_side), max(0.0, -look_side)
    down, up = max(0.0, look_down), max(0.0, -look_down)
    eyes = np.zeros(NUM_ARKIT, np.float32)
    eyes[_EYE_FRAME_CHANNELS] = (blink, blink, side_pos, side_pos, side_neg, side_neg, down, down, up, up)
    return MotionFrame(pose=pose, transl=transl, eye_weights=eyes)


def _spring_run(spring: Spring, targets: list[float], dts: list[float]) -> np.ndarray:
    """`spring.step` over a run of targets (the same arithmetic), its values as an array."""
    w, x, v = spring.omega, spring.x, spring.v
    out = np.empty(len(targets))
    for k, (target, dt) in enumerate(zip(targets, dts)):
        x0 = x - target
        decay = math.exp(-w * dt)
        c = v + w * x0
        x = target + (x0 + c * dt) * decay
        v = (v - w * c * dt) * decay
        out[k] = x
    spring.x, spring.v = x, v
    return out


def _eye_weights(idle: IdleMotion, times: np.ndarray, speaking: np.ndarray, head_yaw: np.ndarray,
                 head_pitch: np.ndarray, extra_blink_at: np.ndarray) -> np.ndarray:
    """compose_motion's eye weights for a block of frames, (k, 52) float32."""
    gain = idle.style.head_gain
    limit = MotionGenerator.HEAD_LIMIT_RAD
    gaze_yaw, gaze_pitch = idle.gazes(times)
    quiet = 1.0 - 0.5 * speaking
    gaze_yaw *= quiet
    gaze_pitch *= quiet
    follow_yaw, follow_pitch = idle.gazes(times, transition_s=0.6)
    yaw = np.clip((0.045 * idle.head[0].at(times) + 0.35 * follow_yaw * quiet) * gain + head_yaw, -limit, limit)
    pitch = np.clip((0.03 * idle.head[1].at(times) + 0.25 * follow_pitch * quiet) * gain + head_pitch, -limit, limit)
    eye_yaw = np.clip(gaze_yaw - 0.3 * yaw, -EYE_LOOK_FULL_RAD, EYE_LOOK_FULL_RAD)
    eye_pitch = np.clip(gaze_pitch - 0.3 * pitch, -EYE_LOOK_FULL_RAD, EYE_LOOK_FULL_RAD)
    blink = np.maximum(idle.blinks(times), blink_shapes(times - extra_blink_at))  # -inf: none yet
    look_side = eye_yaw / EYE_LOOK_FULL_RAD
    look_down = eye_pitch / EYE_LOOK_FULL_RAD
    side_pos, side_neg = np.maximum(0.0, look_side), np.maximum(0.0, -look_side)
    down, up = np.maximum(0.0, look_down), np.maximum(0.0, -look_down)
    eyes = np.zeros((len(times), NUM_ARKIT), np.float32)
    eyes[:, _EYE_FRAME_CHANNELS] = np.stack([blink, blink, side_pos, side_pos, side_neg, side_neg, down, down, up, up],
                                            axis=1)
    return eyes


# ---------------------------------------------------------------- prosody from audio

class ProsodyTracker:
    """Per-hop loudness and pitch from 16 kHz mono audio (cheap autocorrelation pitch).

    Loudness is measured every hop. Pitch, which only steers slow head nods (a spring with a
    ~0.1 s time constant), is measured every PITCH_EVERY-th hop and held in between, on the signal
    decimated by two (pitch lies far below 4 kHz); all hops that arrive together share one batched
    FFT. Only the running peak and pitch median are updated hop by hop, in Python floats. The
    result does not depend on how the audio is chunked.
    """

    WINDOW = 512  # 32 ms: two periods of a 60 Hz voice
    LEVEL_SPAN = 320  # loudness over the last 20 ms
    DECIMATION = 2
    PITCH_EVERY = 2

    def __init__(self, sample_rate: int = 16000, hop: int = 160) -> None:
        self.sample_rate = sample_rate
        self.hop = hop
        self.pitch_rate = sample_rate // self.DECIMATION
        self.min_lag = self.pitch_rate // 400
        self.max_lag = self.pitch_rate // 60
        pitch_window = self.WINDOW // self.DECIMATION
        self._taper = np.hanning(pitch_window) / self.DECIMATION  # the decimation's 1/2 folded in
        self._n_fft = 2 * pitch_window
        # below this a hop is silence; the owner lowers it by the lift a quiet voice gets (studio.engine.level)
        self.audible_db = AUDIBLE_DB
        self.reset()

    def reset(self) -> None:
        self._history = np.zeros(self.WINDOW - self.hop)  # the samples before the next hop's window
        self._pending = np.zeros(0)
        self._peak_db = -40.0
        self._log_f0_median = math.log(150.0)
        self._hops_seen = 0
        self._held_pitch = (0, 0.0)  # (lag, clarity) of the last pitch measurement; lag 0: none
        # (hop, level_db): the noise floor's candidates, first a stand-in that expires after FLOOR_SETTLE_HOPS
        self._quietest = deque([(FLOOR_SETTLE_HOPS - NOISE_FLOOR_WINDOW_HOPS, AUDIBLE_DB - ABOVE_FLOOR_DB)])

    def push(self, samples: np.ndarray, speaking: np.ndarray | None = None) -> list[Prosody]:
        """Prosody for every complete hop in the samples so far; `speaking` gives voice activity per hop."""
        out = []
        for i, (hop_energy, hop_pitch, hop_voiced, level_db, heard) in enumerate(zip(*self.push_arrays(samples))):
            vad = None if speaking is None or i >= len(speaking) else float(speaking[i])
            out.append(Prosody(energy=hop_energy, pitch=hop_pitch, voiced=hop_voiced,
                               speaking=vad if vad is not None else float(hop_energy > 0.15), level_db=level_db,
                               audible=heard))
        return out

    def push_arrays(self, samples: np.ndarray) -> tuple[list[float], list[float], list[bool], list[float], list[bool]]:
        """As `push`, without the Prosody objects (an offline analysis of hours makes millions):
        per complete hop, the lists energy, pitch, voiced, level_db and audible."""
        data = np.concatenate([self._history, self._pending, np.asarray(samples, np.float64)])
        hops = (len(data) - len(self._history)) // self.hop
        end = len(self._history) + hops * self.hop
        self._pending = data[end:]
        if hops == 0:
            return [], [], [], [], []
        self._history = data[end - len(self._history):end]
        # the overlapping windows as a strided view: the mean removal below makes the one copy
        frames = (data[None, :self.WINDOW] if hops == 1
                  else np.lib.stride_tricks.sliding_window_view(data[:end], self.WINDOW)[::self.hop][:hops])
        # few, batched numpy calls: each one costs microseconds whatever its size
        frames = frames - np.add.reduce(frames, axis=1, keepdims=True) * (1.0 / self.WINDOW)
        tail = frames[:, -self.LEVEL_SPAN:]
        levels = [10.0 * math.log10(power / self.LEVEL_SPAN + 1e-12)
                  for power in np.einsum("ij,ij->i", tail, tail).tolist()]
        audible_db = self.audible_db
        measured = [i for i, level_db in enumerate(levels)
                    if level_db > audible_db and (self._hops_seen + i) % self.PITCH_EVERY == 0]
        pitches: dict[int, tuple[int, float]] = {}
        if measured:
            voiced = frames if len(measured) == hops else frames[measured]
            decimated = (voiced[:, 0::2] + voiced[:, 1::2]) * self._taper
            spectrum = np.fft.rfft(decimated, self._n_fft, axis=1)
            corr = np.fft.irfft((spectrum * spectrum.conj()).real, self._n_fft, axis=1)
            search = corr[:, self.min_lag:self.max_lag + 1]
            best = search.argmax(axis=1)
            peaks = search[np.arange(len(measured)), best].tolist()
            for hop, lag, power, peak in zip(measured, best.tolist(), corr[:, 0].tolist(), peaks):
                pitches[hop] = (self.min_lag + lag, peak / power if power > 0 else 0.0)
        energies, pitches_out, voiced_out, heard_out = [], [], [], []
        peak_db, median, held, seen = self._peak_db, self._log_f0_median, self._held_pitch, self._hops_seen
        quietest = self._quietest
        for i, level_db in enumerate(levels):  # plain floats: this runs 100 times per second of audio
            while quietest and quietest[-1][1] >= level_db:  # a sliding minimum: levels ascend in the deque
                quietest.pop()
            quietest.append((seen + i, level_db))
            if quietest[0][0] <= seen + i - NOISE_FLOOR_WINDOW_HOPS:
                quietest.popleft()
            heard_out.append(level_db > audible_db and level_db > quietest[0][1] + ABOVE_FLOOR_DB)
            fresh = (seen + i) % self.PITCH_EVERY == 0
            if fresh:
                held = pitches.get(i, (0, 0.0))
            audible = level_db > audible_db
            peak_db = max(level_db, peak_db - 0.02)  # decays 2 dB/s
            energy = _clamp((level_db - (peak_db - 30.0)) / 30.0, 0.0, 1.0) if audible else 0.0
            pitch, voiced = 0.0, False
            lag, clarity = held
            if audible and lag and clarity > 0.45:
                voiced = True
                log_f0 = math.log(self.pitch_rate / lag)
                if fresh:  # the speaker's median moves once per measurement
                    median += 0.01 * math.copysign(1.0, log_f0 - median)
                semitones = 12.0 * (log_f0 - median) / math.log(2.0)
                pitch = _clamp(semitones / 6.0, -1.0, 1.0)
            energies.append(energy)
            pitches_out.append(pitch)
            voiced_out.append(voiced)
        self._peak_db, self._log_f0_median, self._held_pitch = peak_db, median, held
        self._hops_seen += hops
        return energies, pitches_out, voiced_out, levels, heard_out
