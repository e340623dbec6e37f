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
from studio.engine.motion import relaxed_rest_pose
from studio.engine.pipeline import Engine
from studio.interop.livelink_udp import LiveLinkReceiver
from studio.interop.tracking import TrackerInput, TrackingMixer
from studio.interop.vmc import VmcReceiver
from tests.studio.interop.test_livelink_udp import wait_for

HEAD = JOINT_INDEX["head"]
NECK = JOINT_INDEX["neck"]
HEAD_SLOT = 3 * ANCHORED_JOINTS.index("head")


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
