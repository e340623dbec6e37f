"""A/V sync for live input: the microphone's voice played back delayed, so it lands with the frames that show it.

The avatar on screen shows an instant of speech some time after it was spoken: capture, features,
the model's lookahead, motion, render and present. A viewer who watches the window (or its capture)
and hears the voice live sees the lips late. `VoiceMonitor` plays the captured voice on the speaker
output delayed by that latency, plus a user offset, like OBS's per-source sync offset.

While it plays, presentation works as a jitter buffer: the window shows the frame for a fixed delay
behind the audio heard now (at least the p95 of how far the newest frame trails it, measured at every
presentation), so a frame the engine finished late is still shown on time, and the voice is delayed
by that plus the measured render/present cost. When the speaker's own buffer is longer than that (the
voice cannot reach the DAC sooner), the frames wait for the voice instead. Both sides then follow one
fixed offset.

Timing: the engine thread `feed()`s captured audio with its media position and publishes the
source clock's mapping (media time <-> monotonic arrival time). The speaker callback asks, for the
DAC time of its block, which media instant arrived `delay_s` earlier, and copies that audio from a
small ring (no locks). The device's DAC stamps jitter by ~10 ms from block to block, so playback
stays contiguous and is moved only when the median of the recent blocks' errors exceeds `SLACK_S`
(or at once when one block is `JUMP_S` off: the delay changed, the device skipped).
"""

from __future__ import annotations

import threading
import time
from collections import deque

import numpy as np

from studio.engine.clock import MediaClock
from studio.engine.output import SpeakerClip
from studio.engine.sources import ENGINE_RATE, StreamResampler

RING_S = 2.0  # audio kept for the delayed read: more than any sensible delay
SLACK_S = 0.002  # playback is moved when the median error over recent blocks exceeds this
JUMP_S = 0.05  # ... and at once when one block's wanted position is this far off
MAX_DELAY_S = 1.0
LATENCY_WINDOW = 120  # presented frames the render cost is the median of
LAG_WINDOW = 300  # presentations the video delay is the p95 of (about 5 s at 60 Hz)
LAG_MARGIN_S = 0.002
AUDIO_MARGIN_S = 0.015  # captured audio reaches the ring up to a capture block plus an engine pass late


class MonitorClip(SpeakerClip):
    """A never-ending clip whose samples come from the monitor's ring, read at the delayed position."""

    def __init__(self, monitor: VoiceMonitor, rate: int, channels: int) -> None:
        super().__init__(np.zeros((0, channels), np.float32), rate, None)
        self.monitor = monitor

    @property
    def frames(self) -> int:
        return 1 << 62

    def fill(self, outdata, offset: int, frames: int, dac: float) -> int:
        """Write this block from the ring (silence where nothing was captured yet); called by the callback."""
        count = frames - offset
        self.monitor._read_into(outdata[offset:frames], dac + offset / self.rate)
        self.handed += count
        return frames


