"""Phonemes → OVR visemes → ARKit mouth poses, with coarticulation, on a fixed frame grid.

Frame t of a Track depicts media time t / fps. Used both for the engine's text-to-speech path
and as training targets for the audio-driven face model, so the lip-closure rule here is the
one the model learns and the one tests check (`lips_closed`, `mouth_openness`).

Lip closure timing (measured on espeak-ng 1.52 audio, en-us, 2 voices):
- /p/: espeak's event marks the *release*; the 40 ms of silent closure before it is counted in
  the previous phoneme, and after the event comes aspiration with open lips. Closure interval:
  [event - 40 ms, event + 10 ms]  (`CLOSURE_LEAD_S["p"]`, `CLOSURE_TAIL_S["p"]`).
- /b/ and /m/: the voicing bar / nasal murmur follows the event: the lips are shut from the event
  to the phoneme's end. Closure interval: [event, end].
- Festival (and any aligner giving whole segments, `timing="segment"`; measured on kal_diphone and
  cmu_us_slt_arctic_hts): a segment holds its own closure. /b/, /m/: [start, end - 20 ms] (at most
  30 % of the segment kept for the release); /p/: the first 55 % (burst and aspiration follow).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from studio.avatar.arkit import ARKIT_INDEX, NUM_ARKIT

VISEMES: tuple[str, ...] = ("sil", "PP", "FF", "TH", "DD", "kk", "CH", "SS", "nn", "RR", "aa", "E", "ih", "oh", "ou")
VISEME_INDEX: dict[str, int] = {name: i for i, name in enumerate(VISEMES)}
SILENCE = VISEME_INDEX["sil"]

BILABIALS = frozenset({"p", "b", "m"})
CLOSURE_LEAD_S: dict[str, float] = {"p": 0.040, "b": 0.0, "m": 0.0}
"""How long before the espeak event each bilabial's lips are already shut (see module doc)."""
CLOSURE_TAIL_S: dict[str, float | None] = {"p": 0.010, "b": None, "m": None}
"""Closure end after the event (None: the phoneme's end)."""
SEGMENT_RELEASE_S = 0.020
SEGMENT_P_CLOSED_FRACTION = 0.55
"""Festival /p/ segments hold closure, burst and aspiration: the lips are shut over the first 55 %."""
LIPS_CLOSED_MAX_OPENNESS = 0.08
"""`lips_closed` holds when `mouth_openness` is below this."""

ANTICIPATION_S = 0.08
"""How far ahead a phoneme starts to pull the mouth towards its pose (raised-cosine ramp)."""
RELEASE_S = 0.06
"""How long a phoneme's pose lingers after it ends."""
LIP_CLOSING_S = 0.03
LIP_OPENING_S = 0.04
"""Ramps into and out of a p/b/m closure (the closure itself stays fully shut)."""

# espeak-ng mnemonics (stress marks stripped) → viseme(s). A diphthong lists two, for its halves.
_ESPEAK_VISEMES: dict[str, tuple[str, ...]] = {
    "p": ("PP",), "b": ("PP",), "m": ("PP",),
    "f": ("FF",), "v": ("FF",),
    "T": ("TH",), "D": ("TH",),
    "t": ("DD",), "d": ("DD",), "t#": ("DD",), "t[": ("DD",), "d#": ("DD",),
    "k": ("kk",), "g": ("kk",), "x": ("kk",), "?": ("kk",),
    "tS": ("CH",), "dZ": ("CH",), "S": ("CH",), "Z": ("CH",),
    "s": ("SS",), "z": ("SS",),
    "n": ("nn",), "N": ("nn",), "l": ("nn",), "n-": ("nn",), "@L": ("nn",), "L": ("nn",),
    "r": ("RR",), "r-": ("RR",), "3": ("RR",), "3:": ("RR",), "VR": ("aa", "RR"), "@r": ("RR",),
    "w": ("ou",), "w#": ("ou",), "W": ("ou",),
    "j": ("ih",), ";": ("ih",),
    "a": ("aa",), "a#": ("aa",), "A": ("aa",), "A:": ("aa",), "aa": ("aa",), "V": ("aa",), "0": ("aa",),
    "A@": ("aa", "RR"), "a@": ("aa", "RR"),
    "E": ("E",), "e": ("E",), "@": ("E",), "@2": ("E",), "@5": ("E",), "e@": ("E", "RR"),
    "I": ("ih",), "I#": ("ih",), "I2": ("ih",), "i": ("ih",), "i:": ("ih",), "IR": ("ih", "RR"),
    "i@": ("ih", "E"), "i@3": ("ih", "RR"), "y": ("ih",),
    "O": ("oh",), "O:": ("oh",), "O2": ("oh",), "O@": ("oh", "RR"), "o@": ("oh", "RR"), "o": ("oh",),
    "U": ("ou",), "u": ("ou",), "u:": ("ou",), "U@": ("ou", "RR"),
    "aI": ("aa", "ih"), "aI2": ("aa", "ih"), "aI@": ("aa", "ih"), "aU": ("aa", "ou"), "eI": ("E", "ih"),
    "oU": ("oh", "ou"), "OI": ("oh", "ih"), "aI3": ("aa", "ih"),
}
_PAUSES = frozenset({"_", "_:", "_!", "_^", "_^_", "|", "||", "", "pau", "sil", "h#", "brth"})
_STRESS_MARKS = "'\u02c8\u02cc,%="

