"""The take folder: an append-only, self-describing, crash-safe record of a session.

A take is a folder holding

- `manifest.json`: what was recorded (studio version, persona, preset, avatar identity and content
  hash, sample rate, frame rate, wall-clock start), its status (`recording`, `complete`, `recovered`)
  and, once finished, each file's size and sha256;
- `frames.bin`: a header naming the record layout, then one length-prefixed, CRC-32-checked record per
  FrameState (a fixed numpy part plus a small JSON part), appended as they come;
- `audio.wav`: 16-bit PCM of the input audio on the take's timeline at the source's own rate, mono or stereo
  as the source is (a file's 48 kHz stereo stays so; the engine analyses a 16 kHz mono copy), its header
  patched at the end (or by `repair_take` after a crash);
- `events.jsonl`: the operator's events (expression triggers, persona and preset switches, cue lines),
  one JSON object per line;
- `recording.lock`: the recorder's process id while it records.

Data written is flushed to the operating system each `FLUSH_INTERVAL_S`, so a killed recorder loses at
most that much; `repair_take` trims a half-written tail and marks the take `recovered`.
Reading never plays a damaged take silently: `open_take` raises `TakeError` listing every problem.
An opened take keeps only an index in memory; its frames (`TakeFrames`) and audio (`TakeAudio`) are read
from the files as they are played or exported, so a take of hours costs what a minute does.
"""

from __future__ import annotations

import hashlib
import json
import operator
import os
import shutil
import struct
import zlib
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import overload

import numpy as np

from studio.avatar.arkit import NUM_ARKIT
from studio.avatar.skeleton import NUM_JOINTS
from studio.fileio import atomic_write, atomic_writer
from studio.frame import FrameState

TAKE_FORMAT = "avatar-studio-take"
TAKE_VERSION = 1
MANIFEST, FRAMES, AUDIO, EVENTS, LOCK = "manifest.json", "frames.bin", "audio.wav", "events.jsonl", "recording.lock"
FRAMES_MAGIC = b"ASTAKE1\n"
NUM_VISEMES = 15
FRAME_DTYPE = np.dtype([
    ("media_time_s", "<f8"), ("sequence", "<i8"), ("voice_activity", "<f8"),
    ("arkit", "<f4", (NUM_ARKIT,)), ("pose", "<f4", (NUM_JOINTS, 3)), ("transl", "<f4", (3,)),
    ("has_visemes", "u1"), ("visemes", "<f4", (NUM_VISEMES,)),
])
RECORD_HEAD = struct.Struct("<II")  # payload length, crc32 of the payload
MAX_RECORD_BYTES = FRAME_DTYPE.itemsize + 64 * 1024
WAV_HEADER_BYTES = 44


class TakeError(ValueError):
    """A take folder that cannot be played as it is; `problems` lists what is missing or inconsistent."""

    def __init__(self, path: Path, problems: list[str], repairable: bool = False) -> None:
        self.path = Path(path)
        self.problems = list(problems)
        self.repairable = repairable
        hint = " (repairable: `repair_take` or the take browser's Repair)" if repairable else ""
        super().__init__(f"take {self.path}: " + "; ".join(problems) + hint)


# ------------------------------------------------------------------------------------------ writing


def frames_header() -> bytes:
    """The self-description at the top of frames.bin: how to read every record that follows."""
    layout = {
        "format": TAKE_FORMAT, "version": TAKE_VERSION,
        "record": "u32 payload length, u32 crc32(payload), payload",
        "payload": "fixed part (numpy dtype below, little-endian) then UTF-8 JSON [expression, timings_ms]",
        "fixed_dtype": [[name, FRAME_DTYPE.fields[name][0].base.str, list(FRAME_DTYPE.fields[name][0].shape)]
                        for name in FRAME_DTYPE.names],
        "fixed_bytes": FRAME_DTYPE.itemsize,
    }
    text = json.dumps(layout).encode("utf-8")
    return FRAMES_MAGIC + struct.pack("<I", len(text)) + text


def encode_frame(frame: FrameState) -> bytes:
    """One length-prefixed, checksummed record."""
    fixed = np.zeros((), FRAME_DTYPE)
    fixed["media_time_s"], fixed["sequence"], fixed["voice_activity"] = frame.media_time_s, frame.sequence, frame.voice_activity
    fixed["arkit"], fixed["pose"], fixed["transl"] = frame.arkit, frame.pose, frame.transl
    if frame.visemes is not None:
        if frame.visemes.shape != (NUM_VISEMES,):
            raise ValueError(f"FrameState.visemes has shape {frame.visemes.shape}; a take stores ({NUM_VISEMES},)")
        fixed["has_visemes"], fixed["visemes"] = 1, frame.visemes
    extra = json.dumps([frame.expression, dict(frame.timings_ms)], separators=(",", ":")).encode("utf-8")
    payload = fixed.tobytes() + extra
    return RECORD_HEAD.pack(len(payload), zlib.crc32(payload)) + payload


