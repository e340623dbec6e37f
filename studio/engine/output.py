"""One persistent speaker output, OBS-style: the stream stays open and plays silence between clips.

Opening a PortAudio stream per utterance costs tens of milliseconds (the first one in a process
well over 70 ms: the PulseAudio connection), all of it before the first lip frame. Here the engine
opens one `SpeakerOutput` when it starts and closes it when it stops; a source queues its clip on it.

The device callback is rtmixer's, written in C: it never enters the Python interpreter, so it never
waits for the GIL. With a Python callback, any thread holding the GIL (the GUI thread in Qt's buffer
swap while the software rasteriser finished a head close-up, a long numpy call, a thread the OS
preempted while holding it) starved the device and the sound broke up. A clip is one rtmixer
"play buffer" action over the clip's own samples; the callback mixes it into the device blocks and
counts the frames it has handed over (`done_frames`), and its start time at the DAC (`actual_time`).

The device buffer adapts (`OutputBufferPolicy`): it starts at `MIN_BUFFER_S` (20 ms: text to the first
sound at the DAC within ~35 ms on a quiet machine; `BUSY_START_S` when the CPUs are contended as it opens),
doubles when the device reports an underrun (a busy machine's scheduling delays emptied it; a fixed 0.1 s
made every utterance wait 0.1 s more), and halves again after a quiet stretch. PortAudio fixes a stream's
buffer when it opens, so a new size means a new stream: while nothing plays it is simply reopened (5-20 ms);
while a clip plays a larger buffer takes over mid-clip (`_hand_over`): the new stream starts the clip's
remaining samples at the DAC time the old one has reached them, the two cross-fading, so the sound goes on.
A smaller buffer waits until nothing plays. The clip's DAC start time includes the buffer, so the media
clock (and the lips) follows the sound as heard; an underrun delays the rest of a clip, so its DAC times are
then measured again (a silent probe started beside it: `_probed_frame`). Underruns the device reports are
counted (`underruns`); alsa-lib's own messages about them are silenced (`studio.engine.alsa`).

Cutting a clip (or muting) edits the clip's samples ahead of the callback's read position: a short
fade, then silence, `FADE_S` plus `_GUARD_S` ahead, then the action is cancelled just after the time
the fade ends at the DAC; the next clip starts at that end. Unmuting writes the clip's own samples back, fading in.

A live clip (the voice monitor, `studio.engine.monitor`) fills each block itself, reading its ring at
the block's DAC time; that needs a Python callback, so `play_clip()` plays it on a second stream of
the same device (the sound server mixes the two). Only live input passes through Python.

A device that fails or vanishes is noticed by `check()` (the stream stopped, or the callback made no
progress for `SPEAKER_NO_CALLBACK_TIMEOUT_S`): the stream is closed, `error` says why, the playing clip is
marked failed, and the next `open()`/`play()` tries the device again.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np

from studio.engine import alsa
from studio.engine.sources import AudioDeviceError, close_stream, resample_clip

OUTPUT_BLOCK_S = 0.01  # device block (5 ms blocks underran constantly on PulseAudio)
MIN_BUFFER_S = 0.02  # device buffer on a quiet machine (PortAudio on PulseAudio gives no less than 20 ms anyway)
MAX_BUFFER_S = 0.2  # ... and at most, however often the device runs dry
QUIET_S = 30.0  # a buffer halves after this long without an underrun ...
MAX_QUIET_S = 600.0  # ... waiting longer (up to this) each time the smaller size underran soon after
BUSY_START_S = 0.1  # the first size on a machine whose CPUs are contended when the speaker opens (the fixed size
# that played the window's tone test without gaps on a loaded CI machine before the buffer adapted)
BUSY_CPU_PRESSURE_PCT = 10.0  # ... that is, tasks waited for a CPU this much of the last 10 s (Linux PSI)
SETTLE_S = 0.25  # underruns this soon after a resize are the old stream's (it plays until the handover), not the new size's
_HANDOVER_MARGIN_S = 0.02  # a mid-clip handover is timed this far (plus 2 blocks) beyond the new stream's next block
_CROSSFADE_S = 0.016  # a handover cross-fades the two streams over this long (their DAC estimates differ by ~5 ms)
_STALE_MAPPING_S = 0.5  # a cut clip whose DAC times an underrun moved (not yet measured) is cancelled this much later
_PROBE_S = 2.0  # the silent probe that reads where a playing clip is at the DAC (longer than any wait for it)
FADE_S = 0.005  # a cut clip fades out over this long
_GUARD_S = 0.04  # edits to a playing clip start this far ahead of what the callback has read (4 blocks)
# a cut clip's action is cancelled this long after its fade ends: the stream's clock and its sample count
# disagree by up to a millisecond under load (measured), so a cancel timed to the fade's end could still
# chop its last samples (a click); the clip holds silence there, and the next clip starts at the fade's end
_CANCEL_AFTER_FADE_S = 0.01
_STATS_INTERVAL_S = 0.1  # how often the device's counters are fetched
# A speaker whose callback answers nothing this long is lost. Longer than the microphone's 1 s: on a starved
# machine (2 cores, a build running) the sound server's thread stalled over 1 s while the device was fine, and
# calling it lost dropped the rest of the clip; a short stall is an underrun, which the buffer policy handles.
SPEAKER_NO_CALLBACK_TIMEOUT_S = 3.0
FALLBACK_RATE = 48000


class OutputBufferPolicy:
    """How much sound the speaker keeps queued at the device: as little as this machine allows, now.

    An underrun (the device found the buffer empty: heard as a dropout) doubles the size at once, up to
    `max_s`. After `quiet_s` without one since the last change it halves, down to `min_s`: slowly, so a
    lucky minute does not undo a busy hour's lesson. An underrun within `quiet_s` of a shrink means the
    smaller size was too small here: the next shrink waits twice as long (up to `max_quiet_s`), so the
    size does not flap. Underruns within `settle_s` of a change belong to the old size and are ignored.
    Without a `start_s` the first size follows the machine (`start_for`): `min_s` when it is quiet, and
    `busy_start_s` when its CPUs are contended, so that a busy machine's first sentence does not break up
    while the size is being learned. Pure arithmetic on the times it is given: no clock, no device.
    """

    def __init__(self, min_s: float = MIN_BUFFER_S, max_s: float = MAX_BUFFER_S, quiet_s: float = QUIET_S,
                 max_quiet_s: float = MAX_QUIET_S, settle_s: float = SETTLE_S, start_s: float | None = None,
                 busy_start_s: float = BUSY_START_S) -> None:
        """`start_s`: the first size, whatever the machine (default: `start_for` decides, `min_s` until then)."""
        if not 0.0 < min_s <= max_s:
            raise ValueError(f"OutputBufferPolicy: min_s={min_s} and max_s={max_s} must satisfy 0 < min_s <= max_s")
        if not 0.0 < quiet_s <= max_quiet_s:
            raise ValueError(f"OutputBufferPolicy: quiet_s={quiet_s} must be positive and at most max_quiet_s={max_quiet_s}")
        if settle_s < 0.0:
            raise ValueError(f"OutputBufferPolicy: settle_s={settle_s} must not be negative")
        if start_s is not None and not min_s <= start_s <= max_s:
            raise ValueError(f"OutputBufferPolicy: start_s={start_s} must lie within min_s={min_s} and max_s={max_s}")
        self.min_s, self.max_s = float(min_s), float(max_s)
        self.max_quiet_s = float(max_quiet_s)
        self.settle_s = float(settle_s)
        self.quiet_s = float(quiet_s)  # the quiet stretch the next shrink needs
        self.size_s = self.min_s if start_s is None else float(start_s)
        self.busy_start_s = min(self.max_s, max(self.min_s, float(busy_start_s)))
        self.first_s = self.size_s  # the size the first stream opened with
        self._start_chosen = start_s is not None
        self.grows = 0
        self.shrinks = 0
        self._since: float | None = None  # the last change or counted underrun
        self._changed_at: float | None = None
        self._shrunk_at: float | None = None

    def start_for(self, cpu_pressure_pct: float | None) -> float:
        """Once, before the first update: the first size for a machine whose CPUs were contended this much
        (percent of recent time some task waited for a CPU; None: unknown, taken as quiet)."""
        if not self._start_chosen and self._since is None:
            busy = cpu_pressure_pct is not None and cpu_pressure_pct >= BUSY_CPU_PRESSURE_PCT
            self.size_s = self.busy_start_s if busy else self.min_s
            self.first_s = self.size_s
        self._start_chosen = True
        return self.size_s

    def update(self, now: float, underruns: int = 0) -> float:
        """`underruns` new device underruns seen at time `now` (seconds, any clock); the size to use now."""
        if self._since is None:
            self._since = now
        if underruns > 0:
            if self._changed_at is not None and now - self._changed_at < self.settle_s:
                return self.size_s
            if self._shrunk_at is not None and now - self._shrunk_at < self.quiet_s:
                self.quiet_s = min(self.max_quiet_s, 2.0 * self.quiet_s)
            self._shrunk_at = None
            self._since = now
            if self.size_s < self.max_s:
                self.size_s = min(self.max_s, 2.0 * self.size_s)
                self.grows += 1
                self._changed_at = now
        elif self.size_s > self.min_s and now - self._since >= self.quiet_s:
            self.size_s = max(self.min_s, self.size_s / 2.0)
            self.shrinks += 1
            self._since = self._changed_at = self._shrunk_at = now
        return self.size_s


def cpu_pressure_pct() -> float | None:
    """How contended this machine's CPUs are now: the share of the last 10 s in which some task waited for one
    (Linux pressure stall information), else the 1-minute load average over the core count (capped at 100),
    None where neither exists."""
    try:
        with open("/proc/pressure/cpu", encoding="ascii") as pressure:
            for line in pressure:
                if line.startswith("some "):
                    return float(line.split("avg10=")[1].split()[0])
    except (OSError, IndexError, ValueError):
        pass
    try:
        return min(100.0, 100.0 * os.getloadavg()[0] / (os.cpu_count() or 1))
    except (AttributeError, OSError):
        return None


class SpeakerClip:
    """One queued clip and how far the device has got with it (read by anyone; the device callback updates rtmixer's action)."""

    def __init__(self, samples: np.ndarray, rate: int, clock_offset: float | None = 0.0) -> None:
        self.samples = samples  # (frames, the speaker's channels) float32 at its rate; the device reads it in place
        self.rate = rate
        self.heard: tuple[int, float] | None = None  # (clip frame, monotonic time it reaches the DAC): frame 0
        self.cut = False  # stopped before its end (faded out)
        self.failed: str | None = None  # the device was lost while this clip played
        self.underflows = 0  # device underruns while it played: each may delay the rest of the clip
        self._clock_offset = clock_offset or 0.0  # monotonic - the stream's clock, when it was queued
        self._stopped = False
        self._handed = 0
        self._started_at: float | None = None
        self._action = None  # rtmixer's play action
        self._action_frame = 0  # the clip frame `_action` starts at (not 0 after a mid-clip handover)
        self._origin: tuple[int, float] | None = None  # (clip frame, the current stream's time it reaches the DAC)
        self._retired = None  # (stream, action) of the stream a handover left, playing until the handover time
        self._anchor_probe = None  # measures where the clip is at the DAC after an underrun moved it
        self._heard_before: tuple[int, float] | None = None  # `heard` before that underrun
        self._original: np.ndarray | None = None  # the samples a mute silenced, for unmuting

    @property
    def frames(self) -> int:
        return len(self.samples)

    @property
    def handed(self) -> int:
        """Frames handed to the device so far."""
        action = self._action
        if action is not None and not self._stopped:
            self._handed = max(self._handed, min(self._action_frame + int(action.done_frames), self.frames))
        return self._handed

    @handed.setter
    def handed(self, frames: int) -> None:  # a live clip counts its own blocks
        self._handed = int(frames)

    @property
    def started_at(self) -> float | None:
        """Monotonic time frame 0 reaches the DAC (None until the device has started the clip)."""
        action = self._action
        if self._started_at is None and action is not None and float(action.actual_time) > 0.0:
            self._started_at = float(action.actual_time) + self._clock_offset
            self._origin = (0, float(action.actual_time))
        return self._started_at

    @property
    def done(self) -> bool:
        """Every frame handed, or cut, or failed."""
        return self._stopped or (self._action is not None and self.handed >= self.frames)

    @done.setter
    def done(self, value: bool) -> None:
        if value:
            self.stop()

    def stop(self) -> None:
        self._stopped = True

    @property
    def finished(self) -> bool:
        """Every frame was handed to the device (not cut, not failed)."""
        return self.done and not self.cut and self.failed is None


class SpeakerOutput:
    """The default output device, kept open; `play()` queues a clip, `cut()` fades it out, `close()` ends it."""

    def __init__(self, device: int | str | None = None, block_s: float = OUTPUT_BLOCK_S, fade_s: float = FADE_S,
                 policy: OutputBufferPolicy | None = None) -> None:
        if not 0.0 < fade_s <= block_s:
            raise ValueError(f"SpeakerOutput: fade_s={fade_s} must be positive and at most block_s={block_s}")
        self.device = device
        self.block_s = float(block_s)
        self.fade_s = float(fade_s)
        self.sample_rate: int | None = None
        self.channels = 0
        self.error: str | None = None
        self.realtime = False  # the callback thread asked for real-time priority (granted where permitted)
        self.policy = policy or OutputBufferPolicy()
        self.handovers = 0  # mid-clip switches to a larger buffer
        self._buffer_s = self.policy.size_s  # what the open stream (or the next one) was asked to buffer
        self._retiring: list[tuple] = []  # (stream a resize left, monotonic time to close it after, its stats fetch)
        self._handover_failed_at = -float("inf")
        self._muted = False
        self._stream = None  # the rtmixer.Mixer
        self._lock = threading.Lock()  # open/close/fail
        self._queue_lock = threading.RLock()  # rtmixer's action queue has one producer: every call to it holds this
        self._current: SpeakerClip | None = None
        self._underruns = 0
        self._stats_action = None  # the pending fetch of the callback's counters
        self._stats_sent_at = 0.0
        self._stats_due = 0.0
        self._clock_offset = 0.0  # monotonic - PortAudio stream time
        self._ramp = np.zeros((0, 1), np.float32)
        self._live_stream = None  # the second stream, with a Python callback, for a live clip
        self._live_buffer_s = 0.0
        self._live: SpeakerClip | None = None
        self._live_cut = False
        self._live_underruns = 0
        self._live_underruns_seen = 0

    # ------------------------------------------------------------ control side

    @property
    def is_open(self) -> bool:
        return self._stream is not None

    @property
    def status(self) -> str:
        if self.error:
            return f"speaker: {self.error}"
        return f"speaker: open at {self.sample_rate} Hz" if self.is_open else "speaker: closed"

    @property
    def underruns(self) -> int:
        """Device blocks that found the buffer empty (output underflow) since construction."""
        self._poll_counters()
        self._adapt(hand_over=False)
        return self._underruns + self._live_underruns

    @property
    def buffer_s(self) -> float:
        """The device buffer asked of the open stream (the policy's size; it may not have taken over yet)."""
        return self._buffer_s

    @property
    def buffer_ms(self) -> float:
        """The device buffer as the open stream reports it (PortAudio may round the size asked for), in ms."""
        stream = self._stream
        latency = getattr(stream, "latency", None) if stream is not None else None
        return 1000.0 * float(latency if isinstance(latency, float) and latency > 0 else self._buffer_s)

    @property
    def muted(self) -> bool:
        """Operator mute: the device plays silence while clips still advance."""
        return self._muted

    @muted.setter
    def muted(self, value: bool) -> None:
        value = bool(value)
        if value == self._muted:
            return
        self._muted = value
        clip = self._current
        if clip is not None and not clip.done and clip._action is not None:
            with self._queue_lock:
                if value:
                    self._silence_ahead(clip)
                else:
                    self._restore_ahead(clip)

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
                self._current = None
                stream = self._open_mixer(self.policy.start_for(cpu_pressure_pct()))
            except Exception as error:  # no device, PortAudio missing or refusing: say so, stay closed
                self.error = f"cannot open the speaker output ({error})"
                raise AudioDeviceError(self.error) from error
            self._use(stream, self.policy.size_s)
            self.error = None

    def _open_mixer(self, buffer_s: float):
        """A started rtmixer stream on the device in this speaker's format, buffering `buffer_s`."""
        import rtmixer

        stream = rtmixer.Mixer(device=self.device, samplerate=self.sample_rate, channels=self.channels,
                               latency=buffer_s, blocksize=max(1, round(self.sample_rate * self.block_s)))
        self.realtime = alsa.enable_realtime(stream)
        stream.start()
        alsa.raise_sound_server_threads()
        return stream

    def _use(self, stream, buffer_s: float) -> None:
        """Make `stream` the one clips play on (its counters fresh, its clock read)."""
        self._stream = stream
        self._buffer_s = float(buffer_s)
        self._stats_action = None
        self._stats_due = time.monotonic()
        self._sync_clocks()

    def _configure(self, rate: int, channels: int) -> None:
        self.sample_rate, self.channels = int(rate), int(channels)
        fade = max(1, round(rate * self.fade_s))
        self._ramp = np.linspace(1.0, 0.0, fade + 1, dtype=np.float32)[1:, None]  # ends at silence
        self._probe_buffer = np.zeros((round(_PROBE_S * rate), channels), np.float32)

    def _sync_clocks(self) -> None:
        self._clock_offset = _clock_offset(self._stream)

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

    def play(self, samples: np.ndarray) -> SpeakerClip:
        """Queue a `prepare`d clip (opening the device if needed); whatever played before is faded out."""
        self.open()
        if samples.ndim != 2 or samples.shape[1] not in (1, self.channels):
            raise ValueError(f"SpeakerOutput.play: samples of shape {samples.shape} are not in this speaker's format "
                             f"(frames, 1 or {self.channels}); use prepare()")
        # a private copy with every device channel: the callback reads it in place, and mute/cut edit it
        own = np.ascontiguousarray(np.broadcast_to(samples, (len(samples), self.channels)), np.float32).copy()
        self._sync_clocks()
        clip = SpeakerClip(own, self.sample_rate, self._clock_offset)
        with self._queue_lock:
            start = 0.0
            previous = self._current
            if previous is not None and not previous.done:
                start = self._end(previous)
            if self._muted:
                clip._original = clip.samples.copy()
                clip.samples[:] = 0.0
            self._current = clip
            if clip.frames:
                clip._action = self._stream.play_buffer(clip.samples, channels=list(range(1, self.channels + 1)),
                                                        start=start, allow_belated=True)
            else:
                clip.stop()
        return clip

    def play_clip(self, clip: SpeakerClip) -> SpeakerClip:
        """Play a live clip that fills its own blocks (`clip.fill(outdata, offset, frames, dac)`), on a second stream."""
        self.open()
        if clip.rate != self.sample_rate:
            raise ValueError(f"SpeakerOutput.play_clip: clip at {clip.rate} Hz, the speaker runs at {self.sample_rate}")
        with self._lock:
            if self._live_stream is not None and self._live_buffer_s != self._buffer_s and (
                    self._live is None or self._live.done):  # the live stream takes the new size between clips
                close_stream(self._live_stream)
                self._live_stream = None
            if self._live_stream is None:
                import sounddevice

                try:
                    stream = sounddevice.OutputStream(
                        device=self.device, samplerate=self.sample_rate, channels=self.channels, dtype="float32",
                        callback=self._live_callback, latency=self._buffer_s,
                        blocksize=max(1, round(self.sample_rate * self.block_s)))
                    alsa.enable_realtime(stream)
                    stream.start()
                except Exception as error:  # the device refuses a second stream: say so
                    raise AudioDeviceError(f"cannot open a second stream for the live monitor ({error})") from error
                self._live_stream = stream
                self._live_buffer_s = self._buffer_s
            self._live_cut = False
            self._live = clip
        return clip

    def _live_callback(self, outdata, frames, time_info, status) -> None:
        latency = time_info.outputBufferDacTime - time_info.currentTime if time_info.currentTime else 0.0
        dac = time.monotonic() + (latency if 0.0 <= latency < 1.0 else 0.0)
        clip = self._live
        if clip is None or clip.done:
            outdata[:] = 0.0
            return
        if status.output_underflow:
            clip.underflows += 1
            self._live_underruns += 1
        if self._live_cut:
            count = min(len(self._ramp), frames)
            clip.fill(outdata, 0, count, dac)
            outdata[:count] *= self._ramp[:count]
            outdata[count:] = 0.0
            clip.cut = clip.done = True
            return
        clip.fill(outdata, 0, frames, dac)
        if self._muted:
            outdata[:] = 0.0

    def cut(self, clip: SpeakerClip | None = None) -> None:
        """Fade out the playing clip (only if it is `clip`, when given); silence follows."""
        live = self._live
        if live is not None and (clip is None or clip is live):
            self._live_cut = True
            if self._live_stream is None:
                live.cut = live.done = True
            if clip is live:
                return
        with self._queue_lock:
            current = self._current
            if current is not None and (clip is None or current is clip) and not current.done:
                self._end(current)
        if clip is not None and self._stream is None:
            clip.cut = True
            clip.stop()

    def _end(self, clip: SpeakerClip) -> float:
        """Fade `clip` out ahead of the callback and cancel it there; the stream time its fade ends (0: at once)."""
        clip.cut = True
        clip.stop()
        action = clip._action
        if action is None or self._stream is None:
            return 0.0
        clip.started_at  # noqa: B018 - notes the clip's DAC origin if the callback has started it
        if clip._origin is None:  # the callback has not started it yet: nothing was heard
            self._stream.cancel(action)
            return 0.0
        position = self._fade_ahead(clip)
        origin_frame, origin_time = clip._origin
        end = origin_time + (position - origin_frame) / clip.rate
        # after an underrun not yet measured the fade reaches the DAC later than `end`: silence follows it anyway
        late = _STALE_MAPPING_S if clip._anchor_probe is not None else 0.0
        self._stream.cancel(action, time=end + _CANCEL_AFTER_FADE_S + late, allow_belated=True)
        if clip._anchor_probe is not None:
            self._stream.cancel(clip._anchor_probe)
            clip._anchor_probe = None
        return end

    def _fade_ahead(self, clip: SpeakerClip) -> int:
        """Fade the clip's samples out `_GUARD_S` ahead of the read position, silence after; the frame where silence starts."""
        position = min(clip.frames, clip.handed + round(_GUARD_S * clip.rate))
        count = min(len(self._ramp), clip.frames - position)
        clip.samples[position:position + count] *= self._ramp[:count]
        clip.samples[position + count:] = 0.0
        return position + count

    def _silence_ahead(self, clip: SpeakerClip) -> None:
        clip._original = clip.samples.copy()
        self._fade_ahead(clip)

    def _restore_ahead(self, clip: SpeakerClip) -> None:
        original, clip._original = clip._original, None
        if original is None:
            return
        position = min(clip.frames, clip.handed + round(_GUARD_S * clip.rate))
        count = min(len(self._ramp), clip.frames - position)
        clip.samples[position + count:] = original[position + count:]
        clip.samples[position:position + count] = original[position:position + count] * self._ramp[::-1][:count]

    def check(self) -> bool:
        """True while the device works; a stopped stream or a callback making no progress closes it and sets `error`.

        Also brings the playing clip's progress (`handed`, `heard`, `done`, `underflows`) up to date.
        """
        stream = self._stream
        if stream is None:
            return self.error is None
        if not stream.active:
            self._fail("the speaker output stopped")
            return False
        underruns_before = self._underruns
        if not self._poll_counters():
            self._fail(f"no callback from the speaker output for {SPEAKER_NO_CALLBACK_TIMEOUT_S:.0f} s (unplugged?)")
            return False
        clip = self._current
        if clip is not None and not clip.done:
            if self._underruns > underruns_before:
                clip.underflows += self._underruns - underruns_before
                self._reanchor(clip)
            self._follow(clip)
        elif clip is not None and clip._anchor_probe is not None:  # it ended before the probe measured it
            self._follow(clip)
        self._adapt(hand_over=True)
        return self.error is None

    def _follow(self, clip: SpeakerClip) -> None:
        # Only a start's DAC time is exact (PortAudio's outputBufferDacTime for the block it started in): the
        # clip's own, or after an underrun (which delays the rest of the clip) a silent probe's beside it.
        probe, stream = clip._anchor_probe, self._stream
        if probe is not None and stream is not None:
            with self._queue_lock:
                if float(probe.actual_time) > 0.0 or clip._action not in stream.actions:
                    clip._anchor_probe = None
                    anchor = self._probed_frame(clip, probe, wait=False)
                    if anchor is not None:
                        clip._origin = anchor
                        clip.heard = (anchor[0], anchor[1] + self._clock_offset)
                    else:  # not measurable (the clip ended first): the last DAC time known is better than none
                        clip.heard = clip._heard_before
        elif clip.heard is None and clip.underflows == 0 and clip.started_at is not None:
            clip.heard = (0, clip.started_at)

    def _reanchor(self, clip: SpeakerClip) -> None:
        """The device ran dry while `clip` played: its DAC times moved; forget them until a probe measures them."""
        clip._heard_before = clip.heard or clip._heard_before
        clip.heard = None
        with self._queue_lock:
            if clip._anchor_probe is None and clip._action is not None and self._stream is not None:
                clip._anchor_probe = self._start_probe(self._stream)

    def _start_probe(self, stream):
        """A silent action started at once beside whatever plays: its start is an exact DAC time."""
        return stream.play_buffer(self._probe_buffer, channels=list(range(1, self.channels + 1)), allow_belated=True)

    def _probed_frame(self, clip: SpeakerClip, probe, wait: bool) -> tuple[int, float] | None:
        """(clip frame, stream time it reached the DAC) from a probe on the clip's stream (cancelled here), or
        None while the probe has not started (`wait`: up to half a second) or when the clip's action has ended.

        Both actions advance one block per callback, so the clip's frame when the probe started is the
        difference of their counts, read until no block came in between."""
        stream, action = self._stream, clip._action
        deadline = time.monotonic() + (0.5 if wait else 0.0)
        while float(probe.actual_time) <= 0.0 and action in stream.actions and time.monotonic() < deadline:
            time.sleep(0.002)
        started = float(probe.actual_time) > 0.0
        if not started and action in stream.actions:
            if wait:
                stream.cancel(probe)
            return None
        while True:
            before = int(action.done_frames)
            probed = int(probe.done_frames)
            if int(action.done_frames) == before:
                break
        stream.cancel(probe)
        if not started or action not in stream.actions:
            return None
        return clip._action_frame + before - probed, float(probe.actual_time)

    def _poll_counters(self) -> bool:
        """Fetch the callback's counters (underflows) at most every `_STATS_INTERVAL_S`.

        False when the callback has left a fetch unanswered for `SPEAKER_NO_CALLBACK_TIMEOUT_S`: it is not running.
        """
        stream = self._stream
        if stream is None:
            return True
        now = time.monotonic()
        with self._queue_lock:
            self._close_retired(now)
            pending = self._stats_action
            if pending is not None:
                if pending in stream.actions:
                    return now - self._stats_sent_at <= SPEAKER_NO_CALLBACK_TIMEOUT_S
                new = int(pending.stats.output_underflows)
                self._underruns += new
                self.policy.update(now, new + self._take_live_underruns())
                self._stats_action = None
            if now >= self._stats_due:
                self._stats_action = stream.fetch_and_reset_stats()
                self._stats_sent_at = now
                self._stats_due = now + _STATS_INTERVAL_S
        return True

    def _take_live_underruns(self) -> int:
        seen, self._live_underruns_seen = self._live_underruns_seen, self._live_underruns
        return self._live_underruns - seen

    def _adapt(self, hand_over: bool) -> None:
        """Take the policy's buffer size: reopen while nothing plays; while a clip plays, hand it over to a
        larger buffer (`hand_over`: on the thread that follows the clip, never the GUI's) or wait."""
        if self._stream is None or self.policy.size_s == self._buffer_s:
            return
        with self._lock, self._queue_lock:
            size, old = self.policy.size_s, self._stream
            if old is None or size == self._buffer_s:
                return
            clip = self._current
            playing = clip is not None and not clip.done and clip._action is not None
            if playing and not (hand_over and size > self._buffer_s
                                and time.monotonic() - self._handover_failed_at >= SETTLE_S):
                return
            if not playing and any(action is not self._stats_action for action in old.actions):
                return  # a cut clip's fade (or a probe) still plays: reopen after it
            try:
                stream = self._open_mixer(size)
            except Exception:  # noqa: BLE001 - the device refuses a new stream now: keep the one that plays
                return
            close_old_after = 0.0
            if playing:
                close_old_after = self._hand_over(clip, old, self._clock_offset, stream, _clock_offset(stream))
                if close_old_after is None:  # it could not be timed: the clip goes on on the old stream for now
                    self._handover_failed_at = time.monotonic()  # (tried again after a while, not at every check)
                    close_stream(stream)
                    return
                self.handovers += 1
            self._retiring.append((old, close_old_after, self._stats_action))
            self._use(stream, size)
            self._close_retired(time.monotonic())

    def _hand_over(self, clip: SpeakerClip, old, old_offset: float, new, new_offset: float) -> float | None:
        """Continue `clip` on the `new` (larger-buffered) stream from where the `old` one is at the DAC then;
        the monotonic time after which the old stream may close, or None when it could not be timed.

        Where the clip is at the DAC comes from a silent probe started beside it on the old stream: both
        advance one block per callback, so the clip's frame when the probe started is their difference, and
        the probe's start is an exact DAC time (an underrun shifted the clip's own start time away). The new
        stream starts the rest at the first DAC time it can reach (its buffer ahead) plus a margin, and the old
        one stops there. Each stream's DAC times are its own estimate (through the sound server): two streams
        disagreed by up to ~5 ms, so a butt joint left a gap or repeated a few ms. The two cross-fade over
        `_CROSSFADE_S` around the joint instead: the old stream fades the clip's samples out there (the new
        one does not read them), the new one plays a faded-in copy of that stretch, then the rest in place.
        """
        channels = list(range(1, self.channels + 1))
        if clip._anchor_probe is not None:
            old.cancel(clip._anchor_probe)
            clip._anchor_probe = None
        anchor = self._probed_frame(clip, self._start_probe(old), wait=True)
        if anchor is None:
            return None
        action = clip._action
        probe_frame, probe_at = anchor[0], anchor[1] + old_offset  # monotonic
        reachable = self._first_reachable(new, new_offset)
        if reachable is None:
            return None
        at = reachable + 2 * self.block_s + _HANDOVER_MARGIN_S  # where the cross-fade begins
        frame = probe_frame + round((at - probe_at) * clip.rate)
        span = round(_CROSSFADE_S * clip.rate)
        if not clip._action_frame + int(action.done_frames) < frame < clip.frames - span - round(self.block_s * clip.rate):
            return None  # the old stream has handed it already, or the clip ends first
        ramp = np.linspace(0.0, 1.0, span + 2, dtype=np.float32)[1:-1, None]
        fading_in = np.ascontiguousarray(clip.samples[frame:frame + span] * ramp)
        clip.samples[frame:frame + span] *= ramp[::-1]  # only the old stream reads these samples
        start = at - new_offset
        new.play_buffer(fading_in, channels=channels, start=start, allow_belated=True)
        rest = new.play_buffer(clip.samples[frame + span:], channels=channels, start=start + span / clip.rate,
                               allow_belated=True)
        # the old stream stops where its fade ends (after it the samples are the new stream's, at full level)
        old.cancel(action, time=at - old_offset + span / clip.rate, allow_belated=True)
        clip.started_at  # noqa: B018 - keep the first start time: only the action changes
        clip._retired = (old, action)
        clip._action, clip._action_frame = rest, frame + span
        clip._origin = (frame + span, start + span / clip.rate)
        clip.heard = (frame, at)  # a fresh DAC observation for the source's media clock
        return at + span / clip.rate + 3 * _CANCEL_AFTER_FADE_S

    def _first_reachable(self, stream, offset: float) -> float | None:
        """The monotonic DAC time of the block `stream` renders next, measured by a one-frame silent probe: a
        stream's real lead over the DAC can exceed the latency PortAudio reports (the sound server's own
        buffer), and an action asked to start earlier than that starts late (a gap). None if it never ran."""
        probe = stream.play_buffer(self._probe_buffer[:1], channels=list(range(1, self.channels + 1)),
                                   allow_belated=True)
        deadline = time.monotonic() + 0.5
        while float(probe.actual_time) <= 0.0 and time.monotonic() < deadline:
            time.sleep(0.002)
        started = float(probe.actual_time)
        if started <= 0.0:
            stream.cancel(probe)
            return None
        return max(started + offset, time.monotonic())

    def _close_retired(self, now: float) -> None:
        """Close the streams a resize left once their time has passed (`inf`: all), counting their underruns."""
        with self._queue_lock:
            keep = []
            for stream, close_after, pending in self._retiring:
                if now < close_after:
                    keep.append((stream, close_after, pending))
                    continue
                try:
                    stream.abort()  # its last sound has reached the DAC: what remains queued is silence
                    if pending is not None and pending not in stream.actions:
                        self._underruns += int(pending.stats.output_underflows)
                    self._underruns += int(stream.stats.output_underflows)
                except Exception:  # noqa: BLE001 - a vanished device: nothing left to count
                    pass
                close_stream(stream)
                clip = self._current
                if clip is not None and clip._retired is not None and clip._retired[0] is stream:
                    clip._retired = None
            self._retiring = keep

    def _fail(self, message: str) -> None:
        with self._lock:
            stream, self._stream = self._stream, None
            close_stream(stream)
            self._close_retired(float("inf"))
            self.error = f"{message}; the next play reopens it"
            for clip in (self._current, self._live):
                if clip is not None and not clip.done:
                    clip.failed = message
                    clip.stop()
            self._current = self._live = None
            close_stream(self._live_stream)
            self._live_stream = None

    def close(self) -> None:
        """Fade out what plays, then close the stream (idempotent); `open()` may follow."""
        with self._lock:
            stream = self._stream
            if stream is None:
                return
            playing = self._current
            if playing is not None and not playing.done and stream.active:
                with self._queue_lock:
                    end = self._end(playing)
                if end:
                    time.sleep(min(max(0.0, end + _CANCEL_AFTER_FADE_S - stream.time), 0.3))  # let the fade reach the DAC
            close_stream(stream)
            self._stream = None
            self._current = None
            self._close_retired(float("inf"))
            if self._live is not None and not self._live.done:
                self._live.cut = self._live.done = True
            close_stream(self._live_stream)
            self._live_stream = self._live = None


def _clock_offset(stream) -> float:
    """monotonic - stream time, read back to back (the stream's clock is PortAudio's, not ours)."""
    before = time.monotonic()
    stream_now = stream.time
    return (before + time.monotonic()) / 2 - stream_now


class StreamedClip(SpeakerClip):
    """A clip decoded while it plays: a background thread keeps up to `ahead_s` of it ready in a ring, so a
    20-minute file costs a few seconds of memory. Played as a live clip (`play_clip`: a Python callback
    copies each block from the ring); if the decoder falls behind, the block is padded with silence and
    the gap counted as an underflow."""

    def __init__(self, chunks, rate: int, channels: int, notify: threading.Event | None, ahead_s: float = 3.0) -> None:
        super().__init__(np.zeros((0, channels), np.float32), rate)
        self.notify = notify
        self._ring = np.zeros((max(1, int(ahead_s * rate)), channels), np.float32)
        self._written = 0  # frames decoded into the ring so far
        self._ended = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._decode, args=(chunks,), name="clip-decoder", daemon=True)
        self._thread.start()

    @property
    def frames(self) -> int:
        return self._written if self._ended else 1 << 62

    @property
    def buffered_frames(self) -> int:
        """Decoded but not yet handed to the device (never more than the ring holds)."""
        return self._written - self.handed

    def _decode(self, chunks) -> None:
        size = len(self._ring)
        try:
            for chunk in chunks:
                while not self._stop.is_set() and self._written + len(chunk) - self.handed > size:
                    time.sleep(0.02)  # the ring is full: wait for the device to play some
                if self._stop.is_set():
                    return
                index = (self._written + np.arange(len(chunk))) % size
                self._ring[index] = chunk[:, : self._ring.shape[1]] if chunk.shape[1] >= self._ring.shape[1] else chunk
                self._written += len(chunk)
        except Exception as error:  # noqa: BLE001 - a file damaged part-way: what played so far stands
            self.failed = str(error)
        finally:
            self._ended = True
            if hasattr(chunks, "close"):
                chunks.close()  # a clip cut short closes its file and resampler here

    def fill(self, outdata, offset: int, frames: int, dac: float) -> int:
        position = self.handed
        count = min(frames - offset, self._written - position)
        if count > 0:
            index = (position + np.arange(count)) % len(self._ring)
            outdata[offset:offset + count] = self._ring[index]
            at = dac + offset / self.rate
            if position == 0:
                self._started_at = at
            self.heard = (position, at)
            self.handed = position + count
        elif not self._ended and self.handed > 0:
            self.underflows += 1
        outdata[offset + max(count, 0):frames] = 0.0
        if self._ended and self.handed >= self._written:
            self.done = True
        if self.notify is not None:
            self.notify.set()
        return offset + max(count, 0)

    def close(self) -> None:
        """Stop decoding (the clip was cut or the source stopped)."""
        self._stop.set()
        self._thread.join(timeout=1.0)
