"""VMC in: a scripted sender (python-osc's own client) on loopback, bad input counted, and 10,000 fuzzed packets
(VMC and Live Link Face) into a running engine."""

from __future__ import annotations

import logging
import math
import socket
import time

import numpy as np
import pytest
from pythonosc.osc_bundle_builder import IMMEDIATELY, OscBundleBuilder
from pythonosc.osc_message_builder import OscMessageBuilder
from pythonosc.udp_client import SimpleUDPClient

from studio.avatar.arkit import ARKIT_INDEX, NUM_ARKIT
from studio.avatar.skeleton import JOINT_INDEX
from studio.engine.motion import relaxed_rest_pose
from studio.engine.pipeline import Engine
from studio.frame import FrameState
from studio.interop.bench import mutated_packets
from studio.interop.livelink_udp import LiveLinkReceiver, LiveLinkSender, encode_packet
from studio.interop.tracking import REGIONS, TrackerInput, TrackingMixer
from studio.interop.vmc import VmcReceiver, VmcSender
from tests.studio.interop.engine_watch import EngineWatch
from tests.studio.interop.test_livelink_udp import wait_for


def message(address: str, *args):
    builder = OscMessageBuilder(address)
    for value in args:
        builder.add_arg(value)
    return builder.build()


def bundle(*messages) -> bytes:
    builder = OscBundleBuilder(IMMEDIATELY)
    for item in messages:
        builder.add_content(item)
    return builder.build().dgram


def test_a_scripted_vmc_sender_drives_face_bones_and_root() -> None:
    tracker = TrackerInput()
    receiver = VmcReceiver(tracker, port=0, host="127.0.0.1")
    receiver.start()
    client = SimpleUDPClient("127.0.0.1", receiver.port)
    half = math.sqrt(0.5)
    try:
        client.send_message("/VMC/Ext/Blend/Val", ["EyeBlink_L", 0.8])  # a peer's spelling of eyeBlinkLeft
        client.send_message("/VMC/Ext/Blend/Val", ["browInnerUp", 0.6])
        client.send_message("/VMC/Ext/Blend/Val", ["Joy", 0.5])  # a VRM preset
        client.send_message("/VMC/Ext/Blend/Apply", [])
        # Unity: the head turned 90 degrees about +y (x, y, z, w); the root 1 m along Unity's +x
        client.send_message("/VMC/Ext/Bone/Pos", ["Head", 0.0, 0.0, 0.0, 0.0, half, 0.0, half])
        client.send_message("/VMC/Ext/Root/Pos", ["root", 1.0, 0.0, 0.5, 0.0, 0.0, 0.0, 1.0])
        client.send_message("/VMC/Ext/OK", [1])
        wait_for(lambda: tracker.sample().sequence >= 3, "three packets taken in")
    finally:
        receiver.stop()
    sample = tracker.sample()
    face = dict(zip(np.flatnonzero(sample.face_known).tolist(), sample.face[sample.face_known].tolist()))
    assert face[ARKIT_INDEX["eyeBlinkLeft"]] == pytest.approx(0.8)
    assert face[ARKIT_INDEX["browInnerUp"]] == pytest.approx(0.6)
    for name in ("mouthSmileLeft", "mouthSmileRight", "cheekSquintLeft", "cheekSquintRight"):
        assert face[ARKIT_INDEX[name]] == pytest.approx(0.5)
    assert ARKIT_INDEX["jawOpen"] not in face  # never sent: the engine keeps it
    # Unity +90 degrees about y is -90 degrees about our y (the x mirror flips the turn)
    np.testing.assert_allclose(sample.bones[JOINT_INDEX["head"]], (0.0, -math.pi / 2, 0.0), atol=1e-6)
    np.testing.assert_allclose(sample.root, (-1.0, 0.0, 0.5), atol=1e-6)
    assert receiver.stats().counts == {}


def test_our_vmc_out_read_by_our_vmc_in_gives_the_frame_back() -> None:
    rng = np.random.default_rng(2)
    pose = relaxed_rest_pose() + rng.normal(0.0, 0.2, (55, 3))
    frame = FrameState(media_time_s=2.0, arkit=rng.random(NUM_ARKIT), pose=pose, transl=(0.1, 0.2, 0.3))
    tracker = TrackerInput()
    receiver = VmcReceiver(tracker, port=0)
    receiver.handle(VmcSender(port=9).encode(frame), time.monotonic())
    sample = tracker.sample()
    np.testing.assert_allclose(sample.face, frame.arkit, atol=1e-6)
    for joint in range(1, 55):
        np.testing.assert_allclose(sample.bones[joint], frame.pose[joint], atol=1e-5)
    np.testing.assert_allclose(sample.root, frame.transl, atol=1e-6)


