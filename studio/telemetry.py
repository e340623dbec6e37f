"""Per-stage latency telemetry: the engine stamps every stage, the GUI reads aggregates at ~10 Hz.

Bounded memory (a fixed ring per stage) and cheap to record (one lock, one array write), so it
can stay on for a 10,000 s session.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

TOTAL = "total"
HOP_MS = 10.0  # the engine's analysis hop
SOUND_TO_SCREEN = "sound→screen"  # the one name of the latency a preset's target applies to
SOUND_TO_SCREEN_PERCENTILE = 95
SOUND_TO_SCREEN_PARTS = ("device", "lookahead", "engine", "render", "present")


@dataclass(frozen=True)
class SoundToScreen:
    """The latency a preset's target applies to: from a sound reaching the audio device to the frame that
    shows it being on screen. Defined here once; the Latency dock, the Preset panel's verdict and the bench
    show it under this name (`SOUND_TO_SCREEN`), as the sum of its parts (ms):

    - device: the sound's way from the device into the engine: the input's buffer plus one capture block
      (0 for a played file or TTS: the engine reads those before the DAC plays them).
    - lookahead: what the pipeline waits for before it can say what the mouth does at an instant: the face
      model's lookahead hops and the hops it batches at a lower face rate (`pipeline_lookahead_ms`).
    - engine: computing the frame (capture + features + inference + motion + anchor), per frame.
    - render: drawing and presenting it (the window's render/present time).
    - present: waiting for the next presentation tick (the interval between presented frames).

    Each measured part is its p95 over the dock's window (about 15 s), not its p99: that window holds a few
    hundred presented frames (15-60 fps), so a p99 rests on 2-9 of them and one garbage-collector pause or
    shader compile flips the verdict, while the p95 rests on 8-45 and describes what a viewer sees nearly
    all the time. Single slow frames are shown apart (over-budget marks, underruns). A sum of p95s is at
    least the p95 of the sum when the parts rise together, so the verdict errs on the cautious side.
    The delayed voice monitor measures the same span end to end (how far the newest frame trails the voice
    at presentation, plus render): a check on this sum, not a second definition.
    """

    device_ms: float
    lookahead_ms: float
    engine_ms: float
    render_ms: float
    present_ms: float

    @property
    def total_ms(self) -> float:
        return self.device_ms + self.lookahead_ms + self.engine_ms + self.render_ms + self.present_ms

    def parts(self) -> dict[str, float]:
        """Part name -> ms, in the order sound travels."""
        return dict(zip(SOUND_TO_SCREEN_PARTS, (self.device_ms, self.lookahead_ms, self.engine_ms,
                                                 self.render_ms, self.present_ms)))

    def meets(self, target_ms: float) -> bool:
        """Whether a preset's latency target holds: the total is at most the target."""
        return self.total_ms <= target_ms

    def total_text(self) -> str:
        """'sound→screen p95 123.4 ms' (the number the verdict compares with the target)."""
        return f"{SOUND_TO_SCREEN} p{SOUND_TO_SCREEN_PERCENTILE} {self.total_ms:.1f} ms"

    def parts_text(self) -> str:
        """'device 25.0 + lookahead 20.0 + engine 3.1 + render 40.2 + present 33.3' (ms)."""
        return " + ".join(f"{name} {ms:.1f}" for name, ms in self.parts().items())


def pipeline_lookahead_ms(lookahead_frames: int, face_batch_hops: int = 1) -> float:
    """The wait for future audio before a frame can be computed: the face model's lookahead hops plus the
    hops a lower face rate batches (the first of a batch waits for the rest), on the 10 ms hop grid."""
    return (int(lookahead_frames) + max(1, int(face_batch_hops)) - 1) * HOP_MS


def engine_latency_parts(engine) -> dict[str, float]:
    """The engine's fixed parts of the sound→screen latency and the speaker's buffer (ms), read from a
    `studio.engine.pipeline.Engine`: device (the live input's buffer plus a capture block; 0 for a played
    source), lookahead, and `speaker_buffer_ms` (how long a played sound waits in the output buffer)."""
    source = getattr(engine, "source", None)
    device_s = getattr(source, "input_latency_s", None) or 0.0
    plan = getattr(engine, "plan", None)
    model = getattr(engine, "model", None)
    lookahead = pipeline_lookahead_ms(getattr(model, "lookahead_frames", 0), getattr(plan, "face_batch_hops", 1))
    speaker = getattr(engine, "speaker", None)
    buffer_ms = getattr(speaker, "buffer_ms", None)
    parts = {"device_ms": 1000.0 * float(device_s), "lookahead_ms": lookahead}
    if buffer_ms is not None:
        parts["speaker_buffer_ms"] = float(buffer_ms)
    return parts


class _Ring:
    def __init__(self, size: int) -> None:
        self.values = np.zeros(size)
        self.count = 0

    def add(self, value: float) -> None:
        self.values[self.count % len(self.values)] = value
        self.count += 1

    def window(self) -> np.ndarray:
        return self.values[: min(self.count, len(self.values))]


class ProcessCpuMeter:
    """This process's CPU load between calls, read from its CPU-time clock (nanosecond resolution).

    Not from /proc's tick counts (psutil): those advance in 10 ms steps, so a short or light interval
    reads as 0 %, which is what a bare Debian's faster Python showed.
    """

    def __init__(self) -> None:
        self._mark: tuple[float, float] | None = None

    def load_pct(self) -> float:
        """CPU load since the previous call (100 = one full core; 0 on the first call)."""
        mark = (time.process_time(), time.monotonic())
        previous, self._mark = self._mark, mark
        if previous is None or mark[1] <= previous[1]:
            return 0.0
        return 100.0 * (mark[0] - previous[0]) / (mark[1] - previous[1])


class LatencyTelemetry:
    """Sliding-window latency percentiles per stage, an over-budget count and the process CPU load."""

    def __init__(self, window: int = 1000, budget_ms: float = 10.0) -> None:
        if window < 1:
            raise ValueError(f"LatencyTelemetry window={window} must be at least 1")
        if not budget_ms > 0:
            raise ValueError(f"LatencyTelemetry budget_ms={budget_ms} must be positive")
        self.window = int(window)
        self.budget_ms = float(budget_ms)
        self._lock = threading.Lock()
        self._rings: dict[str, _Ring] = {}
        self._over_budget = _Ring(self.window)
        self.over_budget_count = 0
        self.frames = 0
        self._cpu = ProcessCpuMeter()
        self.counter_sources: dict[str, Callable[[], Mapping[str, int]]] = {}  # area -> live counts, read per snapshot

    def record(self, timings_ms: Mapping[str, float]) -> None:
        """Record one frame's stage timings; their sum is checked against the budget."""
        total = float(sum(timings_ms.values()))
        with self._lock:
            for stage, value in timings_ms.items():
                ring = self._rings.get(stage)
                if ring is None:
                    ring = self._rings[stage] = _Ring(self.window)
                ring.add(float(value))
            self._rings.setdefault(TOTAL, _Ring(self.window)).add(total)
            over = total > self.budget_ms
            self._over_budget.add(float(over))
            self.over_budget_count += int(over)
            self.frames += 1

    def snapshot(self) -> dict:
        """{'stages': {name: {p50_ms, p95_ms, p99_ms, max_ms, last_ms}}, over-budget counts, cpu_pct}."""
        with self._lock:
            windows = {stage: (ring.window().copy(), ring.values[(ring.count - 1) % self.window])
                       for stage, ring in self._rings.items() if ring.count}
            over_in_window = int(self._over_budget.window().sum())
            over_total, frames = self.over_budget_count, self.frames
        stages = {}
        for stage, (values, last) in windows.items():
            p50, p95, p99 = np.percentile(values, [50, 95, 99])
            stages[stage] = {"p50_ms": float(p50), "p95_ms": float(p95), "p99_ms": float(p99),
                             "max_ms": float(values.max()), "last_ms": float(last)}
        return {
            "stages": stages,
            "budget_ms": self.budget_ms,
            "over_budget_count": over_total,
            "over_budget_in_window": over_in_window,
            "frames": frames,
            "cpu_pct": self.cpu_pct(),
            **{area: dict(read()) for area, read in self.counter_sources.items()},
        }

    def cpu_pct(self) -> float:
        """Process CPU load since the previous call (100 = one full core; 0 on the first call)."""
        return self._cpu.load_pct()

    def reset(self) -> None:
        with self._lock:
            self._rings.clear()
            self._over_budget = _Ring(self.window)
            self.over_budget_count = 0
            self.frames = 0
