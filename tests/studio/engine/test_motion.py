"""Motion follows prosody, stays bounded under any input, and is deterministic for a seed."""

import math

import numpy as np
import pytest

from studio.avatar.skeleton import JOINT_INDEX
from studio.avatar.skinning import batch_rodrigues
from studio.engine.motion import (
    AUDIBLE_DB,
    EYE_LOOK_FULL_RAD,
    FLOOR_SETTLE_HOPS,
    IdleMotion,
    MotionGenerator,
    MotionStyle,
    MouthGate,
    Prosody,
    ProsodyTracker,
    _swing_then_rest,
    blink_shape,
    blink_shapes,
    gaze_angles,
    relaxed_rest_pose,
)

HOP = 0.01


def axis_angle_to_matrix(rotvec) -> np.ndarray:
    return batch_rodrigues(rotvec)[0]


def matrix_to_axis_angle(matrix: np.ndarray) -> np.ndarray:
    cos_angle = min(1.0, max(-1.0, (float(np.trace(matrix)) - 1.0) / 2.0))
    angle = math.acos(cos_angle)
    if angle < 1e-9:
        return np.zeros(3)
    axis = np.array([matrix[2, 1] - matrix[1, 2], matrix[0, 2] - matrix[2, 0], matrix[1, 0] - matrix[0, 1]])
    norm = float(np.linalg.norm(axis))
    if norm < 1e-9:  # angle near pi: take the axis from the symmetric part
        diag = np.sqrt(np.maximum((np.diag(matrix) + 1.0) / 2.0, 0.0))
        axis = diag * np.sign(np.where(diag == 0, 1.0, [1.0, matrix[0, 1] + 1e-12, matrix[0, 2] + 1e-12]))
        norm = float(np.linalg.norm(axis))
    return axis / norm * angle


def _run(generator, prosodies, start=0.0):
    return [generator.step(start + i * HOP, p) for i, p in enumerate(prosodies)]


