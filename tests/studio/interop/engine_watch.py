"""What a running engine's own thread does while a test floods a door (a receiver, the API): the code it runs and
the frames it makes. The per-hop budget is kept structurally, so these are what the fuzz tests assert instead of
times (the machine is noisy; times go in `avatar-studio bench`):

- no decoding, parsing or sending runs on the engine thread: the thread profiles itself (`sys.setprofile`,
  installed from the engine's own between-passes hook, `Engine.housekeeper`) and records every function it enters;
- the engine keeps making frames during the flood, each one whole and finite, none skipped or dropped.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time

import numpy as np

from studio.engine.pipeline import Engine, FrameQueue

DEADLINE_S = 30.0  # a hang guard, never a timing assert

# code that decodes, parses, validates, encodes or sends messages; none of it may run on the engine thread
MESSAGE_WORK = tuple(os.path.join(*parts) for parts in (
    ("pythonosc", ""), ("aiohttp", ""), ("json", ""), ("pydantic", ""), ("pydantic_core", ""), ("pylivelinkface", ""),
    ("studio", "interop", "vmc.py"), ("studio", "interop", "livelink_udp.py"), ("studio", "interop", "receiver.py"),
    ("studio", "interop", "sender.py"), ("studio", "api", "server.py"), ("studio", "api", "messages.py")))
# the engine thread's hand-offs into the API server: each copies or schedules and returns
HANDOFFS = {"_on_audio", "_event_from_any_thread", "_call_soon"}
SOCKET_CALLS = {"send", "sendto", "sendall", "sendmsg", "recv", "recvfrom", "recv_into", "recvfrom_into", "recvmsg"}


class _Hook:
    """The engine's between-passes hook, wrapping the one it had (its calls and attributes pass through)."""

    def __init__(self, watch: EngineWatch, inner) -> None:
        self.watch, self.inner = watch, inner

    def tick(self, engine) -> None:
        self.watch.on_engine_thread()
        if self.inner is not None:
            self.inner.tick(engine)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


class EngineWatch:
    """`with EngineWatch(engine) as watch:` profiles the engine thread and collects every frame it makes."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.codes: set = set()
        self.builtins: set[str] = set()
        self.thread_id: int | None = None
        self._installed, self._removed, self._stopping = threading.Event(), threading.Event(), False
        self._queue: FrameQueue | None = None
        self._hook: _Hook | None = None
        self.frames: list = []

    def __enter__(self) -> EngineWatch:
        self._queue = self.engine.subscribe(maxlen=1_000_000)
        self._hook = _Hook(self, self.engine.housekeeper)
        self.engine.housekeeper = self._hook
        assert self._installed.wait(DEADLINE_S), "the engine thread never ran its between-passes hook"
        return self

    def __exit__(self, *exc) -> None:
        self._stopping = True
        removed = self._removed.wait(DEADLINE_S)
        self.engine.housekeeper = self._hook.inner
        self.engine.unsubscribe(self._queue)
        self.take_frames()
        assert removed, "the engine thread stopped running its between-passes hook"

    def on_engine_thread(self) -> None:
        if self._stopping:
            sys.setprofile(None)
            self._removed.set()
        elif not self._installed.is_set():
            self.thread_id = threading.get_ident()
            sys.setprofile(self._profile)
            self._installed.set()

    def _profile(self, frame, event: str, arg) -> None:
        if event == "call":
            self.codes.add(frame.f_code)
        elif event == "c_call":
            self.builtins.add(getattr(arg, "__name__", ""))

    def take_frames(self) -> list:
        """The frames made since the last call (all of them: the queue is far too long to drop one)."""
        new = self._queue.drain()
        self.frames += new
        assert self._queue.dropped == 0
        return new

    def ran(self, filename_part: str, name: str) -> bool:
        return any(filename_part in code.co_filename and code.co_name == name for code in set(self.codes))

    def message_work(self) -> list[str]:
        """`file:function` of each piece of message work that ran on the engine thread, and each socket call."""
        found = sorted(f"{code.co_filename}:{code.co_name}" for code in set(self.codes)
                       if any(part in code.co_filename for part in MESSAGE_WORK) and code.co_name not in HANDOFFS)
        return found + sorted(f"socket {name}" for name in set(self.builtins) & SOCKET_CALLS)

    def wait_for_frames_after(self, count: int, what: str) -> int:
        """Wait (hang guard only) until the engine has made a frame past `count` frames; returns the new count."""
        deadline = time.monotonic() + DEADLINE_S
        while self.engine.work.frames_emitted <= count:
            assert time.monotonic() < deadline, f"the engine made no frame for {DEADLINE_S:.0f} s {what}"
            time.sleep(0.002)
        return self.engine.work.frames_emitted

    def check_frames(self, idle_fps: float | None = None) -> None:
        """Every frame whole and finite, in order; with `idle_fps` (an engine with no source) none skipped."""
        frames = self.frames
        assert frames, "the engine made no frames"
        sequences = np.array([frame.sequence for frame in frames])
        assert np.all(np.diff(sequences) == 1), "a frame went missing between the engine and its subscriber"
        times = np.array([frame.media_time_s for frame in frames])
        assert np.all(np.diff(times) > 0), "media time did not advance from frame to frame"
        if idle_fps is not None:
            np.testing.assert_allclose(np.diff(times), 1.0 / idle_fps, rtol=1e-6,
                                       err_msg="the idle engine skipped a frame")
        for frame in frames:
            assert frame.arkit.shape == (52,) and np.isfinite(frame.arkit).all(), frame.sequence
            assert float(frame.arkit.min()) >= 0.0 and float(frame.arkit.max()) <= 1.0, frame.sequence
            assert np.isfinite(frame.pose).all() and np.isfinite(frame.transl).all(), frame.sequence
            assert all(math.isfinite(v) for v in frame.timings_ms.values()), frame.sequence