def decode_frame(payload: bytes) -> FrameState:
    fixed = np.frombuffer(payload[:FRAME_DTYPE.itemsize], FRAME_DTYPE)[0]
    expression, timings = json.loads(payload[FRAME_DTYPE.itemsize:].decode("utf-8"))
    return FrameState(
        media_time_s=float(fixed["media_time_s"]), arkit=fixed["arkit"], pose=fixed["pose"], transl=fixed["transl"],
        visemes=fixed["visemes"] if fixed["has_visemes"] else None, voice_activity=float(fixed["voice_activity"]),
        expression=expression, timings_ms=timings, sequence=int(fixed["sequence"]),
    )


def wav_header(rate: int, data_bytes: int, channels: int = 1) -> bytes:
    """A 16-bit PCM RIFF header (mono or interleaved stereo) for `data_bytes` of samples."""
    align = 2 * channels
    return (b"RIFF" + struct.pack("<I", 36 + data_bytes) + b"WAVEfmt "
            + struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * align, align, 16) + b"data" + struct.pack("<I", data_bytes))


def to_pcm16(samples: np.ndarray) -> bytes:
    """float samples, (n,) or (n, channels), as interleaved little-endian 16-bit PCM."""
    return (np.clip(np.asarray(samples, np.float32), -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(folder: Path, manifest: dict) -> None:
    atomic_write(folder / MANIFEST, json.dumps(manifest, indent=2) + "\n")


def finished_files(folder: Path) -> dict:
    """Size and sha256 of each data file, for the manifest of a finished take."""
    return {name: {"bytes": (folder / name).stat().st_size, "sha256": file_sha256(folder / name)}
            for name in (FRAMES, AUDIO, EVENTS) if (folder / name).is_file()}


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# ------------------------------------------------------------------------------------------ reading

READ_BATCH_RECORDS = 256  # records read from disk at once while iterating (about 250 kB)
AUDIO_CHUNK_S = 0.5


class TakeFrames(Sequence[FrameState]):
    """A take's frames, read from frames.bin when asked for instead of held in memory.

    Only an index stays in memory (where each record lies, its media time and voice activity: 28 bytes a
    frame, 0.9 MB for 20 minutes at 30 fps against the frames' own 36 MB), so playing or exporting a take
    of hours costs what a minute does. The file is opened for each read and closed again: the take's folder
    can be renamed or trashed while it is open (Windows refuses that for an open file). Every record's
    checksum is checked again as it is read, so a file changed on disk since the take was opened is an
    error, not a wrong frame.
    """

    def __init__(self, path: Path, offsets: np.ndarray, lengths: np.ndarray, times: np.ndarray,
                 voice_activity: np.ndarray) -> None:
        self.path = path
        self._offsets, self._lengths = offsets, lengths  # record start (its head), payload bytes
        self.times, self.voice_activity = times, voice_activity

    def __len__(self) -> int:
        return len(self._offsets)

    @overload
    def __getitem__(self, key: int) -> FrameState: ...

    @overload
    def __getitem__(self, key: slice) -> TakeFrames: ...

    def __getitem__(self, key):
        """One frame read from disk, or a slice as another lazy `TakeFrames` (nothing is read)."""
        if isinstance(key, slice):
            return TakeFrames(self.path, self._offsets[key], self._lengths[key], self.times[key], self.voice_activity[key])
        index = operator.index(key)
        if not -len(self) <= index < len(self):
            raise IndexError(f"frame {key} of a take with {len(self)} frames")
        return next(self._read(slice(index, index + 1 or None)))

    def __iter__(self) -> Iterator[FrameState]:
        return self._read(slice(0, len(self)))

    def records(self) -> Iterator[bytes]:
        """Each frame's record exactly as stored (head and payload), for copying into a repaired file."""
        return self._read(slice(0, len(self)), raw=True)

    def _read(self, which: slice, raw: bool = False) -> Iterator:
        offsets, lengths = self._offsets[which], self._lengths[which]
        with open(self.path, "rb") as handle:
            for first in range(0, len(offsets), READ_BATCH_RECORDS):
                starts = offsets[first:first + READ_BATCH_RECORDS]
                sizes = lengths[first:first + READ_BATCH_RECORDS]
                base = int(starts[0])
                handle.seek(base)
                block = handle.read(int(starts[-1] + RECORD_HEAD.size + sizes[-1]) - base)
                for start, size in zip(starts - base, sizes):
                    record = block[start:start + RECORD_HEAD.size + size]
                    length, crc = RECORD_HEAD.unpack_from(record) if len(record) >= RECORD_HEAD.size else (-1, 0)
                    payload = record[RECORD_HEAD.size:]
                    if length != size or len(payload) != size or zlib.crc32(payload) != crc:
                        raise TakeError(self.path.parent, [f"{FRAMES} changed on disk after the take was opened "
                                                           f"(record at byte {base + int(start)})"])
                    yield record if raw else decode_frame(payload)


class TakeAudio:
    """A take's audio (16-bit PCM in audio.wav, mono or stereo), read from disk in pieces instead of held in memory.

    It reads like a float32 mono array (a stereo take mixed down; its length counts sample frames): `len`, an
    index, a slice (another lazy view; nothing is read) and `np.asarray` (the whole view, for short takes and
    tests). `chunks` feeds video export and playback a piece at a time with every channel kept. A view made
    longer than the recording by `padded` reads as silence past its end.
    """

    def __init__(self, path: Path | None, sample_rate: int, recorded: int = 0, start: int = 0,
                 length: int | None = None, channels: int = 1) -> None:
        self.path, self.sample_rate, self.channels = path, int(sample_rate), int(channels)
        self._recorded = recorded  # sample frames in the file
        self._start = start
        self._length = max(0, recorded - start) if length is None else length

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, key):
        if isinstance(key, slice) and key.step in (None, 1):
            start, stop, _ = key.indices(len(self))
            return TakeAudio(self.path, self.sample_rate, self._recorded, self._start + start, max(0, stop - start),
                             self.channels)
        if isinstance(key, slice):
            return self.read()[key]
        index = operator.index(key)
        if not -len(self) <= index < len(self):
            raise IndexError(f"sample {key} of {len(self)}")
        index %= len(self)
        return self.read(index, index + 1)[0]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        samples = self.read()
        return samples if dtype is None else samples.astype(dtype)

    def padded(self, length: int) -> TakeAudio:
        """This audio cut or extended with silence to `length` samples."""
        return TakeAudio(self.path, self.sample_rate, self._recorded, self._start, max(0, int(length)), self.channels)

    def read(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Samples [start, stop) of this view as float32 in [-1, 1], mono (a stereo take's channels averaged)."""
        frames = self.read_channels(start, stop)
        return frames[:, 0] if self.channels == 1 else frames.mean(axis=1, dtype=np.float32)

    def read_channels(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Sample frames [start, stop) of this view as float32 (n, channels) in [-1, 1]."""
        stop = len(self) if stop is None else min(stop, len(self))
        start = min(max(start, 0), stop)
        out = np.zeros((stop - start, self.channels), np.float32)
        first, last = self._start + start, min(self._start + stop, self._recorded)
        if self.path is not None and last > first:
            pcm = np.fromfile(self.path, "<i2", count=(last - first) * self.channels,
                              offset=WAV_HEADER_BYTES + 2 * self.channels * first)
            out.reshape(-1)[:len(pcm)] = pcm / np.float32(32767.0)
        return out

    def chunks(self, rate: int | None = None, channels: int | None = None) -> Iterator[np.ndarray]:
        """float32 (n, channels) pieces of at most AUDIO_CHUNK_S, at `rate` (default the take's) with `channels`
        (default the take's; 1 averages a stereo take, 2 duplicates a mono one)."""
        from studio.engine.audio_file import RateConverter

        rate = int(rate or self.sample_rate)
        channels = int(channels or self.channels)
        converter = RateConverter(self.sample_rate, rate, channels)
        step = max(1, int(AUDIO_CHUNK_S * self.sample_rate))
        for start in range(0, len(self), step):
            samples = self.read_channels(start, start + step)
            if channels != self.channels:
                samples = np.repeat(samples.mean(axis=1, keepdims=True, dtype=np.float32), channels, axis=1)
            out = converter.push(samples, last=start + step >= len(self))
            if len(out):
                yield out


@dataclass
class FrameScan:
    """What frames.bin holds: where each good record lies, and where and why reading stopped or skipped."""

    path: Path
    offsets: array = field(default_factory=lambda: array("q"))  # each good record's start
    lengths: array = field(default_factory=lambda: array("q"))  # its payload's length
    times: array = field(default_factory=lambda: array("d"))
    voice_activity: array = field(default_factory=lambda: array("f"))
    good_bytes: int = 0  # bytes up to the end of the last readable record
    corrupt: list[str] = field(default_factory=list)  # records that fail their checksum (skipped)
    tail: str | None = None  # a half-written last record
    header_error: str | None = None

    @cached_property
    def frames(self) -> TakeFrames:
        """The good records as a lazy sequence (built once, when the scan is done)."""
        return TakeFrames(self.path, np.array(self.offsets, np.int64), np.array(self.lengths, np.int64),
                          np.array(self.times, np.float64), np.array(self.voice_activity, np.float32))


_SCANNED = struct.Struct("<d8xd")  # media_time_s, (sequence), voice_activity: the start of FRAME_DTYPE


def _scanned_fields(payload: bytes) -> tuple[float, float]:
    """(media time, voice activity) of a record whose JSON part is what `decode_frame` reads; ValueError if not.

    The scan of a 20-minute take checks 36,000 records: building each FrameState to drop it took 1.0 of 1.3 s.
    """
    media_time, voice_activity = _SCANNED.unpack_from(payload)
    expression, timings = json.loads(payload[FRAME_DTYPE.itemsize:].decode("utf-8"))
    if not isinstance(expression, str) or not isinstance(timings, dict):
        raise ValueError("the record's JSON part is not [expression, timings]")
    return media_time, voice_activity


def scan_frames(path: Path) -> FrameScan:
    """Check every record of frames.bin, reading it a record at a time (no frame is kept in memory)."""
    scan = FrameScan(path)
    size = path.stat().st_size
    with open(path, "rb") as handle:
        start = len(FRAMES_MAGIC) + 4
        opening = handle.read(start)
        if not opening.startswith(FRAMES_MAGIC) or len(opening) < start:
            scan.header_error = f"{FRAMES} does not start with the take header (not written by Avatar Studio)"
            return scan
        (header_len,) = struct.unpack_from("<I", opening, len(FRAMES_MAGIC))
        try:
            header = json.loads(handle.read(header_len).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            scan.header_error = f"{FRAMES} header is unreadable"
            return scan
        if not isinstance(header, dict) or header.get("version") != TAKE_VERSION \
                or header.get("fixed_bytes") != FRAME_DTYPE.itemsize:
            found = header if isinstance(header, dict) else {}
            scan.header_error = (f"{FRAMES} is layout version {found.get('version')!r} with {found.get('fixed_bytes')!r}-byte "
                                 f"records; this studio reads version {TAKE_VERSION}")
            return scan
        offset = scan.good_bytes = start + header_len
        handle.seek(offset)
        while offset < size:
            number = len(scan.offsets) + len(scan.corrupt)
            head = handle.read(RECORD_HEAD.size)
            if len(head) < RECORD_HEAD.size:
                scan.tail = f"{FRAMES} ends with {size - offset} bytes of a half-written record at byte {offset}"
                break
            length, crc = RECORD_HEAD.unpack(head)
            end = offset + RECORD_HEAD.size + length
            if not FRAME_DTYPE.itemsize <= length <= MAX_RECORD_BYTES:
                scan.tail = f"{FRAMES} record {number} at byte {offset} has an impossible length {length}"
                break
            if end > size:
                scan.tail = (f"{FRAMES} ends with a half-written record at byte {offset} "
                             f"({size - offset} of {end - offset} bytes)")
                break
            payload = handle.read(length)
            try:
                if zlib.crc32(payload) != crc:
                    raise ValueError("checksum mismatch")
                media_time, voice_activity = _scanned_fields(payload)
            except (ValueError, UnicodeDecodeError):
                scan.corrupt.append(f"record {number} at byte {offset}")
            else:
                scan.offsets.append(offset)
                scan.lengths.append(length)
                scan.times.append(media_time)
                scan.voice_activity.append(voice_activity)
            offset = scan.good_bytes = end
    return scan


@dataclass
class WavInfo:
    """What a take's audio.wav header says and what the file holds, read without loading the samples."""

    sample_rate: int = 0
    samples: int = 0  # whole sample frames (16 bits a channel) after the header
    problem: str | None = None
    channels: int = 1


def read_wav_info(path: Path) -> WavInfo:
    with open(path, "rb") as handle:
        data = handle.read(WAV_HEADER_BYTES)
    if len(data) < WAV_HEADER_BYTES or data[:4] != b"RIFF" or data[8:16] != b"WAVEfmt " or data[36:40] != b"data":
        return WavInfo(problem=f"{AUDIO} is not the take's 16-bit PCM WAV layout")
    _size, fmt, channels, rate, _byte_rate, _align, bits = struct.unpack_from("<IHHIIHH", data, 16)
    if fmt != 1 or channels not in (1, 2) or bits != 16:
        return WavInfo(problem=f"{AUDIO} is format {fmt}, {channels} channels, {bits} bits; expected PCM mono or "
                               "stereo 16-bit")
    (claimed,) = struct.unpack_from("<I", data, 40)
    align = 2 * channels
    held = (path.stat().st_size - WAV_HEADER_BYTES) // align
    problem = None
    if claimed != held * align:
        problem = f"{AUDIO} header says {claimed // align} samples but holds {held} (header not finalised)"
    return WavInfo(rate, held, problem, channels)


def read_events(path: Path) -> tuple[list[dict], str | None]:
    events, problem = [], None
    lines = path.read_bytes().split(b"\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line.decode("utf-8"))
            if not isinstance(event, dict) or not isinstance(event.get("t"), (int, float)) or "kind" not in event:
                raise ValueError("not an event object")
            events.append(event)
        except (ValueError, UnicodeDecodeError):
            last = number == len(lines) or all(not rest.strip() for rest in lines[number:])
            problem = (f"{EVENTS} line {number} is " + ("half-written (the last line)" if last else "not a valid event"))
            if not last:
                return events, problem
    return events, problem


class ResampledFrames:
    """A take's frames on a regular grid of take time, made as they are read (`Take.resampled`)."""

    def __init__(self, frames: TakeFrames, indices: np.ndarray, grid: np.ndarray,
                 transform: Callable[[FrameState], FrameState] | None = None) -> None:
        self._frames, self._indices, self._grid, self._transform = frames, indices, grid, transform

    def __len__(self) -> int:
        return len(self._grid)

    def mapped(self, transform: Callable[[FrameState], FrameState]) -> ResampledFrames:
        """The same grid with `transform` applied to each recorded frame (a re-targeting, say)."""
        return ResampledFrames(self._frames, self._indices, self._grid, transform)

    def __iter__(self) -> Iterator[FrameState]:
        first = int(self._indices[0])
        recorded = iter(self._frames[first:int(self._indices[-1]) + 1])
        position, current = first - 1, None
        for sequence, (index, take_time) in enumerate(zip(self._indices, self._grid)):
            while position < index:  # each recorded frame is read once, however many grid points show it
                current = next(recorded)
                current = self._transform(current) if self._transform is not None else current
                position += 1
            yield current.replace(media_time_s=float(take_time), sequence=sequence)


@dataclass
class Take:
    """A readable take: its frames and audio (both read from disk as needed), the events."""

    path: Path
    manifest: dict
    frames: TakeFrames
    audio: TakeAudio  # the source's rate and channels, sample 0 at the first frame's media time
    events: list[dict]

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def sample_rate(self) -> int:
        return self.audio.sample_rate

    @property
    def start_media_s(self) -> float:
        return float(self.frames.times[0]) if len(self.frames) else 0.0

    @property
    def duration_s(self) -> float:
        """From the first frame to the end of the last frame or of the audio, whichever is later."""
        frame_rate = float(self.manifest.get("frame_rate") or 30.0)
        times = self.frames.times
        frames_end = (float(times[-1]) - self.start_media_s + 1.0 / frame_rate) if len(times) else 0.0
        audio_end = len(self.audio) / self.sample_rate if self.sample_rate else 0.0
        return max(frames_end, audio_end)

    def take_times(self) -> np.ndarray:
        return self.frames.times - self.start_media_s

    def frame_index(self, take_time_s: float) -> int:
        """Index of the recorded frame showing at this take time (the last one at or before it)."""
        return max(int(np.searchsorted(self.take_times(), take_time_s + 1e-9, side="right")) - 1, 0)

    def frame_at(self, take_time_s: float) -> FrameState:
        return self.frames[self.frame_index(take_time_s)]

    def resampled(self, fps: float) -> ResampledFrames:
        """Frames at k / fps of take time (each the recorded frame showing then), stamped with take time."""
        count = max(1, int(np.ceil(self.duration_s * fps - 1e-9)))
        grid = np.arange(count) / fps
        indices = np.clip(np.searchsorted(self.take_times(), grid + 1e-9, side="right") - 1, 0, len(self.frames) - 1)
        return ResampledFrames(self.frames, indices, grid)

    def as_recorded(self) -> ResampledFrames:
        """Every recorded frame once, stamped with its own take time: a CSV at the take's own rate keeps its rows
        (a phone's take runs at 59.9 frames a second under a 60 fps timecode; a 60 fps grid adds a row and shows
        each frame one frame late)."""
        return ResampledFrames(self.frames, np.arange(len(self.frames)), self.take_times())

    def head(self, seconds: float) -> Take:
        """The take's first `seconds` (at least its first frame): a view, nothing is copied or read."""
        count = max(1, int(np.searchsorted(self.take_times(), seconds, side="left")))
        return Take(self.path, self.manifest, self.frames[:count], self.audio[:int(seconds * self.sample_rate)],
                    self.events)

    def voice_activity(self) -> tuple[np.ndarray, np.ndarray]:
        """(take times, voice activity) per recorded frame, for the timeline."""
        return self.take_times(), self.frames.voice_activity.astype(np.float64)

    def audio_level(self, hop_s: float = 0.02) -> tuple[np.ndarray, np.ndarray]:
        """(take times, RMS level normalised to the loudest hop) of the audio, read a chunk at a time."""
        hop = max(1, int(self.sample_rate * hop_s))
        per_chunk = max(1, int(AUDIO_CHUNK_S * self.sample_rate) // hop) * hop
        whole = len(self.audio) // hop * hop
        levels = [np.sqrt((self.audio.read(start, min(start + per_chunk, whole)).astype(np.float64)
                           .reshape(-1, hop) ** 2).mean(axis=1))
                  for start in range(0, whole, per_chunk)]
        rms = np.concatenate(levels) if levels else np.zeros(0)
        level = np.clip(rms / max(float(rms.max(initial=0.0)), 1e-6), 0.0, 1.0)
        return np.arange(len(level)) * hop / self.sample_rate, level


def _load_manifest(folder: Path) -> tuple[dict | None, list[str]]:
    path = folder / MANIFEST
    if not folder.is_dir():
        return None, [f"{folder} is not a folder"]
    if not path.is_file():
        return None, [f"no {MANIFEST} (not an Avatar Studio take, or its manifest was deleted)"]
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        return None, [f"{MANIFEST} is not valid JSON ({error})"]
    if not isinstance(manifest, dict) or manifest.get("format") != TAKE_FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        return None, [f"{MANIFEST} is not an Avatar Studio take manifest (format {found!r})"]
    if manifest.get("version") != TAKE_VERSION:
        return None, [f"{MANIFEST} is take version {manifest.get('version')!r}; this studio reads version {TAKE_VERSION}"]
    return manifest, []


@dataclass
class Inspection:
    """Everything `inspect_take` found: the readable content and the problems, split by whether repair can fix them."""

    manifest: dict | None
    scan: FrameScan | None = None
    audio: TakeAudio | None = None
    events: list[dict] = field(default_factory=list)
    repairable: list[str] = field(default_factory=list)
    fatal: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        return self.fatal + self.repairable

    def take_audio(self) -> TakeAudio:
        """The audio found, or none at the manifest's rate (a missing or unreadable audio.wav)."""
        if self.audio is not None:
            return self.audio
        manifest = self.manifest or {}
        return TakeAudio(None, int(manifest.get("sample_rate") or 16000), channels=int(manifest.get("channels") or 1))


def lock_text() -> str:
    """What a recorder writes into the lock: its process id and that process's start time."""
    import psutil

    return f"{os.getpid()} {psutil.Process().create_time():.3f}\n"


def recorder_alive(folder: Path) -> bool:
    """True while the process that wrote the take's lock still runs (it is being recorded now).

    The start time tells a reused process id (after a reboot, or much later) from the recorder itself.
    """
    import psutil

    try:
        fields = (folder / LOCK).read_text().split()
        pid, started = int(fields[0]), float(fields[1]) if len(fields) > 1 else None
    except (OSError, ValueError, IndexError):
        return False
    try:
        process = psutil.Process(pid)
        return started is None or abs(process.create_time() - started) < 1.0
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True


def inspect_take(folder: str | os.PathLike) -> Inspection:
    """Read a take folder and list what is missing or inconsistent, without changing anything."""
    folder = Path(folder)
    manifest, problems = _load_manifest(folder)
    result = Inspection(manifest, fatal=problems)
    if manifest is None:
        return result
    status = manifest.get("status")
    if status == "recording":
        if recorder_alive(folder):
            result.fatal.append("it is being recorded now")
            return result
        result.repairable.append("the recording was interrupted (no clean stop)")
    files = manifest.get("files") or {}
    for name in (FRAMES, AUDIO, EVENTS):
        if not (folder / name).is_file():
            (result.fatal if name == FRAMES else result.repairable).append(f"{name} is missing")
    if (folder / FRAMES).is_file():
        scan = result.scan = scan_frames(folder / FRAMES)
        if scan.header_error:
            result.fatal.append(scan.header_error)
        else:
            if scan.tail:
                result.repairable.append(scan.tail)
            if scan.corrupt:
                result.repairable.append(f"{len(scan.corrupt)} frame record(s) fail their checksum (tampered or damaged): "
                                         + ", ".join(scan.corrupt[:3]) + (" …" if len(scan.corrupt) > 3 else ""))
            if not scan.frames:
                result.fatal.append(f"{FRAMES} holds no readable frame")
            else:
                times = scan.frames.times
                if np.any(np.diff(times) <= 0):
                    at = int(np.flatnonzero(np.diff(times) <= 0)[0]) + 1
                    result.fatal.append(f"{FRAMES} frame {at} goes back in time ({times[at]:.3f} s after {times[at - 1]:.3f} s)")
            expected = manifest.get("frames")
            if status != "recording" and isinstance(expected, int):
                good = len(scan.frames)
                if good < expected:
                    result.repairable.append(f"{FRAMES} holds {good} readable frames; the manifest says {expected} (truncated)")
                elif good > expected:
                    result.fatal.append(f"{FRAMES} holds {good} frames; the manifest says {expected} (changed after recording)")
                elif FRAMES in files and files[FRAMES].get("sha256") != file_sha256(folder / FRAMES) and not scan.corrupt:
                    result.fatal.append(f"{FRAMES} differs from what was recorded (sha256 does not match the manifest)")
    if (folder / AUDIO).is_file():
        wav = read_wav_info(folder / AUDIO)
        rate, problem = wav.sample_rate, wav.problem
        result.audio = TakeAudio(folder / AUDIO, rate, wav.samples, channels=wav.channels) if rate else None
        if problem and status == "recording":
            result.repairable.append(problem)
        elif problem and "header says" in problem:
            result.repairable.append(problem)
        elif problem:
            result.fatal.append(problem)
        elif rate != manifest.get("sample_rate"):
            result.fatal.append(f"{AUDIO} is {rate} Hz; the manifest says {manifest.get('sample_rate')} Hz")
        elif wav.channels != int(manifest.get("channels") or 1):
            result.fatal.append(f"{AUDIO} has {wav.channels} channel(s); the manifest says {manifest.get('channels') or 1}")
        elif status != "recording" and AUDIO in files and files[AUDIO].get("sha256") != file_sha256(folder / AUDIO):
            result.fatal.append(f"{AUDIO} differs from what was recorded (sha256 does not match the manifest)")
    if (folder / EVENTS).is_file():
        result.events, problem = read_events(folder / EVENTS)
        if problem and "half-written" in problem:
            result.repairable.append(problem)
        elif problem:
            result.fatal.append(problem)
        if status != "recording" and EVENTS in files and files[EVENTS].get("sha256") != file_sha256(folder / EVENTS):
            result.fatal.append(f"{EVENTS} differs from what was recorded (sha256 does not match the manifest)")
    return result


def open_take(folder: str | os.PathLike) -> Take:
    """The take, exactly as recorded; `TakeError` (listing every problem) if anything is off."""
    folder = Path(folder)
    found = inspect_take(folder)
    if found.problems:
        raise TakeError(folder, found.problems, repairable=not found.fatal)
    return Take(folder, found.manifest, found.scan.frames, found.take_audio(), found.events)


def repair_take(folder: str | os.PathLike) -> list[str]:
    """Make an interrupted or damaged take readable again; returns what was done, marks it `recovered`.

    Drops a half-written tail and records that fail their checksum, finalises the WAV header, drops a
    half-written event line. A take with a problem repair cannot fix (no frames, a foreign or changed
    file) raises `TakeError` and is left as it was.
    """
    folder = Path(folder)
    found = inspect_take(folder)
    if found.fatal:
        raise TakeError(folder, found.problems, repairable=False)
    if not found.repairable:
        return []
    manifest = dict(found.manifest)
    done = []
    scan = found.scan
    frames = scan.frames
    if scan.tail or scan.corrupt:
        with atomic_writer(folder / FRAMES, encoding=None) as out:
            out.write(frames_header())
            for record in frames.records():
                out.write(record)
        done.append(f"kept {len(scan.frames)} frames"
                    + (f", dropped {len(scan.corrupt)} damaged record(s)" if scan.corrupt else "")
                    + (", cut a half-written last record" if scan.tail else ""))
    audio = found.take_audio()
    rate = audio.sample_rate
    audio_path = folder / AUDIO
    if not audio_path.is_file() or read_wav_info(audio_path).problem:
        with atomic_writer(audio_path, encoding=None) as out:
            out.write(wav_header(rate, len(audio) * 2 * audio.channels, audio.channels))
            for chunk in audio.chunks():
                out.write(to_pcm16(chunk))
        done.append(f"finalised {AUDIO} ({len(audio) / rate:.2f} s)")
    events_path = folder / EVENTS
    if not events_path.is_file() or read_events(events_path)[1]:
        atomic_write(events_path, "".join(json.dumps(e) + "\n" for e in found.events))
        done.append(f"kept {len(found.events)} events")
    frame_rate = float(manifest.get("frame_rate") or 30.0)
    first, last = float(frames.times[0]), float(frames.times[-1])
    manifest.update({
        "status": "recovered", "frames": len(frames),
        "duration_s": max(last - first + 1.0 / frame_rate, len(audio) / rate),
        "audio_samples": len(audio), "events": len(found.events),
        "repairs": list(manifest.get("repairs") or []) + [{"at": now_iso(), "found": found.repairable, "done": done}],
        "files": finished_files(folder),
    })
    manifest.setdefault("stopped_reason", "interrupted (recovered on the next start)")
    write_manifest(folder, manifest)
    (folder / LOCK).unlink(missing_ok=True)
    return done


# ------------------------------------------------------------------------------------------ the library


@dataclass
class TakeInfo:
    """One row of the take list."""

    path: Path
    name: str
    started_at: str
    duration_s: float
    persona: str
    preset: str
    size_bytes: int
    status: str  # complete, recovered, recording, unfinished, damaged
    problem: str | None = None


def size_text(size: int) -> str:
    """A take's size as the browser and `takes` show it: MB from 1 MiB up, else kB; below zero (never a real size) reads 0 kB."""
    size = max(int(size), 0)
    return f"{size / 2**20:.1f} MB" if size >= 2**20 else f"{size / 1024:.0f} kB"


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def take_info(folder: Path) -> TakeInfo:
    """A cheap summary from the manifest (frames are not read): the browser lists many takes."""
    manifest, problems = _load_manifest(folder)
    size = folder_size(folder) if folder.is_dir() else 0
    if manifest is None:
        return TakeInfo(folder, folder.name, "", 0.0, "", "", size, "damaged", "; ".join(problems))
    status = manifest.get("status", "?")
    problem = None
    if status == "recording" and not recorder_alive(folder):
        status, problem = "unfinished", "the recording was interrupted; it will be repaired when opened"
    return TakeInfo(folder, folder.name, str(manifest.get("started_at", "")), float(manifest.get("duration_s") or 0.0),
                    str(manifest.get("persona", "")), str(manifest.get("preset", "")), size, status, problem)


def list_takes(root: str | os.PathLike) -> list[TakeInfo]:
    """Take folders under `root` (not the trash), newest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    rows = [take_info(p) for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return sorted(rows, key=lambda r: (r.started_at, r.name), reverse=True)


def find_unfinished(root: str | os.PathLike) -> list[Path]:
    """Takes whose recorder stopped without finishing them (a crash, a kill, a power cut)."""
    return [row.path for row in list_takes(root) if row.status == "unfinished"]


TRASH = ".trash"


def trash_take(folder: str | os.PathLike) -> Path:
    """Move a take into the recordings' trash folder (undo with `restore_take`); returns where it went."""
    folder = Path(folder)
    trash = folder.parent / TRASH
    trash.mkdir(exist_ok=True)
    target = trash / f"{folder.name}.{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S%f')}"
    os.replace(folder, target)
    return target


def restore_take(trashed: str | os.PathLike, original: str | os.PathLike) -> Path:
    trashed, original = Path(trashed), Path(original)
    if original.exists():
        raise FileExistsError(f"cannot restore {original.name}: a take with that name exists again")
    os.replace(trashed, original)
    return original


def rename_take(folder: str | os.PathLike, new_name: str) -> Path:
    """Rename a take folder; a name with a path separator, a leading dot or one already used is refused."""
    folder = Path(folder)
    clean = new_name.strip()
    if not clean or clean.startswith(".") or any(c in clean for c in '/\\:*?"<>|') or len(clean) > 120:
        raise ValueError(f"take name {new_name!r} is not allowed: use 1..120 characters without / \\ : * ? \" < > | "
                         "and not starting with a dot")
    target = folder.with_name(clean)
    if target.exists():
        raise FileExistsError(f"a take named {clean!r} already exists")
    os.replace(folder, target)
    return target


def new_take_folder(root: str | os.PathLike, name: str | None = None) -> Path:
    """A fresh, empty folder for a take (named by the wall clock unless given)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    base = name or datetime.now().strftime("take-%Y-%m-%d-%H%M%S")
    folder, n = root / base, 1
    while folder.exists():
        n += 1
        folder = root / f"{base}-{n}"
    folder.mkdir()
    return folder


def free_bytes(folder: Path) -> int:
    return shutil.disk_usage(folder).free
