"""SCA anchoring: pushes and drift are pulled back, intended motion comes through, NaN never reaches a frame."""

import math

import numpy as np
import pytest

from studio.avatar.arkit import NUM_ARKIT
from studio.drift import DriftMonitor
from studio.engine.anchor import (
    ANCHORED_INDEX,
    ANCHORED_JOINTS,
    ROTATION_DIMS,
    AnchorSettings,
    DriftingTracker,
    LatestPose,
    SpatialAnchor,
)
from studio.engine.motion import relaxed_rest_pose

FPS = 100.0
HEAD_X = 3 * ANCHORED_JOINTS.index("head")  # the head's pitch entry in the deviation vector


def _band(signal: np.ndarray, low_hz: float = 0.3, high_hz: float = 5.0) -> np.ndarray:
    spectrum = np.fft.rfft(signal - signal.mean())
    freqs = np.fft.rfftfreq(len(signal), 1.0 / FPS)
    spectrum[(freqs < low_hz) | (freqs > high_hz)] = 0.0
    return np.fft.irfft(spectrum, len(signal))


def _nods(t: np.ndarray) -> np.ndarray:
    """Three 2 Hz nods of 6 degrees every 4 seconds: what a speaker's head does on stressed words."""
    phase = np.mod(t, 4.0)
    return np.where(phase < 1.5, np.radians(6.0) * np.sin(2 * np.pi * 2.0 * phase) ** 2, 0.0)


