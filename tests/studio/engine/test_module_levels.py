"""Each module level changes the engine's work, counted (inference calls, frames, motion steps, finger joints)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from studio.avatar.skeleton import HAND_JOINTS_LEFT, HAND_JOINTS_RIGHT, JOINT_INDEX
from studio.engine.bench import HopFeeder, speech_like
from studio.engine.motion import relaxed_rest_pose
from studio.engine.pipeline import Engine
from studio.precision import ModulePlan

AUDIO = speech_like(2.0)
ARM_JOINTS = [JOINT_INDEX[name] for name in ("left_shoulder", "left_elbow", "right_shoulder", "right_elbow")]
FINGERS = list(HAND_JOINTS_LEFT) + list(HAND_JOINTS_RIGHT)


def run(plan: ModulePlan, switch_to: ModulePlan | None = None):
    """Feed 2 s of speech-like audio hop by hop (switching plan half-way if asked); (work, frames)."""
    engine = Engine(plan=plan)
    queue = engine.subscribe(10_000)
    source = HopFeeder(AUDIO)
    engine.set_source(source)
    while not source.finished:
        engine.run_once()
        if switch_to is not None and source._read >= len(AUDIO) // 2:
            engine.set_plan(switch_to)
            switch_to = None
    engine.run_once()
    return engine, queue.drain()


HIGH = ModulePlan(face_variant="fp32", face_rate_hz=100, body_mode="full", body_rate_hz=100, hands_mode="articulated")


def test_face_low_runs_the_int8_model_on_half_the_calls_and_emits_half_the_frames():
    high, high_frames = run(HIGH)
    low, low_frames = run(dataclasses.replace(HIGH, face_variant="int8", face_rate_hz=50))
    assert high.model.variant == "fp32" and low.model.variant == "int8"
    assert low.work.hops_inferred == high.work.hops_inferred  # the model still hears every hop
    assert low.work.inference_calls <= high.work.inference_calls // 2 + 2
    assert low.work.frames_emitted <= high.work.frames_emitted // 2 + 2
    mouth = [f.weight("jawOpen") for f in low_frames]
    assert max(mouth) > 0.1  # still lip-syncs


def test_body_low_moves_head_and_torso_only_at_a_quarter_of_the_steps():
    high, high_frames = run(HIGH)
    low, low_frames = run(dataclasses.replace(HIGH, body_mode="head_torso", body_rate_hz=25))
    assert low.work.motion_steps <= high.work.motion_steps // 4 + 2
    rest = relaxed_rest_pose()[ARM_JOINTS]
    assert all(np.allclose(f.pose[ARM_JOINTS], rest, atol=1e-6) for f in low_frames)
    assert not all(np.allclose(f.pose[ARM_JOINTS], rest, atol=1e-6) for f in high_frames)
    head = JOINT_INDEX["head"]
    assert np.ptp([f.pose[head, 0] for f in low_frames]) > 1e-3  # the head still moves


@pytest.mark.parametrize("mode", ["fixed", "relaxed", "articulated"])
def test_hand_levels_count_finger_work_and_move_the_fingers_accordingly(mode):
    engine, frames = run(dataclasses.replace(HIGH, hands_mode=mode))
    fingers = np.array([f.pose[FINGERS] for f in frames])
    varies = np.ptp(fingers, axis=0).max()
    if mode == "fixed":
        assert engine.work.finger_joint_updates == 0 and varies == 0.0
        assert np.abs(fingers[0]).max() > 0.1  # a relaxed curl, not flat boards
    else:
        assert engine.work.finger_joint_updates == 30 * engine.work.motion_steps and varies > 0.0


def test_articulated_hands_take_gesture_shapes_the_relaxed_ones_never_reach():
    relaxed = np.array([f.pose[FINGERS] for f in run(dataclasses.replace(HIGH, hands_mode="relaxed"))[1]])
    articulated = np.array([f.pose[FINGERS] for f in run(HIGH)[1]])
    assert np.abs(articulated - relaxed).max() > 0.2


def test_a_plan_switch_mid_speech_swaps_model_and_rates_without_a_gap():
    engine, frames = run(HIGH, switch_to=dataclasses.replace(HIGH, face_variant="int8", face_rate_hz=50,
                                                              body_mode="head_torso", body_rate_hz=25))
    assert engine.model.variant == "int8" and engine.fps == 50 and engine.motion.body_mode == "head_torso"
    times = np.array([f.media_time_s for f in frames])
    steps = np.diff(times)
    assert np.all(steps > 0) and steps.max() < 0.021  # 100 then 50 frames a second, never a hole
    assert np.isclose(steps[:20], 0.01).all() and np.isclose(steps[-21:-1], 0.02).all()
    # one frame per 1/50 s to the end; the first idle frame, on the 1/fps grid, may follow the last hop sooner
    assert len(np.unique(np.floor(times[-20:] * 50 + 1e-6))) == 20
