"""Offline analysis and ARKit CSV export."""

import csv

import numpy as np
import pytest
import soundfile

from studio.avatar.arkit import ARKIT_NAMES
from studio.engine.offline import (
    _csv_rows,
    _weight_lines,
    analyze_audio,
    analyze_text,
    lipsync_command,
    smpte_timecode,
    stream_frame_blocks,
    write_arkit_csv,
)
from studio.speech.visemes import closure_intervals, lips_closed, mouth_openness
from tests.studio.engine.helpers import SR, silence_vowel_silence, vowel


def test_audio_frames_are_on_media_time_and_silence_is_at_rest(tmp_path):
    audio = silence_vowel_silence()
    frames = analyze_audio(audio, fps=60, sample_rate=SR)
    assert len(frames) == int(np.ceil(len(audio) / SR * 60))
    assert [f.media_time_s for f in frames[:3]] == pytest.approx([0, 1 / 60, 2 / 60])
    times = np.array([f.media_time_s for f in frames])
    openness = np.array([mouth_openness(f.arkit) for f in frames])
    assert np.all(openness[(times < 0.5) | (times > 1.75)] < 0.08)
    assert np.median(openness[(times > 0.75) & (times < 1.5)]) > 0.15


@pytest.mark.parametrize("face_only", [False, True])
def test_in_a_noisy_room_the_mouth_rests_around_a_word(face_only):
    audio = (0.018 * np.random.default_rng(5).standard_normal(3 * SR)).astype(np.float32)  # -35 dBFS: a fan
    audio[SR:SR * 3 // 2] += vowel(0.5)
    blocks = list(stream_frame_blocks(audio, fps=100, sample_rate=SR, face_only=face_only))
    times = np.concatenate([b.times for b in blocks])
    openness = mouth_openness(np.concatenate([b.arkit for b in blocks]))
    room = ((times > 0.5) & (times < 0.85)) | (times > 1.8)  # the gate opens 12 hops ahead of a sound offline
    assert np.all(openness[room] < 0.01)
    assert np.all(openness[(times > 1.05) & (times < 1.45)] > 0.1)


def test_a_word_that_fades_in_through_room_noise_is_not_gated_shut_at_its_start():
    fade_in = vowel(1.0)
    fade_in[:SR * 12 // 100] *= (np.arange(SR * 12 // 100) / (SR * 12 // 100)) ** 2  # 120 ms: a soft onset
    audio = np.concatenate([np.zeros(int(0.6 * SR), np.float32), fade_in, np.zeros(int(0.6 * SR), np.float32)])
    audio += (10 ** (-30 / 20) * 0.3 * np.random.default_rng(0).standard_normal(len(audio))).astype(np.float32)
    blocks = list(stream_frame_blocks(audio, fps=100, sample_rate=SR, face_only=True))
    gated_voice = np.concatenate([b.voice for b in blocks])  # the model's voice activity times the silence gate
    # the word's first hops are too quiet to count as heard; the gate must be open through them all the same
    assert np.all(gated_voice[60:63] > 0.15), f"gated shut as the word begins: {gated_voice[58:66].round(2)}"


@pytest.mark.parametrize("name,make", [
    ("silence", lambda: np.zeros(SR, np.float32)),
    ("clipping", lambda: np.clip(silence_vowel_silence() * 20, -1, 1)),
    ("dc_offset", lambda: silence_vowel_silence() + 0.4),
    ("stereo", lambda: np.stack([silence_vowel_silence()] * 2, axis=1)),
])
def test_awkward_audio_gives_sensible_frames(name, make):
    frames = analyze_audio(make(), fps=30, sample_rate=SR)
    arkit = np.array([f.arkit for f in frames])
    assert np.isfinite(arkit).all() and arkit.min() >= 0 and arkit.max() <= 1
    if name == "silence":
        assert max(mouth_openness(f.arkit) for f in frames) == 0.0


def test_text_frames_close_the_lips_for_b_m_p():
    clip, frames = analyze_text("Bob met Pam", fps=100)
    for start, end in closure_intervals(clip.phonemes):
        inside = [f for f in frames if start <= f.media_time_s < end]
        assert inside and all(lips_closed(f.arkit) for f in inside)
    with pytest.raises(ValueError):
        analyze_text("")


def test_csv_has_timecode_media_time_and_the_52_names(tmp_path):
    frames = analyze_audio(np.zeros(SR // 2, np.float32), fps=60, sample_rate=SR)
    path = tmp_path / "take.csv"
    write_arkit_csv(frames, path, 60)
    rows = list(csv.reader(path.open()))
    assert rows[0] == ["Timecode", "media_time_s", *ARKIT_NAMES]
    assert len(rows) == len(frames) + 1
    assert rows[2][0] == "00:00:00:01.000" and float(rows[2][1]) == pytest.approx(1 / 60, abs=1e-6)
    assert smpte_timecode(3723.5, 60) == "01:02:03:30.000"


def test_a_failed_export_never_truncates_the_existing_file(tmp_path):
    path = tmp_path / "take.csv"
    path.write_text("precious")

    class Exploding:
        media_time_s = 0.0

        @property
        def arkit(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_arkit_csv([Exploding()], path, 60)
    assert path.read_text() == "precious"
    assert [p.name for p in tmp_path.iterdir()] == ["take.csv"]


def test_lipsync_command_writes_a_csv_and_reports_bad_input_in_one_line(tmp_path, capsys):
    wav = tmp_path / "speech.wav"
    soundfile.write(wav, silence_vowel_silence(), SR)
    out = tmp_path / "speech.csv"
    assert lipsync_command(str(wav), str(out), 30) == 0 and out.stat().st_size > 0
    garbage = tmp_path / "garbage.mp3"
    garbage.write_bytes(b"\x00\x01not audio" * 50)
    assert lipsync_command(str(garbage), str(tmp_path / "x.csv"), 30) == 2
    error = capsys.readouterr().err.strip()
    assert "garbage.mp3" in error and len(error.splitlines()) == 1
    assert not (tmp_path / "x.csv").exists()


def _rows_one_by_one(times, weights, fps):
    return "".join(f"{smpte_timecode(t, fps)},{t:.6f}," + ",".join(f"{w:.6f}" for w in row) + "\n"
                   for t, row in zip(times, np.asarray(weights, np.float64).tolist()))


def test_csv_rows_print_exactly_what_per_value_formatting_prints():
    rng = np.random.default_rng(4)
    weights = rng.uniform(-0.2, 1.2, (500, 52)).astype(np.float32)
    weights[:, 0] = np.float32(1 / 128)  # a decimal tie: "%.6f" rounds it half to even
    weights[:, 1] = np.float32(-1e-9)  # prints as -0.000000
    weights[:, 2] = 1.0
    weights[::3, 3] = np.float32(9.4999995)
    assert _weight_lines(weights) is not None  # float32 in range: the numpy-built text is what is compared
    for fps, start in ((60, 0.0), (29.97, 3599.0), (1000, 86395.5)):
        times = start + np.arange(len(weights)) / fps
        assert _csv_rows(times.tolist(), weights, fps) == _rows_one_by_one(times.tolist(), weights, fps)
        positive = np.abs(weights)
        assert _csv_rows(times.tolist(), positive, fps) == _rows_one_by_one(times.tolist(), positive, fps)
    unusual = weights[:4].astype(np.float64)  # float64, out of range and NaN go the one-by-one way
    unusual[0, 5], unusual[1, 6], unusual[2, 7] = 12.25, np.nan, 1 / 3
    assert _weight_lines(unusual) is None and _weight_lines(weights[:4] * 10) is None
    assert _csv_rows([0.0, 0.1, 0.2, 0.3], unusual, 10) == _rows_one_by_one([0.0, 0.1, 0.2, 0.3], unusual, 10)


@pytest.mark.parametrize("fps", [60, 24])
def test_face_only_analysis_gives_the_full_analysis_face_weights(fps):
    """lipsync's cheap eye path (face_only) writes the weights the full body analysis gives, blinks and gaze too."""
    phrase = np.concatenate([vowel(1.2), np.zeros(SR, np.float32)])  # phrase ends bring a blink
    audio = np.tile(phrase, 4)
    full = np.concatenate([block.arkit for block in stream_frame_blocks(audio, fps, sample_rate=SR)])
    face = np.concatenate([block.arkit for block in stream_frame_blocks(audio, fps, sample_rate=SR, face_only=True)])
    assert face.shape == full.shape == (int(np.ceil(len(audio) / SR * fps)), 52)
    np.testing.assert_allclose(face, full, atol=1e-5, rtol=0)
    eyes = [ARKIT_NAMES.index(name) for name in ("eyeBlinkLeft", "eyeLookOutLeft", "eyeLookInLeft")]
    assert full[:, eyes[0]].max() > 0.9 and np.ptp(full[:, eyes[1:]]) > 0.02
