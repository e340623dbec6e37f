"""Shared helpers for the engine tests: synthetic speech-like audio and waiting without timed asserts."""

import time

import numpy as np
import pytest

SR = 16000


def vowel(seconds: float, sr: int = SR, f0: float = 140.0) -> np.ndarray:
    """A buzzy vowel-like sound: harmonics of f0 shaped by two formants (~700 and ~1200 Hz, an /a/)."""
    t = np.arange(int(seconds * sr)) / sr
    harmonics = np.arange(1, int(4000 / f0))
    formant = np.exp(-((harmonics * f0 - 700) / 250) ** 2) + 0.6 * np.exp(-((harmonics * f0 - 1200) / 300) ** 2)
    wave = (formant[:, None] * np.sin(2 * np.pi * f0 * harmonics[:, None] * t[None])).sum(0)
    return (0.3 * wave / np.abs(wave).max()).astype(np.float32)


def silence_vowel_silence(sr: int = SR) -> np.ndarray:
    return np.concatenate([np.zeros(int(0.6 * sr), np.float32), vowel(1.0, sr), np.zeros(int(0.6 * sr), np.float32)])


def two_sentences(p90_dbfs: float = -18.0) -> np.ndarray:
    """Two espeak sentences with pauses, scaled so the 90th percentile of their 10 ms levels sits at `p90_dbfs`
    (-18: a voice at a normal level)."""
    from studio.engine.sources import resample_clip
    from studio.speech.espeak import EspeakSynth

    clips = [EspeakSynth().synthesize(line) for line in ("Bob met Pam by the maple tree.", "Would you move to Oslo?")]
    pause = np.zeros(SR // 2, np.float32)
    audio = np.concatenate([pause] + [np.concatenate([resample_clip(c.audio, c.sample_rate, SR), pause]) for c in clips])
    hops = audio[: len(audio) // 160 * 160].reshape(-1, 160)
    p90 = np.percentile(10 * np.log10((hops.astype(np.float64) ** 2).mean(1) + 1e-12), 90)
    return (audio * 10 ** ((p90_dbfs - p90) / 20)).astype(np.float32)


def wait_until(condition, deadline_s: float = 20.0, what: str = "condition"):
    """Poll until condition() is truthy; fail with a message (never a timing assert) if it never is."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    pytest.fail(f"gave up waiting for {what}")
