"""The operator's cue list (the persona's lines, what plays, what comes next) and pause/resume of speech."""

from __future__ import annotations

import dataclasses

from psygnal import Signal

from studio.engine.sources import ENGINE_RATE, PlayedAudio, resample_clip
from studio.presets import PresetError, check_cue_line


def check_cue(index: int, text: str) -> str:
    """The line, or PresetError naming the cue and why TTS cannot speak it."""
    try:
        return check_cue_line(text)
    except ValueError as error:
        raise PresetError(f"cue {index + 1}: {error}") from None


class CueList:
    """Lines to speak in order; `playing` is the index being spoken (None when silent), `next_index` what follows
    (None once the last line has started: the list has ended).

    With `wrap` on, "next" at the end starts again at the first line instead of refusing, so a key pressed at
    the end still speaks. `changed()` fires whenever the lines, the playing or next cue, or `wrap` change.
    """

    changed = Signal()

    def __init__(self, lines: list[str] | tuple[str, ...] = (), wrap: bool = True) -> None:
        self.lines: list[str] = []
        self.playing: int | None = None
        self.next_index: int | None = None
        self.wrap = wrap
        self.set_lines(lines)

    @property
    def ended(self) -> bool:
        """Every line has been started: "next" either wraps to the first line or has nothing to speak."""
        return bool(self.lines) and self.next_index is None

    def set_wrap(self, wrap: bool) -> None:
        self.wrap = bool(wrap)
        self.changed.emit()

    def set_lines(self, lines) -> None:
        lines = [check_cue(i, line) for i, line in enumerate(lines)]
        self.lines = lines
        self.playing = None
        self.next_index = 0 if lines else None
        self.changed.emit()

    def start(self, index: int | None = None) -> str:
        """Mark cue `index` (default: the next one, the first again once the list ended and `wrap` is on) as
        playing and return its text; PresetError when there is nothing to speak, saying why."""
        if index is None:
            index = 0 if self.ended and self.wrap else self.next_index
        if index is None:
            raise PresetError("no cue to speak: the cue list is empty" if not self.lines else
                              f"the cue list has ended (all {len(self.lines)} cues spoken): turn on Wrap around "
                              "to start again at cue 1, or pick a cue")
        if not 0 <= index < len(self.lines):
            raise PresetError(f"cue {index + 1} does not exist; the list has {len(self.lines)}")
        text = check_cue(index, self.lines[index])
        self.playing = index
        self.next_index = index + 1 if index + 1 < len(self.lines) else None
        self.changed.emit()
        return text

    def finish(self) -> None:
        """The playing cue ended (or was stopped)."""
        if self.playing is not None:
            self.playing = None
            self.changed.emit()


def remaining_clip(clip, from_s: float):
    """The SpeechClip from `from_s` on, phonemes shifted to start at 0 (what `resume` speaks)."""
    from_s = max(0.0, float(from_s))
    cut = min(len(clip.audio), int(round(from_s * clip.sample_rate)))
    phonemes = tuple(dataclasses.replace(p, start_s=max(0.0, p.start_s - from_s), end_s=p.end_s - from_s)
                     for p in clip.phonemes if p.end_s - from_s > 0.0)
    return dataclasses.replace(clip, audio=clip.audio[cut:], phonemes=phonemes)


class ClipSource(PlayedAudio):
    """An already synthesized SpeechClip played again (the rest of a paused line), face from its phonemes."""

    def __init__(self, clip, name: str = "resumed line", play: bool = True, realtime: bool = True) -> None:
        self.clip = clip
        super().__init__(name, clip.audio, clip.sample_rate, play, realtime,
                         engine_audio=resample_clip(clip.audio, clip.sample_rate, ENGINE_RATE))
        self.phonemes = clip.phonemes
