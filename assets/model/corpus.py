"""Training/evaluation corpus for the audio → face model: synthetic speech with exact phoneme timing.

Training-time only (numpy + soundfile; festival as an external program). Engines:
- espeak-ng (in-process, `studio.speech.espeak`): many voices × variants, rate 120–260 wpm, pitch 20–80.
- festival (Debian: `apt-get install festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts`):
  diphone and HTS voices built from human recordings, much closer to human speech. Sentences are
  batched into one `festival -b script.scm` run per voice and chunk; segment end times come from
  the utterance's Segment relation. Festival's radio phones are mapped to espeak mnemonics so one
  viseme table serves both (`timing="segment"`: a festival segment holds its own stop closure).
- flite's CMU ARCTIC clustergen voices (`flite_voice`) and Piper's joe voice (`piper_voice`, a VITS
  model of a real speaker): in-process, with the synthesizer's own segment timing.

Everything is resampled to 16 kHz mono float32; targets are `phoneme_track` at 100 fps.

Held-out split (never used for training; `held_out=True` yields only these):
- voices: festival `ked_diphone`, and every espeak voice with variant `f4`, `m6`, `klatt3`, `steph`,
  `Andy` or `whisperf`, or with base `en-029` (Caribbean English);
- sentences: those for which `assets.model.sentences.is_held_out(text)` is true (a tenth).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import soundfile

from assets.model import flite_voice, piper_voice
from assets.model.flite_voice import FLITE_VOICES, flite_available
from assets.model.piper_voice import PIPER_VOICES, piper_available
from assets.model.sentences import generate_sentences
from studio.engine.sources import resample_clip
from studio.speech.espeak import EspeakSynth, Phoneme
from studio.speech.visemes import Track, phoneme_track

SAMPLE_RATE = 16000
TARGET_FPS = 100.0

ESPEAK_TRAIN_BASES = ("en-us", "en", "en-gb-x-rp", "en-gb-scotland", "en-us-nyc", "en-gb-x-gbclan")
ESPEAK_TRAIN_VARIANTS = ("", "f1", "f2", "f3", "f5", "m1", "m2", "m3", "m4", "m5", "m7", "croak", "klatt",
                         "klatt2", "klatt4", "whisper", "Annie", "travis", "adam", "belinda", "linda", "max")
ESPEAK_HELD_OUT_BASES = ("en-029",)
ESPEAK_HELD_OUT_VARIANTS = ("f4", "m6", "klatt3", "steph", "Andy", "whisperf")
FESTIVAL_TRAIN_VOICES = ("kal_diphone", "cmu_us_slt_arctic_hts")
FESTIVAL_HELD_OUT_VOICES = ("ked_diphone",)
FESTIVAL_SHARE = 0.3
"""Fraction of utterances given to festival voices (when festival is installed)."""
FLITE_SHARE = 0.2
"""Fraction of training utterances given to flite's CMU ARCTIC voices (when flite is installed)."""
PIPER_SHARE = 0.25
"""Fraction of training utterances given to Piper's joe voice, the most human-like (when piper-tts is installed)."""
PIPER_ATTEMPTS = 3
"""Piper samples its noise afresh on each call: an utterance failing QC is synthesized again, then left to espeak."""

TELEPHONE_SHARE = 0.3
"""Share of augmented copies cut to the telephone band."""

_FESTIVAL_CHUNK = 24
_BLOCK = 64
_LOOKAHEAD_BLOCKS = 3

# Festival's radio (US) and mrpa (UK) phones → espeak mnemonics (see studio.speech.visemes).
_FESTIVAL_TO_ESPEAK: dict[str, str] = {
    "aa": "A:", "ae": "a", "ah": "V", "ao": "O:", "aw": "aU", "ax": "@", "axr": "3", "ay": "aI", "eh": "E",
    "er": "3:", "ey": "eI", "ih": "I", "iy": "i:", "ow": "oU", "oy": "OI", "uh": "U", "uw": "u:",
    "b": "b", "ch": "tS", "d": "d", "dh": "D", "dx": "t#", "f": "f", "g": "g", "hh": "h", "hv": "h",
    "jh": "dZ", "k": "k", "l": "l", "el": "@L", "m": "m", "em": "m", "n": "n", "en": "n-", "nx": "n",
    "ng": "N", "p": "p", "r": "r", "s": "s", "sh": "S", "t": "t", "th": "T", "v": "v", "w": "w", "y": "j",
    "z": "z", "zh": "Z", "pau": "_", "h#": "_", "brth": "_",
    # mrpa
    "uh_": "V", "@": "@", "@@": "3:", "a": "a", "e": "E", "i": "I", "ii": "i:", "o": "0", "oo": "O:",
    "u": "U", "uu": "u:", "ai": "aI", "au": "aU", "ei": "eI", "oi": "OI", "ou": "oU", "e@": "e@",
    "i@": "i@", "u@": "U@", "h": "h", "j": "j", "#": "_",
}


