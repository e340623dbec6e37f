"""MP4 export round trips through a real encoder and decoder (PyAV: libx264 + AAC)."""

from __future__ import annotations

import numpy as np
import pytest

from render.video import probe_video, render_video
from studio.avatar.arkit import ARKIT_NAMES
from studio.frame import FrameState

FPS = 30
SIZE = (640, 360)


def _talking(count: int):
    jaw = ARKIT_NAMES.index("jawOpen")
    for i in range(count):
        arkit = np.zeros(len(ARKIT_NAMES), np.float32)
        arkit[jaw] = (i % 10) / 10
        yield FrameState(media_time_s=i / FPS, arkit=arkit, sequence=i)


def _tone(seconds: float, rate: int = 48000) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.2 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def test_one_second_with_audio_round_trips(tmp_path, ellipsoid_avatar):
    out = tmp_path / "take.mp4"
    written = render_video(_talking(FPS), out, fps=FPS, size=SIZE, audio=(_tone(1.0), 48000), avatar=ellipsoid_avatar)
    assert written["frames"] == FPS
    probe = probe_video(out)
    assert probe["frames"] == FPS
    assert probe["fps"] == pytest.approx(FPS)
    assert (probe["width"], probe["height"]) == SIZE
    assert probe["duration_s"] == pytest.approx(1.0, abs=1e-6)
    assert probe["has_audio"]
    assert probe["audio_duration_s"] == pytest.approx(1.0, abs=0.05)
    assert [p.name for p in tmp_path.iterdir()] == ["take.mp4"]


def test_video_without_audio_has_no_audio_stream(tmp_path, ellipsoid_avatar):
    out = tmp_path / "silent.mp4"
    render_video(_talking(5), out, fps=FPS, size=(320, 180), avatar=ellipsoid_avatar, background="chroma")
    probe = probe_video(out)
    assert probe["frames"] == 5 and not probe["has_audio"] and probe["audio_duration_s"] is None


def _failing_after(count: int):
    yield from _talking(count)
    raise RuntimeError("engine stopped midway")


def test_failure_midway_keeps_the_previous_file_and_leaves_no_partial(tmp_path, ellipsoid_avatar):
    out = tmp_path / "take.mp4"
    render_video(_talking(3), out, fps=FPS, size=(320, 180), avatar=ellipsoid_avatar)
    before = out.read_bytes()
    with pytest.raises(RuntimeError, match="engine stopped midway"):
        render_video(_failing_after(10), out, fps=FPS, size=(320, 180), avatar=ellipsoid_avatar)
    assert out.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["take.mp4"]


def test_failure_on_a_new_path_leaves_nothing(tmp_path, ellipsoid_avatar):
    with pytest.raises(RuntimeError):
        render_video(_failing_after(4), tmp_path / "new.mp4", fps=FPS, size=(320, 180), avatar=ellipsoid_avatar)
    assert list(tmp_path.iterdir()) == []


def test_empty_frames_and_bad_arguments_are_refused_clearly(tmp_path, ellipsoid_avatar):
    out = tmp_path / "x.mp4"
    with pytest.raises(ValueError, match="no frames"):
        render_video(iter(()), out, fps=FPS, size=(320, 180), avatar=ellipsoid_avatar)
    with pytest.raises(ValueError, match="even width and height"):
        render_video(_talking(1), out, size=(321, 180), avatar=ellipsoid_avatar)
    with pytest.raises(ValueError, match="sample_rate"):
        render_video(_talking(1), out, size=(320, 180), audio=(_tone(0.1), 44100.5), avatar=ellipsoid_avatar)
    with pytest.raises(ValueError, match="does not exist"):
        render_video(_talking(1), tmp_path / "missing" / "x.mp4", size=(320, 180), avatar=ellipsoid_avatar)
    assert list(tmp_path.iterdir()) == []


def test_probe_names_a_file_that_is_not_a_video(tmp_path):
    bogus = tmp_path / "notes.mp4"
    bogus.write_text("not a video")
    with pytest.raises(ValueError, match="notes.mp4 is not a readable video"):
        probe_video(bogus)
    with pytest.raises(FileNotFoundError, match="missing.mp4"):
        probe_video(tmp_path / "missing.mp4")


def test_audio_from_a_file_is_streamed_in_chunks_and_muxed_whole(tmp_path, ellipsoid_avatar):
    import soundfile

    from studio.engine.audio_file import AudioFileStream

    wav = tmp_path / "tone.wav"
    soundfile.write(wav, np.stack([_tone(1.5), _tone(1.5)], axis=1), 48000)
    stream = AudioFileStream(wav, chunk_s=0.1)
    out = tmp_path / "take.mp4"
    written = render_video(_talking(45), out, fps=FPS, size=(320, 180), audio=stream, avatar=ellipsoid_avatar)
    assert written["audio_samples"] == int(1.5 * 48000)
    probe = probe_video(out)
    assert probe["has_audio"] and probe["audio_duration_s"] == pytest.approx(1.5, abs=0.05)