# How strongly each viseme holds its pose against its neighbours' (Cohen–Massaro style dominance).
_DOMINANCE: dict[str, float] = {
    "sil": 1.0, "PP": 4.0, "FF": 3.0, "TH": 1.5, "DD": 0.6, "kk": 0.6, "CH": 2.0, "SS": 1.2, "nn": 0.6,
    "RR": 1.2, "aa": 1.0, "E": 1.0, "ih": 1.0, "oh": 1.5, "ou": 2.0,
}


def _pose(**weights: float) -> np.ndarray:
    row = np.zeros(NUM_ARKIT, np.float32)
    for name, value in weights.items():
        if name.endswith("_LR"):
            base = name[:-3]
            row[ARKIT_INDEX[base + "Left"]] = value
            row[ARKIT_INDEX[base + "Right"]] = value
        else:
            row[ARKIT_INDEX[name]] = value
    return row


# Each viseme's ARKit mouth pose. mouthClose ≤ jawOpen throughout (ARKit convention).
VISEME_POSES: dict[str, np.ndarray] = {
    "sil": _pose(),
    "PP": _pose(jawOpen=0.06, mouthClose=0.06, mouthPress_LR=0.45, mouthRollLower=0.25, mouthRollUpper=0.15),
    "FF": _pose(jawOpen=0.10, mouthRollLower=0.45, mouthUpperUp_LR=0.25, mouthShrugUpper=0.15),
    "TH": _pose(jawOpen=0.16, tongueOut=0.45, mouthLowerDown_LR=0.15, mouthUpperUp_LR=0.10),
    "DD": _pose(jawOpen=0.18, mouthStretch_LR=0.15, mouthLowerDown_LR=0.15, mouthUpperUp_LR=0.10),
    "kk": _pose(jawOpen=0.22, mouthStretch_LR=0.15, mouthLowerDown_LR=0.15, mouthUpperUp_LR=0.05),
    "CH": _pose(jawOpen=0.14, mouthFunnel=0.45, mouthPucker=0.20, mouthUpperUp_LR=0.25, mouthLowerDown_LR=0.25),
    "SS": _pose(jawOpen=0.08, mouthStretch_LR=0.35, mouthSmile_LR=0.20, mouthLowerDown_LR=0.20,
                mouthUpperUp_LR=0.20),
    "nn": _pose(jawOpen=0.15, mouthStretch_LR=0.10, mouthLowerDown_LR=0.10, mouthUpperUp_LR=0.05),
    "RR": _pose(jawOpen=0.15, mouthFunnel=0.30, mouthPucker=0.30, mouthUpperUp_LR=0.10),
    "aa": _pose(jawOpen=0.60, mouthLowerDown_LR=0.30, mouthUpperUp_LR=0.10, mouthStretch_LR=0.10),
    "E": _pose(jawOpen=0.35, mouthStretch_LR=0.30, mouthSmile_LR=0.20, mouthLowerDown_LR=0.25,
               mouthUpperUp_LR=0.10),
    "ih": _pose(jawOpen=0.20, mouthStretch_LR=0.35, mouthSmile_LR=0.30, mouthLowerDown_LR=0.15,
                mouthUpperUp_LR=0.10),
    "oh": _pose(jawOpen=0.40, mouthFunnel=0.60, mouthPucker=0.20, mouthLowerDown_LR=0.10),
    "ou": _pose(jawOpen=0.15, mouthPucker=0.80, mouthFunnel=0.40),
}
VISEME_POSE_MATRIX = np.stack([VISEME_POSES[name] for name in VISEMES])  # (15, 52)
"""Pose of viseme class i in row i."""

MOUTH_INDICES = tuple(sorted({i for pose in VISEME_POSES.values() for i in np.flatnonzero(pose)}))
"""ARKit indices that viseme poses drive (the others stay 0 in a Track)."""

_JAW = ARKIT_INDEX["jawOpen"]
_CLOSE = ARKIT_INDEX["mouthClose"]
_LIP_PARTING = [ARKIT_INDEX[n] for n in ("mouthLowerDownLeft", "mouthLowerDownRight",
                                          "mouthUpperUpLeft", "mouthUpperUpRight")]


