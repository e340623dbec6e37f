"""A UDP output fed with FrameStates on its own thread, so that a slow or absent receiver never slows the engine.

The engine hands each frame to a bounded drop-oldest queue (`Engine.subscribe`); the sender's thread takes
them, keeps one per `1 / rate_hz` of media time, encodes it (`encode`, one datagram per frame) and sends it
on a non-blocking socket. A send that fails is counted and said in plain words, and sending goes on.
"""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass

from studio.frame import FrameState

QUEUE_FRAMES = 8  # at most this many frames wait for the sender; older ones are dropped
MAX_DATAGRAM = 65507  # the most a UDP/IPv4 datagram can carry


@dataclass(frozen=True)
class SenderStats:
    """What an output has done so far, for the Outputs panel and tests."""

    running: bool
    sent: int
    dropped: int
    errors: int
    packets_per_s: float
    last_error: str | None
    encode_ms_mean: float


def resolve(host: str, port: int) -> tuple[str, int]:
    """The socket address of host:port; ValueError in one line when the host or port cannot be used."""
    if not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"port {port!r} is not allowed; use 1..65535")
    try:
        info = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)
    except (socket.gaierror, UnicodeError) as error:
        raise ValueError(f"host {host!r} is not a known address ({error})") from None
    return info[0][4][:2]


def plain_socket_error(error: OSError, host: str, port: int) -> str:
    """An OSError of a send or bind in words an operator can act on."""
    if error.errno == errno.EADDRINUSE:
        return f"port {port} is in use by another program"
    if error.errno in (errno.ECONNREFUSED,):
        return f"nothing is listening at {host}:{port}"
    if error.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
        return f"{host} cannot be reached from this computer"
    if error.errno == errno.EACCES:
        return f"not allowed to use {host}:{port}"
    if error.errno == errno.EMSGSIZE:
        return "a frame is too large for one UDP packet"
    return f"{host}:{port}: {error.strerror or error}"


class FrameSender:
    """Base of the UDP outputs: `encode(frame) -> bytes` is the one thing a subclass adds."""

    name = "output"

    def __init__(self, host: str = "127.0.0.1", port: int = 0, rate_hz: float = 30.0) -> None:
        if not 1.0 <= float(rate_hz) <= 240.0:
            raise ValueError(f"{self.name} rate {rate_hz} Hz is out of range; allowed 1..240")
        self.host, self.port = host, int(port)
        self.address = resolve(host, self.port)
        self.rate_hz = float(rate_hz)
        self.sent = 0
        self.errors = 0
        self.last_error: str | None = None
        self._encode_s = 0.0
        self._encoded = 0
        self._sent_at: deque[float] = deque(maxlen=512)
        self._queue = None
        self._engine = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._last_slot: int | None = None
        self._last_media = -1.0
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.setblocking(False)

    def encode(self, frame: FrameState) -> bytes:
        raise NotImplementedError

    # ------------------------------------------------------------ control (any thread)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, engine) -> None:
        """Subscribe to `engine` (anything with subscribe/unsubscribe) and send on a thread of its own."""
        if self.running:
            return
        self._engine = engine
        self._queue = engine.subscribe(QUEUE_FRAMES)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"{self.name}-sender", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        if self._engine is not None and self._queue is not None:
            self._engine.unsubscribe(self._queue)
        self._engine = self._queue = None

    def close(self) -> None:
        self.stop()
        self._socket.close()

    def stats(self) -> SenderStats:
        now = time.monotonic()
        recent = [t for t in list(self._sent_at) if now - t <= 1.0]
        return SenderStats(running=self.running, sent=self.sent,
                           dropped=self._queue.dropped if self._queue is not None else 0, errors=self.errors,
                           packets_per_s=float(len(recent)), last_error=self.last_error,
                           encode_ms_mean=1000.0 * self._encode_s / self._encoded if self._encoded else 0.0)

    # ------------------------------------------------------------ sender thread

    def due(self, frame: FrameState) -> bool:
        """Whether this frame starts a new 1/rate_hz slot of media time (time going back starts afresh)."""
        if frame.media_time_s < self._last_media:
            self._last_slot = None
        self._last_media = frame.media_time_s
        slot = int(frame.media_time_s * self.rate_hz + 1e-6)
        if slot == self._last_slot:
            return False
        self._last_slot = slot
        return True

    def send_frame(self, frame: FrameState) -> bool:
        """Encode and send one frame now (the thread's step; benchmarks call it directly). True when sent."""
        begin = time.perf_counter()
        data = self.encode(frame)
        self._encode_s += time.perf_counter() - begin
        self._encoded += 1
        try:
            self._socket.sendto(data, self.address)
        except BlockingIOError:  # the socket's buffer is full: this frame is dropped, the next one goes
            self.errors += 1
            return False
        except OSError as error:
            self.errors += 1
            self.last_error = plain_socket_error(error, self.host, self.port)
            return False
        self.sent += 1
        self.last_error = None
        self._sent_at.append(time.monotonic())
        return True

    def _run(self) -> None:
        queue = self._queue
        while not self._stop.is_set():
            frame = queue.get(timeout=0.1)
            if frame is not None and self.due(frame):
                self.send_frame(frame)
