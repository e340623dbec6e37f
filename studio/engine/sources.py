"""Audio sources for the engine: microphone, file, text-to-speech.

Every source hands the engine float32 mono audio at ENGINE_RATE, stamped with its sample
position on the media clock, and feeds its MediaClock with (media time, monotonic time)
observations. Audio callbacks only copy (into an AudioRing) and note the time; everything
else happens on the engine thread in `read_available()`.

A source never raises from `read_available()` because of a device: it records `error`, says
so in `status`, and returns no audio; `restart()` tries again.

Wake-ups: a source whose audio arrives in device callbacks sets `data_event` (when the engine
gave it one) after each callback, so the engine thread sleeps until audio is there instead of
polling; a source paced by a timer says when its next hop is due (`next_data_in_s`).
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from studio.engine import alsa
from studio.engine.clock import MediaClock
from studio.engine.ring import AudioRing

if TYPE_CHECKING:
    from studio.engine.output import SpeakerClip, SpeakerOutput

ENGINE_RATE = 16000
HOP_SAMPLES = ENGINE_RATE // 100  # the engine's 10 ms hop
NO_CALLBACK_TIMEOUT_S = 1.0  # a running device that stays silent this long counts as lost
FIRST_AUDIO_TIMEOUT_S = 3.0  # before a device's first block: starting a capture stream may take this long
CAPTURE_BLOCK_S = 0.005  # microphone callback period: half a hop, so a hop waits at most 5 ms for its last block


class AudioInputError(ValueError):
    """An audio file that cannot be used: missing, truncated, not audio, or empty."""


READABLE_AUDIO = "WAV, FLAC, OGG, MP3 or M4A (or another audio file FFmpeg reads)"


def not_audio(path: str | Path, what: str = "is not an audio file") -> AudioInputError:
    """The plain sentence for a file that holds no audio we can decode: what it is not and what works.

    The decoder's own text (`[Errno 1094995529] Invalid data found ...`) tells a person nothing.
    """
    return AudioInputError(f"{path} {what}; use {READABLE_AUDIO}")


class AudioDeviceError(ValueError):
    """An audio device that does not exist or cannot be opened."""


class AudioSource:
    """What the engine reads audio from."""

    sample_rate = ENGINE_RATE
    phonemes: tuple | None = None  # a source that knows its exact phonemes (text) exposes them

    def __init__(self, name: str) -> None:
        self.name = name
        self.clock = MediaClock()
        self.error: str | None = None
        self.data_event: threading.Event | None = None  # set after each device callback (the engine waits on it)
        self.speaker: SpeakerOutput | None = None  # the engine's persistent output, for sources that play sound
        self._state = "stopped"

    def _notify(self) -> None:
        event = self.data_event
        if event is not None:
            event.set()

    def next_data_in_s(self) -> float | None:
        """Seconds until the next hop of audio is due, for timer-paced sources; None: `data_event` will say."""
        return None

    @property
    def status(self) -> str:
        return f"{self.name}: {self.error}" if self.error else f"{self.name}: {self._state}"

    @property
    def finished(self) -> bool:
        """True once a finite source has delivered all its audio (never for a live device)."""
        return False

    @property
    def duration_s(self) -> float | None:
        return None

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def restart(self) -> None:
        self.stop()
        self.error = None
        self.start()

    def read_available(self) -> tuple[int, np.ndarray]:
        """(media sample position of the first sample, float32 mono samples at ENGINE_RATE)."""
        raise NotImplementedError

    @property
    def capture_format(self) -> tuple[int, int] | None:
        """(rate, channels) of the audio `captured_audio()` hands out, what a take of this source keeps; None for a
        source with no audio of its own beside the engine's copy."""
        return None

    def captured_audio(self) -> tuple[float, np.ndarray, int] | None:
        """The audio the latest `read_available()` consumed as the source has it, for a take to keep: (media time s
        of its first frame, float32 frames (n,) or (n, channels), rate). None: the engine's copy is all there is."""
        return None


def close_stream(stream) -> None:
    """Abort and close a PortAudio stream; a vanished device may refuse, and the stream is gone either way."""
    if stream is None:
        return
    try:
        stream.abort()
        stream.close()
    except Exception:  # noqa: BLE001 - PortAudio raises its own error types for a lost device
        pass


# ---------------------------------------------------------------- streaming resampler

