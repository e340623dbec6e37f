"""A UDP receiver on a thread of its own: each datagram is handed to `handle`, which never raises past here.

Whatever a packet holds, the thread goes on: a handler error is counted as malformed input. Counts say
what was ignored (malformed packets, non-finite values, unknown names) and what was clamped.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass

from studio.interop.sender import plain_socket_error

RECEIVE_BYTES = 65536
POLL_S = 0.1  # how long the thread waits for a packet before it looks whether it should stop
BUSY_LIMIT = 0.3
"""Of each second, at most this long is spent decoding; past it packets are dropped unread and counted as
"flood". A full-body VMC tracker at 60 Hz needs about half of it here; a flood of packets can no longer take
the interpreter from the engine for more than this share."""


@dataclass(frozen=True)
class ReceiverStats:
    running: bool
    packets: int
    packets_per_s: float
    counts: dict[str, int]  # malformed, nonfinite, unknown_name, clamped, flood (dropped unread: too many)
    last_error: str | None


class UdpReceiver:
    """Base of the tracker receivers; a subclass implements `handle(data, arrived_monotonic)`."""

    name = "receiver"

    def __init__(self, port: int, host: str = "0.0.0.0") -> None:
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"{self.name} port {port!r} is not allowed; use 1..65535 (0: any free port)")
        self.host, self.port = host, port
        self.packets = 0
        self.counts: Counter[str] = Counter()
        self.last_error: str | None = None
        self._arrived: deque[float] = deque(maxlen=512)
        self._socket: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def count(self, what: str, n: int = 1) -> None:
        with self._lock:
            self.counts[what] += n

    def handle(self, data: bytes, arrived: float) -> None:
        raise NotImplementedError

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Bind and listen; ValueError in plain words when the port cannot be had (`last_error` says it too)."""
        if self.running:
            return
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.bind((self.host, self.port))
        except OSError as error:
            sock.close()
            self.last_error = plain_socket_error(error, self.host, self.port)
            raise ValueError(self.last_error) from None
        sock.settimeout(POLL_S)
        self.port = sock.getsockname()[1]
        self.last_error = None
        self._socket = sock
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"{self.name}-receiver", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def stats(self) -> ReceiverStats:
        now = time.monotonic()
        with self._lock:
            counts = dict(self.counts)
        recent = sum(1 for t in list(self._arrived) if now - t <= 1.0)
        return ReceiverStats(running=self.running, packets=self.packets, packets_per_s=float(recent),
                             counts=counts, last_error=self.last_error)

    def _run(self) -> None:
        sock = self._socket
        window_start, busy = time.monotonic(), 0.0
        while not self._stop.is_set():
            try:
                data = sock.recv(RECEIVE_BYTES)
            except TimeoutError:
                continue
            except OSError as error:
                self.last_error = plain_socket_error(error, self.host, self.port)
                continue
            arrived = time.monotonic()
            self.packets += 1
            self._arrived.append(arrived)
            if arrived - window_start >= 1.0:
                window_start, busy = arrived, 0.0
            if busy >= BUSY_LIMIT:
                self.count("flood")
                continue
            begin = time.perf_counter()
            try:
                self.handle(data, arrived)
            except Exception:  # noqa: BLE001 - a packet must never stop the receiver
                self.count("malformed")
            busy += time.perf_counter() - begin
