"""Single-producer, single-consumer ring buffer of float32 audio frames, stamped with sample positions.

The audio callback (producer) only copies into it; the engine thread (consumer) drains it.
No lock: the producer writes the samples before it publishes the new write position, and the
consumer checks after copying that the writer has not lapped it (under the GIL, integer
attribute stores are atomic). When the consumer falls behind by more than the capacity the
oldest audio is dropped and counted, never queued without bound.
"""

from __future__ import annotations

import time

import numpy as np


class AudioRing:
    """float32 ring of `channels`-wide frames (a device's own layout: mono (n,), else (n, channels)); positions
    count frames since the stream started (the media clock)."""

    def __init__(self, capacity: int, channels: int = 1) -> None:
        if capacity < 1:
            raise ValueError(f"AudioRing capacity={capacity} must be at least 1 sample")
        if channels < 1:
            raise ValueError(f"AudioRing channels={channels} must be at least 1")
        self.capacity = int(capacity)
        self.channels = int(channels)
        self._data = np.zeros((self.capacity, self.channels) if self.channels > 1 else self.capacity, np.float32)
        self._written = 0  # total samples ever written (published after the copy)
        self._read = 0  # total samples consumed or skipped
        self.dropped_samples = 0
        self.last_write_position = 0  # sample position at the end of the latest write
        self.last_write_monotonic = 0.0  # time.monotonic() of that write
        self._largest_write = 0

    @property
    def written(self) -> int:
        return self._written

    def write(self, samples: np.ndarray, monotonic_s: float | None = None) -> None:
        """Producer side: copy frames in, (n,) or (n, channels) (the caller's buffer is not kept)."""
        samples = np.asarray(samples, np.float32).reshape((-1, self.channels) if self.channels > 1 else -1)
        n = len(samples)
        if n == 0:
            return
        if n > self.capacity:  # only the newest fit; the rest counts as written and dropped
            self._written += n - self.capacity
            samples = samples[-self.capacity:]
            n = self.capacity
        self._largest_write = max(self._largest_write, n)
        start = self._written % self.capacity
        first = min(n, self.capacity - start)
        self._data[start:start + first] = samples[:first]
        self._data[: n - first] = samples[first:]
        self._written += n
        self.last_write_monotonic = time.monotonic() if monotonic_s is None else monotonic_s
        self.last_write_position = self._written

    def read_available(self) -> tuple[int, np.ndarray]:
        """Consumer side: (position of the first returned frame, a private copy of all unread frames)."""
        written = self._written
        start = max(self._read, written - self.capacity)
        n = written - start
        if n <= 0:
            return self._read, np.zeros(self._data[:0].shape, np.float32)
        index = start % self.capacity
        first = min(n, self.capacity - index)
        out = np.concatenate([self._data[index:index + first], self._data[: n - first]])
        # samples the producer overwrote (or may be overwriting right now) while we copied
        lapped = self._written + self._largest_write - self.capacity - start
        if lapped > 0:
            out = out[lapped:]
            start += lapped
        self.dropped_samples += start - self._read
        self._read = start + len(out)
        return start, out

    def reset(self) -> None:
        self._written = 0
        self._read = 0
        self.dropped_samples = 0
        self.last_write_position = 0
        self.last_write_monotonic = 0.0
