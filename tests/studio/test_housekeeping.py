"""Housekeeping: gc only at quiet moments and outside frames, the memory watermark lowers precision and says so."""

import logging

import numpy as np

from studio.frame import FrameState
from studio.housekeeping import Housekeeper, lighter_modules, prewarm_engine
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


def test_gc_runs_at_quiet_moments_between_frames_and_leaves_frame_time_p99_at_its_baseline():
    preset = preset_by_name("education")
    frequent = preset.model_copy(update={"long_session": preset.long_session.model_copy(
        update={"housekeeping_interval_s": 5.0})})
    now = [10.0]
    engine = _engine(frequent, now)
    keeper = Housekeeper(frequent)
    engine.housekeeper = keeper
    queue = engine.subscribe(100_000)
    garbage = [[object() for _ in range(50)] for _ in range(2000)]  # something for the collector to walk
    _run(engine, now, 30.0)
    del garbage
    frames = queue.drain()
    assert keeper.gc_runs >= 4
    frame_ms = np.array([sum(f.timings_ms.values()) for f in frames])
    times = np.array([f.media_time_s for f in frames])
    after = np.zeros(len(frames), bool)
    for at in keeper.gc_media_times:
        after |= (times > at) & (times <= at + 0.5)
    assert after.any()
    assert np.percentile(frame_ms[after], 99) <= np.percentile(frame_ms[~after], 99) + 2.0


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