@dataclass(frozen=True)
class Utterance:
    """One training/eval example: 16 kHz audio and its 100 fps mouth targets."""

    audio: np.ndarray  # float32 mono, SAMPLE_RATE
    targets: Track
    voice: str  # "espeak:en-us+f3" or "festival:kal_diphone"
    text: str
    phonemes: tuple[Phoneme, ...]  # espeak mnemonics; times in seconds from the audio's start
    timing: str = "espeak"  # closure convention of `phonemes` ("espeak" events or "segment")
    sample_rate: int = SAMPLE_RATE

    @property
    def duration_s(self) -> float:
        return len(self.audio) / self.sample_rate


def festival_available() -> bool:
    return shutil.which("festival") is not None


def default_voices(held_out: bool = False) -> list[str]:
    """Voice names used when none are given: the training side, or the held-out side."""
    if held_out:
        espeak = [f"espeak:{base}" for base in ESPEAK_HELD_OUT_BASES]
        espeak += [f"espeak:{base}+{variant}" for base in ESPEAK_TRAIN_BASES[:3] for variant in ESPEAK_HELD_OUT_VARIANTS]
        festival = [f"festival:{name}" for name in FESTIVAL_HELD_OUT_VOICES]
    else:
        espeak = [f"espeak:{base}" + (f"+{variant}" if variant else "")
                  for base in ESPEAK_TRAIN_BASES for variant in ESPEAK_TRAIN_VARIANTS]
        festival = [f"festival:{name}" for name in FESTIVAL_TRAIN_VOICES]
    flite = [] if held_out or not flite_available() else [f"flite:{name}" for name in FLITE_VOICES]
    piper = [] if held_out or not piper_available() else [f"piper:{name}" for name in PIPER_VOICES]
    return espeak + (festival if festival_available() else []) + flite + piper


def is_held_out_voice(voice: str) -> bool:
    engine, _, name = voice.partition(":")
    if engine in ("flite", "piper"):
        return False
    if engine == "festival":
        return name in FESTIVAL_HELD_OUT_VOICES
    base, _, variant = name.partition("+")
    return base in ESPEAK_HELD_OUT_BASES or variant in ESPEAK_HELD_OUT_VARIANTS


@dataclass(frozen=True)
class _Job:
    index: int
    voice: str
    text: str
    rate_wpm: int
    pitch: int
    stretch: float


def synthesize_utterances(n: int, seed: int, voices: Sequence[str] | None = None,
                          held_out: bool = False) -> Iterator[Utterance]:
    """Yield `n` utterances, deterministic for a seed, from one side of the held-out split.

    `voices`: names like "espeak:en-us+f3" / "festival:kal_diphone" (default `default_voices`); a
    held-out voice is refused for training and a training voice for `held_out=True`.
    """
    if n < 0:
        raise ValueError(f"n={n}: must be ≥ 0")
    voice_list = list(voices) if voices is not None else default_voices(held_out)
    if voices is None and not festival_available():
        warnings.warn("festival is not installed: corpus uses espeak voices only (apt-get install festival "
                      "festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts)", stacklevel=2)
    _check_voices(voice_list, held_out)
    jobs = _plan(n, seed, voice_list, held_out)
    blocks = [jobs[i:i + _BLOCK] for i in range(0, len(jobs), _BLOCK)]
    with tempfile.TemporaryDirectory(prefix="corpus-festival-") as workdir, ThreadPoolExecutor(2) as pool:
        pending: dict[int, dict[tuple, Future]] = {}
        for number, block in enumerate(blocks):
            for ahead in range(number, min(number + _LOOKAHEAD_BLOCKS + 1, len(blocks))):
                if ahead not in pending:  # festival runs in the background while espeak works here
                    pending[ahead] = _submit_festival(pool, blocks[ahead], workdir)
            espeak = {job.index: _espeak_utterance(job) for job in block if job.voice.startswith("espeak:")}
            espeak.update({job.index: _flite_utterance(job) for job in block if job.voice.startswith("flite:")})
            espeak.update({job.index: _piper_utterance(job) for job in block if job.voice.startswith("piper:")})
            festival: dict[int, Utterance] = {}
            for future in pending.pop(number).values():
                festival.update(future.result())
            for job in block:
                yield espeak[job.index] if job.index in espeak else festival[job.index]