def test_bad_vmc_input_is_ignored_or_clamped_and_counted() -> None:
    tracker = TrackerInput()
    receiver = VmcReceiver(tracker, port=0)
    now = time.monotonic()
    receiver.handle(bundle(message("/VMC/Ext/Blend/Val", "jawOpen", float("nan")),
                           message("/VMC/Ext/Blend/Val", "noSuchShape", 0.5),
                           message("/VMC/Ext/Blend/Val", "mouthClose", 1.5),
                           message("/VMC/Ext/Blend/Val", "mouthPucker", -0.5),
                           message("/VMC/Ext/Blend/Val", 3, "eyeBlinkLeft"),
                           message("/VMC/Ext/Blend/Val", "eyeWideLeft", 0.25),
                           message("/VMC/Ext/Blend/Apply"),
                           message("/VMC/Ext/Bone/Pos", "Head", 0.0, 0.0, 0.0, float("inf"), 0.0, 0.0, 1.0),
                           message("/VMC/Ext/Bone/Pos", "Tail", 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0),
                           message("/VMC/Ext/Bone/Pos", "Neck", 0.0),
                           message("/not/vmc", 1)), now)
    receiver.handle(b"#bundle\x00garbage", now)
    receiver.handle(b"\xff" * 13, now)
    sample = tracker.sample()
    assert np.flatnonzero(sample.face_known).tolist() == sorted(
        [ARKIT_INDEX["mouthClose"], ARKIT_INDEX["mouthPucker"], ARKIT_INDEX["eyeWideLeft"]])
    assert sample.face[ARKIT_INDEX["mouthClose"]] == 1.0 and sample.face[ARKIT_INDEX["mouthPucker"]] == 0.0
    assert sample.bones == {}
    assert receiver.counts == {"nonfinite": 2, "unknown_name": 3, "clamped": 2, "malformed": 4}


def named_packets(kind: str, count: int) -> list[bytes]:
    """Well-formed packets that each bring new names (Live Link subjects; VMC bones and shapes no one has)."""
    if kind == "livelink":
        values = np.zeros(61)
        return [encode_packet(f"00000000-0000-0000-0000-{k:012d}", f"Phone-{k}", k, 0.0, 60, values) for k in range(count)]
    return [bundle(message("/VMC/Ext/Blend/Val", f"Shape{k}", 0.5), message("/VMC/Ext/Blend/Apply"),
                   message("/VMC/Ext/Bone/Pos", f"Bone{k}", 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)) for k in range(count)]


