"""Making takes without a live session: from a file or a line of text, from a Live Link Face CSV,
and re-targeting a take's frames to another persona.

Every take goes through the same writer as a live recording: the frames pass through a
`FrameQueue` to a `TakeRecorder` thread.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from studio.avatar.model import AvatarModel
from studio.engine.pipeline import ExpressionLayer, FrameQueue
from studio.frame import FrameState
from studio.recording.recorder import TakeRecorder, take_manifest
from studio.recording.take import AUDIO, EVENTS, FRAMES, LOCK, MANIFEST, Take, open_take

WRITE_QUEUE_FRAMES = 256  # frames waiting for the writer thread: a producer ahead of the disk waits for it


def write_take(folder: str | os.PathLike, manifest: dict, frames: Iterable[FrameState],
               audio: np.ndarray | Iterable[tuple[float, np.ndarray]] | None = None,
               events: list[dict] | None = None, min_free_mb: float | None = None) -> Take:
    """Record frames (a list, or a generator producing them as a long file is analysed) and their audio as a
    take; returns it opened. `audio` is one array starting with the first frame, or (media time s, samples)
    chunks, read alongside the frames: memory stays bounded whatever the take's length."""
    frames = iter(frames)
    first = next(frames, None)
    if first is None:
        raise ValueError("no frames to record")
    queue = FrameQueue(maxlen=WRITE_QUEUE_FRAMES)
    options = {} if min_free_mb is None else {"min_free_mb": min_free_mb}
    recorder = TakeRecorder(folder, manifest, queue, **options)
    recorder.start()
    if isinstance(audio, np.ndarray):
        audio = [(first.media_time_s, audio)] if len(audio) else None
    chunks = iter(audio) if audio is not None else None
    for event in events or []:
        recorder.add_event(**event)
    try:
        _feed(recorder, queue, itertools.chain((first,), frames), chunks)
    finally:  # also when the file turns out damaged part-way: the writer stops and closes its files
        recorder.stop("finished")
    if recorder.error:
        raise OSError(recorder.error)
    return open_take(folder)


def _feed(recorder: TakeRecorder, queue: FrameQueue, frames: Iterator[FrameState],
          chunks: Iterator[tuple[float, np.ndarray]] | None) -> None:
    """Frames into the writer's queue, never dropping one, and the audio that reaches each frame beside it."""
    heard_until = -np.inf  # media time the audio handed over so far reaches
    for frame in frames:
        while len(queue) >= WRITE_QUEUE_FRAMES - 1 and recorder.recording:
            time.sleep(0.005)  # never drop a frame of a take made from a file: wait for the writer
        if not recorder.recording:  # the writer stopped (the disk filled up): what it wrote stands
            return
        queue.put(frame)
        while chunks is not None and heard_until <= frame.media_time_s:
            chunk = next(chunks, None)
            if chunk is None:
                chunks = None
            else:
                recorder.add_audio(*chunk)
                heard_until = chunk[0] + len(chunk[1]) / recorder.sample_rate
    for chunk in chunks or ():
        recorder.add_audio(*chunk)


def record_offline(folder: str | os.PathLike, avatar: AvatarModel, persona, preset, audio_path: str | None = None,
                   text: str | None = None, fps: float | None = None,
                   on_notice: Callable[[str], None] | None = None) -> Take:
    """`avatar-studio record`: speak a file or a line in the persona's style into a new take.

    The frames are what the live engine would show (offline analysis, media-time aligned, the persona's
    expression gains and caps applied); the audio is the input at its own rate and channels (the analysis reads
    a 16 kHz mono copy). `on_notice` hears what the user should know and is no error (an audio file that ends
    early: the take holds what it holds).
    """
    from studio.engine import offline

    fps = float(fps or preset.render.fps)
    style = persona.motion_style()
    stream = None
    if audio_path is not None:  # analysed and written as it is decoded (twice, in step): never held whole
        stream = offline.analysis_stream(audio_path)
        frames = offline.stream_frames(stream, fps=fps, style=style)
        source, channels, audio = _source_audio(audio_path)
        rate = source.sample_rate
        events = [{"kind": "source", "media_time_s": 0.0, "file": str(audio_path)}]
    elif text is not None:
        clip, frames = offline.analyze_text(text, persona.voice.name, persona.voice.rate_wpm, persona.voice.pitch,
                                            fps=fps, style=style)
        audio, rate, channels = np.asarray(clip.audio, np.float32), int(clip.sample_rate), 1
        events = [{"kind": "cue", "media_time_s": 0.0, "text": text}]
    else:
        raise ValueError("record needs --audio FILE or --text \"…\"")
    layer = ExpressionLayer(*persona.style.weight_arrays(), name=persona.name)
    frames = (f.replace(arkit=layer.apply(f.arkit), expression=layer.name) for f in frames)
    manifest = take_manifest(persona.name, preset.name, avatar, rate, fps, source="offline", channels=channels)
    take = _write_whole_or_nothing(folder, manifest, frames, audio, events)
    _tell_cut_short(stream, on_notice)
    return take