def _check_voices(voices: Sequence[str], held_out: bool) -> None:
    if not voices:
        raise ValueError("voices is empty: give at least one voice, e.g. 'espeak:en-us'")
    for voice in voices:
        engine, _, name = voice.partition(":")
        if engine not in ("espeak", "festival", "flite", "piper") or not name:
            raise ValueError(f"voice {voice!r}: expected 'espeak:<voice>[+variant]', 'festival:<voice>', "
                             f"'flite:<{'|'.join(FLITE_VOICES)}>' or 'piper:<{'|'.join(PIPER_VOICES)}>'")
        if is_held_out_voice(voice) != held_out:
            side = "held-out" if is_held_out_voice(voice) else "training"
            raise ValueError(f"voice {voice!r} is a {side} voice; held_out={held_out} allows only "
                             f"{'held-out' if held_out else 'training'} voices (see default_voices)")
        if engine == "festival" and not festival_available():
            raise RuntimeError(f"voice {voice!r} needs festival: apt-get install festival festvox-kallpc16k "
                               "festvox-kdlpc16k festvox-us-slt-hts")
        if engine == "flite" and name not in FLITE_VOICES:
            raise ValueError(f"voice {voice!r}: flite voices are {', '.join(FLITE_VOICES)}")
        if engine == "piper" and name not in PIPER_VOICES:
            raise ValueError(f"voice {voice!r}: piper voices are {', '.join(PIPER_VOICES)}")
        if engine == "espeak":
            EspeakSynth(name)  # SpeechError naming the voice if espeak does not know it


def _plan(n: int, seed: int, voices: Sequence[str], held_out: bool) -> list[_Job]:
    rng = np.random.default_rng(seed)
    espeak = [v for v in voices if v.startswith("espeak:")]
    festival = [v for v in voices if v.startswith("festival:")]
    flite = [v for v in voices if v.startswith("flite:")]
    piper = [v for v in voices if v.startswith("piper:")]
    festival_share = FESTIVAL_SHARE if espeak and festival else (1.0 if festival else 0.0)
    flite_share = FLITE_SHARE if espeak or festival else 1.0
    sentences = generate_sentences(seed, held_out=held_out)
    jobs = []
    for index in range(n):
        pool = festival if rng.random() < festival_share else espeak
        if flite and (not pool or rng.random() < flite_share):  # no extra draw without flite: old corpora stay
            pool = flite
        if piper and (not pool or rng.random() < PIPER_SHARE):  # likewise: no draw without piper
            pool = piper
        jobs.append(_Job(index=index, voice=pool[int(rng.integers(len(pool)))], text=next(sentences),
                         rate_wpm=int(rng.integers(120, 261)), pitch=int(rng.integers(20, 81)),
                         stretch=float(rng.uniform(0.8, 1.25))))
    return jobs


def _make_utterance(audio: np.ndarray, rate: int, phonemes: tuple[Phoneme, ...], job: _Job,
                    timing: str) -> Utterance:
    audio16 = resample(audio, rate, SAMPLE_RATE)
    duration_s = len(audio16) / SAMPLE_RATE
    targets = phoneme_track(phonemes, duration_s, TARGET_FPS, timing=timing)
    return Utterance(audio=audio16, targets=targets, voice=job.voice, text=job.text, phonemes=phonemes,
                     timing=timing)


def _espeak_utterance(job: _Job) -> Utterance:
    clip = EspeakSynth(job.voice.partition(":")[2], rate_wpm=job.rate_wpm, pitch=job.pitch).synthesize(job.text)
    return _make_utterance(clip.audio, clip.sample_rate, clip.phonemes, job, "espeak")


def _flite_utterance(job: _Job) -> Utterance:
    audio, rate, segments = flite_voice.synthesize(job.text, job.voice.partition(":")[2])
    return _make_utterance(audio, rate, festival_phonemes(segments), job, "segment")


def _piper_utterance(job: _Job) -> Utterance:
    for attempt in range(PIPER_ATTEMPTS):
        try:
            audio, rate, phonemes = piper_voice.synthesize(job.text, job.voice.partition(":")[2],
                                                           length_scale=job.stretch, seed=job.index * 7 + attempt)
        except piper_voice.PiperError:
            continue
        return _make_utterance(audio, rate, phonemes, job, "segment")
    return _espeak_utterance(dataclasses.replace(job, voice="espeak:en-us"))


