"""Audio files decoded chunk by chunk (PyAV), so memory does not grow with the file's length.

A 2-hour lecture is 460 MB of float32 at 16 kHz and 2.7 GB as stereo 48 kHz: nothing that reads
a file (`lipsync`, `render --audio`, *Play Audio File*) may hold it whole. `AudioFileStream`
probes the file once (rate, channels, duration, a first decoded packet) so a bad file is refused
up front with a message naming it, then `chunks()` decodes, converts (libswresample) and yields
at most `chunk_s` seconds at a time, as often as asked.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from studio.engine.sources import AudioInputError, not_audio

CHUNK_S = 0.5


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
        self.sample_rate, self.channels, self.duration_s = self._probe()

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

    def _probe(self) -> tuple[int, int, float | None]:
        container = self._open()
        with container:
            stream = container.streams.audio[0]
            rate = int(stream.rate or stream.sample_rate or 0)
            channels = int(stream.channels or 0)
            if rate <= 0 or not 1 <= channels <= 64:
                raise AudioInputError(f"{self.path}: invalid audio stream ({rate} Hz, {channels} channels)")
            duration = None
            if stream.duration is not None and stream.time_base is not None:
                duration = float(stream.duration * stream.time_base)
            elif container.duration:
                duration = container.duration / 1_000_000
            try:
                first = next(iter(container.decode(stream)), None)
            except Exception:
                raise not_audio(self.path, "is damaged or not audio: its first sound cannot be decoded") from None
            if first is None:
                raise AudioInputError(f"{self.path}: contains no audio samples (truncated or empty)")
        return rate, channels, duration

    def chunks(self, rate: int | None = None, channels: int = 1) -> Iterator[np.ndarray]:
        """float32 chunks, (frames, channels), at `rate` (default the file's own), ≤ chunk_s seconds each.

        `channels` 1 averages all channels; 2 gives stereo (a mono file is duplicated). Samples are
        clipped to [-1, 1]; NaN or infinity in the file is an AudioInputError naming it.
        """
        import av

        if channels not in (1, 2):
            raise ValueError(f"channels={channels!r}; allowed 1 or 2")
        rate = int(rate or self.sample_rate)
        if not 1000 <= rate <= 384000:
            raise ValueError(f"rate={rate!r} Hz is out of range; allowed 1000..384000")
        # mix to stereo (not mono) in libswresample and average here: its mono downmix scales by 1/sqrt(2)
        layout = "mono" if self.channels == 1 else "stereo"
        converter = av.AudioResampler(format="fltp", layout=layout, rate=rate)
        limit = max(1, int(self.chunk_s * rate))
        pending: list[np.ndarray] = []
        held = 0
        produced = 0
        with self._open() as container:
            stream = container.streams.audio[0]
            try:
                for frame in _frames(container, stream):
                    for converted in converter.resample(frame):
                        block = converted.to_ndarray()
                        pending.append(block)
                        held += block.shape[1]
                        while held >= limit:
                            out, pending, held = _take(pending, held, limit)
                            produced += out.shape[1]
                            yield self._finish(out, channels, produced)
                for converted in converter.resample(None):
                    pending.append(converted.to_ndarray())
                    held += pending[-1].shape[1]
            except AudioInputError:
                raise
            except Exception:  # the file is damaged part-way through
                at = produced / rate
                raise AudioInputError(f"{self.path} is damaged: its audio stops decoding after {at:.1f} s") from None
        while held:
            out, pending, held = _take(pending, held, limit)
            produced += out.shape[1]
            yield self._finish(out, channels, produced)
        if produced == 0:
            raise AudioInputError(f"{self.path}: contains no audio samples (truncated or empty)")

    def _finish(self, planar: np.ndarray, channels: int, produced: int) -> np.ndarray:
        if not np.all(np.isfinite(planar)):
            raise AudioInputError(f"{self.path}: audio contains NaN or infinite samples")
        if channels == 1:
            samples = planar.mean(axis=0)[:, None] if planar.shape[0] > 1 else planar.T
        else:
            samples = planar.T if planar.shape[0] == 2 else np.repeat(planar.T, 2, axis=1)
        return np.clip(samples, -1.0, 1.0).astype(np.float32, copy=False)


def _frames(container, stream):
    """Decoded frames packet by packet; the demuxer's final empty packet drains the decoder."""
    for packet in container.demux(stream):
        yield from packet.decode()


def _take(pending: list[np.ndarray], held: int, limit: int) -> tuple[np.ndarray, list[np.ndarray], int]:
    joined = pending[0] if len(pending) == 1 else np.concatenate(pending, axis=1)
    out, rest = joined[:, :limit], joined[:, limit:]
    return out, ([rest] if rest.shape[1] else []), rest.shape[1]
