"""On-device text-to-speech with exact phoneme timing, through libespeak-ng via ctypes.

The library and its data come only from the `espeakng-loader` wheel (never a system espeak),
so the same code works inside a PyInstaller bundle. libespeak-ng keeps global state and is not
thread-safe: one process-wide lock serialises every call, and the library is initialised once.

Timing: espeak reports a PHONEME event (type 7) at the start of each phoneme with the sample
index where it begins in the synthesized audio; a phoneme ends where the next one starts.
Caveat (measured): a stop consonant's event marks its *release*; the silent closure before it
is counted in the previous phoneme (see `studio.speech.visemes.CLOSURE_LEAD_S`).

Repeatability: the same text gives the same phonemes, but libespeak carries its pitch-flutter
phase from one utterance to the next and aligns phoneme boundaries to pitch periods, so times
(and lengths) vary between calls by up to about one pitch period (~10 ms).

Scripts: the voice decides what it can read. Text that holds no letter or digit at all, or
that the voice turns into no phoneme but pauses, raises SpeechError. An English voice reads
letters of other scripts by *naming* them ("Chinese letter"), which is not speech of the text:
for voices whose language is written in Latin script, text without a single Latin letter or
digit is rejected too (choose a voice for that language, e.g. "cmn" for Chinese).
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
import unicodedata
from dataclasses import dataclass

import numpy as np

# speak_lib.h constants
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_PHONEME_EVENTS = 0x0001
_INITIALIZE_DONT_EXIT = 0x8000
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_EVENT_LIST_TERMINATED = 0
_EVENT_PHONEME = 7
_PARAM_RATE = 1
_PARAM_PITCH = 3
_EE_OK = 0
_RANDOM_SEED = 1

RATE_MIN_WPM = 80
RATE_MAX_WPM = 450
PITCH_MIN = 0
PITCH_MAX = 100

# Pause phoneme mnemonics espeak emits between words/phrases.
PAUSE_SYMBOLS = frozenset({"_", "_:", "_!", "_^", "_^_", "||", "|", ""})

# Languages (by ISO code prefix) that espeak voices read from non-Latin scripts.
_NON_LATIN_LANGUAGES = frozenset({
    "am", "ar", "as", "be", "bg", "bn", "bo", "chr", "cmn", "el", "fa", "gu", "he", "hi", "hy", "ja", "ka",
    "kk", "km", "kn", "ko", "ky", "lo", "mk", "ml", "mn", "mr", "my", "ne", "or", "pa", "ru", "sd", "si",
    "sr", "ta", "te", "th", "ti", "tt", "ug", "uk", "ur", "yue", "hak", "ba", "cv", "sa", "dv", "ru-lv",
})


class SpeechError(ValueError):
    """Bad input to text-to-speech: empty or unspeakable text, unknown voice, value out of range."""


@dataclass(frozen=True)
class Phoneme:
    """One phoneme: espeak mnemonic (e.g. 'p', 'aI', '_' for a pause) and its span in seconds."""

    symbol: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class SpeechClip:
    """Synthesized speech: float32 mono audio in -1..1 and the phonemes that tile it."""

    audio: np.ndarray
    sample_rate: int
    phonemes: tuple[Phoneme, ...]
    text: str

    @property
    def duration_s(self) -> float:
        return len(self.audio) / self.sample_rate


class _EspeakEvent(ctypes.Structure):
    class _Id(ctypes.Union):
        _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8)]

    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", _Id),
    ]


class _EspeakVoice(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("languages", ctypes.c_void_p),
        ("identifier", ctypes.c_char_p),
        ("gender", ctypes.c_ubyte),
        ("age", ctypes.c_ubyte),
        ("variant", ctypes.c_ubyte),
        ("xx1", ctypes.c_ubyte),
        ("score", ctypes.c_int),
        ("spare", ctypes.c_void_p),
    ]


_SYNTH_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int,
                                   ctypes.POINTER(_EspeakEvent))


class _Collector:
    """What one synthesis call gathers from the callback."""

    def __init__(self) -> None:
        self.chunks: list[np.ndarray] = []
        self.events: list[tuple[str, int]] = []  # (mnemonic, sample index)
        self.first_audio_s: float | None = None


class _Engine:
    """The single libespeak-ng instance of this process (guarded by `_LOCK`)."""

    def __init__(self) -> None:
        import espeakng_loader

        library_path = espeakng_loader.get_library_path()
        self.data_path = espeakng_loader.get_data_path()
        self.lib = ctypes.CDLL(library_path)
        lib = self.lib
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_SetSynthCallback.argtypes = [_SYNTH_CALLBACK]
        lib.espeak_SetSynthCallback.restype = None
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetVoiceByName.restype = ctypes.c_int
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_SetParameter.restype = ctypes.c_int
        lib.espeak_Synth.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
                                     ctypes.c_uint, ctypes.POINTER(ctypes.c_uint), ctypes.c_void_p]
        lib.espeak_Synth.restype = ctypes.c_int
        lib.espeak_Synchronize.argtypes = []
        lib.espeak_Synchronize.restype = ctypes.c_int
        lib.espeak_ListVoices.argtypes = [ctypes.POINTER(_EspeakVoice)]
        lib.espeak_ListVoices.restype = ctypes.POINTER(ctypes.POINTER(_EspeakVoice))
        self._set_seed = getattr(lib, "espeak_ng_SetRandSeed", None)
        if self._set_seed is not None:
            self._set_seed.argtypes = [ctypes.c_long]
            self._set_seed.restype = None

        # espeak-ng reads its data path from ESPEAK_DATA_PATH when the argument is NULL; pass it explicitly.
        self.sample_rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 200, self.data_path.encode(),
                                                 _INITIALIZE_PHONEME_EVENTS | _INITIALIZE_DONT_EXIT)
        if self.sample_rate <= 0:
            raise RuntimeError(f"espeak_Initialize failed (returned {self.sample_rate}) with data at {self.data_path}")
        self.collector: _Collector | None = None
        self._callback = _SYNTH_CALLBACK(self._on_synth)  # kept referenced: C holds the pointer
        lib.espeak_SetSynthCallback(self._callback)
        self.current: tuple[str, int, int] | None = None
        self.voice_ids, self.languages, self.voice_files = self._list_voices()
        self.variants = self._list_variants()

    def _on_synth(self, wav, num_samples, events) -> int:
        collector = self.collector
        if collector is None:
            return 0
        if num_samples > 0 and wav:
            if collector.first_audio_s is None:
                collector.first_audio_s = time.perf_counter()
            collector.chunks.append(np.ctypeslib.as_array(wav, shape=(num_samples,)).copy())
        index = 0
        while True:
            event = events[index]
            if event.type == _EVENT_LIST_TERMINATED:
                break
            if event.type == _EVENT_PHONEME:
                collector.events.append((event.id.string.decode("utf-8", "replace"), event.sample))
            index += 1
        return 0

    def _list_voices(self) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
        """Accepted voice names (language, file name, given name; lower case) → language code, and
        the canonical names (voice file names, e.g. 'en', 'en-us', 'en-gb-x-rp') → language code."""
        names: dict[str, str] = {}
        languages: dict[str, str] = {}
        files: dict[str, str] = {}  # any accepted name -> the voice file espeak_SetVoiceByName loads ('en-gb' -> 'en')
        voices = self.lib.espeak_ListVoices(None)
        index = 0
        while voices[index]:
            voice = voices[index].contents
            identifier = voice.identifier.decode()
            # `languages` is a list of (priority byte, NUL-terminated language); read the first one.
            language = ctypes.string_at(voice.languages + 1).decode().lower()
            name = voice.name.decode()
            for key in (language, identifier, name, identifier.rsplit("/", 1)[-1]):
                names.setdefault(key.lower(), language)
                files.setdefault(key.lower(), identifier.rsplit("/", 1)[-1])
            languages[identifier.rsplit("/", 1)[-1].lower()] = language
            index += 1
        return names, languages, files

    def _list_variants(self) -> dict[str, str]:
        folder = os.path.join(self.data_path, "voices", "!v")
        return {entry.lower(): entry for entry in sorted(os.listdir(folder))} if os.path.isdir(folder) else {}

    def resolve_voice(self, voice: str) -> tuple[str, str]:
        """(name to pass to espeak, language code) for 'en-us' or 'en-us+f3'; SpeechError if unknown."""
        base, _, variant = voice.strip().partition("+")
        language = self.voice_ids.get(base.lower())
        if language is None:
            english = ", ".join(lang for lang in sorted(self.languages) if lang.startswith("en"))
            raise SpeechError(f"unknown voice {voice!r}: no espeak voice named {base!r}; allowed e.g. {english} "
                              f"or any of {len(self.languages)} voices, optionally with a variant such as "
                              f"'en-us+f3' (see EspeakSynth.voices())")
        if variant:
            canonical = self.variants.get(variant.lower())
            if canonical is None:
                some = ", ".join(list(self.variants.values())[:12])
                raise SpeechError(f"unknown voice variant {variant!r} in voice {voice!r}; allowed e.g. {some}")
            return f"{self.voice_files[base.lower()]}+{canonical}", language
        return self.voice_files[base.lower()], language

    def configure(self, voice: str, rate_wpm: int, pitch: int) -> None:
        if self.current == (voice, rate_wpm, pitch):
            return
        self.current = None
        if self.lib.espeak_SetVoiceByName(voice.encode()) != _EE_OK:
            raise SpeechError(f"espeak could not load voice {voice!r}")
        self.lib.espeak_SetParameter(_PARAM_RATE, rate_wpm, 0)
        self.lib.espeak_SetParameter(_PARAM_PITCH, pitch, 0)
        self.current = (voice, rate_wpm, pitch)

    def synthesize(self, text: str) -> _Collector:
        collector = _Collector()
        self.collector = collector
        encoded = text.encode("utf-8") + b"\0"
        if self._set_seed is not None:  # fixed seed for espeak's own random numbers
            self._set_seed(_RANDOM_SEED)
        try:
            result = self.lib.espeak_Synth(encoded, len(encoded), 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None)
            self.lib.espeak_Synchronize()
        finally:
            self.collector = None
        if result != _EE_OK:
            raise RuntimeError(f"espeak_Synth failed with error {result} for text {text[:60]!r}")
        return collector


_LOCK = threading.Lock()
_ENGINE: _Engine | None = None


def _engine() -> _Engine:
    """The process's engine, created on first use; call with `_LOCK` held."""
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = _Engine()
    return _ENGINE


