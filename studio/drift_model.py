"""The Drift dock's model, Qt-free: polled once a second with the engine, the take player and the process
memory, it feeds a DriftMonitor and says why a figure is missing. `widgets.drift_dock` only binds to it.

The A/V offset and the skew are measured on the clock of whatever plays: a playing take's own audio clock,
else the engine's source while it plays. Nothing is measured while nothing plays, and a new source (or a
take played again) starts afresh, so one clock's figures are never compared with another's. The offset is
how far the clock estimate, which places the picture, stands from where the device put the newest sound
(`MediaClock.recent_error_s`); the skew is told only once its fit spans MIN_SKEW_SPAN_S, and it warns only
when it is past its limit by more than a few standard errors (`studio.drift.SKEW_SIGMAS`).
"""

from __future__ import annotations

from dataclasses import dataclass

from psygnal import Signal

from studio.drift import DriftMonitor, DriftThresholds
from studio.engine.anchor import SpatialAnchor
from studio.engine.clock import MediaClock

WARMUP_S = 60.0  # memory growth counts from the end of the first minute (models, shaders, voice loaded)
MIN_SKEW_SPAN_S = 30.0  # a skew from a shorter stretch is mostly callback jitter
MIN_SKEW_POINTS = 20  # one-second buckets within that span (a device that stalled leaves gaps)
NOTHING_PLAYS = "nothing playing"
NO_TRACKER = "no tracker input: nothing to anchor"
POSE_SERIES = ("root_drift_mm", "head_drift_deg", "head_position_drift_mm", "raw_root_drift_mm",
               "raw_head_drift_deg", "raw_head_position_drift_mm")


@dataclass(frozen=True)
class Playing:
    """What plays now: the object (a new one restarts the A/V figures), its audio clock and its name."""

    what: object
    clock: MediaClock
    label: str


def playing_now(engine, player=None) -> tuple[Playing | None, str]:
    """What plays, with its own clock, or None and why nothing is measured. A loaded take is what the
    viewport shows, so it decides even while the engine speaks."""
    if player is not None:
        if player.state != "playing":
            return None, "take paused"
        if player.silent_reason or not len(player.take.audio):
            return None, "the take plays without sound"
        return Playing(player, player.audio_clock, f"take {player.take.name}"), ""
    source = None if engine is None else engine.source
    if source is None or source.finished or source.error or engine.source_error:
        return None, NOTHING_PLAYS
    return Playing(source, source.clock, source.name), ""


class DriftModel:
    """Feeds a DriftMonitor from the running engine once a second; `changed` fires after each poll.

    `av_note` says what the A/V figures are measured on, or why there are none; `pose_note` why the body
    and head drift figures are missing (None when they are there)."""

    changed = Signal()

    def __init__(self, thresholds: DriftThresholds | None = None) -> None:
        self.monitor = DriftMonitor(thresholds)
        self.engine = None
        self._queue = None
        self._started: float | None = None
        self._notes_seen = 0
        self._next_identity: float | None = None
        self.identity = None  # callable FrameState -> SSIM (the window supplies an offscreen renderer)
        self.playing: Playing | None = None
        self.av_note = NOTHING_PLAYS
        self.pose_note: str | None = "engine not running: nothing to anchor"

    @property
    def thresholds(self) -> DriftThresholds:
        return self.monitor.thresholds

    @property
    def anchor(self) -> SpatialAnchor | None:
        anchor = getattr(self.engine, "anchor", None)
        return anchor if isinstance(anchor, SpatialAnchor) else None

    def poll(self, engine, now_s: float, rss_mb: float, player=None) -> None:
        """One second's figures: `engine` (None when not running), monotonic `now_s`, the process's memory and
        the take player (None when no take is loaded)."""
        monitor = self.monitor
        if engine is not self.engine:
            if self._queue is not None and self.engine is not None:
                self.engine.unsubscribe(self._queue)
            self.engine, self._queue = engine, None if engine is None else engine.subscribe(maxlen=512)
        if self._started is None:
            self._started = now_s
        session = now_s - self._started
        monitor.session_s = session
        if engine is not None:
            anchor = self.anchor
            if anchor is not None:
                monitor.anchoring = anchor.settings.enabled
                monitor.nonfinite_frames = anchor.nonfinite_frames
                monitor.update_anchor(session, anchor.take_sums(), anchor.rest)
            monitor.update_frames(self._queue.drain())
            monitor.dropped_frames = self._queue.dropped
            counters = engine.audio_counters() if hasattr(engine, "audio_counters") else {}
            monitor.underruns = int(counters.get("output_underruns") or 0)
            events = list(getattr(engine.housekeeper, "events", ()))
            for event in events[self._notes_seen:]:
                monitor.note(event)
            self._notes_seen = len(events)
        self.pose_note = self._pose_note()
        if self.pose_note == NO_TRACKER or engine is None:
            monitor.forget(*POSE_SERIES)
        self._measure_clock(session, engine, player)
        if monitor.baseline_rss_mb is None and session >= WARMUP_S:
            monitor.mark_prewarmed(rss_mb)
        monitor.update_memory(session, rss_mb)
        if self.identity is not None:
            if self._next_identity is None:
                self._next_identity = session
            if session >= self._next_identity:
                self._next_identity = session + self.thresholds.identity_interval_s
                try:
                    monitor.update_identity(session, self.identity(monitor.identity_frame()))
                except Exception as error:  # noqa: BLE001 - a failed render must not stop the monitor
                    monitor.note(f"identity render failed: {error}")
                    self.identity = None
        self.changed.emit()

    def _pose_note(self) -> str | None:
        if self.engine is None:
            return "engine not running: nothing to anchor"
        anchor = self.anchor
        if anchor is None:
            return "no anchor stage in this engine"
        if anchor.pose_input is None:
            return NO_TRACKER
        if "root_drift_mm" not in self.monitor.current:
            return f"measuring: the first {self.thresholds.drift_window_s:g} s of tracker input"
        return None

    def _measure_clock(self, session: float, engine, player) -> None:
        monitor = self.monitor
        playing, why = playing_now(engine, player)
        if playing is None or self.playing is None or playing.what is not self.playing.what:
            monitor.clear_clock()
        self.playing = playing
        if playing is None:
            self.av_note = why
            return
        clock = playing.clock
        error_s = clock.recent_error_s()
        if error_s is None:  # a source just started (or a take was played again): its clock has no fit yet
            monitor.clear_clock()
            self.av_note = f"{playing.label}: measuring"
            return
        span = clock.fitted_span_s
        enough = span >= MIN_SKEW_SPAN_S and clock.fitted_points >= MIN_SKEW_POINTS
        if enough:
            monitor.update_clock(session, error_s * 1000.0, clock.skew_ppm, clock.skew_error_ppm)
            self.av_note = playing.label
        else:
            monitor.update_clock(session, error_s * 1000.0, None)
            self.av_note = f"{playing.label}; skew after {MIN_SKEW_SPAN_S:g} s ({span:.0f} s so far)"

    def re_anchor(self) -> None:
        anchor = self.anchor
        if anchor is not None:
            anchor.re_anchor()
            self.monitor.note(f"re-anchored by the operator at {self.monitor.session_s:.0f} s")

    def set_anchoring(self, enabled: bool) -> None:
        anchor = self.anchor
        if anchor is not None:
            anchor.settings = anchor.settings.model_copy(update={"enabled": bool(enabled)})
            self.monitor.anchoring = bool(enabled)
