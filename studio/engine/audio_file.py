"""Audio files decoded chunk by chunk (PyAV), so memory does not grow with the file's length.

A 2-hour lecture is 460 MB of float32 at 16 kHz and 2.7 GB as stereo 48 kHz: nothing that reads
a file (`lipsync`, `render --audio`, *Play Audio File*) may hold it whole. `AudioFileStream`
probes the file once (rate, channels, duration, a first decoded packet) so a bad file is refused
up front with a message naming it, then `chunks()` decodes, converts and yields at most `chunk_s`
seconds at a time, as often as asked.

Mono and stereo samples are read from the decoded frames' buffers and resampled by libsoxr (python-soxr)
two seconds at a time: converting every packet through PyAV's libswresample and `to_ndarray` made a 4-minute
48 kHz WAV cost 286 ms of CPU where this takes 188 (best of eight each), a third of it in `lipsync`'s
start-to-end time. More channels than two are mixed to stereo by libswresample first (its matrix knows
which channel is the centre and which the LFE).

A file that holds less sound than it states (a WAV's data size, FLAC's sample count; FFmpeg itself reports
only what is there) or whose last packets will not decode was cut off: its sound is used up to the cut and
`cut_short` says so, for the commands (`lipsync`, `render`, `record`) and the studio's status bar to pass on.
Before, a FLAC cut inside a packet was refused whole ("stops decoding after 0.0 s") and a cut WAV gave a short
output without a word.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from studio.engine.sources import AudioInputError, not_audio

CHUNK_S = 0.5
SHORTFALL_S = 0.1  # sound ending this much (or 1 %) before the header's length is a file cut off


class AudioFileStream:
    """One audio file, decodable any number of times in bounded chunks."""

    def __init__(self, path: str | Path, chunk_s: float = CHUNK_S) -> None:
        self.path = Path(path)
        if not 0.01 <= chunk_s <= 60.0:
            raise ValueError(f"chunk_s={chunk_s!r} is out of range; allowed 0.01..60")
        self.chunk_s = float(chunk_s)
        if not self.path.exists():
            raise AudioInputError(f"{self.path}: no such audio file")
        if not self.path.is_file():
            raise AudioInputError(f"{self.path}: not a file")
        if self.path.stat().st_size == 0:
            raise AudioInputError(f"{self.path}: the file is empty")
        self.sample_rate, self.channels, self.duration_s, flac_stated_s = self._probe()
        # a length the file states exactly (WAV's data size, FLAC's sample count), not one FFmpeg guessed from the
        # bit rate (an MP3 without a Xing header): only that can tell a file that was cut off
        wav_stated_s = _wav_stated_s(self.path)
        self._wav_stated = wav_stated_s is not None
        self.stated_s = wav_stated_s or flac_stated_s
        self.cut_short: str | None = None  # set by each whole decode: the sound ends early (see `_shortfall`)

    def _open(self):
        try:
            import av
        except ImportError as error:
            raise AudioInputError(f"{self.path}: cannot decode audio, PyAV is not installed ({error})") from None
        try:
            container = av.open(str(self.path))
        except Exception:  # PyAV raises many FFmpeg error types
            raise not_audio(self.path) from None
        if not container.streams.audio:
            container.close()
            raise not_audio(self.path, "holds no audio (a video or data file without sound)")
        return container

    def _probe(self) -> tuple[int, int, float | None, float | None]:
        container = self._open()
        with container:
            stream = container.streams.audio[0]
            rate = int(stream.rate or stream.sample_rate or 0)
            channels = int(stream.channels or 0)
            if rate <= 0 or not 1 <= channels <= 64:
                raise AudioInputError(f"{self.path}: invalid audio stream ({rate} Hz, {channels} channels)")
            duration = stated = None
            if stream.duration is not None and stream.time_base is not None:
                duration = float(stream.duration * stream.time_base)
                stated = duration if container.format.name == "flac" else None  # STREAMINFO's count of samples
            elif container.duration:
                duration = container.duration / 1_000_000
            try:
                first = next(iter(container.decode(stream)), None)
            except Exception:
                raise not_audio(self.path, "is damaged or not audio: its first sound cannot be decoded") from None
            if first is None:
                raise AudioInputError(f"{self.path}: contains no audio samples (truncated or empty)")
        return rate, channels, duration, stated

    def chunks(self, rate: int | None = None, channels: int = 1) -> Iterator[np.ndarray]:
        """float32 chunks, (frames, channels), at `rate` (default the file's own), ≤ chunk_s seconds each.

        `channels` 1 averages all channels; 2 gives stereo (a mono file is duplicated). Samples are
        clipped to [-1, 1]; NaN or infinity in the file is an AudioInputError naming it.
        """
        if channels not in (1, 2):
            raise ValueError(f"channels={channels!r}; allowed 1 or 2")
        rate = int(rate or self.sample_rate)
        if not 1000 <= rate <= 384000:
            raise ValueError(f"rate={rate!r} Hz is out of range; allowed 1000..384000")
        limit = max(1, int(self.chunk_s * rate))
        pending: list[np.ndarray] = []
        held = 0
        produced = 0
        with self._open() as container:
            stream = container.streams.audio[0]
            decoded = _Decoded(container, stream)
            to_rate = None
            try:
                for file_rate, samples in _float_blocks(decoded, channels, self.path):
                    to_rate = to_rate or RateConverter(file_rate, rate, channels)
                    resampled = to_rate.push(samples)
                    if len(resampled):
                        pending.append(resampled)
                        held += len(resampled)
                    while held >= limit:
                        out, pending, held = _take(pending, held, limit)
                        produced += len(out)
                        yield self._finish(out)
                if to_rate is not None:
                    pending.append(to_rate.push(np.zeros((0, channels), np.float32), last=True))
                    held += len(pending[-1])
            except AudioInputError:
                raise
            except Exception:  # the file is damaged part-way through: its sound goes on after the damage
                at = decoded.decoded_s
                raise AudioInputError(f"{self.path} is damaged: its audio stops decoding after {at:.1f} s") from None
        while held:
            out, pending, held = _take(pending, held, limit)
            produced += len(out)
            yield self._finish(out)
        if produced == 0:
            raise AudioInputError(f"{self.path}: contains no audio samples (truncated or empty)")
        self.cut_short = self._shortfall(decoded)

    def _shortfall(self, decoded: _Decoded) -> str | None:
        """What a user should know of a file that holds less sound than its header states. Cut off (a download or
        recording that stopped): every sound before the cut is used and the lips stay in time. Damaged part-way
        in a way the decoder skips (FLAC resynchronises, dropping frames): the lips after the damage run early."""
        stated, name = self.stated_s, self.path.name
        if stated is None or decoded.decoded_s >= stated - max(SHORTFALL_S, 0.01 * stated):
            return (f"{name}: its sound stops decoding at {decoded.decoded_s:.2f} s (what follows is damaged or cut "
                    "off); the sound before it is used") if decoded.failed_at_end else None
        held = f"{decoded.decoded_s:.2f} s of the {stated:.2f} s its header states"
        if decoded.failed_at_end or self._wav_stated:  # a WAV's samples all decode: less of them is a shorter file
            return f"{name} ends early: it holds {held} (the file was cut off); the rest is missing"
        return (f"{name} is damaged part-way: it decodes to {held}, so the lips after the damage run up to "
                f"{stated - decoded.decoded_s:.2f} s early; repair or re-export the file")

    def _finish(self, samples: np.ndarray) -> np.ndarray:
        if not np.all(np.isfinite(samples)):
            raise AudioInputError(f"{self.path}: audio contains NaN or infinite samples")
        return np.clip(samples, -1.0, 1.0).astype(np.float32, copy=False)


class _Decoded:
    """Decoded frames packet by packet (the demuxer's final empty packet drains the decoder), counting the seconds.

    A packet that will not decode is damage when sound decodes after it (`chunks` refuses the file) and the cut-off
    end of the file when nothing does: a FLAC or WAV copied or recorded only in part ends inside a packet, and
    everything before it is good sound (`failed_at_end`).
    """

    def __init__(self, container, stream) -> None:
        self.container, self.stream = container, stream
        self.decoded_s = 0.0
        self.failed_at_end = False

    def __iter__(self):
        import av

        failed = None
        for packet in self.container.demux(self.stream):
            try:
                frames = packet.decode()
            except av.FFmpegError as error:
                failed = failed or error
                continue
            if failed is not None and frames and packet.size:
                raise failed
            for frame in frames:
                self.decoded_s += frame.samples / frame.sample_rate
                yield frame
        self.failed_at_end = failed is not None


def _wav_stated_s(path: Path) -> float | None:
    """The length a WAV's header states (FFmpeg reports the length of what is there instead), or None: not a
    WAV, or a header written before its length was known (0 or the 4 GB placeholder of a live writer)."""
    try:
        with path.open("rb") as file:
            head = file.read(4096)
    except OSError:
        return None
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    at, block_align, rate = 12, 0, 0
    while at + 8 <= len(head):
        name, size = head[at:at + 4], int.from_bytes(head[at + 4:at + 8], "little")
        if name == b"fmt " and at + 24 <= len(head):
            rate = int.from_bytes(head[at + 12:at + 16], "little")
            block_align = int.from_bytes(head[at + 20:at + 22], "little")
        if name == b"data":
            if not block_align or not rate or size in (0, 0xFFFFFFFF):
                return None
            return size / block_align / rate
        at += 8 + size + (size & 1)
    return None


_SAMPLE_TYPES = {"u8": np.uint8, "s16": np.int16, "s32": np.int32, "s64": np.int64, "flt": np.float32,
                 "dbl": np.float64}  # FFmpeg sample formats (a trailing "p": planar)
_FULL_SCALE = {"u8": 128.0, "s16": 32768.0, "s32": 2147483648.0, "s64": 9223372036854775808.0}
_BLOCK_S = 2.0  # decoded audio handed to the resampler at once: per-call costs spread thin, memory small


def _float_blocks(frames, channels: int, path: Path) -> Iterator[tuple[int, np.ndarray]]:
    """Decoded frames as (their rate, float32 (n, channels)) blocks of about _BLOCK_S seconds, mixed as `chunks`
    says. The rate is the decoder's (an HE-AAC stream may decode at twice the rate its container states)."""
    wide = None  # libswresample, only for frames of more than two channels
    pending: list[np.ndarray] = []
    held = 0
    rate = None
    for frame in frames:
        rate = rate or frame.sample_rate
        if frame.sample_rate != rate:
            raise AudioInputError(f"{path}: its sample rate changes part-way ({rate} -> {frame.sample_rate} Hz); "
                                  "allowed: one rate throughout")
        if frame.layout.nb_channels > 2:
            if wide is None:
                import av

                wide = av.AudioResampler(format="fltp", layout="stereo", rate=rate)
            converted = [_planar_float(part) for part in wide.resample(frame)]
        else:
            converted = [_planar_float(frame)]
        for planar in converted:
            block = _mixed(planar, channels)
            pending.append(block)
            held += len(block)
        if held >= _BLOCK_S * rate:
            yield rate, np.concatenate(pending) if len(pending) > 1 else pending[0]
            pending, held = [], 0
    if wide is not None:
        pending.extend(_mixed(_planar_float(part), channels) for part in wide.resample(None))
    if pending:
        yield rate, np.concatenate(pending)


def _planar_float(frame) -> np.ndarray:
    """One decoded frame as float32 (channels, n), full scale ±1, read from its planes' buffers (PyAV's
    `to_ndarray` costs 50 µs a frame, as much as the rest of the decoding)."""
    name, count, samples = frame.format.name, frame.layout.nb_channels, frame.samples
    kind = name.removesuffix("p")
    sample_type = _SAMPLE_TYPES[kind]  # every FFmpeg sample format is there
    if frame.format.is_planar:  # a plane's buffer may be padded past its samples
        data = np.stack([np.frombuffer(plane, sample_type, count=samples) for plane in frame.planes])
    else:
        data = np.frombuffer(frame.planes[0], sample_type, count=samples * count).reshape(samples, count).T
    if kind in ("flt", "dbl"):
        return data.astype(np.float32)
    if kind == "u8":
        return (data.astype(np.float32) - 128.0) / 128.0
    return (data * (1.0 / _FULL_SCALE[kind])).astype(np.float32)


def _mixed(planar: np.ndarray, channels: int) -> np.ndarray:
    """(channels in, n) -> (n, `channels`): mono averages, stereo duplicates a mono source."""
    if channels == 1:
        return planar.mean(axis=0)[:, None] if len(planar) > 1 else planar.T
    return planar.T if len(planar) == 2 else np.repeat(planar.T, 2, axis=1)


class RateConverter:
    """Streaming sample-rate conversion (libsoxr, high quality, delay compensated); a no-op at the same rate."""

    def __init__(self, from_rate: int, to_rate: int, channels: int) -> None:
        self._stream = None
        self._channels = channels
        if from_rate != to_rate:
            import soxr

            self._stream = soxr.ResampleStream(from_rate, to_rate, channels, dtype="float32", quality="HQ")

    def push(self, samples: np.ndarray, last: bool = False) -> np.ndarray:
        if self._stream is None:
            return samples
        out = self._stream.resample_chunk(np.ascontiguousarray(samples), last=last)
        return out.reshape(-1, self._channels)  # a short block may give no samples yet


def _take(pending: list[np.ndarray], held: int, limit: int) -> tuple[np.ndarray, list[np.ndarray], int]:
    joined = pending[0] if len(pending) == 1 else np.concatenate(pending)
    out, rest = joined[:limit], joined[limit:]
    return out, ([rest] if len(rest) else []), len(rest)