class StreamResampler:
    """Windowed-sinc resampling of a stream, block by block; output sample j is media time j / to_rate.

    An output sample needs the input up to `half_width` samples after its centre, so the last outputs of a
    block wait for the next block. `lead=True` starts the output `lead_in` input samples of silence before
    the input (output j is input time j / to_rate - lead_in / from_rate): every output a block reaches is
    then complete when that block arrives. A live microphone's 10 ms hops end on its 5 ms block boundaries,
    and without the lead each hop waited one more block (5 ms at 48 kHz) for the filter's last 1 ms.
    """

    def __init__(self, from_rate: int, to_rate: int, half_taps: int = 16, lead: bool = False) -> None:
        if from_rate <= 0 or to_rate <= 0:
            raise ValueError(f"StreamResampler: rates must be positive, got {from_rate} -> {to_rate}")
        self.from_rate, self.to_rate = int(from_rate), int(to_rate)
        self.step = self.from_rate / self.to_rate  # input samples per output sample
        self.cutoff = min(1.0, self.to_rate / self.from_rate)
        self.half_width = half_taps / self.cutoff  # in input samples
        self.lead_in = int(math.ceil(self.half_width)) if lead and self.from_rate != self.to_rate else 0
        self._beta = 8.0
        # output j is centred at input (j * stride) / phases - lead_in: its taps depend on j * stride mod phases only
        common = math.gcd(self.from_rate, self.to_rate)
        self._stride, self._phases = self.from_rate // common, self.to_rate // common
        self._width = int(math.ceil(2 * self.half_width)) + 1
        self._table = self._kernels(np.arange(self._phases)) if self._phases <= self.CACHED_PHASES else None
        self.reset()

    CACHED_PHASES = 4096
    """Taps are computed once per phase for every usual device rate (48 kHz: 1 phase, 44.1 kHz: 160); computing
    them for each block cost 28 % of a core at 48 kHz, on the engine thread, where the table costs 1 %."""

    def _kernels(self, phases: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For output phases r: the first tap's offset from the centre's whole input index, and the tap weights."""
        fraction = phases / self._phases
        offsets = np.floor(fraction - self.half_width).astype(np.int64) + 1
        distance = (fraction - offsets)[:, None] - np.arange(self._width)[None, :]
        inside = np.abs(distance) < self.half_width
        window = np.where(inside, np.i0(self._beta * np.sqrt(np.clip(1 - (distance / self.half_width) ** 2, 0, 1))),
                          0.0) / np.i0(self._beta)
        return offsets, self.cutoff * np.sinc(self.cutoff * distance) * window

    def reset(self) -> None:
        self._buffer = np.zeros(0)
        self._buffer_start = 0  # absolute input index of _buffer[0]
        self._received = 0
        self._produced = 0

    def push(self, samples: np.ndarray) -> np.ndarray:
        samples = np.asarray(samples, np.float64)
        if self.from_rate == self.to_rate:
            self._produced += len(samples)
            return samples.astype(np.float32)
        if self._received == 0:  # signal before the start counts as silence
            pad = int(math.ceil(self.half_width)) + 1 + self.lead_in
            self._buffer = np.zeros(pad)
            self._buffer_start = -pad
        self._buffer = np.concatenate([self._buffer, samples])
        self._received += len(samples)
        # outputs whose window is complete
        last_ready = (self._received - 1 - self.half_width + self.lead_in) / self.step
        n_out = max(0, int(math.floor(last_ready)) + 1 - self._produced)
        if n_out == 0:
            return np.zeros(0, np.float32)
        whole, phase = np.divmod((self._produced + np.arange(n_out)) * self._stride, self._phases)
        if self._table is not None:
            offsets, kernel = self._table[0][phase], self._table[1][phase]
        else:
            offsets, kernel = self._kernels(phase)
        first = whole - self.lead_in + offsets - self._buffer_start
        local = np.clip(first[:, None] + np.arange(self._width)[None, :], 0, len(self._buffer) - 1)
        out = np.einsum("ij,ij->i", self._buffer[local], kernel)
        self._produced += n_out
        keep_from = int(np.floor(self._produced * self.step - self.lead_in - self.half_width)) - 1 - self._buffer_start
        if keep_from > 0:
            self._buffer = self._buffer[keep_from:]
            self._buffer_start += keep_from
        return out.astype(np.float32)


def resample_clip(audio: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """Resample a whole mono clip with libsoxr (high quality, no delay), float32 out: every whole-clip conversion
    (a file's or a voice's rate to the engine's or the speaker's) goes through here, as the streamed files go through
    `studio.engine.audio_file.RateConverter`. Live streams, whose latency counts, use `StreamResampler`.

    The output has ceil(n * to_rate / from_rate) samples, the last ones reaching past the clip's end into silence.
    """
    if from_rate <= 0 or to_rate <= 0:
        raise ValueError(f"resample_clip: sample rates must be positive, got {from_rate} -> {to_rate}")
    signal = np.asarray(audio, np.float64)
    if signal.ndim != 1:
        raise ValueError(f"resample_clip: expected mono samples of shape (n,), got shape {signal.shape}")
    if from_rate == to_rate:
        return signal.astype(np.float32)
    import soxr

    n_out = -(-len(signal) * int(to_rate) // int(from_rate))
    if n_out == 0:
        return np.zeros(0, np.float32)
    tail = np.zeros(-(-int(from_rate) // int(to_rate)) + 1)  # soxr rounds its length: silence for the last sample
    out = soxr.resample(np.concatenate([signal, tail]), int(from_rate), int(to_rate), quality="HQ")
    return out[:n_out].astype(np.float32)


# ---------------------------------------------------------------- decoding files

def _to_mono(audio: np.ndarray) -> np.ndarray:
    return audio.mean(axis=1).astype(np.float32) if audio.ndim == 2 else audio.astype(np.float32)


def load_audio(path: str | Path) -> tuple[np.ndarray, int]:
    """Decode any audio file to (frames, channels) float32 and its rate; AudioInputError says what is wrong."""
    path = Path(path)
    if not path.exists():
        raise AudioInputError(f"{path}: no such audio file")
    if not path.is_file():
        raise AudioInputError(f"{path}: not a file")
    if path.stat().st_size == 0:
        raise AudioInputError(f"{path}: the file is empty")
    audio, rate, reason = None, 0, ""
    try:
        import soundfile

        audio, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except Exception:  # libsndfile cannot read it: maybe PyAV can (mp3, m4a, ...)
        audio, rate, reason = _decode_with_av(path)
    if audio is None:
        if reason.startswith("PyAV is not installed"):
            raise AudioInputError(f"{path}: cannot decode it, {reason}")
        raise not_audio(path)
    if audio.shape[0] == 0:
        raise AudioInputError(f"{path}: contains no audio samples (truncated or empty)")
    if rate <= 0:
        raise AudioInputError(f"{path}: invalid sample rate {rate}")
    if not np.all(np.isfinite(audio)):
        raise AudioInputError(f"{path}: audio contains NaN or infinite samples")
    return np.ascontiguousarray(np.clip(audio, -1.0, 1.0)), int(rate)


def _decoded_whole(chunks) -> np.ndarray:
    """A short file's float32 (frames, channels) chunks in one array, filled in place (no list of copies)."""
    parts = list(chunks)
    out = np.empty((sum(len(part) for part in parts), parts[0].shape[1] if parts else 1), np.float32)
    at = 0
    for index, part in enumerate(parts):
        out[at:at + len(part)] = part
        at += len(part)
        parts[index] = None
    return out


def _decode_with_av(path: Path) -> tuple[np.ndarray | None, int, str]:
    try:
        import av
    except ImportError as error:
        return None, 0, f"PyAV is not installed: {error}"
    try:
        with av.open(str(path)) as container:
            if not container.streams.audio:
                return None, 0, "it has no audio stream"
            stream = container.streams.audio[0]
            channels = max(1, min(2, stream.channels or 1))
            rate = int(stream.rate or stream.sample_rate or 0)
            converter = av.AudioResampler(format="fltp", layout="stereo" if channels == 2 else "mono", rate=rate)
            chunks = []
            for frame in container.decode(stream):
                for converted in converter.resample(frame):
                    chunks.append(converted.to_ndarray())
            for converted in converter.resample(None):
                chunks.append(converted.to_ndarray())
    except Exception as error:  # PyAV raises many FFmpeg error types
        return None, 0, f"{type(error).__name__}: {error}"
    if not chunks:
        return np.zeros((0, 1), np.float32), rate, ""
    return np.concatenate(chunks, axis=1).T.astype(np.float32), rate, ""


# ---------------------------------------------------------------- sources with a known waveform (file, text)

class PlayedAudio(AudioSource):
    """A finite waveform released at playback speed; its media clock is the playback position at the DAC.

    Played on `speaker` (the engine's persistent SpeakerOutput, set before `start()`), or, used on its
    own, on a private output opened on `start()` and closed on `stop()`. With no output device, or when
    the device is lost mid-clip, it goes on silently at real-time pace and `status` says why.
    """

    def __init__(self, name: str, audio: np.ndarray, rate: int, play: bool, realtime: bool,
                 engine_audio: np.ndarray | None = None) -> None:
        super().__init__(name)
        audio = audio if audio.ndim == 2 else audio[:, None]
        self.play_audio = np.ascontiguousarray(audio[:, :2], np.float32)
        self.play_rate = int(rate)
        if engine_audio is None:
            engine_audio = resample_clip(_to_mono(audio), rate, ENGINE_RATE)
        self.audio = engine_audio
        self.play = play
        self.realtime = realtime
        self.silent_reason: str | None = None  # why it plays without sound although asked to play
        self._own_speaker: SpeakerOutput | None = None
        self._prepared: tuple[tuple[int, int], np.ndarray] | None = None  # (speaker format, clip in it)
        self._clip: SpeakerClip | None = None
        self._clip_speaker: SpeakerOutput | None = None  # the output `_clip` plays on
        self._reset_position()

    def _reset_position(self) -> None:
        self._read = 0  # ENGINE_RATE samples returned to the engine
        self.underflows_seen = 0  # speaker underruns during this play (each re-anchors the media clock)
        self._timer_start: float | None = None

    @property
    def status(self) -> str:
        if self.error or not self.silent_reason:
            return super().status
        return f"{self.name}: {self._state} without sound ({self.silent_reason})"

    @property
    def duration_s(self) -> float:
        return len(self.audio) / ENGINE_RATE

    @property
    def finished(self) -> bool:
        return self._read >= len(self.audio)

    def start(self) -> None:
        self.stop()
        self._reset_position()
        self.clock.reset()
        self.error = self.silent_reason = None
        self._state = "playing"
        if not self.realtime:
            return
        if self.play:
            try:
                self._clip = self._start_playing()
                return
            except AudioDeviceError as error:  # no output device: keep driving the avatar in silence
                self.silent_reason = f"cannot play audio: {error}"
        self._timer_start = time.monotonic()

    def _start_playing(self) -> SpeakerClip:
        from studio.engine.output import SpeakerOutput

        speaker = self.speaker
        if speaker is None:
            speaker = self._own_speaker = self._own_speaker or SpeakerOutput()
        speaker.open()
        speaker_format = (speaker.sample_rate, speaker.channels)
        if self._prepared is None or self._prepared[0] != speaker_format:
            self._prepared = speaker_format, self._speaker_copy(speaker)
        self._clip_speaker = speaker
        return speaker.play(self._prepared[1])

    def _speaker_copy(self, speaker: SpeakerOutput) -> np.ndarray:
        """The whole clip in the speaker's format (kept, so that playing it again costs nothing)."""
        return speaker.prepare(self.play_audio, self.play_rate)

    def stop(self) -> None:
        clip, self._clip = self._clip, None
        if clip is not None:
            self._clip_speaker.cut(clip)
        if self._own_speaker is not None:
            self._own_speaker.close()
        self._timer_start = None
        self._state = "stopped"

    def next_data_in_s(self) -> float | None:
        if self._clip is not None:  # the device callback is C and wakes nobody: look again within half a hop
            return HOP_SAMPLES / ENGINE_RATE / 2
        if self._timer_start is None or not self.realtime:
            return None
        due = self._timer_start + (self._read + HOP_SAMPLES) / ENGINE_RATE
        return max(0.0, due - time.monotonic())

    def _played_available(self, clip: SpeakerClip) -> int | None:
        """Engine samples handed to the speaker so far (None: the device was lost, go on silently)."""
        speaker = self._clip_speaker
        if clip.failed is not None or not speaker.check():
            self.silent_reason = f"audio output lost: {clip.failed or speaker.error}"
            self._clip = None
            self._timer_start = time.monotonic() - self._read / ENGINE_RATE
            return None
        if clip.underflows != self.underflows_seen:  # the device ran dry: the rest of the clip is heard later
            self.underflows_seen = clip.underflows
            self.clock.reset()
        heard = clip.heard
        if heard is not None:
            self.clock.observe(heard[0] / clip.rate, heard[1])
        if clip.finished:
            return len(self.audio)
        return min(len(self.audio), clip.handed * ENGINE_RATE // clip.rate)

    def _available(self) -> int:
        if not self.realtime:
            return len(self.audio)
        clip = self._clip
        if clip is not None:
            available = self._played_available(clip)
            if available is not None:
                return available
        if self._timer_start is None:
            return self._read
        elapsed = time.monotonic() - self._timer_start
        self.clock.observe(elapsed, time.monotonic())
        return min(self._length(), int(math.ceil(elapsed * ENGINE_RATE)))

    def _length(self) -> int:
        """Samples the source holds; one that streams from disk finds its end as it decodes."""
        return len(self.audio)

    _captured: tuple[float, np.ndarray, int] | None = None

    @property
    def capture_format(self) -> tuple[int, int] | None:
        """The clip's own rate and channels (a voice's 22.05 kHz)."""
        return (self.play_rate, self.play_audio.shape[1]) if len(self.play_audio) else None

    def captured_audio(self) -> tuple[float, np.ndarray, int] | None:
        return self._captured

    def read_available(self) -> tuple[int, np.ndarray]:
        end = self._available()
        start = self._read
        self._read = max(start, end)
        if self.finished:
            self._state = "finished"
        rate = self.play_rate  # the clip's own frames for the same stretch: engine sample j is media time j / ENGINE_RATE
        first, last = -(-start * rate // ENGINE_RATE), min(len(self.play_audio), -(-end * rate // ENGINE_RATE))
        self._captured = (first / rate, self.play_audio[first:last], rate) if last > first else None
        return start, self.audio[start:end].copy()


class FileSource(PlayedAudio):
    """An audio file (WAV/FLAC/OGG/MP3/... via PyAV), played while it drives the avatar.

    Up to STREAM_OVER_S long it is decoded whole and played by the speaker's C callback (the sturdiest
    path under load): two copies, each decoded straight into its final format (the engine's 16 kHz mono,
    and the speaker's rate and channels when playing starts), resampled by libsoxr as `lipsync` and the
    streamed path are. Longer files are streamed from disk: the engine's 16 kHz copy is decoded a chunk at
    a time as playback reaches it, and the speaker's copy by a background decoder a few seconds ahead
    (`StreamedClip`), so memory does not grow with the file's length. A bad file is refused when the
    source is made (probe). While it plays, a third decoder reads the file at its own rate and channels
    (stereo at most) in step with the engine, half a second at a time, for a take to keep (`captured_audio`).

    A whole 48 kHz stereo file held at its own rate, converted to mono, resampled in float64 and then
    prepared for the speaker peaked at 370 MB over the streamed path's for a 2-minute file; decoded
    straight into the two copies, a file at the STREAM_OVER_S limit costs about 15 MB more than streaming.
    """

    STREAM_OVER_S = 30.0

    def __init__(self, path: str | Path, play: bool = True, realtime: bool = True) -> None:
        from studio.engine.audio_file import AudioFileStream

        self.stream = AudioFileStream(path)
        duration = self.stream.duration_s
        self.streamed = duration is None or duration > self.STREAM_OVER_S
        if not self.streamed:
            engine_audio = _decoded_whole(self.stream.chunks(rate=ENGINE_RATE, channels=1))[:, 0]
            super().__init__(f"file {Path(path).name}", np.zeros((0, 1), np.float32), ENGINE_RATE, play, realtime,
                             engine_audio=engine_audio)
            self.path = Path(path)
            return
        AudioSource.__init__(self, f"file {Path(path).name}")
        self.path = Path(path)
        self.play = play
        self.realtime = realtime
        self.silent_reason = None
        self._own_speaker = None
        self._prepared = None
        self._clip = None
        self._clip_speaker = None
        self._reset_position()

    def _reset_position(self) -> None:
        super()._reset_position()
        self._engine_chunks = None
        self._pending = np.zeros(0, np.float32)  # decoded engine samples not yet handed out
        self._decoded = 0
        self._exhausted = False
        self._own_chunks = None  # the file at its own rate and channels, decoded in step for `captured_audio`
        self._own_pending = np.zeros((0, self.capture_format[1]), np.float32)
        self._own_first = 0  # the file's frame index of _own_pending[0]

    @property
    def capture_format(self) -> tuple[int, int]:
        return self.stream.sample_rate, min(self.stream.channels, 2)

    def _capture(self, start: int, end: int) -> None:
        """The file's own frames for engine samples [start, end), decoded as far as they reach."""
        rate = self.stream.sample_rate
        first, last = -(-start * rate // ENGINE_RATE), -(-end * rate // ENGINE_RATE)
        while self._own_chunks is not None and self._own_first + len(self._own_pending) < last:
            chunk = next(self._own_chunks, None)
            if chunk is None:
                self._own_chunks = None
            else:
                self._own_pending = np.concatenate([self._own_pending, chunk])
        skip = max(0, first - self._own_first)
        frames = self._own_pending[skip:last - self._own_first]
        self._own_pending = self._own_pending[skip + len(frames):]
        self._own_first += skip + len(frames)
        self._captured = (first / rate, frames, rate) if len(frames) else None

    @property
    def duration_s(self) -> float | None:
        return self.stream.duration_s if self.streamed else super().duration_s

    @property
    def status(self) -> str:
        """Also says when the file ends early (known once it is decoded to its end: at once for a short file)."""
        status = super().status
        return f"{status}; {self.stream.cut_short}" if self.stream.cut_short and not self.error else status

    @property
    def finished(self) -> bool:
        return self._exhausted and self._read >= self._decoded if self.streamed else super().finished

    def start(self) -> None:
        super().start()
        self._own_chunks = self.stream.chunks(channels=self.capture_format[1])
        if self.streamed:
            self._engine_chunks = (chunk[:, 0] for chunk in self.stream.chunks(rate=ENGINE_RATE, channels=1))

    def _speaker_copy(self, speaker: SpeakerOutput) -> np.ndarray:
        channels = speaker.channels if speaker.channels in (1, 2) else 1  # mono broadcasts to any layout
        return _decoded_whole(self.stream.chunks(rate=speaker.sample_rate, channels=channels))

    def _start_playing(self):
        from studio.engine.output import SpeakerOutput, StreamedClip

        if not self.streamed:
            return super()._start_playing()
        speaker = self.speaker
        if speaker is None:
            speaker = self._own_speaker = self._own_speaker or SpeakerOutput()
        speaker.open()
        channels = speaker.channels if speaker.channels in (1, 2) else 1  # mono broadcasts to any layout
        clip = StreamedClip(self.stream.chunks(rate=speaker.sample_rate, channels=channels), speaker.sample_rate,
                            channels, self.data_event)
        self._clip_speaker = speaker
        return speaker.play_clip(clip)

    def stop(self) -> None:
        clip = self._clip
        super().stop()
        if clip is not None and hasattr(clip, "close"):
            clip.close()
        for chunks in (self._engine_chunks, self._own_chunks):
            if chunks is not None:
                chunks.close()  # closes the file and frees its resampler now, not at interpreter exit
        self._engine_chunks = self._own_chunks = None

    def _played_available(self, clip) -> int | None:
        if not self.streamed:
            return super()._played_available(clip)
        speaker = self._clip_speaker
        if clip.failed is not None or not speaker.check():
            self.silent_reason = f"audio output lost: {clip.failed or speaker.error}"
            self._clip = None
            clip.close()  # its decoder would otherwise wait for a device that is gone, holding the file open
            self._timer_start = time.monotonic() - self._read / ENGINE_RATE
            return None
        if clip.underflows != self.underflows_seen:
            self.underflows_seen = clip.underflows
            self.clock.reset()
        if clip.heard is not None:
            self.clock.observe(clip.heard[0] / clip.rate, clip.heard[1])
        if clip.done:
            return 1 << 62
        return clip.handed * ENGINE_RATE // clip.rate

    def _available(self) -> int:
        if self.streamed and not self.realtime:
            return self._read + ENGINE_RATE * 10  # ten seconds per read: bounded, as fast as asked
        return super()._available()

    def _length(self) -> int:
        return 1 << 62 if self.streamed else super()._length()

    def read_available(self) -> tuple[int, np.ndarray]:
        if not self.streamed:
            start, out = super().read_available()
            self._capture(start, start + len(out))
            return start, out
        start = self._read
        end = min(self._available(), start + ENGINE_RATE * 10)  # at most ten seconds decoded per read
        while self._engine_chunks is not None and not self._exhausted and start + len(self._pending) < end:
            chunk = next(self._engine_chunks, None)
            if chunk is None:
                self._exhausted = True
            else:
                self._pending = np.concatenate([self._pending, chunk])
                self._decoded += len(chunk)
        count = max(0, min(end - start, len(self._pending)))
        out, self._pending = self._pending[:count], self._pending[count:]
        self._read = start + count
        if self.finished:
            self._state = "finished"
        self._capture(start, self._read)
        return start, out.copy()


class TextSource(PlayedAudio):
    """Text spoken by espeak-ng; the face follows its exact phoneme timing instead of the audio model.

    espeak's leading silence is trimmed (phoneme times shift with it), so sound and mouth start
    at once; the face comes from the phonemes, so the engine-rate copy of the audio (used for
    prosody only) is resampled once, whole.
    """

    def __init__(self, text: str, voice: str = "en-us", rate_wpm: int = 175, pitch: int = 50,
                 play: bool = True, realtime: bool = True) -> None:
        from studio.speech.espeak import EspeakSynth

        self.clip = trim_leading_silence(EspeakSynth(voice, rate_wpm, pitch).synthesize(text))
        clip = self.clip
        super().__init__(f"text {text[:24]!r}", clip.audio, clip.sample_rate, play, realtime,
                         engine_audio=resample_clip(clip.audio, clip.sample_rate, ENGINE_RATE))
        self.phonemes = clip.phonemes


SILENCE_LEVEL = 10 ** (-60 / 20)  # -60 dBFS


def trim_leading_silence(clip, keep_s: float = 0.0):
    """The SpeechClip without the silence before its first sound (all but `keep_s`), phonemes shifted to match."""
    import dataclasses

    loud = np.flatnonzero(np.abs(clip.audio) > SILENCE_LEVEL)
    first_sound = int(loud[0]) if loud.size else 0
    cut = max(0, first_sound - int(keep_s * clip.sample_rate))
    if cut == 0:
        return clip
    shift = cut / clip.sample_rate
    phonemes = tuple(dataclasses.replace(p, start_s=max(0.0, p.start_s - shift), end_s=p.end_s - shift)
                     for p in clip.phonemes if p.end_s - shift > 0.0)
    return dataclasses.replace(clip, audio=clip.audio[cut:], phonemes=phonemes)


# ---------------------------------------------------------------- microphone

def _sounddevice():
    """The sounddevice module, imported after alsa-lib's messages are silenced (PortAudio lists devices on import)."""
    alsa.install()
    import sounddevice

    return sounddevice


def input_devices() -> list[tuple[int, str]]:
    """(index, name) of every device that can record."""
    sounddevice = _sounddevice()

    return [(i, d["name"]) for i, d in enumerate(sounddevice.query_devices()) if d["max_input_channels"] > 0]


def resolve_input_device(device: int | str | None) -> int:
    """Index of an input device chosen by index or case-insensitive name substring (None: the default)."""
    sounddevice = _sounddevice()

    devices = input_devices()
    listing = ", ".join(f"{i}: {name}" for i, name in devices) or "none"
    if not devices:
        raise AudioDeviceError("no audio input device found")
    if device is None or device == "":
        default = sounddevice.default.device[0]
        if default is None or default < 0 or default not in {i for i, _ in devices}:
            return devices[0][0]
        return int(default)
    if isinstance(device, (int, np.integer)) or (isinstance(device, str) and device.strip().isdigit()):
        index = int(device)
        if index in {i for i, _ in devices}:
            return index
        raise AudioDeviceError(f"input device index {index} does not exist or cannot record; available: {listing}")
    matches = [i for i, name in devices if str(device).lower() in name.lower()]
    exact = [i for i, name in devices if str(device).lower() == name.lower()]
    if exact:
        return exact[0]
    if not matches:
        raise AudioDeviceError(f"no input device matches {device!r}; available: {listing}")
    return matches[0]


MAX_INPUT_CHANNELS = 2  # a take keeps stereo at most (as a file's audio); more device channels are not opened
PULSE_DEVICES = ("pulse", "default")  # ALSA devices that may be PulseAudio's (or PipeWire's) plugin


def pulse_source_format() -> tuple[int, int] | None:
    """(rate, channels) of the PulseAudio source that the ALSA `pulse` device records from (`PULSE_SOURCE`, else
    the server's default), asked of `pactl`; None when no server or no pactl answers.

    Through the plugin PortAudio reports 44.1 kHz and 32 channels whatever the source is, and captures at any
    rate by resampling in PulseAudio; the source's own format is what a take should keep.
    """
    import os
    import re
    import subprocess

    def pactl(*args: str) -> str:
        return subprocess.run(["pactl", *args], capture_output=True, text=True, timeout=2.0, check=True,
                              env=dict(os.environ, LC_ALL="C")).stdout

    try:
        name = os.environ.get("PULSE_SOURCE") or next(
            (line.split(":", 1)[1].strip() for line in pactl("info").splitlines() if line.startswith("Default Source:")),
            "")
        for line in pactl("list", "short", "sources").splitlines():
            fields = line.split("\t")
            found = re.search(r"(\d+)ch (\d+)Hz", line)
            if len(fields) > 1 and fields[1] == name and found:
                return int(found.group(2)), int(found.group(1))
    except (OSError, subprocess.SubprocessError):  # no pactl, no server, or it did not answer in time
        return None
    return None


def negotiate_input_format(device: int, rate: int | None = None, channels: int | None = None) -> tuple[int, int]:
    """(rate, channels) to capture `device` at: its own format, so a take keeps all of it (the engine analyses a
    16 kHz mono copy). Its PulseAudio source's format through the `pulse` plugin, else PortAudio's default rate,
    with as many channels as it has up to MAX_INPUT_CHANNELS; when the device refuses that, 48 kHz, 44.1 kHz
    or 16 kHz and mono are tried. A `rate` or `channels` asked for is checked, and AudioDeviceError says why a
    device refuses it."""
    sounddevice = _sounddevice()

    info = sounddevice.query_devices(device)
    name, most = info["name"], int(info["max_input_channels"])
    default_rate = int(info["default_samplerate"] or 0)
    offered = f"it records up to {most} channel(s), by default at {default_rate} Hz"
    if rate is not None and not (isinstance(rate, (int, np.integer)) and 8000 <= rate <= 384000):
        raise AudioDeviceError(f"input sample rate {rate!r} for {name!r} is not allowed; use an integer 8000..384000 Hz")
    if channels is not None and channels not in range(1, MAX_INPUT_CHANNELS + 1):
        raise AudioDeviceError(f"input channels {channels!r} for {name!r} is not allowed; use 1 or 2")
    if channels is not None and channels > most:
        raise AudioDeviceError(f"input device {name!r} cannot record {channels} channels; {offered}")
    own = pulse_source_format() if name in PULSE_DEVICES else None
    own_rate, own_channels = own if own is not None else (default_rate, most)
    rates = [rate] if rate is not None else [r for r in dict.fromkeys((own_rate, 48000, 44100, ENGINE_RATE)) if r]
    layouts = ([channels] if channels is not None else
               list(dict.fromkeys((max(1, min(own_channels, most, MAX_INPUT_CHANNELS)), 1))))
    refusals = []
    for candidate_rate in rates:
        for candidate_channels in layouts:
            try:
                sounddevice.check_input_settings(device=device, samplerate=candidate_rate, channels=candidate_channels,
                                                 dtype="float32")
                return int(candidate_rate), int(candidate_channels)
            except Exception as error:  # noqa: BLE001 - PortAudio refuses with its own error types: try the next
                refusals.append(f"{candidate_rate} Hz x {candidate_channels}: {error}")
    raise AudioDeviceError(f"input device {name!r} refuses every format tried ({'; '.join(refusals)}); {offered}")


class MicrophoneSource(AudioSource):
    """A live input device at its own rate and channels (a take keeps them); its sample count is the media clock.

    The engine reads a 16 kHz mono mix of it, resampled on the engine thread. Captured in 5 ms blocks
    (`CAPTURE_BLOCK_S`) at PortAudio's low-latency setting, so a hop's audio reaches the engine at most one
    short block after the device delivers it. Audio the ring had to drop (the engine fell more than
    `ring_seconds` behind) still counts on the media clock: the next samples are stamped where they really
    are, and `dropped_s` says how much was lost.
    """

    def __init__(self, device: int | str | None = None, ring_seconds: float = 5.0, rate: int | None = None,
                 channels: int | None = None) -> None:
        sounddevice = _sounddevice()

        self.device_index = resolve_input_device(device)
        self.device_name = sounddevice.query_devices(self.device_index)["name"]
        super().__init__(f"microphone {self.device_name}")
        self.device_rate, self.channels = negotiate_input_format(self.device_index, rate, channels)
        self._ring = AudioRing(int(ring_seconds * self.device_rate), self.channels)
        self._resampler = StreamResampler(self.device_rate, ENGINE_RATE, lead=True)
        self._captured: tuple[float, np.ndarray, int] | None = None
        self._stream = None
        self._started_at = 0.0
        self._position = 0  # media position (ENGINE_RATE samples) of the next sample handed out
        self._raw_read = 0  # device samples consumed from the ring (dropped ones included)
        self.overflows = 0
        self._peak = 0.0  # loudest sample (0..1) read since `take_peak()`: the input level meter

    def take_peak(self) -> float:
        """The loudest sample the engine read since the last call (0..1), for a level meter; resets it."""
        peak, self._peak = self._peak, 0.0
        return peak

    @property
    def input_latency_s(self) -> float | None:
        """From the sound at the device to its block in the ring: PortAudio's input latency plus one capture
        block (None while the device is not open)."""
        stream = self._stream
        latency = getattr(stream, "latency", None) if stream is not None else None
        return float(latency) + CAPTURE_BLOCK_S if isinstance(latency, float) else None

    @property
    def dropped_s(self) -> float:
        """Seconds of captured audio the ring dropped because the engine fell behind."""
        return self._ring.dropped_samples / self.device_rate

    def start(self) -> None:
        sounddevice = _sounddevice()

        self.stop()
        self._ring.reset()
        self._resampler.reset()
        self.clock.reset()
        self._position = 0
        self._raw_read = 0
        self.error = None
        try:
            self._stream = sounddevice.InputStream(
                device=self.device_index, samplerate=self.device_rate, channels=self.channels, dtype="float32",
                callback=self._input_callback, latency="low", blocksize=int(self.device_rate * CAPTURE_BLOCK_S))
            alsa.enable_realtime(self._stream)
            self._stream.start()
        except Exception as error:
            self._stream = None
            self.error = f"cannot open the device ({error}); call restart() to try again"
            self._state = "error"
            return
        self._started_at = time.monotonic()
        self._state = "listening"

    def _input_callback(self, indata, frames, time_info, status) -> None:
        self._ring.write(indata if self.channels > 1 else indata[:, 0])
        if status.input_overflow:
            self.overflows += 1
        self._notify()

    def stop(self) -> None:
        close_stream(self._stream)
        self._stream = None
        if self._state != "error":
            self._state = "stopped"

    def fail(self, message: str) -> None:
        """The device is lost: say so, stop the stream, keep the engine going."""
        self.stop()
        self.error = f"{message}; call restart() to try again"
        self._state = "error"

    def _check_device(self) -> None:
        stream = self._stream
        if stream is None:
            return
        last = self._ring.last_write_monotonic or self._started_at
        # a PulseAudio monitor source can take well over a second to deliver its first block
        timeout = NO_CALLBACK_TIMEOUT_S if self._ring.last_write_monotonic else FIRST_AUDIO_TIMEOUT_S
        if not stream.active:
            self.fail("the input device stopped")
        elif time.monotonic() - last > timeout:
            self.fail(f"no audio from the input device for {timeout:.1f} s (unplugged?)")

    @property
    def capture_format(self) -> tuple[int, int]:
        return self.device_rate, self.channels

    def captured_audio(self) -> tuple[float, np.ndarray, int] | None:
        return self._captured

    def read_available(self) -> tuple[int, np.ndarray]:
        self._check_device()
        written, at = self._ring.last_write_position, self._ring.last_write_monotonic
        raw_start, raw = self._ring.read_available()
        # device frame i is media time (i + lead_in) / device_rate, as the engine copy made from it
        media_s = (raw_start + self._resampler.lead_in) / self.device_rate
        self._captured = (media_s, raw, self.device_rate) if len(raw) else None
        if written:  # the resampler's lead: media time runs lead_in device samples ahead of the device's count
            self.clock.observe((written + self._resampler.lead_in) / self.device_rate, at)
        if raw_start > self._raw_read:  # the ring dropped audio: resume at the true media position
            self._resampler.reset()  # (within half an engine sample: 31 us)
            self._position = round(raw_start * ENGINE_RATE / self.device_rate)
        self._raw_read = raw_start + len(raw)
        if raw.size:
            self._peak = max(self._peak, float(np.abs(raw).max()))
        mono = raw.mean(axis=1) if raw.ndim == 2 else raw
        samples = self._resampler.push(mono) if raw.size else np.zeros(0, np.float32)
        start = self._position
        self._position += len(samples)
        return start, samples