def _is_latin_language(language: str) -> bool:
    return language.split("-")[0] not in _NON_LATIN_LANGUAGES and language not in _NON_LATIN_LANGUAGES


def _has_latin_letter_or_digit(text: str) -> bool:
    for char in text:
        if char.isdigit():
            return True
        if char.isalpha() and unicodedata.name(char, "").startswith("LATIN"):
            return True
    return False


class EspeakSynth:
    """A configured espeak-ng voice; `synthesize` returns audio with phoneme timing.

    `voice` is an espeak voice/language name ("en-us", "en-gb-x-rp", "en") optionally with a
    variant ("en-us+f3", "en+croak"); `rate_wpm` 80..450; `pitch` 0..100.
    """

    def __init__(self, voice: str = "en-us", rate_wpm: int = 175, pitch: int = 50) -> None:
        if not isinstance(rate_wpm, int) or not RATE_MIN_WPM <= rate_wpm <= RATE_MAX_WPM:
            raise SpeechError(f"rate_wpm={rate_wpm!r} is out of range: allowed {RATE_MIN_WPM}..{RATE_MAX_WPM} words/min")
        if not isinstance(pitch, int) or not PITCH_MIN <= pitch <= PITCH_MAX:
            raise SpeechError(f"pitch={pitch!r} is out of range: allowed {PITCH_MIN}..{PITCH_MAX}")
        with _LOCK:
            self._espeak_voice, self._language = _engine().resolve_voice(voice)
        self.voice = voice
        self.rate_wpm = rate_wpm
        self.pitch = pitch

    @staticmethod
    def voices() -> list[str]:
        """Voice names this class accepts (see module function `voices`)."""
        return voices()

    @property
    def sample_rate(self) -> int:
        with _LOCK:
            return _engine().sample_rate

    def synthesize(self, text: str) -> SpeechClip:
        """Speak `text`; SpeechError if there is nothing this voice can speak in it."""
        return self._synthesize(text)[0]

    def _synthesize(self, text: str) -> tuple[SpeechClip, float | None]:
        if not isinstance(text, str) or not text.strip():
            raise SpeechError(f"text to speak is empty or whitespace only: {text!r}")
        if not any(char.isalnum() for char in text):
            raise SpeechError(f"text has no letter or digit to speak: {text[:60]!r}")
        if _is_latin_language(self._language) and not _has_latin_letter_or_digit(text):
            raise SpeechError(f"text {text[:60]!r} has no Latin letter or digit that voice {self.voice!r} "
                              f"({self._language}) can read; choose a voice for the text's language")
        with _LOCK:
            engine = _engine()
            engine.configure(self._espeak_voice, self.rate_wpm, self.pitch)
            started = time.perf_counter()
            collector = engine.synthesize(text)
            sample_rate = engine.sample_rate
        first_audio_ms = None if collector.first_audio_s is None else (collector.first_audio_s - started) * 1000.0
        samples = np.concatenate(collector.chunks) if collector.chunks else np.zeros(0, np.int16)
        audio = (samples.astype(np.float32) / 32768.0).astype(np.float32)
        phonemes = _phonemes_from_events(collector.events, len(audio), sample_rate)
        if not any(p.symbol not in PAUSE_SYMBOLS for p in phonemes):
            raise SpeechError(f"voice {self.voice!r} produced no speech sounds for text {text[:60]!r}")
        return SpeechClip(audio=audio, sample_rate=sample_rate, phonemes=phonemes, text=text), first_audio_ms