def _speech(seconds, seed=0):
    """Syllable-like loudness bursts at ~4 Hz with a wandering pitch."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds / HOP)) * HOP
    energy = np.clip(0.5 + 0.5 * np.sin(2 * np.pi * 4 * t) + 0.1 * rng.standard_normal(len(t)), 0, 1)
    pitch = np.sin(2 * np.pi * 0.5 * t)
    return [Prosody(energy=float(e), pitch=float(p), voiced=e > 0.3, speaking=1.0) for e, p in zip(energy, pitch)]


def test_speech_moves_the_head_more_than_silence():
    silent = _run(MotionGenerator(), [Prosody()] * 1000)
    speaking = _run(MotionGenerator(), _speech(10))
    head_speed = [np.abs(np.diff([m.pose[15] for m in frames], axis=0)).sum() for frames in (silent, speaking)]
    assert head_speed[1] > 2 * head_speed[0]


def test_beat_gestures_need_gesture_energy():
    def elbow_travel(energy):
        frames = _run(MotionGenerator(MotionStyle(gesture_energy=energy)), _speech(10))
        elbows = np.array([np.concatenate([m.pose[18], m.pose[19]]) for m in frames])
        return np.abs(elbows - elbows[0]).max()

    assert elbow_travel(1.0) > 0.2
    assert elbow_travel(0.0) < 0.05


def test_deterministic_for_a_seed():
    a = _run(MotionGenerator(MotionStyle(seed=5)), _speech(3))
    b = _run(MotionGenerator(MotionStyle(seed=5)), _speech(3))
    assert all(np.array_equal(x.pose, y.pose) and np.array_equal(x.eye_weights, y.eye_weights) for x, y in zip(a, b))


def test_bounded_under_hostile_input_late_in_a_session():
    rng = np.random.default_rng(1)
    hostile = [Prosody(energy=float(rng.integers(0, 2)), pitch=float(rng.uniform(-5, 5)), voiced=True,
                       speaking=float(rng.integers(0, 2))) for _ in range(6000)]
    frames = _run(MotionGenerator(MotionStyle(head_gain=3, gesture_energy=2, sway=3)), hostile, start=7200.0)
    poses = np.array([m.pose for m in frames])
    assert np.isfinite(poses).all()
    assert np.abs(poses[:, 12:16]).max() < 0.36  # neck and head within the clamp
    assert np.abs(poses).max() < 2.5
    eyes = np.array([m.eye_weights for m in frames])
    assert eyes.min() >= 0 and eyes.max() <= 1


def test_a_phrase_end_brings_a_blink():
    style = MotionStyle(blink_rate_per_min=0.5, seed=2)  # almost no spontaneous blinks
    frames = _run(MotionGenerator(style), _speech(2) + [Prosody()] * 100)
    blink = np.array([m.eye_weights[0] for m in frames])
    assert blink[:150].max() < 0.5
    assert blink[200:].max() > 0.9


def test_prosody_tracker_hears_pitch_loudness_and_silence():
    sr = 16000
    t = np.arange(sr) / sr
    tracker = ProsodyTracker()
    silence = tracker.push(np.zeros(sr // 2) + 0.3)  # DC offset only
    assert all(p.energy == 0.0 and not p.voiced for p in silence[5:])  # after the step onset
    low = tracker.push(0.3 * np.sin(2 * np.pi * 120 * t))
    high = tracker.push(0.3 * np.sin(2 * np.pi * 240 * t))
    assert sum(p.voiced for p in low[10:]) > 0.9 * len(low[10:])
    assert np.mean([p.energy for p in low[10:]]) > 0.5
    assert np.mean([p.pitch for p in high[10:]]) > np.mean([p.pitch for p in low[10:]]) + 0.3


def test_gaze_travels_in_the_eye_look_weights_and_the_eye_joints_stay_at_rest():
    frames = _run(MotionGenerator(MotionStyle(seed=3)), [Prosody()] * 2000)
    eye_joints = np.array([m.pose[[JOINT_INDEX["left_eye_smplhf"], JOINT_INDEX["right_eye_smplhf"]]] for m in frames])
    assert np.all(eye_joints == 0.0)  # one gaze signal only: the avatar's eyeLook shapes turn the eyeballs
    yaws = []
    for m in frames:
        yaw, pitch = gaze_angles(m.apply(np.zeros(52, np.float32)))
        yaws.append(yaw)
        assert abs(yaw) <= EYE_LOOK_FULL_RAD and abs(pitch) <= EYE_LOOK_FULL_RAD
    assert np.ptp(yaws) > 0.05  # the eyes do move


def test_prosody_tracker_hears_speech_over_a_noisy_room_but_not_the_room():
    sr = 16000
    room = 10 ** (-35 / 20) * np.random.default_rng(0).standard_normal(4 * sr)  # a fan, above the absolute -50 dBFS
    t = np.arange(4 * sr) / sr
    word = (t >= 2.0) & (t < 2.5)
    prosody = ProsodyTracker().push(room + word * 0.3 * np.sin(2 * np.pi * 150 * t))
    hop = np.arange(len(prosody)) * 0.01
    settled = hop >= FLOOR_SETTLE_HOPS * 0.01
    assert all(prosody[i].audible for i in np.flatnonzero((hop >= 2.03) & (hop < 2.5)))  # the 20 ms window fills
    assert not any(prosody[i].audible for i in np.flatnonzero(settled & ((hop < 2.0) | (hop >= 2.53))))
    assert all(p.level_db > AUDIBLE_DB for p in prosody[2:])  # the absolute threshold alone hears the fan
    assert all(p.audible for p in prosody[2:FLOOR_SETTLE_HOPS])  # ... and is all there is before the floor settles


def test_a_stream_that_starts_mid_word_is_heard_and_then_finds_its_floor():
    sr = 16000
    t = np.arange(2 * sr) / sr
    syllables = np.where(np.sin(2 * np.pi * 4 * t) > 0, 0.3, 0.003) * np.sin(2 * np.pi * 150 * t) * (t < 1.0)
    room = 10 ** (-48 / 20) * np.random.default_rng(1).standard_normal(2 * sr)
    prosody = ProsodyTracker().push(syllables + room)
    peaks = [i for i in range(len(prosody)) if i < 100 and np.sin(2 * np.pi * 4 * (i + 0.5) / 100) > 0.3]
    assert all(prosody[i].audible for i in peaks)  # every syllable, the first ones before any pause too
    assert not any(p.audible for p in prosody[103:])  # the room after the word, above the absolute -50 dBFS
    assert all(p.level_db > AUDIBLE_DB for p in prosody[103:])


def test_prosody_does_not_depend_on_how_the_audio_is_chunked():
    sr = 16000
    t = np.arange(sr) / sr
    audio = 0.3 * np.sin(2 * np.pi * 150 * t) * (np.sin(2 * np.pi * 3 * t) > 0)
    whole = ProsodyTracker().push(audio)
    for size in (1, 97, 160, 1000):
        tracker = ProsodyTracker()
        chunked = [p for i in range(0, len(audio), size) for p in tracker.push(audio[i:i + size])]
        assert chunked == whole


def test_mouth_gate_opens_at_once_on_sound_and_closes_gently():
    gate = MouthGate()
    assert gate.step(False) == 0.0
    opening = [gate.step(True) for _ in range(3)]
    assert opening[1] > 0.6  # two hops after sound appears in the lookahead the mouth is free
    closing = [gate.step(False) for _ in range(3)]
    assert closing[0] > 0.75 and closing[2] < closing[1] < closing[0]  # a hop of silence is not a shut mouth
    assert MouthGate(opened=True).step(True) == 1.0


def test_mouth_gate_attack_fits_the_warning_the_stream_gets():
    assert MouthGate.attack_for_warning(3) == pytest.approx(MouthGate().attack_omega, rel=0.1)  # 3 hops: 120/s
    assert MouthGate.attack_for_warning(MouthGate.FILE_LOOK_AHEAD) < MouthGate().attack_omega  # a file: in time
    live = MouthGate(MouthGate.attack_for_warning(1))  # the live model hears sound one hop ahead
    assert 0.85 < live.step(True) < 0.95  # 90 % open one hop after the sound is heard
    assert live.step(True) > 0.99
    assert MouthGate(MouthGate.attack_for_warning(1)).step(False) == 0.0  # and shut while nothing is heard


def test_arm_swing_is_the_rotation_product_it_stands_for():
    rest = relaxed_rest_pose()
    for forward in (0.0, 0.2, -0.4, 1.0):
        for side, joint in ((0, "left_shoulder"), (1, "right_shoulder")):
            expected = axis_angle_to_matrix(np.array([-forward, 0.0, 0.0])) @ axis_angle_to_matrix(rest[JOINT_INDEX[joint]])
            swing = np.array(_swing_then_rest(forward, side))
            assert np.allclose(axis_angle_to_matrix(swing), expected, atol=1e-9)
            assert np.allclose(matrix_to_axis_angle(expected), swing, atol=1e-9)


def _phrases(seconds, fps, seed=0):
    """Per-frame prosody arrays: 3 s phrases of syllable-like bursts with 1 s pauses between them."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * fps)) / fps
    talking = (t % 4.0) < 3.0
    energy = np.clip(0.5 + 0.5 * np.sin(2 * np.pi * 4 * t) + 0.1 * rng.standard_normal(len(t)), 0, 1) * talking
    pitch = np.sin(2 * np.pi * 0.5 * t) * talking
    voiced = energy > 0.3
    speaking = np.where(talking, np.clip(0.8 + 0.3 * rng.standard_normal(len(t)), 0, 1), 0.0).astype(np.float32)
    return t, energy, pitch, voiced, speaking