@pytest.mark.parametrize("kind", ["vmc", "livelink"])
def test_ten_thousand_fuzzed_packets_neither_crash_nor_hang_a_receiver_nor_burden_the_engine(kind: str, caplog) -> None:
    """The per-hop budget is checked structurally (times belong to `avatar-studio bench`): while the packets go
    through a real socket into a running engine's tracker stage, no decoding runs on the engine thread, the
    engine goes on making whole, finite frames, none skipped, and what the receiver keeps stays within its bounds."""
    rng = np.random.default_rng(9)
    frames = [FrameState(media_time_s=float(k), arkit=rng.random(NUM_ARKIT),
                         pose=relaxed_rest_pose() + rng.normal(0, 0.2, (55, 3))) for k in range(4)]
    if kind == "vmc":
        sender, make = VmcSender(port=9, naming="vrm"), VmcReceiver
        valid = [sender.encode(f) for f in frames] + [VmcSender(port=9).encode(f) for f in frames]
    else:
        sender, make = LiveLinkSender(port=9), LiveLinkReceiver
        valid = [sender.encode(f) for f in frames]
    sender.close()
    names = named_packets(kind, 200)
    packets = mutated_packets(valid, 10_000, seed=1 if kind == "vmc" else 2)
    packets[1::50] = names  # one in 50 a well-formed packet with new names
    # every packet through the handler directly (none lost to a full socket buffer)...
    tracker = TrackerInput()
    direct = make(tracker, port=0)
    for packet in packets:
        direct.handle(packet, time.monotonic())
    assert sum(direct.counts.values()) > 0
    assert set(direct.counts) <= {"malformed", "nonfinite", "unknown_name", "clamped"}, direct.counts
    assert not [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]  # no log flood
    if tracker.sample().sequence:
        assert np.isfinite(tracker.sample().face).all()
        assert ((tracker.sample().face >= 0.0) & (tracker.sample().face <= 1.0)).all()
        assert all(np.isfinite(v).all() for v in tracker.sample().bones.values())
    assert set(tracker.sample().bones) <= set(JOINT_INDEX.values())  # new bone names add no bones
    if kind == "livelink":
        assert len(direct.subjects) == 64  # 200 subjects came; the names kept are capped
    # ...and all of them through a real socket into a running engine's tracker stage
    live_tracker = TrackerInput()
    receiver = make(live_tracker, port=0, host="127.0.0.1")
    receiver.start()
    engine = Engine()
    mixer = TrackingMixer(live_tracker, sources={region: "tracker" for region in REGIONS})
    mixer.attach(engine)
    engine.start()
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        with EngineWatch(engine) as watch:
            made = watch.wait_for_frames_after(engine.work.frames_emitted, "before the fuzz")
            for k, packet in enumerate(packets):
                out.sendto(packet, ("127.0.0.1", receiver.port))
                if k % 10 == 9:  # let the receiver drain (UDP drops what a full buffer cannot hold)
                    caught_up = time.monotonic() + 0.5
                    while receiver.packets <= k and time.monotonic() < caught_up:
                        time.sleep(0.0005)
                if k % 500 == 499:  # the engine keeps making frames during the flood
                    made = watch.wait_for_frames_after(made, f"after packet {k + 1} of the fuzz")
                    watch.take_frames()
            before = live_tracker.sample().sequence
            wait_for(lambda: (out.sendto(valid[0], ("127.0.0.1", receiver.port)) and
                              live_tracker.sample().sequence > before + 1), "a good packet after the fuzz")
            watch.wait_for_frames_after(engine.work.frames_emitted, "after the fuzz")
        assert receiver.running and engine.running
    finally:
        out.close()
        receiver.stop()
        engine.stop()
    assert receiver.packets > 9000  # nearly all of them went through the socket
    assert watch.message_work() == []  # no decoding on the engine thread...
    assert watch.ran("pipeline.py", "_emit") and watch.ran("tracking.py", "mix")  # ...which was watched, tracker stage and all
    assert len(watch.frames) > 20 and mixer.state == "tracking"
    watch.check_frames(idle_fps=engine.fps)
    assert set(live_tracker.sample().bones) <= set(JOINT_INDEX.values())
    assert len(mixer.latencies_ms) <= mixer.latencies_ms.maxlen and len(getattr(receiver, "subjects", ())) <= 64


def test_a_root_rotation_turns_the_hips_once_however_often_it_comes() -> None:
    tracker = TrackerInput()
    receiver = VmcReceiver(tracker, port=0)
    half = math.sqrt(0.5)
    for _ in range(3):  # a sender that sends the root's turn and never the hips
        receiver.handle(bundle(message("/VMC/Ext/Root/Pos", "root", 0.0, 0.0, 0.0, 0.0, half, 0.0, half)), time.monotonic())
    np.testing.assert_allclose(tracker.sample().bones[JOINT_INDEX["pelvis"]], (0.0, -math.pi / 2, 0.0), atol=1e-6)


def test_vrm_0_and_vrm_1_preset_names_both_drive_the_face() -> None:
    tracker = TrackerInput()
    receiver = VmcReceiver(tracker, port=0)
    receiver.handle(bundle(message("/VMC/Ext/Blend/Val", "aa", 0.7), message("/VMC/Ext/Blend/Val", "blinkRight", 0.4),
                           message("/VMC/Ext/Blend/Val", "Angry", 0.3), message("/VMC/Ext/Blend/Apply")), time.monotonic())
    face, known = tracker.sample().face, tracker.sample().face_known
    assert face[ARKIT_INDEX["jawOpen"]] == pytest.approx(0.7) and face[ARKIT_INDEX["eyeBlinkRight"]] == pytest.approx(0.4)
    assert face[ARKIT_INDEX["browDownLeft"]] == pytest.approx(0.3) and not known[ARKIT_INDEX["eyeBlinkLeft"]]
    assert receiver.counts == {}
