"""Exports of a take: video (MP4, alpha MOV/WebM) rendered offscreen, Live Link Face CSV, BVH.

Each export reports progress (0..1) and checks a cancel flag between frames; a cancelled or failed
export leaves nothing under the target name (files are written under a temporary name and renamed
at the end). A persona other than the recorded one re-targets the take: its avatar and colours
render it and its expression gains and caps reshape the recorded weights.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from studio.avatar.model import AvatarModel
from studio.fileio import check_output_file
from studio.frame import FrameState
from studio.recording.take import ResampledFrames, Take

EXPORT_KINDS = ("mp4", "mov", "webm", "csv", "bvh")
VIDEO_KINDS = ("mp4", "mov", "webm")


class ExportCancelled(Exception):
    """The operator cancelled the export; nothing was written under the target name."""


def persona_avatar(persona, fallback: AvatarModel | None = None) -> AvatarModel:
    """The avatar a persona names (`default`: `fallback`, else the shipped one; or a file), in the persona's colours
    and body shape: `studio.avatar.look.drawn_model` at full detail, as the viewport and output window draw it."""
    from studio.avatar.look import persona_model

    return persona_model(persona, fallback)


def _recorded_persona(take: Take):
    """The persona the take was recorded with, for its look; None when it no longer loads."""
    from studio.presets import PresetError, persona_by_name

    try:
        return persona_by_name(take.manifest.get("persona") or "default")
    except PresetError:
        return None


def take_frames(take: Take, fps: float, persona=None, as_recorded: bool = False) -> ResampledFrames:
    """The take at `fps`, stamped with take time, re-targeted to `persona` when it is not the recorded one;
    read from disk as it is iterated, so exporting an hour costs what a minute does. With `as_recorded`, a take
    asked for at its own frame rate gives each recorded frame once at its own time instead of a regular grid."""
    own_rate = abs(fps - float(take.manifest.get("frame_rate") or 0.0)) < 1e-9
    frames = take.as_recorded() if as_recorded and own_rate else take.resampled(fps)
    recorded = take.manifest.get("persona") or "default"
    if persona is not None and persona.name != recorded:
        from studio.recording.session import retargeter

        frames = frames.mapped(retargeter(recorded, persona))
    return frames


class _Tracked:
    """Frames handed on one at a time, reporting progress and stopping at the cancel flag between frames."""

    def __init__(self, frames: Collection[FrameState], progress: Callable[[float], None] | None,
                 cancel: threading.Event | None) -> None:
        self._frames, self._progress, self._cancel = frames, progress, cancel

    def __len__(self) -> int:
        return len(self._frames)

    def __iter__(self) -> Iterator[FrameState]:
        total = max(1, len(self._frames))
        for index, frame in enumerate(self._frames):
            if self._cancel is not None and self._cancel.is_set():
                raise ExportCancelled("export cancelled")
            yield frame
            if self._progress is not None:
                self._progress((index + 1) / total)


def export_take(take: Take, kind: str, out: str | os.PathLike, avatar: AvatarModel | None = None, persona=None,
                size: tuple[int, int] = (1280, 720), fps: float | None = None, background: str = "studio",
                camera: str = "body", progress: Callable[[float], None] | None = None,
                cancel: threading.Event | None = None) -> dict:
    """Write the take as `kind` (mp4, mov, webm, csv, bvh) to `out`; returns what was written."""
    if kind not in EXPORT_KINDS:
        raise ValueError(f"export kind {kind!r} is not one of {', '.join(EXPORT_KINDS)}")
    out = Path(out)
    check_output_file(out)
    fps = float(fps or take.manifest.get("frame_rate") or 30.0)
    frames = _Tracked(take_frames(take, fps, persona, as_recorded=kind == "csv"), progress, cancel)
    if kind in VIDEO_KINDS:
        from render.video import render_video

        if out.suffix.lower() != f".{kind}":
            raise ValueError(f"cannot write {kind} to {out}: the file name must end in .{kind}")
        look = persona if persona is not None else _recorded_persona(take)
        if look is not None:
            avatar = persona_avatar(look, avatar)
        audio = None
        if len(take.audio):  # read a chunk at a time as the video needs it, silence to the last frame's end
            audio = take.audio.padded(int(round(len(frames) / fps * take.sample_rate)))
        return render_video(frames, out, fps=fps, size=size, audio=audio, avatar=avatar,
                            background=background, camera=camera)
    if kind == "csv":
        from studio.recording.livelink import take_timecode_start, write_livelink_csv

        write_livelink_csv(frames, out, fps, start_s=take_timecode_start(take.manifest))
    else:
        from studio.avatar.io import default_avatar_path, load_avatar
        from studio.recording.bvh import write_bvh

        if avatar is None:
            avatar = persona_avatar(persona) if persona is not None else load_avatar(default_avatar_path())
        write_bvh(frames, avatar.rest_joints(), out, fps)
    if progress is not None:
        progress(1.0)
    return {"path": str(out), "frames": len(frames), "fps": fps, "duration_s": len(frames) / fps}


def bench_mp4_export(avatar: AvatarModel, seconds: float = 4.0, size: tuple[int, int] = (1280, 720)) -> dict:
    """MP4 export speed from a spoken take, in percent of real time (200: a minute of take exports in 30 s)."""
    import tempfile
    import time

    from studio.presets import persona_by_name, preset_by_name
    from studio.recording.session import record_offline

    words = "The quick brown fox jumps over the lazy dog, and then it runs back home again."
    with tempfile.TemporaryDirectory(prefix="export-bench-") as folder:
        take = record_offline(Path(folder) / "take", avatar, persona_by_name("default"), preset_by_name("default"),
                              text=words, fps=30)
        take = take.head(seconds)
        started = time.perf_counter()
        written = export_take(take, "mp4", Path(folder) / "take.mp4", avatar=avatar, size=size)
        elapsed = time.perf_counter() - started
    return {
        f"mp4_export_{size[0]}x{size[1]}_realtime_pct": 100.0 * written["duration_s"] / elapsed,  # 100: as fast as played
        f"mp4_export_{size[0]}x{size[1]}_fps": written["frames"] / elapsed,
        "mp4_export_take_s": written["duration_s"],
    }
