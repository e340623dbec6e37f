"""A take keeps its source's audio as it is (48 kHz stereo stays 48 kHz stereo), and so does every export of it:
a ProRes master of a 48 kHz voice must still hold what lies above 8 kHz."""

from __future__ import annotations

import os

import numpy as np
import pytest
import soundfile

from render.take_export import export_take
from studio.avatar.io import default_avatar_path, load_avatar
from studio.presets import persona_by_name, preset_by_name
from studio.recording.livelink import write_livelink_csv
from studio.recording.session import import_livelink, record_offline
from studio.recording.take import open_take, repair_take
from tests.studio.engine.helpers import SR, silence_vowel_silence

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
RATE = 48000
HIGH_HZ = 12000.0  # only a 48 kHz take keeps it: a 16 kHz one ends at 8 kHz


@pytest.fixture(scope="module")
def avatar():
    return load_avatar(default_avatar_path())


def _stereo_voice(path) -> np.ndarray:
    """A voice (the engine's test vowel, resampled) on the left, with a 12 kHz tone under it; the right holds the
    voice alone, so the two channels differ."""
    from studio.engine.sources import resample_clip

    voice = resample_clip(silence_vowel_silence(), SR, RATE).astype(np.float32)
    tone = 0.1 * np.sin(2 * np.pi * HIGH_HZ * np.arange(len(voice)) / RATE).astype(np.float32)
    stereo = np.stack([0.5 * voice + tone, 0.5 * voice], axis=1)
    soundfile.write(path, stereo, RATE, subtype="PCM_16")
    return stereo


def _high_share(samples: np.ndarray, rate: int) -> float:
    """Share of the signal's energy above 8 kHz."""
    spectrum = np.abs(np.fft.rfft(samples.astype(np.float64))) ** 2
    frequencies = np.fft.rfftfreq(len(samples), 1.0 / rate)
    return float(spectrum[frequencies > 8000].sum() / max(spectrum.sum(), 1e-12))


def test_a_recorded_take_and_its_prores_master_keep_48_khz_stereo(tmp_path, avatar):
    import av

    source = _stereo_voice(tmp_path / "voice.wav")
    take = record_offline(tmp_path / "take", avatar, persona_by_name("default"), preset_by_name("default"),
                          audio_path=str(tmp_path / "voice.wav"), fps=30)
    assert (take.sample_rate, take.audio.channels) == (RATE, 2) and take.manifest["channels"] == 2
    kept = take.audio.read_channels()
    assert kept.shape == source.shape and np.abs(kept - source).max() < 2 / 32767
    assert _high_share(kept[:, 0], RATE) > 0.05

    export_take(take, "mov", tmp_path / "master.mov", avatar=avatar, size=(64, 48))
    with av.open(str(tmp_path / "master.mov")) as container:
        stream = container.streams.audio[0]
        assert (stream.rate, stream.channels) == (RATE, 2)
        decoded = np.concatenate([frame.to_ndarray().reshape(-1, 2) if frame.format.name == "s16"
                                  else frame.to_ndarray().T for frame in container.decode(audio=0)])
    left = decoded[:len(source), 0].astype(np.float64) / (32767 if decoded.dtype.kind == "i" else 1)
    assert np.abs(left - source[:len(left), 0]).max() < 3 / 32767
    assert _high_share(left, RATE) > 0.05
    export_take(take, "mp4", tmp_path / "web.mp4", avatar=avatar, size=(64, 48))
    with av.open(str(tmp_path / "web.mp4")) as container:
        assert (container.streams.audio[0].rate, container.streams.audio[0].channels) == (RATE, 2)


def test_an_imported_take_keeps_its_audio_rate_and_channels_and_repairs_so(tmp_path, avatar):
    source = _stereo_voice(tmp_path / "voice.wav")
    from studio.frame import FrameState

    frames = [FrameState(media_time_s=k / 60, arkit=np.zeros(52)) for k in range(len(source) * 60 // RATE)]
    write_livelink_csv(frames, tmp_path / "face.csv", 60)
    take = import_livelink(tmp_path / "face.csv", tmp_path / "take", avatar, str(tmp_path / "voice.wav"))
    assert (take.sample_rate, take.audio.channels) == (RATE, 2)
    assert np.abs(take.audio.read_channels() - source).max() < 2 / 32767

    wav = tmp_path / "take" / "audio.wav"
    wav.write_bytes(wav.read_bytes()[:44 + 4 * RATE // 2])  # cut to 0.5 s of stereo, the header still says more
    repair_take(tmp_path / "take")
    repaired = open_take(tmp_path / "take")
    assert (repaired.sample_rate, repaired.audio.channels, len(repaired.audio)) == (RATE, 2, RATE // 2)
    assert np.abs(repaired.audio.read_channels() - source[:RATE // 2]).max() < 2 / 32767
