"""Offline analysis: a whole file or a line of text to FrameStates at any fps, and ARKit CSV export.

Frames are aligned to media time exactly (the model's lookahead is compensated), so an exported
take lines up with its audio. `lipsync_command` is the `avatar-studio lipsync` CLI body.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from studio.avatar.arkit import ARKIT_NAMES, NUM_ARKIT
from studio.engine.features import LogMelExtractor, resample
from studio.engine.motion import AUDIBLE_DB, HOP_S, MotionGenerator, MotionStyle, Prosody, ProsodyTracker, _Spring
from studio.engine.pipeline import MOUTH_CHANNELS
from studio.engine.sources import ENGINE_RATE, AudioInputError, load_audio
from studio.frame import FrameState


def _check_fps(fps: float) -> float:
    if not isinstance(fps, (int, float)) or not math.isfinite(fps) or not 1 <= fps <= 1000:
        raise ValueError(f"fps={fps!r} is out of range; allowed 1..1000")
    return float(fps)


def _load(path_or_array, sample_rate: int | None) -> np.ndarray:
    if isinstance(path_or_array, (str, Path)):
        audio, rate = load_audio(path_or_array)
        audio = audio.mean(axis=1)
    else:
        if sample_rate is None:
            raise ValueError("analyze_audio: an array needs sample_rate (Hz)")
        audio, rate = np.asarray(path_or_array, np.float32), int(sample_rate)
        if audio.ndim == 2:
            audio = audio.mean(axis=1 if audio.shape[1] <= 8 else 0)
        if audio.ndim != 1 or audio.size == 0:
            raise AudioInputError(f"analyze_audio: expected a non-empty mono or (n, channels) array, got {audio.shape}")
        if not np.all(np.isfinite(audio)):
            raise AudioInputError("analyze_audio: audio contains NaN or infinite samples")
        audio = np.clip(audio, -1.0, 1.0)
    return resample(audio, rate, ENGINE_RATE) if rate != ENGINE_RATE else audio.astype(np.float32)


def _gated_motion(arkit_hops: np.ndarray, voice_hops: np.ndarray, prosodies: list[Prosody], style: MotionStyle,
                  gate_mouth: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-hop face with the silence gate, motion laid over it: (arkit, pose, transl, voice)."""
    motion = MotionGenerator(style)
    gate = _Spring(40.0)
    n = len(arkit_hops)
    arkit_out = np.zeros((n, NUM_ARKIT), np.float32)
    poses = np.zeros((n, 55, 3), np.float32)
    transl = np.zeros((n, 3), np.float32)
    voice_out = np.zeros(n, np.float32)
    for i in range(n):
        prosody = prosodies[i] if i < len(prosodies) else Prosody()
        audible = any(prosodies[k].level_db > AUDIBLE_DB for k in range(max(0, i - 1), min(len(prosodies), i + 3)))
        g = float(np.clip(gate.step(1.0 if audible or not gate_mouth else 0.0, HOP_S)[0], 0.0, 1.0))
        arkit = np.clip(arkit_hops[i], 0.0, 1.0).astype(np.float32)
        arkit[MOUTH_CHANNELS] *= g
        voice = float(voice_hops[i]) * (g if gate_mouth else 1.0)
        frame = motion.step(i * HOP_S, Prosody(prosody.energy, prosody.pitch, prosody.voiced, voice, prosody.level_db))
        arkit_out[i] = frame.apply(arkit)
        poses[i], transl[i], voice_out[i] = frame.pose, frame.transl, voice
    return arkit_out, poses, transl, voice_out


def _frames_at_fps(arkit, poses, transl, voice, visemes, duration_s: float, fps: float) -> list[FrameState]:
    """Sample per-hop values at k / fps (linear between hops)."""
    n_frames = max(1, int(math.ceil(duration_s * fps - 1e-9)))
    frames = []
    for k in range(n_frames):
        t = k / fps
        position = min(max(t / HOP_S, 0.0), len(arkit) - 1)
        i = int(math.floor(position))
        j = min(i + 1, len(arkit) - 1)
        w = position - i
        frames.append(FrameState(
            media_time_s=t,
            arkit=arkit[i] * (1 - w) + arkit[j] * w,
            pose=poses[i] * (1 - w) + poses[j] * w,
            transl=transl[i] * (1 - w) + transl[j] * w,
            visemes=None if visemes is None else visemes[i if w < 0.5 else j],
            voice_activity=float(voice[i] * (1 - w) + voice[j] * w),
            sequence=k,
        ))
    return frames


