"""Qt-free view-models that the panels bind to.

Each model holds the state a panel shows and emits a psygnal signal when that state changes (as
studio/'s models do), so the logic works and is tested without a display; the Qt widgets only mirror it.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from psygnal import Signal

from studio.avatar.arkit import ARKIT_NAMES
from studio.avatar.skeleton import JOINT_INDEX
from studio.avatar.skinning import batch_rodrigues
from studio.frame import FrameState
from studio.telemetry import SOUND_TO_SCREEN_PERCENTILE, SoundToScreen, engine_latency_parts

ENGINE_STAGES: tuple[str, ...] = ("capture", "features", "inference", "motion", "anchor")
RENDER_STAGE = "render"
TOTAL_STAGE = "total"
ALL_STAGES: tuple[str, ...] = (*ENGINE_STAGES, RENDER_STAGE)
DEFAULT_LATENCY_TARGET_MS = 50.0

ARKIT_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Eyes", tuple(n for n in ARKIT_NAMES if n.startswith("eye"))),
    ("Jaw", tuple(n for n in ARKIT_NAMES if n.startswith("jaw"))),
    ("Mouth", tuple(n for n in ARKIT_NAMES if n.startswith("mouth"))),
    ("Brows · cheeks · nose · tongue", tuple(n for n in ARKIT_NAMES if n.startswith(("brow", "cheek", "nose", "tongue")))),
)

# No "Jaw" row: the jaw opens through the jawOpen blendshape (shown under Jaw weights), never through
# the jaw joint, so a joint row read +0.0 while the mouth stood open.
INSPECTED_JOINTS: tuple[tuple[str, str], ...] = (
    ("Head", "head"),
    ("Neck", "neck"),
    ("Left eye", "left_eye_smplhf"),
    ("Right eye", "right_eye_smplhf"),
    ("Spine 1", "spine1"),
    ("Spine 2", "spine2"),
    ("Spine 3", "spine3"),
)


def axis_angle_to_euler_deg(axis_angle: np.ndarray) -> tuple[float, float, float]:
    """(pitch about x, yaw about y, roll about z) in degrees, intrinsic Y-X-Z as a head turns.

    Axis-angle components are not angles a person can read; Euler angles in this order
    match "turn, nod, tilt" for the small rotations joints make.
    """
    vector = np.asarray(axis_angle, np.float64)
    angle = float(np.linalg.norm(vector))
    if angle < 1e-9:
        return 0.0, 0.0, 0.0
    r = batch_rodrigues(vector)[0]
    pitch = math.asin(max(-1.0, min(1.0, -r[1, 2])))
    yaw = math.atan2(r[0, 2], r[2, 2])
    roll = math.atan2(r[1, 0], r[1, 1])
    return math.degrees(pitch), math.degrees(yaw), math.degrees(roll)


class InspectorModel:
    """The latest FrameState and what the inspector derives from it.

    `set_frame` is called at display rate; listeners of `changed` (the panel) decide how
    often to redraw, so a cheap model update never forces widget work.
    """

    changed = Signal(object)  # (FrameState)

    def __init__(self) -> None:
        self.frame: FrameState | None = None

    def set_frame(self, state: FrameState) -> None:
        self.frame = state
        self.changed.emit(state)

    def weights(self) -> np.ndarray:
        return np.zeros(len(ARKIT_NAMES), np.float32) if self.frame is None else self.frame.arkit

    def joint_angles_deg(self) -> dict[str, tuple[float, float, float]]:
        """Label → (pitch, yaw, roll) in degrees for the joints the inspector lists."""
        if self.frame is None:
            return {label: (0.0, 0.0, 0.0) for label, _ in INSPECTED_JOINTS}
        return {label: axis_angle_to_euler_deg(self.frame.pose[JOINT_INDEX[joint]]) for label, joint in INSPECTED_JOINTS}


@dataclass(frozen=True)
class StageStats:
    p50_ms: float
    p95_ms: float
    p99_ms: float


@dataclass
class TelemetrySample:
    """One 10 Hz reading: a representative latency per stage, budget overruns and CPU load."""

    time_s: float
    stage_ms: dict[str, float]
    stats: dict[str, StageStats]
    over_budget_total: int | None = None
    cpu_pct: float | None = None
    end_to_end_ms: float = 0.0
    output_underruns: int | None = None
    input_overflows: int | None = None
    engine_p95_ms: float | None = None  # one frame's compute, all stages (the sound→screen 'engine' part)
    device_ms: float | None = None  # the engine's fixed parts of sound→screen (studio.telemetry.engine_latency_parts)
    lookahead_ms: float | None = None
    speaker_buffer_ms: float | None = None


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _stage_stats(entry) -> tuple[StageStats, float] | None:
    """(percentiles, newest value) of one stage entry, as `LatencyTelemetry.snapshot()` writes it.

    The newest value ('last_ms') is the trace point; without it the median stands in.
    """
    if not isinstance(entry, Mapping):
        return None
    p50, p95, p99 = (_number(entry.get(f"p{q}_ms")) for q in (50, 95, 99))
    if p50 is None:
        return None
    p95 = p50 if p95 is None else p95
    p99 = p95 if p99 is None else p99
    last = _number(entry.get("last_ms"))
    return StageStats(p50, p95, p99), p50 if last is None else last


def parse_telemetry(snapshot: Mapping, time_s: float) -> TelemetrySample:
    """Read `studio.telemetry.LatencyTelemetry.snapshot()`: stages, over-budget count, CPU load."""
    stages = snapshot.get("stages")
    stats: dict[str, StageStats] = {}
    stage_ms: dict[str, float] = {}
    total_ms = engine_p95 = None
    if isinstance(stages, Mapping):
        for stage in ENGINE_STAGES:
            parsed = _stage_stats(stages.get(stage))
            if parsed is not None:
                stats[stage], stage_ms[stage] = parsed
        total = _stage_stats(stages.get(TOTAL_STAGE))
        total_ms = None if total is None else total[1]
        engine_p95 = None if total is None else total[0].p95_ms
    over = _number(snapshot.get("over_budget_count"))
    latency = snapshot.get("latency")
    latency = latency if isinstance(latency, Mapping) else {}
    audio = snapshot.get("audio")
    audio = audio if isinstance(audio, Mapping) else {}
    underruns, overflows = _number(audio.get("output_underruns")), _number(audio.get("input_overflows"))
    return TelemetrySample(
        time_s, stage_ms, stats, None if over is None else int(over), _number(snapshot.get("cpu_pct")),
        sum(stage_ms.values()) if total_ms is None else total_ms,
        None if underruns is None else int(underruns), None if overflows is None else int(overflows),
        engine_p95, _number(latency.get("device_ms")), _number(latency.get("lookahead_ms")),
        _number(latency.get("speaker_buffer_ms")),
    )


class LatencyModel:
    """Sliding-window latency traces per stage for the latency dock.

    Engine stages come from telemetry snapshots; render/present comes from the window's own
    per-frame timing. Over-budget points are ticks where the engine counted new overruns or
    where the end-to-end latency crossed the target. `sound_to_screen` is the latency the
    preset's target applies to (`studio.telemetry.SoundToScreen`), None while no engine runs.
    """

    changed = Signal()

    def __init__(self, window_s: float = 15.0, target_ms: float = DEFAULT_LATENCY_TARGET_MS, max_points: int = 4000) -> None:
        if not target_ms > 0:
            raise ValueError(f"latency target {target_ms!r} ms is not allowed; it must be > 0")
        self.window_s = float(window_s)
        self.target_ms = float(target_ms)
        self.traces: dict[str, deque[tuple[float, float]]] = {s: deque(maxlen=max_points) for s in ALL_STAGES}
        self.over_budget: deque[tuple[float, float]] = deque(maxlen=max_points)
        self.cpu: deque[tuple[float, float]] = deque(maxlen=max_points)
        self.stats: dict[str, StageStats] = {}
        self.engine_active = False
        self.output_underruns: int | None = None  # speaker blocks that ran dry (None: no engine has reported yet)
        self.input_overflows: int | None = None
        self.speaker_buffer_ms: float | None = None  # the speaker's adaptive output buffer now
        self.sound_to_screen: SoundToScreen | None = None
        self.sound_to_screen_trace: deque[tuple[float, float]] = deque(maxlen=max_points)
        self.present_ms: float | None = None  # p95 interval between presented frames: the wait for the next tick
        self._render_samples: deque[tuple[float, float]] = deque(maxlen=max_points)
        self._last_over_total: int | None = None

    def set_target(self, target_ms: float) -> None:
        if not target_ms > 0:
            raise ValueError(f"latency target {target_ms!r} ms is not allowed; it must be > 0")
        self.target_ms = float(target_ms)
        self.changed.emit()

    def clear(self) -> None:
        """Forget every trace and statistic (e.g. after start-up, whose shader compiles are not typical)."""
        for series in (*self.traces.values(), self.over_budget, self.cpu, self._render_samples,
                       self.sound_to_screen_trace):
            series.clear()
        self.stats.clear()
        self.sound_to_screen = self.present_ms = None
        self._last_over_total = None
        self.changed.emit()

    def add_render_time(self, time_s: float, render_ms: float) -> None:
        """One presented frame's render/present cost (called at display rate; no event)."""
        self._render_samples.append((float(time_s), float(render_ms)))

    def update(self, time_s: float, snapshot: Mapping | None, cpu_pct: float | None = None) -> None:
        """A 10 Hz tick: fold in the render samples since the last tick and the engine snapshot.

        `cpu_pct` is the process load measured by the caller, used when no snapshot carries one.
        """
        self._update_render(time_s)
        self.engine_active = snapshot is not None
        sample = None if snapshot is None else parse_telemetry(snapshot, time_s)
        if sample is not None:
            self._update_engine(sample)
        self._update_sound_to_screen(time_s, sample)
        if (sample is None or sample.cpu_pct is None) and cpu_pct is not None:
            self.cpu.append((time_s, float(cpu_pct)))
        self._trim(time_s)
        self.changed.emit()

    def _update_render(self, time_s: float) -> None:
        recent = [ms for t, ms in self._render_samples if t > time_s - self.window_s]
        if not recent:
            return
        since_last = [ms for t, ms in self._render_samples if t > time_s - 0.25]
        if since_last:
            self.traces[RENDER_STAGE].append((time_s, max(since_last)))
        p50, p95, p99 = np.percentile(recent, (50, 95, 99))
        self.stats[RENDER_STAGE] = StageStats(float(p50), float(p95), float(p99))
        times = [t for t, _ in self._render_samples if t > time_s - self.window_s]
        if len(times) >= 2:
            self.present_ms = float(np.percentile(np.diff(times), SOUND_TO_SCREEN_PERCENTILE)) * 1000.0

    def _update_sound_to_screen(self, time_s: float, sample: TelemetrySample | None) -> None:
        """The latency the target applies to, from its parts' p95s; None while no engine reports."""
        if sample is None:
            self.sound_to_screen = None
            return
        if sample.speaker_buffer_ms is not None:
            self.speaker_buffer_ms = sample.speaker_buffer_ms
        render = self.stats.get(RENDER_STAGE)
        self.sound_to_screen = SoundToScreen(
            device_ms=sample.device_ms or 0.0, lookahead_ms=sample.lookahead_ms or 0.0,
            engine_ms=sample.engine_p95_ms if sample.engine_p95_ms is not None else sum(
                stats.p95_ms for stats in sample.stats.values()),
            render_ms=0.0 if render is None else render.p95_ms, present_ms=self.present_ms or 0.0)
        self.sound_to_screen_trace.append((time_s, self.sound_to_screen.total_ms))

    def _update_engine(self, sample: TelemetrySample) -> None:
        for stage, value in sample.stage_ms.items():
            self.traces[stage].append((sample.time_s, value))
        self.stats.update(sample.stats)
        if sample.output_underruns is not None:
            self.output_underruns = sample.output_underruns
        if sample.input_overflows is not None:
            self.input_overflows = sample.input_overflows
        if sample.cpu_pct is not None:
            self.cpu.append((sample.time_s, sample.cpu_pct))
        end_to_end = sample.end_to_end_ms
        new_overruns = (
            sample.over_budget_total is not None
            and self._last_over_total is not None
            and sample.over_budget_total > self._last_over_total
        )
        if sample.over_budget_total is not None:
            self._last_over_total = sample.over_budget_total
        if new_overruns or end_to_end > self.target_ms:
            self.over_budget.append((sample.time_s, end_to_end))

    def _trim(self, time_s: float) -> None:
        oldest = time_s - self.window_s
        for series in (*self.traces.values(), self.over_budget, self.cpu, self._render_samples,
                       self.sound_to_screen_trace):
            while series and series[0][0] < oldest:
                series.popleft()

    def trace(self, stage: str) -> tuple[np.ndarray, np.ndarray]:
        """(times, milliseconds) of one stage's trace, oldest first."""
        points = self.traces[stage]
        if not points:
            return np.empty(0), np.empty(0)
        array = np.asarray(points, np.float64)
        return array[:, 0], array[:, 1]

    def latest_cpu_pct(self) -> float | None:
        return self.cpu[-1][1] if self.cpu else None