@dataclass(frozen=True)
class Track:
    """Per-frame mouth targets: frame t depicts time t / fps."""

    arkit: np.ndarray  # (T, 52) float32
    viseme: np.ndarray  # (T,) int64 class index into VISEMES
    voice_active: np.ndarray  # (T,) float32, 1 while a non-pause phoneme sounds
    fps: float

    @property
    def num_frames(self) -> int:
        return len(self.viseme)

    @property
    def times_s(self) -> np.ndarray:
        return np.arange(self.num_frames) / self.fps


def mouth_openness(arkit: np.ndarray) -> np.ndarray | float:
    """How far the lips are apart, ≥ 0: jawOpen − mouthClose plus a quarter of the mean lip parting.

    Works on one (52,) row (returns float) or a (..., 52) array, for targets and model outputs alike.
    """
    weights = np.asarray(arkit, dtype=np.float32)
    openness = weights[..., _JAW] - weights[..., _CLOSE] + 0.25 * weights[..., _LIP_PARTING].mean(axis=-1)
    openness = np.clip(openness, 0.0, None)
    return float(openness) if openness.ndim == 0 else openness


def lips_closed(arkit: np.ndarray) -> np.ndarray | bool:
    """True where the lips meet (openness below LIPS_CLOSED_MAX_OPENNESS); bool for one row."""
    closed = np.asarray(mouth_openness(arkit)) < LIPS_CLOSED_MAX_OPENNESS
    return bool(closed) if closed.ndim == 0 else closed


def base_symbol(symbol: str) -> str:
    """A phoneme mnemonic without stress marks ("'aI" → "aI")."""
    return symbol.lstrip(_STRESS_MARKS)


def is_pause(symbol: str) -> bool:
    return base_symbol(symbol) in _PAUSES or base_symbol(symbol).startswith("_")


def phoneme_visemes(symbol: str) -> tuple[str, ...]:
    """Viseme(s) of one espeak mnemonic; unknown variants fall back to their longest known prefix."""
    base = base_symbol(symbol)
    if is_pause(base):
        return ("sil",)
    if base in ("h", "h#", "hh"):
        return ()  # takes the shape of what follows
    candidate = base
    while candidate:
        if candidate in _ESPEAK_VISEMES:
            return _ESPEAK_VISEMES[candidate]
        candidate = candidate[:-1]
    return ("nn",)  # unknown consonant-like mnemonic: a neutral, slightly open mouth


def closure_intervals(phonemes: Sequence, timing: str = "espeak") -> list[tuple[float, float]]:
    """(start_s, end_s) spans where the lips are shut for p/b/m, overlapping spans merged.

    `timing="espeak"`: events from espeak (see module doc); `"segment"`: whole segments (festival).
    """
    if timing not in ("espeak", "segment"):
        raise ValueError(f"timing={timing!r}: allowed 'espeak' or 'segment'")
    spans: list[tuple[float, float]] = []
    for phoneme in phonemes:
        base = base_symbol(phoneme.symbol)
        if base not in BILABIALS:
            continue
        if timing == "segment":
            duration = phoneme.end_s - phoneme.start_s
            start = phoneme.start_s
            if base == "p":
                end = start + SEGMENT_P_CLOSED_FRACTION * duration
            else:
                end = phoneme.end_s - min(SEGMENT_RELEASE_S, 0.3 * duration)
        else:
            start = max(0.0, phoneme.start_s - CLOSURE_LEAD_S[base])
            tail = CLOSURE_TAIL_S[base]
            end = phoneme.end_s if tail is None else min(phoneme.end_s, phoneme.start_s + tail)
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return spans


def _segments(phonemes: Sequence, duration_s: float) -> list[tuple[float, float, str]]:
    """(start, end, viseme) spans tiling [0, duration): silence in gaps, diphthongs split, /h/ copied."""
    raw: list[tuple[float, float, tuple[str, ...]]] = []
    cursor = 0.0
    for phoneme in phonemes:
        start, end = max(phoneme.start_s, 0.0), min(phoneme.end_s, duration_s)
        if end <= start:
            continue
        if start > cursor:
            raw.append((cursor, start, ("sil",)))
        raw.append((start, end, phoneme_visemes(phoneme.symbol)))
        cursor = max(cursor, end)
    if cursor < duration_s:
        raw.append((cursor, duration_s, ("sil",)))
    segments: list[tuple[float, float, str]] = []
    for index, (start, end, visemes) in enumerate(raw):
        if not visemes:  # /h/: the mouth already shapes the next sound
            following = raw[index + 1][2] if index + 1 < len(raw) else ("sil",)
            visemes = (following[0],) if following and following[0] != "sil" else ("E",)
        if len(visemes) == 1:
            segments.append((start, end, visemes[0]))
        else:
            middle = start + 0.5 * (end - start)
            segments.append((start, middle, visemes[0]))
            segments.append((middle, end, visemes[1]))
    return segments


