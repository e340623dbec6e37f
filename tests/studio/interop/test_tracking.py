"""The tracker stage: per-region sources, loss and reconnection, anchoring, and real trackers driving the engine."""

from __future__ import annotations

import math
import socket
import threading

import numpy as np
import pytest
from pylivelinkface import FaceBlendShape, PyLiveLinkFace
from pythonosc.udp_client import SimpleUDPClient

from studio.avatar.arkit import ARKIT_INDEX, NUM_ARKIT
from studio.avatar.skeleton import JOINT_INDEX
from studio.engine.anchor import ANCHORED_JOINTS, SpatialAnchor
from studio.engine.motion import EYE_LOOK_FULL_RAD, relaxed_rest_pose
from studio.engine.pipeline import Engine
from studio.frame import FrameState
from studio.interop.livelink_udp import LiveLinkReceiver
from studio.interop.tracking import TrackerInput, TrackingMixer
from studio.interop.vmc import VmcReceiver
from studio.recording.livelink import frame_rotations
from studio.recording.rotations import rotvec_to_matrix
from tests.studio.interop.test_livelink_udp import wait_for
from tests.studio.interop.test_vmc_in import bundle, message

HEAD = JOINT_INDEX["head"]
NECK = JOINT_INDEX["neck"]
HEAD_SLOT = 3 * ANCHORED_JOINTS.index("head")
EYES = {"left": JOINT_INDEX["left_eye_smplhf"], "right": JOINT_INDEX["right_eye_smplhf"]}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def speaking_frame() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What the engine makes on a /m/: lips pressed shut, eyes open, the head nodding."""
    arkit = np.zeros(NUM_ARKIT, np.float32)
    arkit[ARKIT_INDEX["mouthClose"]] = 0.3
    arkit[ARKIT_INDEX["mouthPressLeft"]] = arkit[ARKIT_INDEX["mouthPressRight"]] = 0.6
    arkit[ARKIT_INDEX["jawOpen"]] = 0.3
    pose = relaxed_rest_pose().astype(np.float32)
    pose[HEAD] = (0.1, 0.0, 0.0)
    pose[NECK] = (0.05, 0.0, 0.0)
    return arkit, pose, np.zeros(3, np.float32)


def tracked_face() -> np.ndarray:
    face = np.zeros(NUM_ARKIT)
    face[ARKIT_INDEX["eyeBlinkLeft"]] = 1.0
    face[ARKIT_INDEX["browInnerUp"]] = 0.8
    face[ARKIT_INDEX["jawOpen"]] = 1.0  # a tracker that sees an open mouth while the voice says /m/
    return face


def test_by_default_the_tracker_has_eyes_brows_and_head_and_the_voice_keeps_its_closures() -> None:
    clock, tracker = Clock(), TrackerInput()
    mixer = TrackingMixer(tracker, monotonic=clock)
    anchor = SpatialAnchor()
    mixer.pose_target = anchor.pose_input = mixer.pose_target
    mixer.anchored = True
    tracker.put_face(tracked_face(), np.array((0.0, 0.4, 0.0)), clock.now)
    arkit, pose, transl = speaking_frame()
    for _ in range(40):  # 0.4 s of frames: the ease (0.3 s) is done
        clock.now += 0.01
        tracker.put_face(tracked_face(), np.array((0.0, 0.4, 0.0)), clock.now)
        out_arkit, out_pose, out_transl = mixer.mix(0.0, arkit, pose, transl)
    assert mixer.state == "tracking" and mixer.status == "tracking"
    assert out_arkit[ARKIT_INDEX["eyeBlinkLeft"]] == pytest.approx(1.0)
    assert out_arkit[ARKIT_INDEX["browInnerUp"]] == pytest.approx(0.8)
    mouth = [ARKIT_INDEX[n] for n in ("jawOpen", "mouthClose", "mouthPressLeft", "mouthPressRight")]
    np.testing.assert_array_equal(out_arkit[mouth], arkit[mouth])  # the /m/ closure is the voice's, untouched
    # the engine's own nod is gone from the owned head; the tracked turn goes to the anchor's input
    np.testing.assert_allclose(out_pose[[NECK, HEAD]], 0.0, atol=1e-6)
    rotations, _ = mixer.pose_target.sample(0.0)
    np.testing.assert_allclose(rotations[ANCHORED_JOINTS.index("head")], (0.0, 0.4, 0.0))
    _, anchored_pose, _ = anchor.process(0.0, out_arkit, out_pose, out_transl)
    assert anchored_pose[HEAD][1] == pytest.approx(0.4, abs=1e-6)

    mixer.set_source("mouth_jaw", "tracker")
    for _ in range(40):
        clock.now += 0.01
        tracker.put_face(tracked_face(), None, clock.now)
        out_arkit, _, _ = mixer.mix(0.0, arkit, pose, transl)
    assert out_arkit[ARKIT_INDEX["jawOpen"]] == pytest.approx(1.0)
    assert out_arkit[ARKIT_INDEX["mouthPressLeft"]] == pytest.approx(0.0)


def test_a_lost_tracker_eases_to_the_engine_and_back_on_reconnection() -> None:
    clock, tracker = Clock(), TrackerInput()
    mixer = TrackingMixer(tracker, monotonic=clock)
    arkit, pose, transl = speaking_frame()
    assert mixer.mix(0.0, arkit, pose, transl)[0][ARKIT_INDEX["eyeBlinkLeft"]] == 0.0
    assert mixer.state == "waiting" and mixer.status == "waiting for the tracker's first packet"
    blinks = []
    for step in range(300):  # packets for 1 s, none for 2 s
        clock.now += 0.01
        if step < 100:
            tracker.put_face(tracked_face(), None, clock.now)
        blinks.append(float(mixer.mix(0.0, arkit, pose, transl)[0][ARKIT_INDEX["eyeBlinkLeft"]]))
    assert blinks[99] == pytest.approx(1.0)
    assert blinks[140] == pytest.approx(1.0)  # 0.41 s without packets: still tracking
    assert 0.0 < blinks[170] < 1.0  # lost at 0.5 s: easing
    assert blinks[-1] == 0.0 and mixer.state == "lost"
    assert mixer.status == "no packets from the tracker for 2 s"
    assert np.all(np.diff(blinks[150:]) <= 1e-7)  # eased, never jumping back
    eased = []
    for _ in range(60):
        clock.now += 0.01
        tracker.put_face(tracked_face(), None, clock.now)
        eased.append(float(mixer.mix(0.0, arkit, pose, transl)[0][ARKIT_INDEX["eyeBlinkLeft"]]))
    assert mixer.state == "tracking" and 0.0 < eased[5] < 1.0 and eased[-1] == pytest.approx(1.0)


def test_bad_region_or_source_is_refused_in_one_line() -> None:
    mixer = TrackingMixer(TrackerInput())
    with pytest.raises(ValueError, match="region 'hands' is not known; allowed: eyes_brows, mouth_jaw, head, body"):
        mixer.set_source("hands", "tracker")
    with pytest.raises(ValueError, match="source 'camera' for the head is not known; allowed: tracker, voice"):
        mixer.set_source("head", "camera")


def test_a_biased_tracker_drifts_and_the_anchor_holds_the_avatar() -> None:
    """A head tracker whose pitch creeps 1 degree a second: its input drifts, the anchored head does not."""
    clock = Clock()
    tracker = TrackerInput()
    engine = Engine(fps=30, monotonic=clock)
    mixer = TrackingMixer(tracker, monotonic=clock)
    mixer.attach(engine)
    assert engine.anchor.pose_input is mixer.pose_target
    frames = engine.subscribe(maxlen=8192)
    rng = np.random.default_rng(4)
    for k in range(3600):  # two minutes at 30 fps
        clock.now += 1.0 / 30.0
        pitch = math.radians(1.0) * k / 30.0 + rng.normal(0.0, 0.002)
        tracker.put_pose({HEAD: np.array((pitch, 0.0, 0.0))}, None, clock.now)
        engine.run_once()
        if k == 1800:
            shown_at_one_minute = engine.anchor.shown_deviation[HEAD_SLOT]
    shown = frames.drain()
    assert len(shown) > 3000
    anchor = engine.anchor
    raw_pitch, shown_pitch = anchor.raw_deviation[HEAD_SLOT], anchor.shown_deviation[HEAD_SLOT]
    assert raw_pitch == pytest.approx(math.radians(120.0), rel=0.02)  # the input drifted 120 degrees
    # what is shown stays where it was a minute ago (the anchor's lag behind the ramp), while the input moved 60 degrees
    assert abs(shown_pitch - shown_at_one_minute) < math.radians(1.0)
    assert abs(shown_pitch) < math.radians(15.0) and abs(shown[-1].pose[HEAD][0]) < math.radians(15.0)
    sums = anchor.take_sums()  # what the Drift dock plots: input against anchored
    assert sums["frames"] > 3000 and abs(sums["raw"][HEAD_SLOT]) > 5 * abs(sums["shown"][HEAD_SLOT])
    mixer.detach(engine)
    assert engine.tracking is None and engine.anchor.pose_input is None


@pytest.fixture()
def running_engine():
    engine = Engine()
    engine.start()
    yield engine
    engine.stop()


def follow(engine: Engine, condition, what: str) -> None:
    queue = engine.subscribe(maxlen=64)
    latest = []

    def newest_matches() -> bool:
        latest.extend(queue.drain())
        return bool(latest) and condition(latest[-1])

    try:
        wait_for(newest_matches, what)
    finally:
        engine.unsubscribe(queue)


def test_a_scripted_vmc_sender_drives_the_running_engine(running_engine: Engine) -> None:
    tracker = TrackerInput()
    receiver = VmcReceiver(tracker, port=0, host="127.0.0.1")
    receiver.start()
    mixer = TrackingMixer(tracker)
    mixer.attach(running_engine)
    client = SimpleUDPClient("127.0.0.1", receiver.port)
    stop = threading.Event()

    def send() -> None:
        while not stop.wait(1 / 60):
            client.send_message("/VMC/Ext/Blend/Val", ["eyeBlinkLeft", 1.0])
            client.send_message("/VMC/Ext/Blend/Val", ["jawOpen", 1.0])
            client.send_message("/VMC/Ext/Blend/Apply", [])
            client.send_message("/VMC/Ext/Bone/Pos", ["Head", 0.0, 0.0, 0.0, 0.0, math.sin(0.2), 0.0, math.cos(0.2)])

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        follow(running_engine, lambda f: f.weight("eyeBlinkLeft") > 0.99 and f.pose[HEAD][1] < -0.39,
               "the tracked blink and head turn in the engine's frames")
        assert mixer.state == "tracking"
        assert running_engine.slot.latest().weight("jawOpen") < 0.05  # the voice (silent) owns the mouth
        stop.set()
        sender.join()
        wait_for(lambda: mixer.state == "lost", "the tracker reported lost")
        follow(running_engine, lambda f: f.weight("eyeBlinkLeft") < 0.5, "the engine's own eyes back")
    finally:
        stop.set()
        receiver.stop()
        mixer.detach(running_engine)
    assert len(mixer.latencies_ms) > 0


def test_a_pylivelinkface_sender_drives_the_running_engine(running_engine: Engine) -> None:
    tracker = TrackerInput()
    receiver = LiveLinkReceiver(tracker, port=0, host="127.0.0.1")
    receiver.start()
    mixer = TrackingMixer(tracker, sources={"mouth_jaw": "tracker"})
    mixer.attach(running_engine)
    phone = PyLiveLinkFace(name="iPhone", fps=60)
    phone.set_blendshape(FaceBlendShape.BrowInnerUp, 0.9, no_filter=True)
    phone.set_blendshape(FaceBlendShape.JawOpen, 0.7, no_filter=True)
    phone.set_blendshape(FaceBlendShape.HeadYaw, 0.3, no_filter=True)
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stop = threading.Event()

    def send() -> None:
        while not stop.wait(1 / 60):
            out.sendto(phone.encode(), ("127.0.0.1", receiver.port))

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        follow(running_engine, lambda f: (f.weight("browInnerUp") > 0.89 and f.weight("jawOpen") > 0.69
                                          and f.pose[HEAD][1] > 0.29), "the phone's brows, jaw and head")
    finally:
        stop.set()
        sender.join()
        out.close()
        receiver.stop()
        mixer.detach(running_engine)


def test_the_drift_dock_model_shows_a_biased_trackers_drift_and_the_anchored_result() -> None:
    """What the window's Drift dock plots (studio.drift_model), with a head tracker creeping 1 degree a second."""
    from studio.drift_model import DriftModel

    clock = Clock()
    tracker = TrackerInput()
    engine = Engine(fps=30, monotonic=clock)
    drift = DriftModel()
    drift.poll(engine, clock.now, 100.0)
    assert drift.pose_note == "no tracker input: nothing to anchor"
    mixer = TrackingMixer(tracker, monotonic=clock)
    mixer.attach(engine)
    for k in range(30 * 90):  # 90 s
        clock.now += 1.0 / 30.0
        tracker.put_pose({HEAD: np.array((math.radians(1.0) * k / 30.0, 0.0, 0.0))}, None, clock.now)
        engine.run_once()
        if k % 30 == 29:
            drift.poll(engine, clock.now, 100.0)
    assert drift.pose_note is None
    current = drift.monitor.current
    assert current["raw_head_drift_deg"] > 50.0  # the input drifted from where the anchor took its rest
    assert current["head_drift_deg"] < 10.0  # the anchored head did not follow it