def _tell_cut_short(stream, on_notice: Callable[[str], None] | None) -> None:
    if stream is not None and stream.cut_short and on_notice is not None:
        on_notice(stream.cut_short)


def _write_whole_or_nothing(folder: str | os.PathLike, manifest: dict, frames: Iterable[FrameState],
                            audio: Iterable[tuple[float, np.ndarray]] | np.ndarray | None, events: list[dict]) -> Take:
    """`write_take` into a new folder from inputs read as it writes; an input found damaged part-way (an
    AudioInputError or LiveLinkFormatError, both ValueErrors) leaves no half take behind."""
    try:
        return write_take(folder, manifest, frames, audio, events)
    except ValueError:
        for name in (MANIFEST, FRAMES, AUDIO, EVENTS, LOCK):
            (Path(folder) / name).unlink(missing_ok=True)
        raise


def _timed_chunks(chunks: Iterable[np.ndarray], rate: int) -> Iterator[tuple[float, np.ndarray]]:
    """Chunks at `rate` from media time 0 as (media time s, samples)."""
    position = 0
    for chunk in chunks:
        yield position / rate, chunk
        position += len(chunk)


def _source_audio(audio_path: str | os.PathLike):
    """(the file's AudioFileStream, channels, timed chunks) of a file's audio as it is, stereo at most: a take keeps
    what a master needs (48 kHz stereo stays so; more channels are mixed to stereo). The file is probed now."""
    from studio.engine.audio_file import AudioFileStream

    source = AudioFileStream(audio_path)
    channels = min(source.channels, 2)
    return source, channels, _timed_chunks(source.chunks(channels=channels), source.sample_rate)


def import_livelink(csv_path: str | os.PathLike, folder: str | os.PathLike, avatar: AvatarModel,
                    audio_path: str | None = None, persona: str = "default", preset: str = "default",
                    fps: float | None = None, on_notice: Callable[[str], None] | None = None) -> Take:
    """A Live Link Face CSV (and its audio file, when given) as a new take, both read as they are written;
    `on_notice` as `record_offline`'s."""
    from studio.engine.sources import ENGINE_RATE
    from studio.recording.livelink import check_livelink_csv

    checked = check_livelink_csv(csv_path, fps)  # every problem in the CSV is found before the take is begun
    rate, channels, audio, stream = ENGINE_RATE, 1, None, None
    if audio_path is not None:  # probed now: a bad file fails before the take is begun
        stream, channels, audio = _source_audio(audio_path)
        rate = stream.sample_rate
    manifest = take_manifest(persona, preset, avatar, rate, checked.fps, source="livelink-csv", channels=channels,
                             imported_from=str(Path(csv_path).name), timecode_start=checked.timecode_start)
    events = [{"kind": "import", "media_time_s": 0.0, "file": str(Path(csv_path).name)}]
    take = _write_whole_or_nothing(folder, manifest, checked.frames(), audio, events)
    _tell_cut_short(stream, on_notice)
    return take


def retargeter(recorded: str, to_persona) -> Callable[[FrameState], FrameState]:
    """A function showing a frame recorded with persona `recorded` as `to_persona` would have: the recorded
    persona's gains divided out (when it no longer loads, there is nothing to divide), the new persona's
    gains and caps applied (weights the old caps clipped stay at the cap's level)."""
    from studio.presets import Persona, PresetError, persona_by_name

    try:
        from_persona = persona_by_name(recorded)
    except PresetError:
        from_persona = Persona(name=recorded)
    old_gains, _old_caps = from_persona.style.weight_arrays()
    new = ExpressionLayer(*to_persona.style.weight_arrays(), name=to_persona.name)
    ratio = np.where(old_gains > 1e-6, 1.0 / np.maximum(old_gains, 1e-6), 1.0).astype(np.float32)
    return lambda frame: frame.replace(arkit=new.apply(frame.arkit * ratio), expression=new.name)
