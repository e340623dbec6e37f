"""Time kept in float64 all the way: idle motion at t = 10,000 s is as smooth as at t = 10 s."""

import numpy as np

from studio.engine.motion import MotionGenerator

FPS = 100.0


def _roughness(start_s: float, dtype=np.float64) -> float:
    """RMS third difference (jerk) of the head, neck and spine rotations over 2 s of idle motion at 100 fps:
    smooth motion has almost none, a time base that moves in steps has plenty."""
    motion = MotionGenerator()
    times = start_s + np.arange(int(2 * FPS)) / FPS
    poses = np.array([motion.idle_frame(float(dtype(t))).pose[[3, 6, 9, 12, 15]].ravel() for t in times])
    return float(np.sqrt(np.mean(np.diff(poses, 3, axis=0) ** 2)))


def test_idle_motion_after_10000_seconds_is_as_smooth_as_after_10():
    early, late = _roughness(10.0), _roughness(10_000.0)
    assert late < 1.5 * early
    # the check can fail: the same motion on float32 time steps in milliseconds at 10,000 s
    assert _roughness(10_000.0, np.float32) > 5 * early

