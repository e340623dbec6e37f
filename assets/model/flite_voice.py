"""flite's CMU voices in-process (Debian `flite`), with the synthesizer's own segment timing.

The clustergen voices awb, rms and slt are statistical models trained on the CMU ARCTIC
recordings of three real speakers, so they carry human timing and spectra that espeak's formant
voices lack. Through ctypes we get, per sentence, the wave and the Segment relation's end times
(CMU radio phones, the same set festival uses), in about 0.1 s.

Training-time only; nothing in the studio imports this.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
from functools import cache, lru_cache

import numpy as np
import soundfile

FLITE_VOICES = ("awb", "rms", "slt")


class FliteError(RuntimeError):
    """flite or one of its voices is not installed, or it gave no audio."""


@lru_cache(maxsize=1)
def _library() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL("libflite.so.1", mode=ctypes.RTLD_GLOBAL)
        for dependency in ("libflite_usenglish.so.1", "libflite_cmulex.so.1"):
            ctypes.CDLL(dependency, mode=ctypes.RTLD_GLOBAL)
    except OSError as error:
        raise FliteError(f"flite is not installed ({error}); apt-get install flite") from None
    lib.flite_init()
    lib.flite_synth_text.restype = ctypes.c_void_p
    lib.flite_synth_text.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    lib.utt_wave.restype = ctypes.c_void_p
    lib.utt_wave.argtypes = [ctypes.c_void_p]
    lib.cst_wave_save_riff.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.utt_relation.restype = ctypes.c_void_p
    lib.utt_relation.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.relation_head.restype = ctypes.c_void_p
    lib.relation_head.argtypes = [ctypes.c_void_p]
    lib.item_next.restype = ctypes.c_void_p
    lib.item_next.argtypes = [ctypes.c_void_p]
    lib.ffeature_float.restype = ctypes.c_float
    lib.ffeature_float.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.ffeature_string.restype = ctypes.c_char_p
    lib.ffeature_string.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.delete_utterance.argtypes = [ctypes.c_void_p]
    return lib


@cache
def _voice(name: str) -> int:
    if name not in FLITE_VOICES:
        raise FliteError(f"flite voice {name!r} is not one of {', '.join(FLITE_VOICES)}")
    _library()
    try:
        module = ctypes.CDLL(f"libflite_cmu_us_{name}.so.1")
    except OSError as error:
        raise FliteError(f"flite voice {name!r} is not installed ({error}); apt-get install flite") from None
    register = getattr(module, f"register_cmu_us_{name}")
    register.restype = ctypes.c_void_p
    voice = register(None)
    if not voice:
        raise FliteError(f"flite voice {name!r} did not load")
    return voice


def flite_available() -> bool:
    try:
        _voice(FLITE_VOICES[0])
    except FliteError:
        return False
    return True


def synthesize(text: str, voice: str) -> tuple[np.ndarray, int, list[tuple[str, float]]]:
    """(float32 mono audio, rate, [(radio phone, end time s)]) for one sentence."""
    lib = _library()
    utterance = lib.flite_synth_text(text.encode("utf-8"), _voice(voice))
    if not utterance:
        raise FliteError(f"flite voice {voice!r} gave no utterance for {text!r}")
    try:
        handle, wav = tempfile.mkstemp(suffix=".wav", prefix="flite-")
        os.close(handle)
        try:
            lib.cst_wave_save_riff(lib.utt_wave(utterance), wav.encode())
            audio, rate = soundfile.read(wav, dtype="float32", always_2d=True)
        finally:
            os.remove(wav)
        segments = []
        item = lib.relation_head(lib.utt_relation(utterance, b"Segment"))
        while item:
            segments.append((lib.ffeature_string(item, b"name").decode(), float(lib.ffeature_float(item, b"end"))))
            item = lib.item_next(item)
    finally:
        lib.delete_utterance(utterance)
    if not len(audio) or not segments:
        raise FliteError(f"flite voice {voice!r} gave no audio/segments for {text!r}")
    return audio.mean(axis=1), int(rate), segments