def gaze_towards(pose: np.ndarray, eye: str) -> tuple[float, float]:
    """(towards the subject's left, up) of where an eye looks, from its joint's rotation, in directions read off
    the default avatar's rest joints (left: right eye to left eye; up: neck to head; forward: their cross product,
    checked to point from the head to the eyes) rather than from any axis convention."""
    from studio.avatar.io import default_avatar_path, load_avatar

    joints = load_avatar(default_avatar_path()).rest_joints().astype(np.float64)
    left = joints[EYES["left"]] - joints[EYES["right"]]
    up = joints[HEAD] - joints[NECK]
    left, up = left / np.linalg.norm(left), up / np.linalg.norm(up)
    forward = np.cross(left, up)
    assert np.dot((joints[EYES["left"]] + joints[EYES["right"]]) / 2 - joints[HEAD], forward) > 0
    gaze = rotvec_to_matrix(np.asarray(pose[EYES[eye]], np.float64)[None])[0] @ forward
    return float(gaze @ left), float(gaze @ up)


EYE_ANGLES = {  # Live Link Face's LeftEyeYaw, LeftEyePitch, LeftEyeRoll, RightEyeYaw, RightEyePitch, RightEyeRoll:
    # the app's yaw falls as the eyes turn to the subject's left, its pitch rises as they look down
    "left": (-0.3, 0.0, 0.0, -0.25, 0.0, 0.0),
    "right": (0.3, 0.0, 0.0, 0.25, 0.0, 0.0),
    "up": (0.0, -0.2, 0.0, 0.0, -0.2, 0.0),
    "down": (0.0, 0.25, 0.05, 0.0, 0.25, -0.05),
}


