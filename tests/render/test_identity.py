"""The soak's identity check: SSIM against the first render, and GL resources that never pile up."""

import gc

import numpy as np

from render.identity import IdentityCheck, live_gl_objects
from studio.animation import IdleAnimator
from studio.engine.motion import relaxed_rest_pose
from studio.frame import FrameState


def test_the_same_neutral_pose_matches_and_a_drifted_one_does_not(ellipsoid_avatar):
    check = IdentityCheck(ellipsoid_avatar, size=(128, 128))
    try:
        neutral = FrameState(pose=relaxed_rest_pose())
        assert check(neutral) == 1.0  # the first render is the reference
        assert check(neutral) > 0.999
        turned = relaxed_rest_pose()
        turned[15, 1] += np.radians(4.0)  # the head turned 4 degrees away from its rest anchor
        assert check(FrameState(pose=turned, transl=np.array((0.004, 0.0, 0.0)))) < 0.98
    finally:
        check.close()


def test_rendering_for_hours_and_swapping_avatars_leave_no_gl_objects_behind(ellipsoid_avatar):
    check = IdentityCheck(ellipsoid_avatar, size=(96, 96))
    try:
        canvas = check.renderer.canvas
        idle = IdleAnimator()
        check(idle.frame_at(0.0))
        baseline = live_gl_objects(canvas)
        assert baseline > 0
        for index in range(60):
            check.renderer.render(idle.frame_at(index * 0.5))
        assert live_gl_objects(canvas) == baseline
        for _ in range(3):  # a user opening avatars: the previous one's buffers must be released
            check.renderer.view.set_avatar(ellipsoid_avatar)
            gc.collect()
            check.renderer.render(idle.frame_at(1.0))
        assert live_gl_objects(canvas) == baseline
    finally:
        check.close()
