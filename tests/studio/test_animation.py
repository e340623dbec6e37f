"""IdleAnimator: deterministic, bounded, smooth idle motion with relaxed arms and a resting mouth."""

import numpy as np
import pytest

from studio.animation import IdleAnimator
from studio.avatar.arkit import ARKIT_INDEX, ARKIT_NAMES
from studio.avatar.skinning import batch_rodrigues
from studio.engine.motion import MotionStyle

FPS = 60


def _frames(animator, seconds, start=0.0):
    return [animator.frame_at(start + i / FPS) for i in range(int(seconds * FPS))]


def _blink_count(frames):
    closed = np.array([f.weight("eyeBlinkLeft") > 0.8 for f in frames])
    return int(np.sum(closed[1:] & ~closed[:-1]))


def test_same_seed_same_motion_at_any_frame_rate():
    a, b = IdleAnimator(seed=3), IdleAnimator(seed=3)
    for t in (0.0, 1.2345, 77.5, 3600.01):
        assert np.array_equal(a.frame_at(t).pose, b.frame_at(t).pose)
        assert np.array_equal(a.frame_at(t).arkit, b.frame_at(t).arkit)
    assert not np.array_equal(IdleAnimator(seed=4).frame_at(1.0).pose, a.frame_at(1.0).pose)


def test_blinks_at_roughly_the_persona_rate_and_none_when_rate_is_zero():
    frames = _frames(IdleAnimator(MotionStyle(blink_rate_per_min=17)), 60)
    assert 10 <= _blink_count(frames) <= 30
    assert _blink_count(_frames(IdleAnimator(MotionStyle(blink_rate_per_min=0)), 30)) == 0


def test_mouth_at_rest_and_only_eye_channels_move():
    eye_channels = {i for i, name in enumerate(ARKIT_NAMES) if name.startswith("eye")}
    for frame in _frames(IdleAnimator(), 10):
        others = [frame.arkit[i] for i in range(len(ARKIT_NAMES)) if i not in eye_channels]
        assert max(others) == 0.0
        assert frame.voice_activity == 0.0
    assert ARKIT_INDEX["jawOpen"] not in eye_channels


def test_arms_hang_relaxed_at_the_sides():
    frame = IdleAnimator().frame_at(2.0)
    left_arm = batch_rodrigues(frame.joint_pose("left_shoulder"))[0] @ np.array([1.0, 0.0, 0.0])
    right_arm = batch_rodrigues(frame.joint_pose("right_shoulder"))[0] @ np.array([-1.0, 0.0, 0.0])
    for arm in (left_arm, right_arm):
        assert arm[1] < -0.85  # pointing down, not out in a T
    assert left_arm[0] > 0.2 and right_arm[0] < -0.2  # still on their own side


@pytest.mark.parametrize("start", [0.0, 10_000.0])
def test_motion_is_bounded_and_smooth_even_after_hours(start):
    frames = _frames(IdleAnimator(MotionStyle(head_gain=3.0, sway=3.0)), 20, start)
    poses = np.array([f.pose for f in frames])
    body = np.delete(poses, [23, 24], axis=1)  # eyes saccade on purpose
    assert np.abs(poses[:, 15]).max() < 0.35
    assert np.abs(np.diff(body, axis=0)).max() < 0.02  # radians per frame at 60 fps: no jerks
    arkit = np.array([f.arkit for f in frames])
    assert arkit.min() >= 0.0 and arkit.max() <= 1.0


def test_bad_style_names_the_field():
    with pytest.raises(ValueError, match="blink_rate_per_min"):
        MotionStyle(blink_rate_per_min=-1)