class FpsMeter:
    """Measured presentation rate over the last second of presented frames."""

    def __init__(self, window_s: float = 1.0) -> None:
        self.window_s = window_s
        self._times: deque[float] = deque(maxlen=1000)

    def tick(self, time_s: float) -> None:
        self._times.append(time_s)
        while self._times and self._times[0] < time_s - self.window_s:
            self._times.popleft()

    def fps(self) -> float:
        if len(self._times) < 2:
            return 0.0
        span = self._times[-1] - self._times[0]
        return (len(self._times) - 1) / span if span > 0 else 0.0


class EngineController:
    """The window's seam to the speech engine, which may be missing or fail to start.

    The engine is built and started on the first speech command and then keeps running
    (idle between sources, so the mouth eases to rest rather than jumping). If building it
    fails, the controller says why in `unavailable_reason`/`state` and the window keeps
    showing its own idle animation. `engine_factory` builds the engine
    (default: `studio.engine.pipeline.Engine()`).
    """

    state_changed = Signal(str)
    notice = Signal(str)  # worth saying once, not an error (an audio file that ends early)

    def __init__(self, engine_factory: Callable[[], object] | None = None) -> None:
        self._factory = engine_factory or _default_engine_factory
        self.engine = None
        self.state = "idle"
        self.unavailable_reason: str | None = None
        self._source = None
        self.expression = None  # the expression stage every engine built here uses (the panels' mixer)
        self.plan = None  # the module plan switched to since start-up (preset panel)
        self.style = None  # the persona's motion style switched to since start-up
        self.voice_monitor = (False, 0.0)  # (on, offset ms): the delayed voice for A/V sync
        self._picked_at: float | None = None  # when the frame being presented was taken from the engine

    @property
    def running(self) -> bool:
        return self.engine is not None and self.engine.running

    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self.state_changed.emit(state)

    def _idle_state(self, why: str | None = None) -> str:
        reason = why or self.unavailable_reason
        return "idle" if reason is None else f"idle — {reason}"

    def ensure_engine(self):
        """The running engine, built and started now if there is none yet (None, and `state` says why, if that fails)."""
        if self.engine is not None:
            return self.engine
        try:
            engine = self._factory()
            engine.start()
        except Exception as error:  # noqa: BLE001 - any failure leaves the studio idle, and says why
            self.unavailable_reason = f"speech engine unavailable ({type(error).__name__}: {error})"
            self._set_state(self._idle_state())
            return None
        self.engine, self.unavailable_reason = engine, None
        self._configure(engine)
        return engine

    def _configure(self, engine) -> None:
        if self.expression is not None:
            engine.expression = self.expression
        if self.plan is not None:
            engine.set_plan(self.plan)
        if self.style is not None:
            engine.set_style(self.style)
        if hasattr(engine, "set_monitor"):
            engine.set_monitor(*self.voice_monitor)

    def configure(self, expression=None, plan=None, style=None) -> None:
        """Use this expression stage, module plan or motion style now and in every engine built later."""
        self.expression = expression or self.expression
        self.plan = plan or self.plan
        self.style = style or self.style
        if self.engine is not None:
            self._configure(self.engine)

    def speak_clip(self, clip, description: str = "resumed line") -> bool:
        """Play an already synthesized SpeechClip (the rest of a paused line)."""
        from studio.cues import ClipSource

        return self._start(description, lambda _sources: ClipSource(clip, description))

    @property
    def source(self):
        """The source speaking now (None when idle)."""
        return self._source

    def _start(self, description: str, make_source: Callable[[object], object]) -> bool:
        engine = self.ensure_engine()
        if engine is None:
            return False
        try:
            source = make_source(_sources_module())
        except Exception as error:  # noqa: BLE001 - a bad device, file or voice must not take the window down
            from studio.engine.sources import AudioInputError

            # a bad audio file's message names the file and what works already: said once, not after the source name
            reason = str(error) if isinstance(error, AudioInputError) else f"{description} failed: {error}"
            self._set_state(self._idle_state(reason))
            return False
        engine.set_source(source)
        self._source = source
        self._set_state(description)
        self._tell_cut_short(source)
        return True

    def _tell_cut_short(self, source) -> None:
        """A file that holds less sound than it states plays what it holds; the user hears why it stops early. A
        short file is decoded when it is opened, a long one only when it has played to its end."""
        note = getattr(getattr(source, "stream", None), "cut_short", None)
        if note:
            self.notice.emit(note)

    def start_microphone(self, device: str | int | None = None) -> bool:
        label = "microphone" if device is None else f"microphone {device}"
        return self._start(label, lambda sources: sources.MicrophoneSource(device))

    def play_file(self, path: str) -> bool:
        return self._start(f"file {path}", lambda sources: sources.FileSource(path))

    def speak_text(self, text: str, voice: str = "en-us", rate_wpm: int = 165, pitch: int = 50) -> bool:
        if not text.strip():
            self._set_state(self._idle_state("nothing to speak: the text is empty"))
            return False
        short = text if len(text) <= 32 else text[:31] + "…"
        return self._start(f"text “{short}”", lambda sources: sources.TextSource(text, voice, rate_wpm, pitch))

    def stop(self) -> None:
        """Back to idle: the engine keeps running so the mouth eases to rest."""
        if self.running:
            self.engine.set_source(None)
        self._source = None
        self._set_state(self._idle_state())

    def shutdown(self) -> None:
        """Stop the engine thread and its source (window closing)."""
        if self.engine is not None:
            self.engine.stop()
        self._source = None

    def poll(self) -> str:
        """Refresh `state` from the engine thread: a source that ended or failed returns to idle."""
        if self._source is None or not self.running:
            return self.state
        error = getattr(self.engine, "source_error", None) or getattr(self._source, "error", None)
        if error:
            self._source = None
            self._set_state(self._idle_state(str(error)))
        elif self._source.finished:
            finished, self._source = self._source, None
            self._set_state(self._idle_state())
            if getattr(finished, "streamed", False):
                self._tell_cut_short(finished)
        return self.state

    def microphone(self):
        """The microphone source being listened to, or None (another source, or none)."""
        source = self._source
        return source if source is not None and isinstance(source, _sources_module().MicrophoneSource) else None

    def input_lift_db(self) -> float:
        """How far the microphone's voice is lifted for the lip model (0: a normal level, or no microphone)."""
        level = getattr(self.engine, "level", None)
        return float(level.lift_db) if level is not None and self.microphone() is not None else 0.0

    def latest_frame(self) -> FrameState | None:
        """The engine's frame for the media time to show now (heard now, or a fixed delay behind it while the
        voice monitor plays), or None (never waits)."""
        if not self.running:
            return None
        self._picked_at = time.monotonic()
        timing = getattr(self.engine, "presentation_media_time", None) or self.engine.media_time_now
        return self.engine.slot.get(timing())

    def note_presented(self, presented_at: float) -> None:
        """The frame from `latest_frame` reached the screen at `presented_at` (monotonic)."""
        picked, self._picked_at = self._picked_at, None
        if picked is not None and self.running and hasattr(self.engine, "note_presented"):
            self.engine.note_presented(picked, presented_at)

    def set_voice_monitor(self, enabled: bool, offset_ms: float = 0.0) -> None:
        """Turn the delayed voice monitor on or off and set its offset, now and for engines built later."""
        self.voice_monitor = (bool(enabled), float(offset_ms))
        if self.engine is not None and hasattr(self.engine, "set_monitor"):
            self.engine.set_monitor(*self.voice_monitor)

    def voice_monitor_status(self) -> dict:
        """On/off, whether it plays now, and the delay in use and measured (ms)."""
        monitor = getattr(self.engine, "monitor", None)
        playing = monitor is not None and monitor.clip is not None and self.running
        return {"enabled": self.voice_monitor[0], "playing": playing, "offset_ms": self.voice_monitor[1],
                "delay_ms": monitor.delay_s * 1000 if playing else None,
                "measured_ms": monitor.measured_latency_s * 1000 if playing else None}

    def telemetry_snapshot(self) -> dict | None:
        """The engine's telemetry, with the fixed parts of the sound→screen latency under 'latency'."""
        if not self.running:
            return None
        snapshot = self.engine.telemetry.snapshot()
        snapshot["latency"] = engine_latency_parts(self.engine)
        return snapshot


def _default_engine_factory():
    from studio.engine.pipeline import Engine

    return Engine()


def _sources_module():
    from studio.engine import sources

    return sources