class VoiceMonitor:
    """The delayed monitor of one live source on one SpeakerOutput."""

    def __init__(self, offset_ms: float = 0.0) -> None:
        self.offset_ms = float(offset_ms)
        self.video_delay_s = 0.0  # frames are presented this far behind the audio heard now
        self.render_s = 0.0  # median render/present cost
        self.output_latency_s = 0.0  # the speaker stream's buffer: DAC time minus now, seen by the callback
        self._output_latencies: deque[float] = deque(maxlen=101)
        self._lags: deque[float] = deque(maxlen=LAG_WINDOW)
        self._renders: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self._rate = 0
        self._channels = 1
        self._ring = np.zeros(0, np.float32)
        self._written = 0  # absolute speaker-rate index one past the newest sample in the ring
        self._resampler: StreamResampler | None = None  # engine rate to the speaker's (~70 µs a 10 ms hop at 44.1/48 kHz)
        self._mapping: tuple[float, float, float] | None = None  # (media s, monotonic s, monotonic s per media s)
        self._next: int | None = None  # where the callback continues reading
        self._errors: deque[float] = deque(maxlen=50)  # wanted minus continued position, recent blocks
        self._feed_position: int | None = None  # engine-rate media index expected next from feed()
        self.blocks: deque[tuple[int, float]] = deque(maxlen=2000)  # (ring index, DAC time) per output block
        self.tap: deque[tuple[int, float, np.ndarray]] | None = None  # when set: every block sent, for checks
        self.clip: MonitorClip | None = None
        self._lock = threading.Lock()  # feed/reset against each other (never taken by the callback)

    @property
    def measured_latency_s(self) -> float:
        """From the audio's arrival to the frame showing it on screen (video delay plus render/present), or to
        the voice reaching the DAC through the output's own buffer, whichever is longer: both sides wait for it."""
        return min(MAX_DELAY_S, max(self.video_delay_s + self.render_s, self.output_latency_s + AUDIO_MARGIN_S))

    @property
    def video_shift_s(self) -> float:
        """How far behind the audio heard now the viewport presents: the common delay less its render cost."""
        return max(0.0, self.measured_latency_s - self.render_s)

    @property
    def delay_s(self) -> float:
        """What the voice is delayed by: the measured latency plus the user's offset."""
        return min(MAX_DELAY_S, max(0.0, self.measured_latency_s + self.offset_ms / 1000.0))

    @property
    def sample_rate(self) -> int:
        return self._rate

    def attach(self, rate: int, channels: int) -> MonitorClip:
        """A fresh clip for a speaker running at `rate` with `channels`; forgets earlier audio."""
        with self._lock:
            self._rate, self._channels = int(rate), int(channels)
            self._ring = np.zeros(int(RING_S * rate), np.float32)
            self._written = 0
            self._resampler = StreamResampler(ENGINE_RATE, self._rate)  # ~1 ms of filter delay, output on time
            self._mapping = None
            self._next = None
            self._feed_position = None
            self.blocks.clear()
            self.clip = MonitorClip(self, self._rate, self._channels)
            return self.clip

    def note_lag(self, lag_s: float) -> None:
        """At a presentation: how far the newest frame trails the audio heard now."""
        if 0.0 <= lag_s < MAX_DELAY_S:
            self._lags.append(float(lag_s))
            self.video_delay_s = float(np.percentile(self._lags, 95)) + LAG_MARGIN_S

    def note_render(self, render_s: float) -> None:
        """One presented frame: from picking it to its being on screen."""
        if 0.0 <= render_s < MAX_DELAY_S:
            self._renders.append(float(render_s))
            self.render_s = float(np.median(self._renders))

    def feed(self, media_index: int, samples: np.ndarray, clock: MediaClock) -> None:
        """Engine thread: captured engine-rate samples starting at media sample `media_index` of the source."""
        with self._lock:
            if self._resampler is None or samples.size == 0:
                return
            if self._feed_position != media_index:  # first audio, or the source dropped some: restart the ring
                self._resampler.reset()
                self._written = int(round(media_index * self._rate / ENGINE_RATE))
                self._next = None
            self._feed_position = media_index + len(samples)
            out = self._resampler.push(samples)
            size = len(self._ring)
            for start in range(0, len(out), size):
                piece = out[start:start + size]
                index = (self._written + np.arange(len(piece))) % size
                self._ring[index] = piece
                self._written += len(piece)
            if clock.ready:
                media0 = media_index / ENGINE_RATE
                mono0 = clock.media_to_monotonic(media0)
                slope = clock.media_to_monotonic(media0 + 1.0) - mono0
                self._mapping = (media0, mono0, slope)

    def _read_into(self, block: np.ndarray, dac: float) -> None:
        """Callback: fill `block` (frames, channels) with the audio that arrived `delay_s` before `dac`."""
        mapping, rate = self._mapping, self._rate
        block[:] = 0.0
        self._output_latencies.append(max(0.0, dac - time.monotonic()))
        if len(self._output_latencies) % 10 == 1:  # a median every 10 blocks: the buffer's depth, not one stamp
            self.output_latency_s = float(np.median(self._output_latencies))
        if mapping is None or rate == 0:
            return
        media0, mono0, slope = mapping
        wanted = int(round((media0 + (dac - self.delay_s - mono0) / slope) * rate))
        if self._next is None or abs(wanted - self._next) > JUMP_S * rate:
            start = wanted  # first block, or the delay or the device moved a lot: go there at once
            self._errors.clear()
        else:  # the device's DAC stamps jitter by ~10 ms: steer by their median, never by one stamp
            self._errors.append(wanted - self._next)
            error = float(np.median(self._errors)) if len(self._errors) >= 5 else 0.0
            start = self._next + (int(round(error)) if abs(error) > SLACK_S * rate else 0)
            if start != self._next:
                self._errors.clear()
        count = len(block)
        self._next = start + count
        self.blocks.append((start, dac))
        # ring index k holds media time k / rate (StreamResampler's output convention)
        oldest = self._written - len(self._ring)
        first, last = max(start, oldest), min(start + count, self._written)
        if last > first:
            index = np.arange(first, last) % len(self._ring)
            block[first - start:last - start] = self._ring[index][:, None]
        tap = self.tap
        if tap is not None:
            tap.append((start, dac, block[:, 0].copy()))
