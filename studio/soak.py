"""The soak: a long session run faster than real time through the studio's real engine.

Nothing is special-cased for it. The engine reads time from `Engine.monotonic`; here that is a
`SyntheticClock` that the loop advances instead of sleeping. On that clock a capture device is
simulated (`SimulatedCapture`): looped long speech whose crystal runs `skew_ppm` fast, callbacks up to
`jitter_ms` late, blocks lost at `drop_rate`. Everything else is the studio's own code: features, face
model, prosody, motion, expression, the SCA anchor with an external pose input (a `DriftingTracker`
with bias and random walk), the MediaClock estimate that picks the presented frame, housekeeping,
and the periodic identity render (a callback from render/, every `identity_interval_s`).

A/V offset is the error of the presented media time: `Engine.media_time_now()` (what the viewport
presents at this monotonic instant, from the MediaClock estimate) minus the true media time of the
sound at that instant, which the simulation knows. The pipeline's constant latency is not drift and
is not in it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from studio.drift import DriftMonitor
from studio.engine.anchor import DriftingTracker, SpatialAnchor
from studio.engine.sources import ENGINE_RATE, AudioSource
from studio.frame import FrameState
from studio.housekeeping import Housekeeper, freeze_survivors, prewarm_engine, rss_mb
from studio.precision import plan_for
from studio.presets import Preset

BLOCK = ENGINE_RATE // 100  # a 10 ms device block
WARMUP_S = 60.0  # memory growth counts from the end of the first simulated minute (prewarm and caches filled)

PARAGRAPHS = (
    "Good morning. Today we will look at why the sky is blue, and why sunsets are red.",
    "Sunlight is made of every colour. The air scatters blue light much more than red light, "
    "so wherever you look in the sky, blue light reaches your eyes.",
    "Your blood pressure is a little high, but this is common, and we can manage it together.",
    "Please breathe in slowly, hold it for a moment, and then breathe out.",
    "Bob met Pam by the maple tree, and they walked to the bookshop before the rain began.",
    "Do you have any questions before we begin the next part of the lesson?",
    "When the sun is low, its light crosses much more air, and most of the blue is scattered away.",
    "Thank you for your patience. We will check again in two weeks, and I will call you with the results.",
)
VOICES = (("en-us", 165, 50), ("en-gb+f4", 175, 60), ("en-us+m6", 150, 40), ("en-us+klatt3", 185, 55))


def speech_playlist(seed: int = 0) -> np.ndarray:
    """Long speech at ENGINE_RATE: TTS paragraphs in several voices, with pauses of 1-5 s between them
    (silent stretches, where housekeeping may run and the resting face is measured)."""
    from studio.engine.sources import resample_clip
    from studio.speech.espeak import EspeakSynth, SpeechError

    rng = np.random.default_rng(seed)
    parts = []
    for index, text in enumerate(PARAGRAPHS * 2):
        voice, rate, pitch = VOICES[index % len(VOICES)]
        try:
            clip = EspeakSynth(voice, rate, pitch).synthesize(text)
        except SpeechError:  # a voice this espeak lacks: the next one speaks instead
            continue
        parts.append(resample_clip(clip.audio, clip.sample_rate, ENGINE_RATE))
        parts.append(np.zeros(int(rng.uniform(1.0, 5.0) * ENGINE_RATE), np.float32))
    if not parts:
        raise RuntimeError("no espeak voice could speak the soak's paragraphs")
    return np.concatenate(parts).astype(np.float32)


class SyntheticClock:
    """A monotonic clock that moves only when told to (float64 seconds)."""

    def __init__(self, start_s: float = 1000.0) -> None:
        self.now_s = float(start_s)

    def __call__(self) -> float:
        return self.now_s

    def advance(self, seconds: float) -> None:
        self.now_s += seconds


class SimulatedCapture(AudioSource):
    """A capture device on a synthetic clock: `audio` on a loop, a crystal `skew_ppm` fast, each 10 ms
    callback late by |N(0, jitter)|, and a block lost now and then (its time still passes: the next block
    is stamped where it really is). Feeds its MediaClock like MicrophoneSource does."""

    def __init__(self, audio: np.ndarray, clock: SyntheticClock, skew_ppm: float = 0.0, jitter_ms: float = 0.0,
                 drop_rate: float = 0.0, seed: int = 0) -> None:
        super().__init__("soak capture")
        self.audio = np.asarray(audio, np.float32)
        self.monotonic = clock
        self.rate = 1.0 + skew_ppm * 1e-6  # media seconds per monotonic second
        self.jitter_s = jitter_ms / 1000.0
        self.drop_rate = drop_rate
        self._rng = np.random.default_rng(seed)
        self._origin = 0.0
        self._next_block = 0
        self._last_due = 0.0
        self._draws: tuple[np.ndarray, np.ndarray] = (np.zeros(0), np.zeros(0, bool))
        self._ready: list[int] = []  # delivered block indices not read yet
        self.dropped_blocks = 0
        self.first_observation: tuple[float, float] | None = None

    def start(self) -> None:
        self._origin = self.monotonic()
        self._last_due = self._origin
        self._next_block = 0
        self._ready = []
        self.clock.reset()
        self.error = None
        self._state = "listening"

    def stop(self) -> None:
        self._state = "stopped"

    def true_media_s(self, monotonic_s: float) -> float:
        """Where the device really is at this monotonic instant (what the listener hears)."""
        return (monotonic_s - self._origin) * self.rate

    def _draw(self, index: int) -> tuple[float, bool]:
        jitter, drops = self._draws
        offset = index % 4096
        if offset == 0 or len(jitter) == 0:
            jitter = np.abs(self._rng.normal(0.0, self.jitter_s, 4096)) if self.jitter_s > 0 else np.zeros(4096)
            drops = self._rng.random(4096) < self.drop_rate
            self._draws = (jitter, drops)
        return float(jitter[offset]), bool(drops[offset])

    def _deliver(self) -> None:
        now = self.monotonic()
        while True:
            index = self._next_block
            media_end = (index + 1) * BLOCK / ENGINE_RATE
            due = self._origin + media_end / self.rate
            if due > now:  # not even a punctual callback has come yet
                return
            late, dropped = self._draw(index)
            arrival = max(due + late, self._last_due)
            if arrival > now:
                return
            self._next_block += 1
            self._last_due = arrival
            if dropped:
                self.dropped_blocks += 1
                continue
            self._ready.append(index)
            self.clock.observe(media_end, arrival)
            if self.first_observation is None:
                self.first_observation = (media_end, arrival)

    @property
    def pending(self) -> bool:
        return bool(self._ready)

    def read_available(self) -> tuple[int, np.ndarray]:
        """The delivered blocks up to the first gap (the rest on the next read)."""
        self._deliver()
        if not self._ready:
            return self._next_block * BLOCK, np.zeros(0, np.float32)
        first = self._ready[0]
        run = 1
        while run < len(self._ready) and self._ready[run] == first + run:
            run += 1
        del self._ready[:run]
        positions = np.arange(first * BLOCK, (first + run) * BLOCK) % len(self.audio)
        return first * BLOCK, self.audio[positions]


@dataclass
class SoakOptions:
    duration_s: float
    preset: Preset
    skew_ppm: float = 0.0
    jitter_ms: float = 0.0
    drop_rate: float = 0.0
    pose_bias: tuple[float, float] = (0.0, 0.0)  # mm per minute, degrees per minute
    anchor: bool = True
    seed: int = 0
    step_s: float = 0.1  # simulated time between two engine passes (the engine takes all audio that came)
    speed: float | None = None  # None: as fast as possible; else this many times real time, or report falling behind
    audio: np.ndarray | None = None  # the speech to loop (default: speech_playlist())
    identity: Callable[[FrameState], float] | None = None  # renders a neutral frame, returns SSIM vs the first
    progress: Callable[[float], None] | None = None  # called with simulated seconds done


@dataclass
class _Tally:
    after_gc_ms: list[float] = field(default_factory=list)
    after_identity_ms: list[float] = field(default_factory=list)
    after_quiet_ms: np.ndarray = field(default_factory=lambda: np.zeros(20_000))  # control sample, cyclic
    after_quiet_count: int = 0
    identity_media_times: list[float] = field(default_factory=list)  # the last two identity renders
    frames: int = 0
    max_av_offset_ms: float = 0.0
    naive_av_offset_ms: float = 0.0
    last_skew_ppm: float = 0.0


def run_soak(options: SoakOptions) -> dict:
    """Run the session; returns the report (see `build_report`)."""
    from studio.engine.pipeline import Engine

    preset = options.preset
    started_wall, started_cpu = time.perf_counter(), time.process_time()
    clock = SyntheticClock()
    tracker = DriftingTracker(bias_mm_per_min=options.pose_bias[0], bias_deg_per_min=options.pose_bias[1],
                              seed=options.seed + 1)
    anchor_settings = preset.anchor.model_copy(update={"enabled": options.anchor and preset.anchor.enabled})
    anchor = SpatialAnchor(anchor_settings, tracker, seed=options.seed)
    engine = Engine(plan=plan_for(preset), anchor=anchor, monotonic=clock)
    housekeeper = Housekeeper(preset)
    engine.housekeeper = housekeeper
    if preset.long_session.prewarm:
        prewarm_engine(engine)
    audio = options.audio if options.audio is not None else speech_playlist(options.seed)
    source = SimulatedCapture(audio, clock, options.skew_ppm, options.jitter_ms, options.drop_rate, options.seed)
    queue = engine.subscribe(maxlen=8192)
    engine.set_source(source)
    monitor = DriftMonitor(preset.drift)
    monitor.anchoring = anchor_settings.enabled
    tally = _Tally()
    identity_every = preset.drift.identity_interval_s
    steps = int(math.ceil(options.duration_s / options.step_s))
    next_second, next_memory, next_identity = 1.0, 10.0, 0.0
    kept_up = True
    simulated = 0.0
    interrupted = None
    try:
        for step in range(1, steps + 1):
            clock.advance(options.step_s)
            simulated = step * options.step_s
            engine.run_once()
            while source.pending:
                engine.run_once()
            frames = queue.drain()
            _tally_frames(frames, tally, housekeeper)
            monitor.update_frames(frames)
            if simulated >= next_second:
                next_second += 1.0
                _each_second(engine, source, anchor, monitor, tally, clock, simulated)
            if simulated >= next_memory:
                next_memory += 10.0
                memory = rss_mb()
                if monitor.baseline_rss_mb is None and simulated >= WARMUP_S:
                    freeze_survivors()
                    memory = rss_mb()
                    monitor.mark_prewarmed(memory)
                monitor.update_memory(simulated, memory)
            if options.identity is not None and simulated >= next_identity:
                next_identity += identity_every
                monitor.update_identity(simulated, options.identity(monitor.identity_frame()))
                latest = engine.slot.latest()
                if latest is not None:
                    tally.identity_media_times = [*tally.identity_media_times[-1:], latest.media_time_s]
            if options.progress is not None and step % 50 == 0:
                options.progress(simulated)
            if options.speed is not None:
                ahead = simulated / options.speed - (time.perf_counter() - started_wall)
                if ahead > 0:
                    time.sleep(ahead)
                elif ahead < -1.0:
                    kept_up = False
    except KeyboardInterrupt:
        interrupted = "interrupted"
    finally:
        engine.stop()
    if options.progress is not None:
        options.progress(simulated)
    for event in housekeeper.events:
        monitor.note(event)
    run = {
        "wall_s": time.perf_counter() - started_wall,
        "cpu_s": time.process_time() - started_cpu,
        "simulated_s": simulated,
        "kept_up": kept_up,
        "interrupted": interrupted,
        "dropped_blocks": source.dropped_blocks,
        "dropped_frames": queue.dropped,
        "nonfinite_frames": anchor.nonfinite_frames,
        "glitch_frames": anchor.glitch_frames,
        "gc_runs": housekeeper.gc_runs,
        "gc_max_ms": max(housekeeper.gc_ms, default=0.0),
        "watermark_events": list(housekeeper.events),
        "final_skew_ppm": tally.last_skew_ppm,
        "naive_av_offset_ms": tally.naive_av_offset_ms,
        "after_gc_frame_ms": tally.after_gc_ms,
        "after_identity_frame_ms": tally.after_identity_ms,
        "after_quiet_frame_ms": tally.after_quiet_ms[:min(tally.after_quiet_count, len(tally.after_quiet_ms))],
    }
    return build_report(options, monitor, run)


def _tally_frames(frames: list[FrameState], tally: _Tally, housekeeper: Housekeeper) -> None:
    """The frame times of the second after each collection, and after each identity render: the render is the
    soak's measuring instrument, not part of the studio's frame path, so a frame after both counts as the
    render's, and housekeeping is judged on the rest."""
    tally.frames += len(frames)
    recent_gc = list(housekeeper.gc_media_times)[-2:]
    recent_quiet = list(housekeeper.quiet_moments)[-2:]
    for frame in frames:
        t = frame.media_time_s
        frame_ms = sum(frame.timings_ms.values())
        if any(at < t <= at + 1.0 for at in tally.identity_media_times):
            tally.after_identity_ms.append(frame_ms)
        elif any(at < t <= at + 1.0 for at in recent_gc):
            tally.after_gc_ms.append(frame_ms)
        elif any(at < t <= at + 1.0 for at in recent_quiet):  # the same moments, without a collection
            tally.after_quiet_ms[tally.after_quiet_count % len(tally.after_quiet_ms)] = frame_ms
            tally.after_quiet_count += 1


