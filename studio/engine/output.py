"""One persistent speaker output, OBS-style: the stream stays open and plays silence between clips.

Opening a PortAudio stream per utterance costs tens of milliseconds (the first one in a process
well over 70 ms: the PulseAudio connection), all of it before the first lip frame. Here the engine
opens one `SpeakerOutput` when it starts and closes it when it stops; a source queues its clip on
it and the next device block (10 ms) starts it.

The device callback only copies from the queued clip into the device buffer and notes, per block,
which clip frame reaches the DAC at which monotonic time (`SpeakerClip.heard`), so a source's media
clock follows the sound actually heard. Switching is lock-free: the control side replaces one
attribute (`_queued`) and the callback, seeing it differ from the clip it plays, fades the old clip
out over `FADE_S` (no click) and starts the new one right after the fade, in the same block.

The device buffer holds `OUTPUT_LATENCY_S` (about 0.1 s) of sound, not PortAudio's "low" ~20 ms:
on a loaded two-core machine the callback thread can wait tens of milliseconds for a CPU (and for
the GIL), and a 20 ms buffer ran dry several times a second. The callback's `outputBufferDacTime`
includes that latency, so the media clock (and so the lips) still follows the sound as heard; only
the delay from a play command to the sound grows. Every underrun the device reports is counted
(`underruns`), and alsa-lib's own xrun messages are counted instead of printed (`studio.engine.alsa`).

A device that fails or vanishes is noticed by `check()` (the stream stopped, or no callback for
`NO_CALLBACK_TIMEOUT_S`): the stream is closed, `error` says why, the playing clip is marked failed,
and the next `open()`/`play()` tries the device again.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from studio.engine import alsa
from studio.engine.sources import NO_CALLBACK_TIMEOUT_S, AudioDeviceError, _close_stream, resample_clip

OUTPUT_BLOCK_S = 0.01  # device block: a queued clip waits at most this long (5 ms blocks underran constantly on PulseAudio)
OUTPUT_LATENCY_S = 0.1  # device buffer: rides out a busy CPU (0.02 s underran under load; see the module docstring)
FADE_S = 0.005  # a cut clip fades out over this long (shorter than a block: the fade fits in one)
FALLBACK_RATE = 48000


class SpeakerClip:
    """One queued clip and how far the device has got with it (written by the callback, read by anyone)."""

    def __init__(self, samples: np.ndarray, rate: int, notify: threading.Event | None) -> None:
        self.samples = samples  # (frames, 1 or the speaker's channels) float32 at the speaker's rate
        self.rate = rate
        self.notify = notify  # set after every block that handed this clip's audio to the device
        self.handed = 0  # frames handed to the device so far
        self.heard: tuple[int, float] | None = None  # (clip frame, monotonic time it reaches the DAC), latest block
        self.started_at: float | None = None  # monotonic time frame 0 reaches the DAC
        self.done = False  # every frame handed, or cut
        self.cut = False  # stopped before its end (faded out)
        self.failed: str | None = None  # the device was lost while this clip played
        self.underflows = 0  # device underruns while it played: each may delay the rest of the clip

    @property
    def frames(self) -> int:
        return len(self.samples)

    @property
    def finished(self) -> bool:
        """Every frame was handed to the device (not cut, not failed)."""
        return self.done and not self.cut and self.failed is None


class SpeakerOutput:
    """The default output device, kept open; `play()` queues a clip, `cut()` fades it out, `close()` ends it."""

    def __init__(self, device: int | str | None = None, block_s: float = OUTPUT_BLOCK_S, fade_s: float = FADE_S) -> None:
        if not 0.0 < fade_s <= block_s:
            raise ValueError(f"SpeakerOutput: fade_s={fade_s} must be positive and at most block_s={block_s}")
        self.device = device
        self.block_s = float(block_s)
        self.fade_s = float(fade_s)
        self.sample_rate: int | None = None
        self.channels = 0
        self.error: str | None = None
        self.muted = False  # operator mute: the device plays silence while clips still advance
        self._stream = None
        self._lock = threading.Lock()  # open/close/fail (never taken by the callback)
        self._queued: SpeakerClip | None = None  # what the control side wants playing
        self._current: SpeakerClip | None = None  # what the callback plays (only the callback writes it)
        self._last_callback = 0.0
        self.realtime = False  # the callback thread asked for real-time priority (granted where permitted)
        self.underruns = 0  # device blocks that found the buffer empty (output underflow), since construction
        self._ramp = np.zeros((0, 1), np.float32)

    # ------------------------------------------------------------ control side

    @property
    def is_open(self) -> bool:
        return self._stream is not None

    @property
    def status(self) -> str:
        if self.error:
            return f"speaker: {self.error}"
        return f"speaker: open at {self.sample_rate} Hz" if self.is_open else "speaker: closed"

    def open(self) -> None:
        """Open the device if it is not open (again after an error); AudioDeviceError says why it cannot be."""
        with self._lock:
            if self._stream is not None:
                return
            alsa.install()
            try:
                import sounddevice

                info = sounddevice.query_devices(self.device, kind="output")
                rate = int(info["default_samplerate"] or FALLBACK_RATE)
                channels = max(1, min(2, int(info["max_output_channels"])))
                self._configure(rate, channels)
                self._queued = self._current = None
                self._last_callback = time.monotonic()
                stream = sounddevice.OutputStream(
                    device=self.device, samplerate=rate, channels=channels, dtype="float32", callback=self._callback,
                    latency=OUTPUT_LATENCY_S, blocksize=max(1, round(rate * self.block_s)))
                self.realtime = alsa.enable_realtime(stream)
                stream.start()
            except Exception as error:  # no device, PortAudio missing or refusing: say so, stay closed
                self.error = f"cannot open the speaker output ({error})"
                raise AudioDeviceError(self.error) from error
            self._stream = stream
            self.error = None

    def _configure(self, rate: int, channels: int) -> None:
        self.sample_rate, self.channels = int(rate), int(channels)
        fade = max(1, round(rate * self.fade_s))
        self._ramp = np.linspace(1.0, 0.0, fade + 1, dtype=np.float32)[1:, None]  # ends at silence

    def prepare(self, audio: np.ndarray, rate: int) -> np.ndarray:
        """A clip (frames[, channels]) at `rate` in this speaker's format: its rate, 1 or its channel count."""
        if self.sample_rate is None:
            raise AudioDeviceError("the speaker output was never opened; call open() first")
        audio = np.asarray(audio, np.float32)
        audio = audio[:, None] if audio.ndim == 1 else audio
        if audio.ndim != 2 or audio.shape[1] < 1:
            raise ValueError(f"SpeakerOutput.prepare: expected (frames,) or (frames, channels) audio, got {audio.shape}")
        if audio.shape[1] > self.channels:
            audio = audio.mean(axis=1, keepdims=True)
        if audio.shape[1] > 1:
            audio = audio[:, :self.channels]
        if int(rate) != self.sample_rate:
            audio = np.stack([resample_clip(audio[:, c], int(rate), self.sample_rate) for c in range(audio.shape[1])], 1)
        return np.ascontiguousarray(np.clip(audio, -1.0, 1.0), np.float32)

    def play(self, samples: np.ndarray, notify: threading.Event | None = None) -> SpeakerClip:
        """Queue a `prepare`d clip (opening the device if needed); whatever played before is faded out."""
        self.open()
        if samples.ndim != 2 or samples.shape[1] not in (1, self.channels):
            raise ValueError(f"SpeakerOutput.play: samples of shape {samples.shape} are not in this speaker's format "
                             f"(frames, 1 or {self.channels}); use prepare()")
        clip = SpeakerClip(samples, self.sample_rate, notify)
        self._queued = clip
        return clip

    def play_clip(self, clip: SpeakerClip) -> SpeakerClip:
        """Queue a clip built for this speaker (e.g. a live monitor clip that fills its own blocks)."""
        self.open()
        if clip.rate != self.sample_rate:
            raise ValueError(f"SpeakerOutput.play_clip: clip at {clip.rate} Hz, the speaker runs at {self.sample_rate}")
        self._queued = clip
        return clip

    def cut(self, clip: SpeakerClip | None = None) -> None:
        """Fade out the playing clip (only if it is `clip`, when given); silence follows."""
        queued = self._queued
        if queued is not None and (clip is None or queued is clip):
            self._queued = None
        if clip is not None and self._stream is None:
            clip.done = clip.cut = True

    def check(self) -> bool:
        """True while the device works; a stopped stream or silent callback closes it and sets `error`."""
        stream = self._stream
        if stream is None:
            return self.error is None
        if not stream.active:
            self._fail("the speaker output stopped")
        elif time.monotonic() - self._last_callback > NO_CALLBACK_TIMEOUT_S:
            self._fail(f"no callback from the speaker output for {NO_CALLBACK_TIMEOUT_S:.1f} s (unplugged?)")
        return self.error is None

    def _fail(self, message: str) -> None:
        with self._lock:
            stream, self._stream = self._stream, None
            _close_stream(stream)
            self.error = f"{message}; the next play reopens it"
            for clip in (self._queued, self._current):
                if clip is not None and not clip.done:
                    clip.failed = message
                    clip.done = True
            self._queued = self._current = None

    def close(self) -> None:
        """Fade out what plays, then close the stream (idempotent); `open()` may follow."""
        with self._lock:
            stream = self._stream
            if stream is None:
                return
            playing = self._current
            self._queued = None
            if playing is not None and not playing.done and stream.active:
                deadline = time.monotonic() + 0.2
                while not playing.done and time.monotonic() < deadline:
                    time.sleep(self.block_s / 2)
                time.sleep(min(float(stream.latency or 0.0), 0.1))  # let the fade reach the DAC
            _close_stream(stream)
            self._stream = None
            self._queued = self._current = None

    # ------------------------------------------------------------ device thread

    def _callback(self, outdata, frames, time_info, status) -> None:
        now = time.monotonic()
        self._last_callback = now
        latency = time_info.outputBufferDacTime - time_info.currentTime if time_info.currentTime else 0.0
        dac = now + latency if 0.0 <= latency < 1.0 else now
        offset = 0
        current, queued = self._current, self._queued
        if current is not queued:
            if current is not None and not current.done:
                offset = self._fade_out(current, outdata, frames, dac)
            self._current = current = queued
        underflow = status.output_underflow
        if underflow:
            self.underruns += 1
        if current is not None and not current.done:
            if underflow:
                current.underflows += 1
            offset = self._copy(current, outdata, offset, frames, dac)
        outdata[offset:] = 0.0
        if self.muted:
            outdata[:] = 0.0

    def _copy(self, clip: SpeakerClip, outdata, offset: int, frames: int, dac: float) -> int:
        fill = getattr(clip, "fill", None)
        if fill is not None:  # a live clip (the voice monitor) writes its own block
            return fill(outdata, offset, frames, dac)
        position = clip.handed
        count = min(frames - offset, clip.frames - position)
        if count > 0:
            outdata[offset:offset + count] = clip.samples[position:position + count]
            at = dac + offset / clip.rate
            if position == 0:
                clip.started_at = at
            clip.heard = (position, at)
            clip.handed = position + count
        if clip.handed >= clip.frames:
            clip.done = True
        if clip.notify is not None:
            clip.notify.set()
        return offset + max(count, 0)

    def _fade_out(self, clip: SpeakerClip, outdata, frames: int, dac: float) -> int:
        fill = getattr(clip, "fill", None)
        if fill is not None:
            count = min(len(self._ramp), frames)
            fill(outdata, 0, count, dac)
            outdata[:count] *= self._ramp[:count]
            clip.cut = clip.done = True
            return count
        position = clip.handed
        count = min(len(self._ramp), frames, clip.frames - position)
        if count > 0:
            np.multiply(clip.samples[position:position + count], self._ramp[:count], out=outdata[:count])
            clip.heard = (position, dac)
            clip.handed = position + count
        clip.cut = clip.done = True
        if clip.notify is not None:
            clip.notify.set()
        return max(count, 0)
