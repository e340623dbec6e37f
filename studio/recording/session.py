"""Making takes without a live session: from a file or a line of text, from a Live Link Face CSV,
and re-targeting a take's frames to another persona.

Every take goes through the same writer as a live recording: the frames pass through a
`FrameQueue` to a `TakeRecorder` thread.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from studio.avatar.model import AvatarModel
from studio.engine.pipeline import ExpressionLayer, FrameQueue
from studio.frame import FrameState
from studio.recording.recorder import TakeRecorder, take_manifest
from studio.recording.take import Take, open_take


def write_take(folder: str | os.PathLike, manifest: dict, frames: list[FrameState], audio: np.ndarray | None = None,
               events: list[dict] | None = None, min_free_mb: float | None = None) -> Take:
    """Record a finished list of frames (and audio starting with the first frame) as a take; returns it opened."""
    if not frames:
        raise ValueError("no frames to record")
    queue = FrameQueue(maxlen=len(frames) + 1)
    options = {} if min_free_mb is None else {"min_free_mb": min_free_mb}
    recorder = TakeRecorder(folder, manifest, queue, **options)
    recorder.start()
    start = frames[0].media_time_s
    if audio is not None and len(audio):
        recorder.add_audio(start, audio)
    for event in events or []:
        recorder.add_event(**event)
    for frame in frames:
        queue.put(frame)
    recorder.stop("finished")
    if recorder.error:
        raise OSError(recorder.error)
    return open_take(folder)


def record_offline(folder: str | os.PathLike, avatar: AvatarModel, persona, preset, audio_path: str | None = None,
                   text: str | None = None, fps: float | None = None) -> Take:
    """`avatar-studio record`: speak a file or a line in the persona's style into a new take.

    The frames are what the live engine would show (offline analysis, media-time aligned, the persona's
    expression gains and caps applied); the audio is the input at the engine's analysis rate.
    """
    from studio.engine import offline
    from studio.engine.sources import ENGINE_RATE, load_audio, resample_clip

    fps = float(fps or preset.render.fps)
    style = persona.motion_style()
    if audio_path is not None:
        samples, rate = load_audio(audio_path)
        frames = offline.analyze_audio(samples, fps=fps, sample_rate=rate, style=style)
        mono = samples.mean(axis=1) if samples.ndim == 2 else samples
        events = [{"kind": "source", "media_time_s": 0.0, "file": str(audio_path)}]
    elif text is not None:
        clip, frames = offline.analyze_text(text, persona.voice.name, persona.voice.rate_wpm, persona.voice.pitch,
                                            fps=fps, style=style)
        mono, rate = clip.audio, clip.sample_rate
        events = [{"kind": "cue", "media_time_s": 0.0, "text": text}]
    else:
        raise ValueError("record needs --audio FILE or --text \"…\"")
    layer = ExpressionLayer(*persona.style.weight_arrays(), name=persona.name)
    frames = [f.replace(arkit=layer.apply(f.arkit), expression=layer.name) for f in frames]
    audio = resample_clip(np.asarray(mono, np.float32), rate, ENGINE_RATE) if rate != ENGINE_RATE else mono
    manifest = take_manifest(persona.name, preset.name, avatar, ENGINE_RATE, fps, source="offline")
    return write_take(folder, manifest, frames, audio, events)


def import_livelink(csv_path: str | os.PathLike, folder: str | os.PathLike, avatar: AvatarModel,
                    audio_path: str | None = None, persona: str = "default", preset: str = "default",
                    fps: float | None = None) -> Take:
    """A Live Link Face CSV (and its audio file, when given) as a new take."""
    from studio.engine.sources import ENGINE_RATE, load_audio, resample_clip
    from studio.recording.livelink import read_livelink_csv

    frames, rate_fps = read_livelink_csv(csv_path, fps)
    audio = None
    if audio_path is not None:
        samples, rate = load_audio(audio_path)
        mono = samples.mean(axis=1) if samples.ndim == 2 else samples
        audio = resample_clip(np.asarray(mono, np.float32), rate, ENGINE_RATE) if rate != ENGINE_RATE else mono
    manifest = take_manifest(persona, preset, avatar, ENGINE_RATE, rate_fps, source="livelink-csv",
                             imported_from=str(Path(csv_path).name))
    events = [{"kind": "import", "media_time_s": 0.0, "file": str(Path(csv_path).name)}]
    return write_take(folder, manifest, frames, audio, events)


def retarget_frames(frames: list[FrameState], from_persona, to_persona) -> list[FrameState]:
    """The frames as `to_persona` would have shown them: the recorded persona's gains divided out, the new
    persona's gains and caps applied (weights the old caps clipped stay at the cap's level)."""
    old_gains, _old_caps = from_persona.style.weight_arrays()
    new = ExpressionLayer(*to_persona.style.weight_arrays(), name=to_persona.name)
    ratio = np.where(old_gains > 1e-6, 1.0 / np.maximum(old_gains, 1e-6), 1.0).astype(np.float32)
    return [f.replace(arkit=new.apply(f.arkit * ratio), expression=new.name) for f in frames]
