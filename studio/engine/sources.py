"""Audio sources for the engine: microphone, file, text-to-speech.

Every source hands the engine float32 mono audio at ENGINE_RATE, stamped with its sample
position on the media clock, and feeds its MediaClock with (media time, monotonic time)
observations. Audio callbacks only copy (into an AudioRing) and note the time; everything
else happens on the engine thread in `read_available()`.

A source never raises from `read_available()` because of a device: it records `error`, says
so in `status`, and returns no audio; `restart()` tries again.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import numpy as np

from studio.engine.clock import MediaClock
from studio.engine.features import resample
from studio.engine.ring import AudioRing

ENGINE_RATE = 16000
NO_CALLBACK_TIMEOUT_S = 1.0  # a running device that stays silent this long counts as lost


class AudioInputError(ValueError):
    """An audio file that cannot be used: missing, truncated, not audio, or empty."""


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
        self._state = "stopped"

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


# ---------------------------------------------------------------- streaming resampler

class StreamResampler:
    """Windowed-sinc resampling of a stream, block by block; output sample j is media time j / to_rate."""

    def __init__(self, from_rate: int, to_rate: int, half_taps: int = 16) -> None:
        if from_rate <= 0 or to_rate <= 0:
            raise ValueError(f"StreamResampler: rates must be positive, got {from_rate} -> {to_rate}")
        self.from_rate, self.to_rate = int(from_rate), int(to_rate)
        self.step = self.from_rate / self.to_rate  # input samples per output sample
        self.cutoff = min(1.0, self.to_rate / self.from_rate)
        self.half_width = half_taps / self.cutoff  # in input samples
        self._beta = 8.0
        self.reset()

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
            pad = int(math.ceil(self.half_width)) + 1
            self._buffer = np.zeros(pad)
            self._buffer_start = -pad
        self._buffer = np.concatenate([self._buffer, samples])
        self._received += len(samples)
        last_ready = (self._received - 1 - self.half_width) / self.step  # outputs whose window is complete
        n_out = max(0, int(math.floor(last_ready)) + 1 - self._produced)
        if n_out == 0:
            return np.zeros(0, np.float32)
        centres = (self._produced + np.arange(n_out)) * self.step
        first = np.floor(centres - self.half_width).astype(np.int64) + 1
        width = int(math.ceil(2 * self.half_width)) + 1
        index = first[:, None] + np.arange(width)[None, :]
        distance = centres[:, None] - index
        inside = np.abs(distance) < self.half_width
        window = np.where(inside, np.i0(self._beta * np.sqrt(np.clip(1 - (distance / self.half_width) ** 2, 0, 1))),
                          0.0) / np.i0(self._beta)
        kernel = self.cutoff * np.sinc(self.cutoff * distance) * window
        local = np.clip(index - self._buffer_start, 0, len(self._buffer) - 1)
        out = np.sum(self._buffer[local] * kernel, axis=1)
        self._produced += n_out
        keep_from = int(np.floor(self._produced * self.step - self.half_width)) - 1 - self._buffer_start
        if keep_from > 0:
            self._buffer = self._buffer[keep_from:]
            self._buffer_start += keep_from
        return out.astype(np.float32)


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
    except Exception as error:  # libsndfile cannot read it: maybe PyAV can (mp3, m4a, ...)
        reason = str(error)
        audio, rate, av_reason = _decode_with_av(path)
        reason = av_reason if audio is None else ""
    if audio is None:
        raise AudioInputError(f"{path}: not a readable audio file ({reason})")
    if audio.shape[0] == 0:
        raise AudioInputError(f"{path}: contains no audio samples (truncated or empty)")
    if rate <= 0:
        raise AudioInputError(f"{path}: invalid sample rate {rate}")
    if not np.all(np.isfinite(audio)):
        raise AudioInputError(f"{path}: audio contains NaN or infinite samples")
    return np.ascontiguousarray(np.clip(audio, -1.0, 1.0)), int(rate)


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

class _PlayedAudio(AudioSource):
    """A finite waveform released at playback speed; its media clock is the playback position."""

    def __init__(self, name: str, audio: np.ndarray, rate: int, play: bool, realtime: bool) -> None:
        super().__init__(name)
        audio = audio if audio.ndim == 2 else audio[:, None]
        self.play_audio = np.ascontiguousarray(audio[:, :2], np.float32)
        self.play_rate = int(rate)
        self.audio = resample(_to_mono(audio), rate, ENGINE_RATE) if rate != ENGINE_RATE else _to_mono(audio)
        self.play = play
        self.realtime = realtime
        self._stream = None
        self._lock = threading.Lock()
        self._reset_position()

    def _reset_position(self) -> None:
        self._played = 0  # play_rate frames handed to the device
        self._played_at = 0.0  # monotonic time those frames reach the speaker
        self._read = 0  # ENGINE_RATE samples returned to the engine
        self._timer_start: float | None = None

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
        self.error = None
        self._state = "playing"
        if not self.realtime:
            return
        if self.play:
            try:
                self._open_output()
                return
            except Exception as error:  # no output device: keep driving the avatar in silence
                self.error = f"cannot play audio ({error}); animating without sound"
                self._stream = None
        self._timer_start = time.monotonic()

    def _open_output(self) -> None:
        import sounddevice

        self._stream = sounddevice.OutputStream(
            samplerate=self.play_rate, channels=self.play_audio.shape[1], dtype="float32",
            callback=self._output_callback, latency="low")
        self._stream.start()

    def _output_callback(self, outdata, frames, time_info, status) -> None:
        position = self._played
        chunk = self.play_audio[position:position + frames]
        outdata[: len(chunk)] = chunk
        outdata[len(chunk):] = 0.0
        now = time.monotonic()
        latency = time_info.outputBufferDacTime - time_info.currentTime if time_info.currentTime else 0.0
        self._played_at = now + latency if 0.0 <= latency < 1.0 else now
        self._played = position + len(chunk)

    def stop(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                stream.abort()
                stream.close()
            except Exception:  # a vanished device may refuse to close; the stream is gone either way
                pass
        self._timer_start = None
        self._state = "stopped"

    def _available(self) -> int:
        if not self.realtime:
            return len(self.audio)
        if self._stream is not None:
            played, at = self._played, self._played_at
            if played:
                self.clock.observe(played / self.play_rate, at)
            if played >= len(self.play_audio):
                return len(self.audio)
            return min(len(self.audio), int(played * ENGINE_RATE // self.play_rate))
        if self._timer_start is None:
            return self._read
        elapsed = time.monotonic() - self._timer_start
        self.clock.observe(elapsed, time.monotonic())
        return min(len(self.audio), int(math.ceil(elapsed * ENGINE_RATE)))

    def read_available(self) -> tuple[int, np.ndarray]:
        end = self._available()
        start = self._read
        self._read = max(start, end)
        if self.finished:
            self._state = "finished"
        return start, self.audio[start:end].copy()


class FileSource(_PlayedAudio):
    """An audio file (WAV/FLAC/OGG via soundfile, MP3 and others via PyAV), played while it drives the avatar."""

    def __init__(self, path: str | Path, play: bool = True, realtime: bool = True) -> None:
        audio, rate = load_audio(path)
        super().__init__(f"file {Path(path).name}", audio, rate, play, realtime)
        self.path = Path(path)


class TextSource(_PlayedAudio):
    """Text spoken by espeak-ng; the face follows its exact phoneme timing instead of the audio model."""

    def __init__(self, text: str, voice: str = "en-us", rate_wpm: int = 175, pitch: int = 50,
                 play: bool = True, realtime: bool = True) -> None:
        from studio.speech.espeak import EspeakSynth

        self.clip = EspeakSynth(voice, rate_wpm, pitch).synthesize(text)
        super().__init__(f"text {text[:24]!r}", self.clip.audio, self.clip.sample_rate, play, realtime)
        self.phonemes = self.clip.phonemes


# ---------------------------------------------------------------- microphone

def input_devices() -> list[tuple[int, str]]:
    """(index, name) of every device that can record."""
    import sounddevice

    return [(i, d["name"]) for i, d in enumerate(sounddevice.query_devices()) if d["max_input_channels"] > 0]


def resolve_input_device(device: int | str | None) -> int:
    """Index of an input device chosen by index or case-insensitive name substring (None: the default)."""
    import sounddevice

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


def negotiate_input_rate(device: int) -> int:
    """The first rate the device accepts: 16 kHz (no resampling), then 48k, 44.1k, its own default."""
    import sounddevice

    default = int(sounddevice.query_devices(device)["default_samplerate"] or 0)
    for rate in dict.fromkeys((ENGINE_RATE, 48000, 44100, default)):
        if not rate:
            continue
        try:
            sounddevice.check_input_settings(device=device, samplerate=rate, channels=1, dtype="float32")
            return rate
        except Exception:  # PortAudio rejects the rate: try the next
            continue
    raise AudioDeviceError(f"input device {device} accepts none of 16000, 48000, 44100, {default} Hz")


class MicrophoneSource(AudioSource):
    """A live input device; its sample count is the media clock."""

    def __init__(self, device: int | str | None = None, ring_seconds: float = 5.0) -> None:
        import sounddevice

        self.device_index = resolve_input_device(device)
        self.device_name = sounddevice.query_devices(self.device_index)["name"]
        super().__init__(f"microphone {self.device_name}")
        self.device_rate = negotiate_input_rate(self.device_index)
        self._ring = AudioRing(int(ring_seconds * self.device_rate))
        self._resampler = StreamResampler(self.device_rate, ENGINE_RATE)
        self._stream = None
        self._started_at = 0.0
        self._position = 0  # ENGINE_RATE samples handed out
        self.overflows = 0

    def start(self) -> None:
        import sounddevice

        self.stop()
        self._ring.reset()
        self._resampler.reset()
        self.clock.reset()
        self._position = 0
        self.error = None
        try:
            self._stream = sounddevice.InputStream(
                device=self.device_index, samplerate=self.device_rate, channels=1, dtype="float32",
                callback=self._input_callback, latency="low")
            self._stream.start()
        except Exception as error:
            self._stream = None
            self.error = f"cannot open the device ({error}); call restart() to try again"
            self._state = "error"
            return
        self._started_at = time.monotonic()
        self._state = "listening"

    def _input_callback(self, indata, frames, time_info, status) -> None:
        self._ring.write(indata[:, 0])
        if status.input_overflow:
            self.overflows += 1

    def stop(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                stream.abort()
                stream.close()
            except Exception:  # the device may already be gone
                pass
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
        if not stream.active:
            self.fail("the input device stopped")
        elif time.monotonic() - last > NO_CALLBACK_TIMEOUT_S:
            self.fail(f"no audio from the input device for {NO_CALLBACK_TIMEOUT_S:.1f} s (unplugged?)")

    def read_available(self) -> tuple[int, np.ndarray]:
        self._check_device()
        written, at = self._ring.last_write_position, self._ring.last_write_monotonic
        _, raw = self._ring.read_available()
        if written:
            self.clock.observe(written / self.device_rate, at)
        samples = self._resampler.push(raw) if raw.size else np.zeros(0, np.float32)
        start = self._position
        self._position += len(samples)
        return start, samples