def _run(anchor: SpatialAnchor, pose_input: LatestPose, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Feed per-frame deviation vectors; return the raw and shown deviations of every frame."""
    pose, transl, arkit = relaxed_rest_pose().astype(np.float32), np.zeros(3, np.float32), np.zeros(NUM_ARKIT, np.float32)
    raw, shown = [], []
    for index, deviation in enumerate(inputs):
        pose_input.put(deviation[:ROTATION_DIMS].reshape(-1, 3), deviation[ROTATION_DIMS:])
        _, out_pose, out_transl = anchor.process(index / FPS, arkit, pose, transl)
        rotations = (out_pose[ANCHORED_INDEX] - pose[ANCHORED_INDEX]).ravel()
        shown.append(np.concatenate([rotations, out_transl - transl]))
        raw.append(deviation)
    return np.array(raw), np.array(shown)


def test_a_push_off_the_anchor_is_pulled_back_within_one_refresh_interval_while_nods_pass():
    settings = AnchorSettings()
    settle, after = 600, 3000
    t = np.arange(settle + after) / FPS
    nodding = np.zeros((len(t), ROTATION_DIMS + 3))
    nodding[:, HEAD_X] = _nods(t)
    pushed = nodding.copy()
    pushed[settle:, HEAD_X] += math.radians(8.0)  # pushed: head tipped 8 degrees ...
    pushed[settle:, ROTATION_DIMS] += 0.02  # ... and the body 20 mm sideways, and held there
    pose_input = LatestPose()
    raw, shown = _run(SpatialAnchor(settings, pose_input), pose_input, pushed)
    _, reference = _run(SpatialAnchor(settings, pose_input), pose_input, nodding)  # the same nods, never pushed

    just_after = slice(settle + 5, settle + 50)
    assert np.mean(shown[just_after, ROTATION_DIMS]) > 0.01  # the push did reach the output at first
    back = slice(settle + settings.refresh_max_frames, None)  # from one refresh interval after the push
    assert math.degrees(np.abs(shown[back, HEAD_X] - reference[back, HEAD_X]).max()) < 0.1
    assert 1000.0 * np.abs(shown[back, ROTATION_DIMS] - reference[back, ROTATION_DIMS]).max() < 0.5
    correlation = np.corrcoef(_band(raw[back, HEAD_X]), _band(shown[back, HEAD_X]))[0, 1]
    assert correlation >= 0.95


def test_anchoring_that_flattened_motion_would_fail_the_band_correlation():
    """The correlation check can fail: a short buffer tracks the nods themselves and removes them."""
    settings = AnchorSettings(buffer_frames=30, refresh_min_frames=50, refresh_max_frames=50)
    pose_input = LatestPose()
    t = np.arange(3000) / FPS
    inputs = np.zeros((len(t), ROTATION_DIMS + 3))
    inputs[:, HEAD_X] = _nods(t)
    raw, shown = _run(SpatialAnchor(settings, pose_input), pose_input, inputs)
    assert np.corrcoef(_band(raw[500:, HEAD_X]), _band(shown[500:, HEAD_X]))[0, 1] < 0.95


def _drift_run(enabled: bool, seconds: float = 600.0) -> DriftMonitor:
    tracker = DriftingTracker(bias_mm_per_min=2.0, bias_deg_per_min=0.2, seed=3)
    anchor = SpatialAnchor(AnchorSettings(enabled=enabled), tracker)
    monitor = DriftMonitor()
    monitor.anchoring = enabled
    pose, transl, arkit = relaxed_rest_pose().astype(np.float32), np.zeros(3, np.float32), np.zeros(NUM_ARKIT, np.float32)
    for second in range(int(seconds)):
        for frame in range(int(FPS)):
            anchor.process(second + frame / FPS, arkit, pose, transl)
        monitor.update_anchor(second + 1.0, anchor.take_sums(), anchor.rest)
    return monitor


def test_a_biased_random_walking_tracker_stays_bounded_with_anchoring_and_drifts_without():
    anchored = _drift_run(enabled=True)
    assert anchored.worst("root_drift_mm") < 0.5
    assert anchored.worst("head_drift_deg") < 0.1
    assert anchored.worst("raw_root_drift_mm") > 10.0  # the input itself did drift: 2 mm a minute for 10 minutes
    free = _drift_run(enabled=False)
    assert free.worst("root_drift_mm") > 10.0
    assert free.worst("head_drift_deg") > 1.0
    assert any("anchoring is off" in warning for warning in free.warnings())
    assert not any("rest anchor" in warning for warning in anchored.warnings())


def test_re_anchor_takes_the_current_input_as_the_new_rest():
    pose_input = LatestPose()
    anchor = SpatialAnchor(AnchorSettings(), pose_input)
    inputs = np.zeros((2000, ROTATION_DIMS + 3))
    inputs[:, ROTATION_DIMS + 1] = 0.01
    _run(anchor, pose_input, inputs[:400])
    assert anchor.rest[ROTATION_DIMS + 1] == pytest.approx(0.01)
    inputs[:, ROTATION_DIMS + 1] = 0.03  # the operator now sits 2 cm higher, on purpose
    anchor.re_anchor()
    _, shown = _run(anchor, pose_input, inputs)
    assert anchor.rest[ROTATION_DIMS + 1] == pytest.approx(0.03, abs=1e-6)
    assert shown[-1, ROTATION_DIMS + 1] == pytest.approx(0.03, abs=1e-4)


def test_a_nan_or_infinite_pose_is_held_and_counted_never_passed_on():
    pose_input = LatestPose()
    anchor = SpatialAnchor(AnchorSettings(), pose_input)
    pose, transl, arkit = relaxed_rest_pose().astype(np.float32), np.zeros(3, np.float32), np.zeros(NUM_ARKIT, np.float32)
    pose_input.put(np.full((6, 3), 0.01), np.zeros(3))
    good = anchor.process(0.0, arkit, pose, transl)
    pose_input.put(np.full((6, 3), np.nan), np.zeros(3))
    held = anchor.process(0.01, arkit, pose, transl)
    bad_engine_pose = pose.copy()
    bad_engine_pose[15, 0] = np.inf
    pose_input.put(np.zeros((6, 3)), np.zeros(3))
    held_again = anchor.process(0.02, arkit, bad_engine_pose, transl)
    assert anchor.nonfinite_frames == 2
    for out in (held, held_again):
        assert all(np.isfinite(part).all() for part in out)
        assert np.array_equal(out[1], good[1])


def test_the_engine_never_emits_a_frame_with_a_nan_pose_from_its_pose_input():
    from studio.engine.pipeline import Engine

    now = [100.0]
    pose_input = LatestPose()
    anchor = SpatialAnchor(AnchorSettings(), pose_input)
    engine = Engine(anchor=anchor, monotonic=lambda: now[0])
    queue = engine.subscribe(1000)
    pose_input.put(np.full((6, 3), 0.02), np.array((0.0, 0.0, 0.01)))
    for _ in range(5):
        now[0] += 0.05
        engine.run_once()
    pose_input.put(np.full((6, 3), np.nan), np.zeros(3))
    for _ in range(5):
        now[0] += 0.05
        engine.run_once()
    frames = queue.drain()
    assert len(frames) > 40
    assert all(np.isfinite(f.pose).all() and np.isfinite(f.transl).all() for f in frames)
    assert anchor.nonfinite_frames >= 20
    held = [f for f in frames if f.media_time_s > 0.3]
    assert all(np.array_equal(f.pose, held[0].pose) for f in held)  # the last good pose, held
