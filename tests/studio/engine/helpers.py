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


def wait_until(condition, deadline_s: float = 20.0, what: str = "condition"):
    """Poll until condition() is truthy; fail with a message (never a timing assert) if it never is."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    pytest.fail(f"gave up waiting for {what}")
