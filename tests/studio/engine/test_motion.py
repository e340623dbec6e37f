"""Motion follows prosody, stays bounded under any input, and is deterministic for a seed."""

import numpy as np

from studio.engine.motion import MotionGenerator, MotionStyle, Prosody, ProsodyTracker

HOP = 0.01


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
