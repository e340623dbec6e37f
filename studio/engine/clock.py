"""The media clock (audio sample position) and its estimated mapping to time.monotonic().

A sound card's crystal is not the CPU's: one running 100 ppm fast gains 0.72 s in two hours.
Each audio callback gives an observation (media time of the samples it delivered, monotonic
time it ran). Callback jitter only ever makes a callback late, so per one-second bucket we keep
the earliest observation (the lower envelope), and fit a line through the last `history_s` of
those points: offset and skew, robust to jitter, and an honest drift monitor.

The fit also says how far to trust it: the skew's standard error, and how far the line sits from where
the device put the newest buckets (what the picture, placed by the line, is off the sound by).
"""

from __future__ import annotations

import threading
from collections import deque

import numpy as np


class MediaClock:
    """Continuously estimated mapping media time <-> monotonic time."""

    def __init__(self, bucket_s: float = 1.0, history_s: float = 600.0) -> None:
        if bucket_s <= 0 or history_s < 2 * bucket_s:
            raise ValueError(f"MediaClock needs bucket_s > 0 and history_s >= 2*bucket_s, got {bucket_s}, {history_s}")
        self.bucket_s = float(bucket_s)
        self._points: deque[tuple[float, float]] = deque(maxlen=int(history_s / bucket_s))
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Forget everything (a new source has a new clock)."""
        with self._lock:
            self._points.clear()
            self._bucket: int | None = None
            self._bucket_best: tuple[float, float] | None = None
            self._first: tuple[float, float] | None = None
            self._latest: tuple[float, float] | None = None
            self._slope = 1.0  # monotonic seconds per media second
            self._anchor = (0.0, 0.0)  # (media, monotonic) the line passes through
            self._slope_error = float("inf")  # standard error of the slope (inf below 3 points)
            self._residuals = np.zeros(0)  # each point's monotonic time minus the line's, oldest first
            self.observations = 0

    def observe(self, media_time_s: float, monotonic_s: float) -> None:
        """One callback: these samples end at media_time_s and were delivered at monotonic_s."""
        media_time_s, monotonic_s = float(media_time_s), float(monotonic_s)
        with self._lock:
            self.observations += 1
            self._latest = (media_time_s, monotonic_s)
            if self._first is None:
                self._first = self._latest
                self._anchor = self._latest
            bucket = int(media_time_s // self.bucket_s)
            if self._bucket is not None and bucket != self._bucket and self._bucket_best is not None:
                self._points.append(self._bucket_best)
                self._bucket_best = None
                self._fit()
            self._bucket = bucket
            lateness = monotonic_s - media_time_s
            if self._bucket_best is None or lateness < self._bucket_best[1] - self._bucket_best[0]:
                self._bucket_best = (media_time_s, monotonic_s)
            if not self._points:  # until the first bucket closes: earliest-seen offset, no skew
                best = self._bucket_best
                if best[1] - best[0] <= self._anchor[1] - self._anchor[0]:
                    self._anchor = best

    def _fit(self) -> None:
        points = np.array(self._points)
        media, mono = points[:, 0], points[:, 1]
        if len(points) >= 3 and media[-1] - media[0] > 0:
            media_mean, mono_mean = media.mean(), mono.mean()
            centred = media - media_mean
            spread = float(np.dot(centred, centred))
            slope = float(np.dot(centred, mono - mono_mean) / spread)
            residuals = mono - mono_mean - slope * centred
            # the median residual keeps one unlucky bucket from shifting the whole line
            median_residual = float(np.median(residuals))
            self._slope = slope
            self._anchor = (media_mean, mono_mean + median_residual)
            self._residuals = residuals - median_residual
            self._slope_error = float(np.sqrt(np.dot(residuals, residuals) / (len(points) - 2) / spread))
        else:
            best = min(self._points, key=lambda p: p[1] - p[0])
            self._anchor = best
            self._slope_error = float("inf")
            self._residuals = np.zeros(0)

    @property
    def skew_ppm(self) -> float:
        """How much faster the media clock runs than the monotonic clock, parts per million."""
        return (1.0 / self._slope - 1.0) * 1e6

    @property
    def skew_error_ppm(self) -> float:
        """Standard error of `skew_ppm` (inf until three buckets have closed): a skew within a few of these of
        zero is not a measured skew."""
        with self._lock:
            return self._slope_error / self._slope ** 2 * 1e6

    @property
    def fitted_points(self) -> int:
        """Closed one-bucket points the estimate rests on."""
        with self._lock:
            return len(self._points)

    @property
    def fitted_span_s(self) -> float:
        """Media seconds between the oldest and the newest point the estimate rests on."""
        with self._lock:
            return self._points[-1][0] - self._points[0][0] if self._points else 0.0

    def recent_error_s(self, buckets: int = 5) -> float | None:
        """Media time the estimate is ahead of the device over the newest `buckets` points (their median):
        where the picture, placed by the estimate, stands against the sound. None below three points."""
        with self._lock:
            if len(self._residuals) < 3:
                return None
            return float(np.median(self._residuals[-buckets:])) / self._slope

    @property
    def drift_s(self) -> float:
        """Media time gained on the monotonic clock since the first observation (a drift monitor)."""
        with self._lock:
            if self._first is None or self._latest is None:
                return 0.0
            return (self._latest[0] - self._first[0]) - (self._to_monotonic(self._latest[0]) - self._first[1])

    def _to_monotonic(self, media_time_s: float) -> float:
        return self._anchor[1] + (media_time_s - self._anchor[0]) * self._slope

    def media_to_monotonic(self, media_time_s: float) -> float:
        with self._lock:
            return self._to_monotonic(media_time_s)

    def monotonic_to_media(self, monotonic_s: float) -> float:
        with self._lock:
            return self._anchor[0] + (monotonic_s - self._anchor[1]) / self._slope

    @property
    def ready(self) -> bool:
        return self.observations > 0