def _ramp(distance: np.ndarray, width: float) -> np.ndarray:
    """Raised cosine: 1 at distance 0, 0 from `width` on."""
    inside = np.clip(distance / width, 0.0, 1.0)
    return 0.5 * (1.0 + np.cos(np.pi * inside))


def phoneme_track(phonemes: Sequence, duration_s: float, fps: float = 100.0, timing: str = "espeak") -> Track:
    """Mouth targets for phonemes (objects with symbol/start_s/end_s) over [0, duration_s).

    Each phoneme's pose is blended with its neighbours' by dominance functions that rise
    ANTICIPATION_S before it and fall RELEASE_S after it; inside p/b/m closures the lips are
    shut exactly (PP pose), and far from any speech every weight is exactly 0 (rest).
    """
    if duration_s < 0 or not np.isfinite(duration_s):
        raise ValueError(f"duration_s={duration_s!r}: must be a finite number ≥ 0")
    if fps <= 0:
        raise ValueError(f"fps={fps!r}: must be > 0")
    num_frames = int(np.ceil(duration_s * fps - 1e-9))
    times = np.arange(num_frames, dtype=np.float64) / fps
    segments = _segments(phonemes, duration_s)
    closures = closure_intervals(phonemes, timing)
    if timing == "espeak":
        # Re-time bilabial segments to their closures so anticipation and dominance centre on them.
        segments = _retime_bilabials(segments, closures)

    weight_sum = np.zeros(num_frames)
    blended = np.zeros((num_frames, NUM_ARKIT))
    viseme = np.full(num_frames, SILENCE, dtype=np.int64)
    voice_active = np.zeros(num_frames, np.float32)
    for start, end, name in segments:
        first = max(0, int(np.floor((start - ANTICIPATION_S) * fps)))
        last = min(num_frames, int(np.ceil((end + RELEASE_S) * fps)) + 1)
        window = times[first:last]  # outside it the dominance is 0
        before = np.clip(start - window, 0.0, None)
        after = np.clip(window - end, 0.0, None)
        dominance = _DOMINANCE[name] * _ramp(before, ANTICIPATION_S) * _ramp(after, RELEASE_S)
        weight_sum[first:last] += dominance
        blended[first:last] += dominance[:, None] * VISEME_POSES[name][None, :]
        inside = (window >= start) & (window < end)
        viseme[first:last][inside] = VISEME_INDEX[name]
        if name != "sil":
            voice_active[first:last][inside] = 1.0
    arkit = np.divide(blended, weight_sum[:, None], out=np.zeros_like(blended), where=weight_sum[:, None] > 0)
    closed = np.zeros(num_frames)  # 1 inside a closure, raised-cosine ramps either side: no jumps
    for start, end in closures:
        inside = (times >= start) & (times < end)
        ramp = _ramp(np.clip(start - times, 0.0, None), LIP_CLOSING_S) * _ramp(np.clip(times - end, 0.0, None),
                                                                               LIP_OPENING_S)
        closed = np.maximum(closed, ramp)
        viseme[inside] = VISEME_INDEX["PP"]
        voice_active[inside] = 1.0
    arkit = (1.0 - closed[:, None]) * arkit + closed[:, None] * VISEME_POSES["PP"][None, :]
    return Track(arkit=arkit.astype(np.float32), viseme=viseme, voice_active=voice_active, fps=float(fps))


def _retime_bilabials(segments: list[tuple[float, float, str]],
                      closures: list[tuple[float, float]]) -> list[tuple[float, float, str]]:
    """Give each closure its own PP segment and hand the rest of a /p/ (aspiration) to the next sound."""
    if not closures:
        return segments
    boundaries = sorted({t for start, end, _ in segments for t in (start, end)} | {t for c in closures for t in c})
    retimed: list[tuple[float, float, str]] = []
    for left, right in zip(boundaries[:-1], boundaries[1:]):
        if right <= left:
            continue
        middle = 0.5 * (left + right)
        if any(start <= middle < end for start, end in closures):
            name = "PP"
        else:
            name = next((n for s, e, n in segments if s <= middle < e), "sil")
            if name == "PP":  # a /p/ after its release: open towards the next sound
                name = next((n for s, _, n in segments if s >= right and n != "PP"), "sil")
        if retimed and retimed[-1][2] == name and abs(retimed[-1][1] - left) < 1e-12:
            retimed[-1] = (retimed[-1][0], right, name)
        else:
            retimed.append((left, right, name))
    return retimed