def _phonemes_from_events(events: list[tuple[str, int]], num_samples: int, sample_rate: int) -> tuple[Phoneme, ...]:
    """Phonemes tiling the audio: each lasts until the next event (the last until the end)."""
    phonemes: list[Phoneme] = []
    for index, (symbol, sample) in enumerate(events):
        end_sample = events[index + 1][1] if index + 1 < len(events) else num_samples
        start_sample = min(max(sample, 0), num_samples)
        end_sample = min(max(end_sample, start_sample), num_samples)
        if end_sample <= start_sample and symbol in PAUSE_SYMBOLS:
            continue
        phonemes.append(Phoneme(symbol, start_sample / sample_rate, end_sample / sample_rate))
    return tuple(phonemes)


def voices() -> list[str]:
    """Voice names EspeakSynth accepts: languages ('en-us', 'en-gb-x-rp', …) and English variants.

    Any language combines with any variant from `variants()` the same way as 'en-us+f3'.
    """
    with _LOCK:
        engine = _engine()
        languages = sorted(engine.languages)
        variant_names = list(engine.variants.values())
    return languages + [f"en-us+{variant}" for variant in variant_names]


def variants() -> list[str]:
    """Voice variants (e.g. 'f3', 'm1', 'croak', 'whisper') that can follow a voice as 'en-us+f3'."""
    with _LOCK:
        return list(_engine().variants.values())


def benchmark_tts(text: str = "The quick brown fox jumps over the lazy dog, then naps in the warm sun.",
                  repeats: int = 20) -> dict:
    """Synthesis speed: ms of compute per second of audio, and time until espeak hands over audio."""
    synth = EspeakSynth()
    synth.synthesize(text)  # warm up: initialisation and voice loading
    totals, firsts = [], []
    duration_s = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        clip, first_ms = synth._synthesize(text)
        totals.append((time.perf_counter() - started) * 1000.0)
        firsts.append(first_ms if first_ms is not None else float("nan"))
        duration_s = clip.duration_s
    total_ms = float(np.median(totals))
    return {
        "tts_audio_s": round(duration_s, 3),
        "tts_synth_ms": round(total_ms, 3),
        "tts_synth_ms_per_s_audio": round(total_ms / duration_s, 3),
        "tts_first_audio_ms": round(float(np.median(firsts)), 3),
    }