def test_eye_weights_block_equals_the_eyes_of_step_frame_by_frame():
    fps = 60
    style = MotionStyle(blink_rate_per_min=20.0, seed=5, head_gain=1.3)
    t, energy, pitch, voiced, speaking = _phrases(30, fps)
    stepped = MotionGenerator(style, "head_torso", "fixed")
    expected = np.array([stepped.step(float(t[k]), Prosody(float(energy[k]), float(pitch[k]), bool(voiced[k]),
                                                            float(speaking[k]))).eye_weights for k in range(len(t))])
    blocked = MotionGenerator(style, "head_torso", "fixed")
    edges = [0, 1, 7, 300, 301, 900, 1500, len(t)]  # uneven blocks: the springs carry over
    got = np.concatenate([blocked.eye_weights_block(t[a:b], energy[a:b], pitch[a:b], voiced[a:b], speaking[a:b])
                          for a, b in zip(edges, edges[1:])])
    assert got.shape == expected.shape == (len(t), 52)
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
    blink = expected[:, 0]
    assert blink.max() > 0.99 and np.ptp(expected[:, 2:10]) > 0.05  # blinks and gaze are both in the comparison
    assert math.isfinite(stepped._extra_blink_at) and blocked._extra_blink_at == stepped._extra_blink_at
    assert blocked.steps == stepped.steps == len(t)


def test_mouth_gate_run_equals_its_steps():
    audible = (np.random.default_rng(3).random(400) < 0.5).tolist()
    stepped = MouthGate(attack_omega=MouthGate.attack_for_warning(1))
    expected = [stepped.step(heard) for heard in audible]
    ran = MouthGate(attack_omega=MouthGate.attack_for_warning(1))
    gates = np.concatenate([ran.run(audible[:150]), ran.run(audible[150:])])
    np.testing.assert_array_equal(gates, np.array(expected, np.float32))
    assert 0.0 < gates.min() < 0.5 < gates.max() <= 1.0


def test_idle_blinks_and_gaze_for_a_block_equal_their_per_frame_values():
    idle = IdleMotion(MotionStyle(seed=3, blink_rate_per_min=30.0))  # doubles and slot edges within a minute
    times = np.arange(0.0, 60.0, 1 / 60)
    blinks = idle.blinks(times)
    np.testing.assert_array_equal(blinks, [idle.blink(float(t)) for t in times])
    assert blinks.max() == 1.0
    for transition_s in (0.045, 0.6):
        yaw, pitch = idle.gazes(times, transition_s)
        np.testing.assert_array_equal(np.stack([yaw, pitch], 1), [idle.gaze(float(t), transition_s) for t in times])
    edges = np.array([-0.1, 0.0, 0.035, 0.07, 0.085, 0.1, 0.2, 0.25, 0.26, np.inf])
    np.testing.assert_array_equal(blink_shapes(edges), [blink_shape(float(s)) for s in edges])