def _each_second(engine, source: SimulatedCapture, anchor: SpatialAnchor, monitor: DriftMonitor, tally: _Tally,
                 clock: SyntheticClock, simulated: float) -> None:
    monitor.update_anchor(simulated, anchor.take_sums(), anchor.rest)
    now = clock()
    true_media = engine.source_start_media_s + source.true_media_s(now)
    offset_ms = (engine.media_time_now() - true_media) * 1000.0
    skew = source.clock.skew_ppm
    tally.last_skew_ppm = skew
    if source.first_observation is not None:  # a mapping that never estimated skew: offset only
        media0, mono0 = source.first_observation
        tally.naive_av_offset_ms = (engine.source_start_media_s + media0 + (now - mono0) - true_media) * 1000.0
    if simulated > 2.0:  # after the first second of callbacks has closed a bucket
        monitor.update_clock(simulated, offset_ms, skew)


def build_report(options: SoakOptions, monitor: DriftMonitor, run: dict) -> dict:
    """report.json: settings, a summary of every figure (unit in each key), pass/fail per threshold,
    downsampled time series for the plots, and whether the session ran complete."""
    limits = monitor.thresholds
    after_gc = run.pop("after_gc_frame_ms")
    after_identity = run.pop("after_identity_frame_ms")
    after_quiet = run.pop("after_quiet_frame_ms")
    p99_series = monitor.series["frame_p99_ms"].arrays()["max"]

    def worst(name: str) -> float | None:
        value = monitor.worst(name)
        return None if value is None else round(float(value), 4)

    complete = run["simulated_s"] >= options.duration_s - 1e-6 and run["interrupted"] is None
    summary = {
        "duration_s": options.duration_s,
        "simulated_s": round(run["simulated_s"], 3),
        "complete": complete,
        "kept_up": run["kept_up"],
        "wall_s": round(run["wall_s"], 1),
        "cpu_s": round(run["cpu_s"], 1),
        "speed_x": round(run["simulated_s"] / max(run["wall_s"], 1e-9), 1),
        "max_root_drift_mm": worst("root_drift_mm"),
        "max_head_drift_deg": worst("head_drift_deg"),
        "max_head_position_drift_mm": worst("head_position_drift_mm"),
        "raw_max_root_drift_mm": worst("raw_root_drift_mm"),
        "raw_max_head_drift_deg": worst("raw_head_drift_deg"),
        "raw_max_head_position_drift_mm": worst("raw_head_position_drift_mm"),
        "max_av_offset_ms": worst("av_offset_ms"),
        "naive_av_offset_ms_at_end": round(run["naive_av_offset_ms"], 2),
        "estimated_skew_ppm": round(run["final_skew_ppm"], 2),
        "rss_baseline_mb": None if monitor.baseline_rss_mb is None else round(monitor.baseline_rss_mb, 1),
        "rss_final_mb": None if "rss_mb" not in monitor.current else round(monitor.current["rss_mb"], 1),
        "rss_growth_pct": worst("rss_growth_pct"),
        "min_identity_ssim": worst("identity_ssim"),
        "identity_checks": len(monitor.series["identity_ssim"]),
        "max_neutral_bias": worst("neutral_bias"),
        "frame_p99_ms": worst("frame_p99_ms"),
        "frame_p99_median_minute_ms": round(float(np.median(p99_series)), 4) if len(p99_series) else None,
        "frame_p99_first_minute_ms": None if not len(p99_series) else round(float(p99_series[0]), 4),
        "frame_p99_after_gc_ms": round(float(np.percentile(after_gc, 99)), 4) if after_gc else None,
        "frame_p99_after_quiet_moment_without_gc_ms": round(float(np.percentile(after_quiet, 99)), 4)
        if len(after_quiet) else None,
        "frame_p99_after_identity_render_ms": round(float(np.percentile(after_identity, 99)), 4)
        if after_identity else None,
        "gc_runs": run["gc_runs"],
        "gc_max_ms": round(run["gc_max_ms"], 2),
        "dropped_blocks": run["dropped_blocks"],
        "dropped_frames": run["dropped_frames"],
        "nonfinite_frames": run["nonfinite_frames"],
        "glitch_frames": run["glitch_frames"],
    }
    spike_ms = None
    baseline = summary["frame_p99_after_quiet_moment_without_gc_ms"]
    if summary["frame_p99_after_gc_ms"] is not None and baseline is not None:
        spike_ms = round(summary["frame_p99_after_gc_ms"] - baseline, 4)
    summary["housekeeping_spike_ms"] = spike_ms
    checks = {
        "complete": complete,
        "max_root_drift_mm": _below(summary["max_root_drift_mm"], limits.max_root_drift_mm),
        "max_head_drift_deg": _below(summary["max_head_drift_deg"], limits.max_head_drift_deg),
        "max_av_offset_ms": _below(summary["max_av_offset_ms"], limits.max_av_offset_ms),
        "rss_growth_pct": _below(summary["rss_growth_pct"], limits.max_rss_growth_pct),
        "min_identity_ssim": None if summary["min_identity_ssim"] is None
        else summary["min_identity_ssim"] >= limits.min_identity_ssim,
        "max_neutral_bias": _below(summary["max_neutral_bias"], limits.max_neutral_bias),
        "housekeeping_spike_ms": None if spike_ms is None else spike_ms <= 2.0,
        "nonfinite_frames": summary["nonfinite_frames"] == 0,
    }
    series = {}
    for name, data in monitor.series.items():
        arrays = data.arrays()
        if len(arrays["time_s"]):
            series[name] = {key: np.round(values, 5).tolist() for key, values in arrays.items()}
    return {
        "settings": {
            "preset": options.preset.name, "anchor": monitor.anchoring, "skew_ppm": options.skew_ppm,
            "jitter_ms": options.jitter_ms, "drop_rate": options.drop_rate,
            "pose_bias_mm_per_min": options.pose_bias[0], "pose_bias_deg_per_min": options.pose_bias[1],
            "engine_pass_every_s": options.step_s, "identity_interval_s": options.preset.drift.identity_interval_s,
            "drift_window_s": options.preset.drift.drift_window_s, "seed": options.seed,
            "speed": "max" if options.speed is None else options.speed,
        },
        "summary": summary,
        "thresholds": options.preset.drift.model_dump(),
        "pass": checks,
        "passed": all(value is not False for value in checks.values()),
        "events": list(monitor.events),
        "series": series,
    }


def _below(value: float | None, limit: float) -> bool | None:
    return None if value is None else value <= limit


def gui_rss_growth(times_s: list[float], rss: list[float], warmup_s: float) -> dict:
    """Memory growth of a GUI session after its warm-up: the median RSS over the last stretch (a tenth of the
    run, at most 60 s, about one round of the operator script) against the median over the same stretch from
    `warmup_s` on. Medians, because a playback or a mesh build holds buffers for a few seconds that a single
    sample would count as growth."""
    if not times_s:
        return {"growth_pct": None, "baseline_mb": None, "end_mb": None, "max_mb": None}
    stretch = min(60.0, max(times_s[-1] / 10.0, 1.0))
    after = [mb for t, mb in zip(times_s, rss) if t >= warmup_s] or rss[-1:]
    baseline = float(np.median([mb for t, mb in zip(times_s, rss) if warmup_s <= t < warmup_s + stretch] or after[:1]))
    end = float(np.median([mb for t, mb in zip(times_s, rss) if t >= times_s[-1] - stretch]))
    return {"growth_pct": round((end - baseline) / baseline * 100.0, 2), "baseline_mb": round(baseline, 1),
            "end_mb": round(end, 1), "max_mb": round(max(after), 1)}
