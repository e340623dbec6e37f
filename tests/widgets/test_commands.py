"""The headless commands end to end, in a process with no display: real EGL, real MP4 files decoded back."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import soundfile

from render.video import probe_video
from studio.avatar.arkit import ARKIT_NAMES

ROOT = Path(__file__).resolve().parents[2]


def run_headless(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    environment["EGL_PLATFORM"] = "surfaceless"
    return subprocess.run(
        [sys.executable, "-m", "widgets.app", *args], cwd=ROOT, capture_output=True, text=True,
        timeout=timeout, env=environment,
    )


def test_selftest_passes_without_a_display():
    result = run_headless("selftest")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS jawOpen" in result.stdout and "PASS eyeBlinkLeft" in result.stdout


def test_selftest_refuses_a_broken_avatar_by_name(tmp_path):
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not an avatar")
    result = run_headless("selftest", "--avatar", str(broken))
    assert result.returncode == 2 and "broken.npz" in result.stderr


def test_render_idle_animation_to_mp4(tmp_path):
    out = tmp_path / "idle.mp4"
    result = run_headless("render", "--out", str(out), "--duration", "1", "--fps", "24", "--size", "320x180")
    assert result.returncode == 0, result.stderr
    video = probe_video(out)
    assert (video["frames"], video["width"], video["height"]) == (24, 320, 180)
    assert not video["has_audio"]


def test_render_speech_muxes_the_audio(tmp_path):
    out = tmp_path / "speech.mp4"
    result = run_headless("render", "--out", str(out), "--text", "Bob met Pam.", "--size", "320x180")
    assert result.returncode == 0, result.stderr
    video = probe_video(out)
    assert video["has_audio"]
    assert abs(video["audio_duration_s"] - video["duration_s"]) < 0.1


def test_lipsync_writes_one_row_per_frame_with_every_arkit_column(tmp_path):
    rate = 16000
    t = np.arange(rate) / rate
    audio = np.concatenate([np.zeros(rate // 2), 0.3 * np.sin(2 * np.pi * 180 * t) * (1 + np.sin(2 * np.pi * 3 * t))])
    wav = tmp_path / "speech.wav"
    soundfile.write(wav, audio.astype(np.float32), rate)
    out = tmp_path / "weights.csv"
    result = run_headless("lipsync", str(wav), "--out", str(out), "--fps", "60")
    assert result.returncode == 0, result.stderr
    with open(out, newline="") as handle:
        rows = list(csv.reader(handle))
    header = rows[0]
    assert header[0] == "Timecode" and header[-52:] == list(ARKIT_NAMES)
    assert abs(len(rows) - 1 - 90) <= 1
    silent = np.array(rows[5][-52:], float)
    assert silent[ARKIT_NAMES.index("jawOpen")] < 0.05


def test_lipsync_format_livelink_writes_the_apps_layout(tmp_path):
    from studio.recording.livelink import HEADER, read_livelink_csv

    wav, out = tmp_path / "speech.wav", tmp_path / "face.csv"
    soundfile.write(wav, (0.3 * np.sin(np.arange(16000) * 0.07)).astype(np.float32), 16000)
    result = run_headless("lipsync", str(wav), "--out", str(out), "--format", "livelink")
    assert result.returncode == 0, result.stderr
    rows = list(csv.reader(open(out, newline="")))
    assert tuple(rows[0]) == HEADER and rows[1][:2] == ["00:00:00:00.000", "61"]
    assert len(read_livelink_csv(out)[0]) == len(rows) - 1 == 60


def test_lipsync_on_a_truncated_file_fails_cleanly_and_keeps_the_old_csv(tmp_path):
    wav = tmp_path / "cut.wav"
    soundfile.write(wav, np.zeros(16000, np.float32), 16000)
    wav.write_bytes(wav.read_bytes()[:30])
    out = tmp_path / "keep.csv"
    out.write_text("precious\n")
    result = run_headless("lipsync", str(wav), "--out", str(out))
    assert result.returncode == 2
    assert "cut.wav" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert out.read_text() == "precious\n"


def test_render_audio_file_streams_it_and_refuses_a_bad_one(tmp_path):
    rate = 48000
    t = np.arange(rate) / rate
    wav = tmp_path / "speech.wav"
    soundfile.write(wav, np.stack([0.3 * np.sin(2 * np.pi * 180 * t)] * 2, axis=1).astype(np.float32), rate)
    out = tmp_path / "speech.mp4"
    result = run_headless("render", "--out", str(out), "--audio", str(wav), "--size", "160x90", "--fps", "15")
    assert result.returncode == 0, result.stderr
    video = probe_video(out)
    assert video["frames"] == 15 and abs(video["audio_duration_s"] - 1.0) < 0.05
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF" + b"\x00" * 40)
    result = run_headless("render", "--out", str(tmp_path / "bad.mp4"), "--audio", str(bad))
    assert result.returncode == 2 and "bad.wav" in result.stderr and not (tmp_path / "bad.mp4").exists()
