"""Housekeeping: gc only at quiet moments and outside frames, the memory watermark lowers precision and says so."""

import gc
import logging
import sys

import numpy as np

from studio.frame import FrameState
from studio.housekeeping import QUIET_S, Housekeeper, lighter_modules, prewarm_engine
from studio.precision import plan_for
from studio.presets import preset_by_name


def _engine(preset, now):
    from studio.engine.pipeline import Engine

    return Engine(plan=plan_for(preset), monotonic=lambda: now[0])


def _run(engine, now, seconds, step_s=0.05):
    for _ in range(int(seconds / step_s)):
        now[0] += step_s
        engine.run_once()


def test_the_education_watermark_switches_to_a_lighter_precision_and_reports_it(caplog):
    education = preset_by_name("education")
    assert education.modules.face == "medium"
    low_watermark = education.model_copy(update={"long_session": education.long_session.model_copy(
        update={"memory_watermark_mb": 1.0})})  # any process is above 1 MB
    now = [50.0]
    engine = _engine(low_watermark, now)
    keeper = Housekeeper(low_watermark)
    engine.housekeeper = keeper
    with caplog.at_level(logging.WARNING, logger="avatar_studio.housekeeping"):
        _run(engine, now, 1.0)
    assert keeper.lowered
    assert keeper.preset.modules == lighter_modules(education.modules)
    assert engine.plan == plan_for(keeper.preset)  # the engine runs the lighter plan now
    assert engine.plan.face_rate_hz < plan_for(education).face_rate_hz
    assert "watermark" in keeper.events[-1] and "face medium->low" in keeper.events[-1]
    assert any("watermark" in record.getMessage() for record in caplog.records)


def test_below_the_watermark_nothing_changes():
    education = preset_by_name("education")
    now = [50.0]
    engine = _engine(education, now)
    keeper = Housekeeper(education, memory_mb=lambda: 0.5 * education.long_session.watermark_mb)
    engine.housekeeper = keeper
    _run(engine, now, 1.0)
    assert not keeper.lowered and engine.plan == plan_for(education)


def test_gc_runs_at_quiet_moments_between_frames_never_inside_one():
    """Each housekeeping collection starts between two engine passes, after QUIET_S of silent frames.

    How long a collection takes is a figure for `soak` (frame p99 after a quiet-moment gc), not a test."""
    preset = preset_by_name("education")
    frequent = preset.model_copy(update={"long_session": preset.long_session.model_copy(
        update={"housekeeping_interval_s": 5.0})})
    now = [10.0]
    engine = _engine(frequent, now)
    keeper = Housekeeper(frequent)
    engine.housekeeper = keeper
    queue = engine.subscribe(100_000)
    making_a_frame = ("_process_source", "_process_idle", "_emit")
    collections: list[tuple[set[str], int]] = []  # (engine functions on the stack, frames emitted so far)

    def on_gc(phase, info):
        stack, frame = set(), sys._getframe(1)
        while frame is not None:
            stack.add(frame.f_code.co_name)
            frame = frame.f_back
        if phase == "start" and "collect" in stack and "tick" in stack:  # the housekeeper's, not Python's own
            collections.append((stack, engine.work.frames_emitted))

    gc.callbacks.append(on_gc)
    try:
        _run(engine, now, 30.0)
    finally:
        gc.callbacks.remove(on_gc)
    frames = queue.drain()
    assert keeper.gc_runs >= 4 and len(collections) == keeper.gc_runs
    for (stack, emitted), at in zip(collections, keeper.gc_media_times):
        assert not stack & set(making_a_frame), f"the gc at {at:.2f} s ran inside {stack & set(making_a_frame)}"
        before = [f for f in frames[:emitted] if f.media_time_s > at - QUIET_S - 1e-9]
        assert before and before[-1].media_time_s == at, "it follows the frame it was timed by"
        assert all(f.voice_activity < 0.05 for f in before) and at - before[0].media_time_s >= QUIET_S - 0.05


def test_no_gc_while_someone_speaks():
    from studio.engine.pipeline import LatestFrameSlot

    class Speaking:  # the slot is the engine's own; only the frames are made up
        slot = LatestFrameSlot()

    keeper = Housekeeper(preset_by_name("education"), memory_mb=lambda: 0.0)
    for index in range(10000):
        Speaking.slot.put(FrameState(media_time_s=index * 0.5, voice_activity=1.0))
        keeper.tick(Speaking)
    assert keeper.gc_runs == 0


def test_prewarm_leaves_the_engine_as_fresh():
    now = [0.0]
    preset = preset_by_name("default")
    warmed, fresh = _engine(preset, now), _engine(preset, now)
    assert prewarm_engine(warmed, voice=None) > 0
    features = np.random.default_rng(0).normal(size=(20, 80)).astype(np.float32)
    assert np.allclose(warmed.model.step(features).arkit, fresh.model.step(features).arkit, atol=1e-6)
