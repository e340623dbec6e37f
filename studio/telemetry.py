"""Per-stage latency telemetry: the engine stamps every stage, the GUI reads aggregates at ~10 Hz.

Bounded memory (a fixed ring per stage) and cheap to record (one lock, one array write), so it
can stay on for a 10,000 s session.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

import numpy as np

TOTAL = "total"


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
