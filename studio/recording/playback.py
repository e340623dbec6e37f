"""Playing a take: the frame for now follows the take's audio as the speaker plays it.

While sound plays, the playback position is the audio clock (the clip frame at the DAC and when it
got there), so the face stays on the voice even when the device runs late; without sound (no audio
in the take, no output device) the monotonic clock paces it. Play, pause, seek and loop. The take's own
`audio_clock` (a MediaClock fed with the same DAC timing, restarted on each play) is what the drift monitor
measures a playing take against.
Frames and sound are read from the take's files as they play (the sound through a `StreamedClip`), so a
take of hours plays in the memory a minute takes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from studio.engine.clock import MediaClock
from studio.engine.sources import AudioDeviceError
from studio.frame import FrameState
from studio.recording.take import Take


class TakePlayer:
    """Plays one take (`transform` re-targets each frame shown); call `frame()` at display rate."""

    def __init__(self, take: Take, transform: Callable[[FrameState], FrameState] | None = None, speaker=None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.take = take
        self._transform = transform
        self._shown: tuple[int, FrameState] | None = None  # the last frame read: the display outpaces the take
        self.duration_s = take.duration_s
        self.loop = False
        self.state = "paused"
        self.silent_reason: str | None = None
        self._speaker = speaker
        self._clip = None
        self._clock = clock
        self.audio_clock = MediaClock()  # take time heard <-> monotonic time, while its sound plays
        self._observed: tuple[int, float] | None = None  # the DAC timing last given to `audio_clock`
        self._origin = 0.0  # take time where the current run started
        self._started = 0.0  # clock time when it started (monotonic pacing)

    # ----------------------------------------------------------------- control

    def play(self) -> None:
        if self.state == "playing":
            return
        if self._origin >= self.duration_s - 1e-6:
            self._origin = 0.0
        self.state = "playing"
        self.audio_clock.reset()
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
        # check() also brings the clip's DAC timing (`heard`) up to date
        if clip is not None and (not self._speaker.check() or clip.failed is not None):
            self._sound_lost(clip)
            clip = None
        if clip is not None and clip.heard is not None:
            frame, at = clip.heard  # `at` may lie ahead: the sound is still in the device's buffer
            if clip.heard != self._observed:
                self._observed = clip.heard
                self.audio_clock.observe(self._origin + frame / clip.rate, at)
            now = max(self._origin, self._origin + frame / clip.rate + (self._clock() - at))
        elif clip is not None:
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
        """The recorded frame showing at the current position (re-targeted when asked)."""
        index = self.take.frame_index(self.position())
        if self._shown is None or self._shown[0] != index:
            frame = self.take.frames[index]
            self._shown = (index, self._transform(frame) if self._transform is not None else frame)
        return self._shown[1]

    # ----------------------------------------------------------------- sound

    def _start_sound(self, from_s: float):
        from studio.engine.output import SpeakerOutput, StreamedClip

        audio = self.take.audio
        start = int(from_s * self.take.sample_rate)
        if len(audio) <= start:
            return None
        try:
            if self._speaker is None:
                self._speaker = SpeakerOutput()
            speaker = self._speaker
            speaker.open()
            channels = speaker.channels if speaker.channels in (1, 2) else 1  # mono broadcasts to any layout
            clip = StreamedClip(audio[start:].chunks(rate=speaker.sample_rate, channels=channels), speaker.sample_rate,
                                channels, None)
            self.silent_reason = None
            try:
                return speaker.play_clip(clip)
            except BaseException:
                clip.close()
                raise
        except AudioDeviceError as error:  # no output device: the pictures go on at real-time pace
            self.silent_reason = str(error)
            return None

    def _sound_lost(self, clip) -> None:
        """The device failed mid-play: the pictures go on at real-time pace from where the sound stopped."""
        self._origin += clip.heard[0] / clip.rate if clip.heard is not None else 0.0
        self._started = self._clock()
        self._clip = None
        clip.close()  # its decoder would otherwise wait for a device that is gone, holding the file open
        self.silent_reason = f"audio output lost: {clip.failed or self._speaker.error}"

    def _stop_sound(self) -> None:
        clip, self._clip = self._clip, None
        if clip is not None and self._speaker is not None:
            self._speaker.cut(clip)
        if clip is not None:
            clip.close()  # its decoder thread stops and closes the take's audio file
