"""Offline analysis: a whole file or a line of text to FrameStates at any fps, and ARKit CSV export.

Frames are aligned to media time exactly (the model's lookahead is compensated), so an exported
take lines up with its audio. `lipsync_command` is the `avatar-studio lipsync` CLI body.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

from studio.avatar.arkit import ARKIT_NAMES, NUM_ARKIT
from studio.engine.features import LogMelExtractor, resample
from studio.engine.motion import (
    AUDIBLE_DB,
    HOP_S,
    SILENCE,
    MotionGenerator,
    MotionStyle,
    MouthGate,
    Prosody,
    ProsodyTracker,
    lay_eyes,
)
from studio.engine.pipeline import MOUTH_CHANNELS
from studio.engine.sources import ENGINE_RATE, AudioInputError, load_audio, resample_clip, trim_leading_silence
from studio.fileio import atomic_write
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
    gate = MouthGate(opened=not gate_mouth)
    n = len(arkit_hops)
    levels = np.array([p.level_db for p in prosodies] + [-np.inf] * (MouthGate.LOOK_AHEAD + 1))
    loud = levels > AUDIBLE_DB
    audible = np.zeros(n, bool)
    for k in range(-MouthGate.LOOK_BEHIND, MouthGate.LOOK_AHEAD + 1):  # any audible hop nearby
        audible[max(0, -k):] |= loud[max(0, k):max(0, k) + n - max(0, -k)]
    gates = np.ones(n, np.float32)
    poses = np.zeros((n, 55, 3), np.float32)
    transl = np.zeros((n, 3), np.float32)
    eyes = np.zeros((n, NUM_ARKIT), np.float32)
    voice_out = np.asarray(voice_hops, np.float32)[:n].copy()
    for i, heard in enumerate(audible.tolist()):
        prosody = prosodies[i] if i < len(prosodies) else SILENCE
        if gate_mouth:
            gates[i] = gate.step(heard)
            voice_out[i] *= gates[i]
        frame = motion.step(i * HOP_S, Prosody(prosody.energy, prosody.pitch, prosody.voiced, float(voice_out[i]),
                                               prosody.level_db))
        poses[i], transl[i], eyes[i] = frame.pose, frame.transl, frame.eye_weights
    arkit = np.clip(np.asarray(arkit_hops, np.float32), 0.0, 1.0)
    arkit[:, MOUTH_CHANNELS] *= gates[:, None]
    return lay_eyes(arkit, eyes), poses, transl, voice_out


def _frames_at_fps(arkit, poses, transl, voice, visemes, duration_s: float, fps: float,
                   mouth: np.ndarray | None = None) -> list[FrameState]:
    """Sample per-hop values at k / fps (linear between hops); `mouth` (per output frame) replaces the mouth channels."""
    n_frames = max(1, int(math.ceil(duration_s * fps - 1e-9)))
    times = np.arange(n_frames) / fps
    position = np.clip(times / HOP_S, 0.0, len(arkit) - 1)
    i = np.floor(position).astype(np.int64)
    j = np.minimum(i + 1, len(arkit) - 1)
    w = (position - i).astype(np.float32)

    def lerp(values: np.ndarray) -> np.ndarray:
        weight = w.reshape((-1,) + (1,) * (values.ndim - 1))
        return values[i] * (1 - weight) + values[j] * weight

    arkit_at, pose_at, transl_at, voice_at = lerp(arkit), lerp(poses), lerp(transl), lerp(voice).tolist()
    if mouth is not None:
        rows = min(len(mouth), n_frames)
        arkit_at[:rows, MOUTH_CHANNELS] = mouth[:rows, MOUTH_CHANNELS]
    nearest = np.where(w < 0.5, i, j)
    return [FrameState(media_time_s=float(times[k]), arkit=arkit_at[k], pose=pose_at[k], transl=transl_at[k],
                       visemes=None if visemes is None else visemes[nearest[k]], voice_activity=voice_at[k], sequence=k)
            for k in range(n_frames)]


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
    """Speak a line with espeak-ng; the mouth follows its exact phonemes. Returns (SpeechClip, frames).

    Leading silence is trimmed as in `TextSource`, so offline takes and live speech share one timeline.
    """
    from studio.speech.espeak import EspeakSynth
    from studio.speech.visemes import phoneme_track

    fps = _check_fps(fps)
    clip = trim_leading_silence(EspeakSynth(voice, rate_wpm, pitch).synthesize(text))
    audio = resample_clip(clip.audio, clip.sample_rate, ENGINE_RATE)
    track = phoneme_track(clip.phonemes, clip.duration_s, fps=1.0 / HOP_S)
    prosodies = ProsodyTracker().push(np.concatenate([audio, np.zeros(int(ENGINE_RATE * HOP_S), np.float32)]))
    arkit, poses, transl, voice_out = _gated_motion(track.arkit, track.voice_active, prosodies,
                                                    style or MotionStyle(), gate_mouth=False)
    # the mouth comes straight from the phoneme track at the output rate (exact closures, no hop blur)
    exact = phoneme_track(clip.phonemes, clip.duration_s, fps=fps).arkit
    return clip, _frames_at_fps(arkit, poses, transl, voice_out, None, clip.duration_s, fps, mouth=exact)


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
    atomic_write(path, "\n".join(lines) + "\n")


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