def test_a_pylivelinkface_senders_eye_angles_turn_the_running_engines_eyes(running_engine: Engine) -> None:
    """The phone's six eye angles become the gaze of the engine's frames (read back as the app would write it),
    and each direction turns both eyes that way; before, the angles were ignored and the eyes kept the engine's."""
    tracker = TrackerInput()
    receiver = LiveLinkReceiver(tracker, port=0, host="127.0.0.1")
    receiver.start()
    mixer = TrackingMixer(tracker)  # by default the tracker has the eyes and brows
    mixer.attach(running_engine)
    phone = PyLiveLinkFace(name="iPhone", fps=60)
    names = ("LeftEyeYaw", "LeftEyePitch", "LeftEyeRoll", "RightEyeYaw", "RightEyePitch", "RightEyeRoll")
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stop = threading.Event()

    def send() -> None:
        while not stop.wait(1 / 60):
            out.sendto(phone.encode(), ("127.0.0.1", receiver.port))

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    seen = {}
    try:
        for direction, angles in EYE_ANGLES.items():
            for name, value in zip(names, angles):
                phone.set_blendshape(getattr(FaceBlendShape, name), value, no_filter=True)

            def looks(frame: FrameState, want: tuple = angles, direction: str = direction) -> bool:
                seen[direction] = frame
                return np.allclose(frame_rotations(frame)[3:], want, atol=1e-4)

            follow(running_engine, looks, f"the eyes looking {direction} as the phone's angles say")
    finally:
        stop.set()
        sender.join()
        out.close()
        receiver.stop()
        mixer.detach(running_engine)
    for eye in EYES:
        assert gaze_towards(seen["left"].pose, eye)[0] > 0.2
        assert gaze_towards(seen["right"].pose, eye)[0] < -0.2
        assert gaze_towards(seen["up"].pose, eye)[1] > 0.15
        assert gaze_towards(seen["down"].pose, eye)[1] < -0.2
    # the phone's eyeLook weights (0 here) are what the frames wear: the angles are on the joints, not turned twice
    # (within 1e-6: the engine's own gaze, eased out, may leave a trace of 1e-9)
    assert abs(seen["left"].weight("eyeLookOutLeft")) < 1e-6 and abs(seen["left"].weight("eyeLookInLeft")) < 1e-6


