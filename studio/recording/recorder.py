"""TakeRecorder: a thread that drains a FrameState subscriber queue into a take folder.

The engine and the GUI thread never write: the engine puts frames into a drop-oldest `FrameQueue` and
hands audio chunks and operator events over with non-blocking appends; this thread encodes and appends
them and flushes to the operating system every `FLUSH_INTERVAL_S`, so a killed process loses at most that.
Disk space is checked before the take starts and every second while it runs: short of space, the
recorder stops cleanly and finalises the take, saying why.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import numpy as np

import studio
from studio.avatar.model import AvatarModel
from studio.engine.audio_file import RateConverter
from studio.engine.pipeline import Engine, FrameQueue
from studio.engine.sources import MicrophoneSource
from studio.recording.take import (
    AUDIO,
    EVENTS,
    FRAMES,
    LOCK,
    TAKE_FORMAT,
    TAKE_VERSION,
    encode_frame,
    finished_files,
    frames_header,
    free_bytes,
    lock_text,
    now_iso,
    to_pcm16,
    wav_header,
    write_manifest,
)

FLUSH_INTERVAL_S = 0.5  # half the promise: a kill loses at most the last second, queue lag included
DISK_CHECK_INTERVAL_S = 1.0
WRITE_INTERVAL_S = 0.05
MIN_FREE_MB = 200.0  # refuse to start, or stop cleanly, below this much free space
WARN_FREE_MB = 2048.0  # below this, `low_space` says so (the window shows it beside REC)
SILENT_PEAK = 10 ** (-60 / 20)  # a take whose loudest sample stays under -60 dBFS counts as silent
MASTER_FORMAT = (48000, 2)  # a live take's audio unless a microphone sets it: any voice that comes later keeps its band


class DiskSpaceError(OSError):
    """Not enough free space to record."""


def avatar_content_hash(avatar: AvatarModel) -> str:
    """sha256 over the avatar's geometry, rig and expression arrays: the same avatar under any file name."""
    digest = hashlib.sha256()
    for name in ("v_template", "faces", "joint_regressor", "skin_weights", "shape_dirs", "expr_dirs", "pose_dirs"):
        value = getattr(avatar, name)
        if value is not None:
            digest.update(name.encode())
            digest.update(np.ascontiguousarray(value).tobytes())
    return digest.hexdigest()


def take_manifest(persona: str, preset: str, avatar: AvatarModel, sample_rate: int, frame_rate: float,
                  source: str = "live", channels: int = 1, **extra) -> dict:
    """The manifest a take starts with (status `recording`); `sample_rate` and `channels` are its audio's."""
    return {
        "format": TAKE_FORMAT, "version": TAKE_VERSION, "status": "recording",
        "studio_version": studio.__version__, "source": source,
        "persona": persona, "preset": preset,
        "avatar": {"name": avatar.name, "source": str(avatar.source), "sha256": avatar_content_hash(avatar)},
        "sample_rate": int(sample_rate), "channels": int(channels), "frame_rate": float(frame_rate),
        "started_at": now_iso(), **extra,
    }


def live_take_format(engine: Engine) -> tuple[int, int]:
    """(rate, channels) for a live take of `engine`: its microphone's own rate and channels while it listens to one;
    otherwise MASTER_FORMAT, so a microphone started during the take loses nothing to the take's format (a line
    of text or a file, at its own rate, is resampled to it by the writer)."""
    source = engine.source
    return source.capture_format if isinstance(source, MicrophoneSource) else MASTER_FORMAT


