"""Playing a take: the frame for now follows the take's audio as the speaker plays it.

While sound plays, the playback position is the audio clock (the clip frame at the DAC and when it
got there), so the face stays on the voice even when the device runs late; without sound (no audio
in the take, no output device) the monotonic clock paces it. Play, pause, seek and loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from studio.engine.sources import AudioDeviceError
from studio.frame import FrameState
from studio.recording.take import Take


class TakePlayer:
    """Plays one take (optionally with re-targeted frames); call `frame()` at display rate."""

    def __init__(self, take: Take, frames: list[FrameState] | None = None, speaker=None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.take = take
        self.frames = frames if frames is not None else take.frames
        self._times = np.array([f.media_time_s for f in self.frames]) - self.frames[0].media_time_s
        self.duration_s = take.duration_s
        self.loop = False
        self.state = "paused"
        self.silent_reason: str | None = None
        self._speaker = speaker
        self._prepared: np.ndarray | None = None
        self._clip = None
        self._clock = clock
        self._origin = 0.0  # take time where the current run started
        self._started = 0.0  # clock time when it started (monotonic pacing)

    # ----------------------------------------------------------------- control

    def play(self) -> None:
        if self.state == "playing":
            return
        if self._origin >= self.duration_s - 1e-6:
            self._origin = 0.0
        self.state = "playing"
        self._started = self._clock()
        self._clip = self._start_sound(self._origin)

    def pause(self) -> None:
        if self.state == "playing":
            self._origin = self.position()
            self._stop_sound()
        self.state = "paused"

    def toggle(self) -> None:
        self.pause() if self.state == "playing" else self.play()

    def seek(self, take_time_s: float) -> None:
        playing = self.state == "playing"
        self._stop_sound()
        self.state = "paused"
        self._origin = float(min(max(take_time_s, 0.0), self.duration_s))
        if playing:
            self.play()

    def close(self) -> None:
        self._stop_sound()
        self.state = "paused"
        if self._speaker is not None:
            self._speaker.close()

    # ----------------------------------------------------------------- reading

    def position(self) -> float:
        """Take time being shown now; at the end it loops or stops there."""
        if self.state != "playing":
            return self._origin
        clip = self._clip
        if clip is not None:
            self._speaker.check()  # brings the clip's DAC timing (`heard`) up to date
        if clip is not None and clip.heard is not None and clip.failed is None:
            frame, at = clip.heard  # `at` may lie ahead: the sound is still in the device's buffer
            now = max(self._origin, self._origin + frame / clip.rate + (self._clock() - at))
        elif clip is not None and clip.failed is None:
            now = self._origin  # the first block is on its way to the device
        else:
            now = self._origin + (self._clock() - self._started)
        if now >= self.duration_s:
            if self.loop:
                self._stop_sound()
                self._origin = 0.0
                self.state = "paused"
                self.play()
                return 0.0
            self._stop_sound()
            self._origin, self.state = self.duration_s, "paused"
            return self.duration_s
        return now

    def frame(self) -> FrameState:
        """The recorded frame showing at the current position."""
        index = int(np.searchsorted(self._times, self.position() + 1e-9, side="right")) - 1
        return self.frames[max(index, 0)]

    # ----------------------------------------------------------------- sound

    def _start_sound(self, from_s: float):
        audio = self.take.audio
        start = int(from_s * self.take.sample_rate)
        if len(audio) <= start:
            return None
        try:
            if self._speaker is None:
                from studio.engine.output import SpeakerOutput

                self._speaker = SpeakerOutput()
            self._speaker.open()
            if self._prepared is None:
                self._prepared = self._speaker.prepare(audio, self.take.sample_rate)
            offset = int(from_s * self._speaker.sample_rate)
            self.silent_reason = None
            return self._speaker.play(self._prepared[offset:])
        except AudioDeviceError as error:  # no output device: the pictures go on at real-time pace
            self.silent_reason = str(error)
            return None

    def _stop_sound(self) -> None:
        clip, self._clip = self._clip, None
        if clip is not None and self._speaker is not None:
            self._speaker.cut(clip)