def test_tracked_eyes_follow_the_eyes_region_and_ease_back_to_the_engines_gaze_when_lost() -> None:
    """Live Link eye angles with eyeLook weights that already show part of the turn: the joints add the rest;
    with the eyes given to the voice, or once the tracker is lost, the engine's own eyes come back."""
    clock, tracker = Clock(), TrackerInput()
    mixer = TrackingMixer(tracker, monotonic=clock)
    receiver = LiveLinkReceiver(tracker, port=0)
    phone = PyLiveLinkFace(name="iPhone", fps=60)
    for name, value in (("LeftEyeYaw", -0.3), ("RightEyeYaw", -0.3), ("EyeLookOutLeft", 0.2), ("EyeLookInRight", 0.2)):
        phone.set_blendshape(getattr(FaceBlendShape, name), value, no_filter=True)
    arkit, pose, transl = speaking_frame()
    pose[EYES["left"]] = pose[EYES["right"]] = (0.0, 0.0, 0.02)  # the engine's own eyes, told apart from rest

    def frames(count: int, packets: bool) -> FrameState:
        for _ in range(count):
            clock.now += 0.01
            if packets:
                receiver.handle(phone.encode(), clock.now)
            out_arkit, out_pose, out_transl = mixer.mix(0.0, arkit, pose, transl)
        return FrameState(arkit=out_arkit, pose=out_pose, transl=out_transl)

    tracked = frames(40, packets=True)
    np.testing.assert_allclose(frame_rotations(tracked)[[3, 6]], -0.3, atol=1e-5)  # weights and joints together
    assert tracked.weight("eyeLookOutLeft") == pytest.approx(0.2)
    # the joint turns what the weight leaves
    assert tracked.pose[EYES["left"]][1] == pytest.approx(0.3 - 0.2 * EYE_LOOK_FULL_RAD, abs=1e-5)
    mixer.set_source("eyes_brows", "voice")
    np.testing.assert_allclose(frames(40, packets=True).pose[list(EYES.values())], pose[list(EYES.values())], atol=1e-6)
    mixer.set_source("eyes_brows", "tracker")
    assert frames(40, packets=True).pose[EYES["left"]][1] > 0.2
    easing = frames(65, packets=False)  # 0.5 s lost, then 0.15 s of the 0.3 s ease
    assert mixer.state == "lost" and 0.0 < easing.pose[EYES["left"]][1] < 0.2
    np.testing.assert_allclose(frames(40, packets=False).pose[list(EYES.values())], pose[list(EYES.values())], atol=1e-6)


