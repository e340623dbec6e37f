"""Long-session housekeeping from the preset: a garbage collection at quiet moments, a memory watermark
that switches to a lighter module precision, and prewarming so the first minute is as smooth as the
hundredth.

The engine calls `Housekeeper.tick(engine)` on its own thread between passes, that is between frames;
a collection runs only after `QUIET_S` of silence, so the frame it could delay is an idle one.
"""

from __future__ import annotations

import gc
import logging
import time
from collections import deque

from studio.heap import release_free_memory
from studio.precision import Level, plan_for
from studio.presets import Modules, Preset

log = logging.getLogger("avatar_studio.housekeeping")

QUIET_S = 0.5  # silence this long before a collection may run
MEMORY_CHECK_S = 5.0  # media seconds between two looks at the process memory
RELEASE_INTERVAL_S = 60.0  # free C-heap pages go back to the system this often, in quiet moments (~0.1 ms)
_LIGHTER: dict[str, Level] = {"high": "medium", "medium": "low", "low": "low"}


def lighter_modules(modules: Modules) -> Modules:
    """Every module one precision level down (low stays low)."""
    return Modules(**{name: _LIGHTER[level] for name, level in modules.model_dump().items()})


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


class Housekeeper:
    """Runs between engine passes: gc when quiet and due, lighter precision above the memory watermark."""

    def __init__(self, preset: Preset, memory_mb=rss_mb) -> None:
        self.preset = preset
        self.settings = preset.long_session
        self.memory_mb = memory_mb
        self.lowered = False
        self.gc_runs = 0
        self.gc_ms: deque[float] = deque(maxlen=256)
        self.gc_media_times: deque[float] = deque(maxlen=256)
        self.quiet_moments: deque[float] = deque(maxlen=256)  # when a silence became long enough to collect in
        self.events: deque[str] = deque(maxlen=50)
        self._quiet_since: float | None = None
        self._last_gc: float | None = None
        self._last_release: float | None = None
        self.releases = 0
        self._next_memory_check = 0.0

    def tick(self, engine) -> None:
        frame = engine.slot.latest()
        if frame is None:
            return
        now = frame.media_time_s
        if self._last_gc is None:
            self._last_gc = now  # the interval counts from the session start
        if frame.voice_activity < 0.05:
            self._quiet_since = now if self._quiet_since is None else self._quiet_since
        else:
            self._quiet_since = None
        quiet = self._quiet_since is not None and now - self._quiet_since >= QUIET_S
        if quiet and (not self.quiet_moments or self.quiet_moments[-1] < self._quiet_since):
            self.quiet_moments.append(now)
        if quiet and now - self._last_gc >= self.settings.housekeeping_interval_s:
            self.collect(now)
        elif quiet and now - (self._last_release if self._last_release is not None else self._last_gc) >= RELEASE_INTERVAL_S:
            self._release(now)
        if now >= self._next_memory_check:
            self._next_memory_check = now + MEMORY_CHECK_S
            self.check_memory(engine, now)

    def collect(self, media_time_s: float) -> float:
        started = time.perf_counter()
        gc.collect()
        self._release(media_time_s)
        cost_ms = (time.perf_counter() - started) * 1000.0
        self._last_gc = media_time_s
        self.gc_runs += 1
        self.gc_ms.append(cost_ms)
        self.gc_media_times.append(media_time_s)
        log.info("housekeeping: garbage collected and free memory returned in a quiet moment at %.0f s (%.1f ms)",
                 media_time_s, cost_ms)
        return cost_ms

    def _release(self, media_time_s: float) -> None:
        """Free pages inside the C heaps back to the system: what a session frees stays free, not held in RSS."""
        release_free_memory()
        self._last_release = media_time_s
        self.releases += 1

    def check_memory(self, engine, media_time_s: float) -> None:
        used = self.memory_mb()
        watermark = self.settings.watermark_mb
        if self.lowered or used < watermark:
            return
        self.lowered = True
        before = self.preset.modules
        self.preset = self.preset.model_copy(update={"modules": lighter_modules(before)})
        after = self.preset.modules
        changes = ", ".join(f"{name} {level}->{getattr(after, name)}" for name, level in before.model_dump().items()
                            if getattr(after, name) != level)
        plan = plan_for(self.preset)
        engine.set_plan(plan)
        message = (f"memory {used:.0f} MB reached the {watermark:.0f} MB watermark at {media_time_s:.0f} s: "
                   f"lighter precision ({changes or 'already the lightest'}; face model {plan.face_variant} "
                   f"at {plan.face_rate_hz:.0f} Hz, body {plan.body_mode})")
        self.events.append(message)
        log.warning("housekeeping: %s", message)


def prewarm_engine(engine, voice: str | None = "en-us") -> float:
    """Run the face model, features, prosody and motion once, and load the TTS voice, before the session
    starts, so nothing is loaded or compiled mid-sentence; returns the seconds it took."""
    import numpy as np

    from studio.engine.motion import SILENCE

    started = time.perf_counter()
    engine.model.step(np.zeros((50, 80), np.float32))
    engine.model.reset()
    engine.features.push(np.zeros(1600, np.float32))
    engine.features.reset()
    engine.prosody.push(np.zeros(1600, np.float32))
    engine.prosody.reset()
    for index in range(20):
        engine.motion.step(index * 0.01, SILENCE)
    engine.motion.reset()
    if voice:
        try:
            from studio.speech.espeak import EspeakSynth

            EspeakSynth(voice).synthesize("Ready.")
        except Exception as error:  # noqa: BLE001 - no voice: speech will say why when it is asked for
            log.info("prewarm: the TTS voice %r is not available (%s)", voice, error)
    return time.perf_counter() - started


def freeze_survivors() -> None:
    """Collect once and move every object alive now (models, caches, GUI) out of the collector's sight
    (gc.freeze): each quiet-moment collection after this walks only what the session created since."""
    gc.collect()
    gc.freeze()


def prepare_long_session(engine, preset: Preset, voice: str | None = "en-us") -> None:
    """What a preset's `long_session` asks of a new engine: housekeeping between passes, and prewarm."""
    engine.housekeeper = Housekeeper(preset)
    if preset.long_session.prewarm:
        seconds = prewarm_engine(engine, voice)
        freeze_survivors()
        log.info("prewarm: models, features, motion and the voice ready in %.2f s", seconds)