class TakeRecorder:
    """Records frames from `queue`, audio from `add_audio` and events from `add_event` into `folder`.

    Audio chunks carry the media time of their first sample; they are laid on the take's timeline
    (sample 0 = the first frame's media time), silence filling gaps, so sound and frames stay aligned. Chunks at
    another rate or channel count (the engine switched to a source of another format) are converted on the
    writer thread, never on the caller's.
    """

    def __init__(self, folder: str | os.PathLike, manifest: dict, queue: FrameQueue,
                 min_free_mb: float = MIN_FREE_MB, on_stopped: Callable[[str], None] | None = None) -> None:
        self.folder = Path(folder)
        self.manifest = dict(manifest)
        self.queue = queue
        self.min_free_mb = float(min_free_mb)
        self.warn_free_mb = max(WARN_FREE_MB, self.min_free_mb)
        self.free_mb: float | None = None
        self.on_stopped = on_stopped
        self.sample_rate = int(manifest["sample_rate"])
        self.channels = int(manifest.get("channels") or 1)
        if self.channels not in (1, 2):
            raise ValueError(f"take manifest channels={self.channels!r}; allowed 1 or 2")
        self._audio: deque[tuple[float, np.ndarray, int]] = deque()
        self._converter: _RateStream | None = None  # converting chunks at another rate to the take's
        self._events: deque[dict] = deque()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.frames_written = 0
        self.audio_samples = 0
        self.audio_peak = 0.0  # the loudest sample written (0..1 of full scale)
        self.bytes_written = 0
        self.first_media_s: float | None = None
        self.last_media_s: float | None = None
        self.stopped_reason: str | None = None
        self._expression = ""
        self.error: str | None = None

    # ----------------------------------------------------------------- any thread

    def start(self) -> None:
        """Check the space, write the manifest and the file headers, start the writer thread."""
        self.folder.mkdir(parents=True, exist_ok=True)
        free_mb = self.free_mb = free_bytes(self.folder) / 2**20
        if free_mb < self.min_free_mb:
            raise DiskSpaceError(f"cannot record to {self.folder}: {free_mb:.0f} MB free, "
                                 f"at least {self.min_free_mb:.0f} MB needed")
        (self.folder / LOCK).write_text(lock_text())
        write_manifest(self.folder, self.manifest)
        self._frames = open(self.folder / FRAMES, "wb")
        self._frames.write(frames_header())
        self._wav = open(self.folder / AUDIO, "wb")
        self._wav.write(wav_header(self.sample_rate, 0, self.channels))
        self._events_file = open(self.folder / EVENTS, "wb")
        for handle in (self._frames, self._wav, self._events_file):
            handle.flush()
        self.bytes_written = self._frames.tell() + self._wav.tell()
        self._thread = threading.Thread(target=self._run, name="take-recorder", daemon=True)
        self._thread.start()

    def add_audio(self, media_time_s: float, samples: np.ndarray, rate: int | None = None) -> None:
        """Queue audio, (n,) or (n, channels) float32 at `rate` (the take's when None), whose first sample is at this
        media time. It only copies (the engine thread calls it); the writer thread duplicates a mono chunk for a
        stereo take, averages a stereo one for a mono take, and resamples another rate to the take's."""
        self._audio.append((float(media_time_s), np.array(samples, np.float32, copy=True), int(rate or self.sample_rate)))

    def add_event(self, kind: str, media_time_s: float, **data) -> None:
        """An operator event (expression trigger, persona or preset switch, cue line) at this media time."""
        self._events.append({"t": float(media_time_s), "kind": str(kind), **data})

    @property
    def low_space(self) -> str | None:
        """A warning while free space is running low (the recorder stops at `min_free_mb`), else None."""
        if self.free_mb is None or self.free_mb >= self.warn_free_mb:
            return None
        return f"disk space low: {self.free_mb:.0f} MB free, recording stops at {self.min_free_mb:.0f} MB"

    @property
    def holds_sound(self) -> bool:
        """Whether anything audible was recorded (a take of idle frames over silence is worth a warning)."""
        return self.audio_peak >= SILENT_PEAK

    @property
    def recording(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def elapsed_s(self) -> float:
        if self.first_media_s is None or self.last_media_s is None:
            return 0.0
        return self.last_media_s - self.first_media_s

    def stop(self, reason: str = "stopped by the operator") -> dict:
        """Stop, drain what is queued, finalise the files and the manifest; returns the manifest."""
        if self._thread is not None:
            self.stopped_reason = self.stopped_reason or reason
            self._stop.set()
            self._thread.join()
        return self.manifest

    # ----------------------------------------------------------------- writer thread

    def _run(self) -> None:
        last_flush = last_disk = time.monotonic()
        try:
            while not self._stop.wait(WRITE_INTERVAL_S):  # in batches: few wake-ups beside the engine thread
                for frame in self.queue.drain():
                    self._write_frame(frame)
                self._write_pending()
                now = time.monotonic()
                if now - last_flush >= FLUSH_INTERVAL_S:
                    self._flush()
                    last_flush = now
                if now - last_disk >= DISK_CHECK_INTERVAL_S:
                    last_disk = now
                    free_mb = self.free_mb = free_bytes(self.folder) / 2**20
                    if free_mb < self.min_free_mb:
                        self.stopped_reason = f"disk almost full ({free_mb:.0f} MB free, {self.min_free_mb:.0f} MB kept)"
                        break
            for frame in self.queue.drain():
                self._write_frame(frame)
            self._write_pending()
            if self._converter is not None and self.first_media_s is not None:  # the filter's last samples
                self._place_audio(*self._converter.finish())
        except OSError as error:  # e.g. the disk filled up between checks: keep what was written
            self.error = f"writing the take failed: {error}"
            self.stopped_reason = self.error
        finally:
            self._finish()

    def _write_frame(self, frame) -> None:
        if self.last_media_s is not None and frame.media_time_s <= self.last_media_s:
            return  # the engine's clock restarted (a new session): a take's frames always move forward
        record = encode_frame(frame)
        self._frames.write(record)
        self.bytes_written += len(record)
        self.frames_written += 1
        if self.first_media_s is None:
            self.first_media_s = frame.media_time_s
        elif frame.expression != self._expression:  # a trigger or a persona switch shows in every frame: log it
            self._events.append({"t": frame.media_time_s, "kind": "expression", "name": frame.expression})
        self._expression = frame.expression
        self.last_media_s = frame.media_time_s

    def _write_pending(self) -> None:
        while self._events:
            event = self._events.popleft()
            line = (json.dumps(event) + "\n").encode("utf-8")
            self._events_file.write(line)
            self.bytes_written += len(line)
        while self._audio:
            if self.first_media_s is None:  # nothing to align to yet: kept until the first frame arrives
                break
            media, samples, rate = self._audio.popleft()
            samples = samples.reshape(len(samples), -1)
            if samples.shape[1] != self.channels:
                samples = np.repeat(samples.mean(axis=1, keepdims=True, dtype=np.float32), self.channels, axis=1)
            for media_s, converted in self._at_take_rate(media, samples, rate):
                self._place_audio(media_s, converted)

    def _at_take_rate(self, media: float, samples: np.ndarray, rate: int) -> list[tuple[float, np.ndarray]]:
        """(media time, samples at the take's rate) for a chunk at `rate`: chunks that follow one another at another
        rate go through one streaming converter; a gap, a new rate or a chunk at the take's rate ends it."""
        out = []
        if self._converter is not None and not self._converter.continues(media, rate):
            out.append(self._converter.finish())
            self._converter = None
        if rate == self.sample_rate:
            return [*out, (media, samples)]
        if self._converter is None:
            self._converter = _RateStream(media, rate, self.sample_rate, self.channels)
        out.append(self._converter.push(samples))
        return out

    def _place_audio(self, media: float, samples: np.ndarray) -> None:
        """Write samples at the take's rate and channels where their media time falls on the take's timeline."""
        position = int(round((media - self.first_media_s) * self.sample_rate))
        if position < self.audio_samples:  # overlaps what is written (or before the take): keep only the new part
            samples = samples[self.audio_samples - position:]
            position = self.audio_samples
        if position > self.audio_samples:  # a gap: silence keeps later sound on its time
            self._append_audio(np.zeros((position - self.audio_samples, self.channels), np.float32))
        self._append_audio(samples)

    def _append_audio(self, samples: np.ndarray) -> None:
        if samples.size:
            data = to_pcm16(samples)
            self.audio_peak = max(self.audio_peak, float(np.abs(samples).max()))
            self._wav.write(data)
            self.audio_samples += len(samples)
            self.bytes_written += len(data)

    def _flush(self) -> None:
        for handle in (self._frames, self._wav, self._events_file):
            handle.flush()
            os.fsync(handle.fileno())

    def _finish(self) -> None:
        try:
            for handle in (self._frames, self._wav, self._events_file):
                try:
                    handle.flush()
                finally:
                    handle.close()
            with open(self.folder / AUDIO, "r+b") as wav:
                wav.seek(0)
                wav.write(wav_header(self.sample_rate, self.audio_samples * 2 * self.channels, self.channels))
            frame_rate = float(self.manifest.get("frame_rate") or 30.0)
            self.manifest.update({
                "status": "complete", "frames": self.frames_written,
                "duration_s": max(self.elapsed_s + 1.0 / frame_rate if self.frames_written else 0.0,
                                  self.audio_samples / self.sample_rate),
                "audio_samples": self.audio_samples, "dropped_frames": self.queue.dropped,
                "stopped_reason": self.stopped_reason or "stopped", "finished_at": now_iso(),
                "files": finished_files(self.folder),
            })
            if self.frames_written == 0:
                self.manifest["status"] = "empty"
            write_manifest(self.folder, self.manifest)
            (self.folder / LOCK).unlink(missing_ok=True)
        except OSError as error:  # the take stays `recording` on disk; the next start repairs it
            self.error = f"finishing the take failed: {error}"
        if self.on_stopped is not None:
            self.on_stopped(self.stopped_reason or "stopped")


class _RateStream:
    """One run of chunks at another rate than the take's, converted as a stream (no seams between chunks); its output
    sample j sits at the run's first media time plus j / to_rate."""

    def __init__(self, media_s: float, from_rate: int, to_rate: int, channels: int) -> None:
        self.start_s, self.from_rate, self.to_rate = media_s, from_rate, to_rate
        self._converter = RateConverter(from_rate, to_rate, channels)
        self._channels = channels
        self._received = 0
        self._produced = 0

    def continues(self, media_s: float, rate: int) -> bool:
        """Whether a chunk at `rate` starting at `media_s` follows this run without a gap (within one input sample)."""
        return rate == self.from_rate and abs(media_s - (self.start_s + self._received / rate)) <= 1.0 / rate

    def push(self, samples: np.ndarray) -> tuple[float, np.ndarray]:
        self._received += len(samples)
        return self._out(self._converter.push(samples))

    def finish(self) -> tuple[float, np.ndarray]:
        return self._out(self._converter.push(np.zeros((0, self._channels), np.float32), last=True))

    def _out(self, converted: np.ndarray) -> tuple[float, np.ndarray]:
        media = self.start_s + self._produced / self.to_rate
        self._produced += len(converted)
        return media, converted