def test_vmc_eye_bones_turn_the_eyes_with_the_eyes_region() -> None:
    """A VMC tracker's LeftEye/RightEye bones (Unity's frame: a turn about -y looks to the subject's left)."""
    clock, tracker = Clock(), TrackerInput()
    mixer = TrackingMixer(tracker, monotonic=clock)
    receiver = VmcReceiver(tracker, port=0)
    half = -0.15  # half of -0.3 rad about Unity's y
    packet = bundle(*(message("/VMC/Ext/Bone/Pos", bone, 0.0, 0.0, 0.0, 0.0, math.sin(half), 0.0, math.cos(half))
                      for bone in ("LeftEye", "RightEye")))
    arkit, pose, transl = speaking_frame()
    for _ in range(40):
        clock.now += 0.01
        receiver.handle(packet, clock.now)
        _, out_pose, _ = mixer.mix(0.0, arkit, pose, transl)
    assert receiver.counts == {}
    for eye in EYES:
        assert gaze_towards(out_pose, eye)[0] == pytest.approx(math.sin(0.3), abs=1e-4)
    mixer.set_source("eyes_brows", "voice")
    for _ in range(40):
        clock.now += 0.01
        receiver.handle(packet, clock.now)
        _, out_pose, _ = mixer.mix(0.0, arkit, pose, transl)
    np.testing.assert_allclose(out_pose[list(EYES.values())], pose[list(EYES.values())], atol=1e-6)