def _submit_festival(pool: ThreadPoolExecutor, block: list[_Job], workdir: str) -> dict[tuple, Future]:
    by_voice: dict[str, list[_Job]] = {}
    for job in block:
        if job.voice.startswith("festival:"):
            by_voice.setdefault(job.voice, []).append(job)
    futures = {}
    for voice, jobs in by_voice.items():
        for start in range(0, len(jobs), _FESTIVAL_CHUNK):
            chunk = jobs[start:start + _FESTIVAL_CHUNK]
            futures[(voice, chunk[0].index)] = pool.submit(_run_festival, chunk, workdir)
    return futures


def _scheme_string(text: str) -> str:
    return '"' + text.replace("\\", " ").replace('"', " ") + '"'


def _run_festival(jobs: list[_Job], workdir: str) -> dict[int, Utterance]:
    """One festival process for a chunk of sentences of one voice: wavs + segment end times."""
    voice = jobs[0].voice.partition(":")[2]
    lines = [
        "(define (dump u name) (utt.save.wave u name 'riff) (format t \"WAV %s\\n\" name)",
        "  (mapcar (lambda (s) (format t \"SEG %s %f\\n\" (item.name s) (item.feat s \"end\")))",
        "          (utt.relation.items u 'Segment)) t)",
        f"(voice_{voice})",
    ]
    paths = {}
    for job in jobs:
        path = os.path.join(workdir, f"utt{job.index}.wav")
        paths[path] = job
        lines += [f"(Parameter.set 'Duration_Stretch {job.stretch:.3f})",
                  f"(set! u (Utterance Text {_scheme_string(job.text)}))", "(utt.synth u)", f'(dump u "{path}")']
    script = os.path.join(workdir, f"batch{jobs[0].index}.scm")
    with open(script, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    result = subprocess.run(["festival", "-b", script], capture_output=True, text=True, timeout=600, check=False)
    segments: dict[str, list[tuple[str, float]]] = {}
    current = None
    for line in result.stdout.splitlines():
        if line.startswith("WAV "):
            current = line[4:].strip()
            segments[current] = []
        elif line.startswith("SEG ") and current is not None:
            _, name, end = line.split()
            segments[current].append((name, float(end)))
    utterances = {}
    for path, job in paths.items():
        if not segments.get(path) or not os.path.exists(path):
            raise RuntimeError(f"festival voice {voice!r} gave no audio/segments for {job.text!r}: "
                               f"rc={result.returncode} {result.stderr[-400:]}")
        audio, rate = soundfile.read(path, dtype="float32", always_2d=True)
        os.remove(path)
        utterances[job.index] = _make_utterance(audio.mean(axis=1), rate, festival_phonemes(segments[path]), job,
                                                "segment")
    os.remove(script)
    return utterances


def festival_phonemes(segments: list[tuple[str, float]]) -> tuple[Phoneme, ...]:
    phonemes = []
    start = 0.0
    for name, end in segments:
        symbol = _FESTIVAL_TO_ESPEAK.get(name, name)
        if end > start:
            phonemes.append(Phoneme(symbol, start, end))
        start = max(start, end)
    return tuple(phonemes)


# ----------------------------------------------------------------------------- signal helpers

def resample(audio: np.ndarray, rate_in: int, rate_out: int) -> np.ndarray:
    """Band-limited resampling of a whole clip (the studio's own clip resampler)."""
    return resample_clip(np.asarray(audio, np.float64).ravel(), rate_in, rate_out)


def _fit_length(audio: np.ndarray, length: int) -> np.ndarray:
    return audio[:length] if len(audio) >= length else np.pad(audio, (0, length - len(audio)))


def _band_limit(audio: np.ndarray, rate: int, low_hz: float, high_hz: float) -> np.ndarray:
    spectrum = np.fft.rfft(audio)
    freqs = np.fft.rfftfreq(len(audio), 1.0 / rate)
    spectrum[(freqs < low_hz) | (freqs > high_hz)] = 0
    return np.fft.irfft(spectrum, len(audio))


def pink_noise(length: int, rng: np.random.Generator) -> np.ndarray:
    """Unit-variance 1/f noise: the spectrum of fans, traffic and room hum more than white noise is."""
    spectrum = np.fft.rfft(rng.standard_normal(length))
    spectrum /= np.sqrt(np.maximum(np.arange(len(spectrum)), 1))
    noise = np.fft.irfft(spectrum, length)
    return noise / (noise.std() + 1e-12)


def mix_noise(signal: np.ndarray, noise: np.ndarray, snr_db: float) -> np.ndarray:
    """`signal` plus unit-variance `noise` scaled to `snr_db` below the signal's active power (its samples
    above 1 % of its peak: a pause does not dilute the speech it is measured against)."""
    active = np.abs(signal) > 0.01 * (np.abs(signal).max() + 1e-12)
    power = np.mean(signal[active] ** 2) if active.any() else np.mean(signal**2)
    return signal + noise * np.sqrt(power / 10 ** (snr_db / 10.0))


def _reverb(audio: np.ndarray, rng: np.random.Generator, rate: int) -> np.ndarray:
    """Synthetic room: direct path at t=0 (timing kept) plus exponentially decaying noise tail."""
    rt60 = rng.uniform(0.15, 0.6)
    length = int(rt60 * rate)
    t = np.arange(length) / rate
    impulse = rng.standard_normal(length) * np.exp(-6.9 * t / rt60) * rng.uniform(0.05, 0.3)
    impulse[0] = 1.0
    size = 1 << int(np.ceil(np.log2(len(audio) + length)))
    wet = np.fft.irfft(np.fft.rfft(audio, size) * np.fft.rfft(impulse, size), size)[:len(audio)]
    return wet * (np.abs(audio).max() / (np.abs(wet).max() + 1e-12))


def _mu_law_round_trip(signal: np.ndarray) -> np.ndarray:
    """G.711 μ-law: 8-bit companded quantisation, as telephone and voicemail recordings carry."""
    scale = max(1.0, float(np.abs(signal).max()))
    x = np.clip(signal / scale, -1.0, 1.0)
    coded = np.round(np.sign(x) * np.log1p(255.0 * np.abs(x)) / np.log(256.0) * 127.0) / 127.0
    return np.sign(coded) * np.expm1(np.abs(coded) * np.log(256.0)) / 255.0 * scale


def telephone_band(audio: np.ndarray, sample_rate: int = SAMPLE_RATE, mu_law: bool = False) -> np.ndarray:
    """`audio` as a telephone line carries it (300–3400 Hz through 8 kHz, optionally μ-law coded), same length."""
    signal = np.asarray(audio, np.float64)
    narrow = resample(_band_limit(signal, sample_rate, 300.0, 3400.0), sample_rate, 8000)
    if mu_law:
        narrow = _mu_law_round_trip(narrow)
    return _fit_length(resample(narrow, 8000, sample_rate), len(signal))


def augment(audio: np.ndarray, rng: np.random.Generator, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """A randomly degraded copy of `audio`, same length and timing (labels stay valid).

    Reverb, telephone band (300–3400 Hz via 8 kHz, half of the time μ-law coded), resampling round
    trips, gain with occasional clipping, DC offset and white/pink noise at 10–40 dB SNR, each applied
    with some probability. The telephone band is common (`TELEPHONE_SHARE`): a model trained mostly on
    wide-band audio missed a fifth of the human dev set's closures once it was band-limited.
    """
    signal = np.asarray(audio, dtype=np.float64).copy()
    length = len(signal)
    if length == 0:
        return signal.astype(np.float32)
    if rng.random() < 0.3:
        signal = _reverb(signal, rng, sample_rate)
    if rng.random() < TELEPHONE_SHARE:
        signal = telephone_band(signal, sample_rate, mu_law=rng.random() < 0.5)
    elif rng.random() < 0.2:
        via = int(rng.choice([11025, 12000, 22050, 24000, 44100]))
        signal = _fit_length(resample(resample(signal, sample_rate, via), via, sample_rate), length)
    peak = np.abs(signal).max()
    if rng.random() < 0.15 and peak > 0:
        signal = np.clip(signal * rng.uniform(1.2, 2.0) / peak, -1.0, 1.0)  # mild clipping
    else:
        signal = signal * 10 ** (rng.uniform(-12.0, 6.0) / 20.0)
    if rng.random() < 0.2:
        signal = signal + rng.uniform(-0.02, 0.02)
    if rng.random() < 0.6:
        noise = rng.standard_normal(length) if rng.random() < 0.5 else pink_noise(length, rng)
        signal = mix_noise(signal, noise, rng.uniform(10.0, 40.0))
    return np.clip(signal, -1.0, 1.0).astype(np.float32)