def analyze_audio(path_or_array, fps: float = 60, sample_rate: int | None = None, model_variant: str = "fp32",
                  style: MotionStyle | None = None) -> list[FrameState]:
    """A whole recording through features, face model and motion: one FrameState per 1/fps of media time."""
    from studio.engine.face_model import FaceModel

    fps = _check_fps(fps)
    audio = _load(path_or_array, sample_rate)
    duration = len(audio) / ENGINE_RATE
    hop = int(ENGINE_RATE * HOP_S)
    padded = np.concatenate([audio, np.zeros((-len(audio)) % hop + hop, np.float32)])
    features = LogMelExtractor().compute(padded)
    output = FaceModel(model_variant).run_offline(features)
    prosodies = ProsodyTracker().push(padded)
    arkit, poses, transl, voice = _gated_motion(output.arkit, output.voice_activity, prosodies,
                                                style or MotionStyle(), gate_mouth=True)
    return _frames_at_fps(arkit, poses, transl, voice, output.visemes, duration, fps)


def analyze_text(text: str, voice: str = "en-us", rate_wpm: int = 175, pitch: int = 50, fps: float = 60,
                 style: MotionStyle | None = None):
    """Speak a line with espeak-ng; the mouth follows its exact phonemes. Returns (SpeechClip, frames)."""
    from studio.speech.espeak import EspeakSynth
    from studio.speech.visemes import phoneme_track

    fps = _check_fps(fps)
    clip = EspeakSynth(voice, rate_wpm, pitch).synthesize(text)
    audio = resample(clip.audio, clip.sample_rate, ENGINE_RATE) if clip.sample_rate != ENGINE_RATE else clip.audio
    track = phoneme_track(clip.phonemes, clip.duration_s, fps=1.0 / HOP_S)
    prosodies = ProsodyTracker().push(np.concatenate([audio, np.zeros(int(ENGINE_RATE * HOP_S), np.float32)]))
    arkit, poses, transl, voice_out = _gated_motion(track.arkit, track.voice_active, prosodies,
                                                    style or MotionStyle(), gate_mouth=False)
    frames = _frames_at_fps(arkit, poses, transl, voice_out, None, clip.duration_s, fps)
    # the mouth comes straight from the phoneme track at the output rate (exact closures, no hop blur)
    exact = phoneme_track(clip.phonemes, clip.duration_s, fps=fps).arkit
    for k, frame in enumerate(frames):
        if k < len(exact):
            mouth = frame.arkit.copy()
            mouth[MOUTH_CHANNELS] = exact[k][MOUTH_CHANNELS]
            frames[k] = frame.replace(arkit=mouth)
    return clip, frames


def smpte_timecode(media_time_s: float, fps: float) -> str:
    """Live Link Face style HH:MM:SS:FF.mmm (frame number within the second, then its fraction)."""
    total_frames = media_time_s * fps
    whole_seconds = int(math.floor(media_time_s + 1e-9))
    frame_in_second = max(0.0, total_frames - whole_seconds * fps)
    frame = int(math.floor(frame_in_second + 1e-6))
    fraction = min(999, int(round((frame_in_second - frame) * 1000)))
    hours, rest = divmod(whole_seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}:{frame:02d}.{max(fraction, 0):03d}"


def write_arkit_csv(frames: list[FrameState], path: str | Path, fps: float) -> None:
    """Timecode, media_time_s and the 52 ARKit weights per frame; atomic (an existing file survives any error)."""
    fps = _check_fps(fps)
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise ValueError(f"cannot write {path}: folder {directory} does not exist")
    lines = [",".join(("Timecode", "media_time_s") + ARKIT_NAMES)]
    for frame in frames:
        weights = ",".join(f"{w:.6f}" for w in frame.arkit)
        lines.append(f"{smpte_timecode(frame.media_time_s, fps)},{frame.media_time_s:.6f},{weights}")
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "w", newline="\n") as out:
            out.write("\n".join(lines) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def lipsync_command(audio: str, out: str, fps: float = 60) -> int:
    """`avatar-studio lipsync AUDIO --out FILE.csv --fps N`: 0 on success, 2 with one clear line on bad input."""
    try:
        frames = analyze_audio(audio, fps=fps)
        write_arkit_csv(frames, out, fps)
    except (ValueError, OSError) as error:
        print(f"lipsync: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # the model or runtime failed: still one line, not a traceback
        print(f"lipsync: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(f"lipsync: wrote {len(frames)} frames at {fps:g} fps to {out}")
    return 0
