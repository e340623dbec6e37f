"""VMC in: a scripted sender (python-osc's own client) on loopback, bad input counted, and 10,000 fuzzed packets."""

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
from studio.frame import FrameState
from studio.interop.livelink_udp import LiveLinkReceiver, LiveLinkSender
from studio.interop.tracking import TrackerInput
from studio.interop.vmc import VmcReceiver, VmcSender
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


def mutations(valid: list[bytes], count: int, seed: int) -> list[bytes]:
    """Random bytes, truncations, extensions, flipped bytes and NaN/huge floats spliced into valid packets."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        base = bytearray(valid[k % len(valid)])
        kind = k % 6
        if kind == 0:
            out.append(rng.bytes(int(rng.integers(0, 2000))))
            continue
        if kind == 1:
            base = base[:int(rng.integers(0, len(base)))]
        elif kind == 2:
            base += rng.bytes(int(rng.integers(1, 64)))
        elif kind == 3:
            for _ in range(int(rng.integers(1, 8))):
                base[int(rng.integers(0, len(base)))] = int(rng.integers(0, 256))
        elif kind == 4 and len(base) >= 8:
            at = int(rng.integers(0, len(base) - 4))
            base[at:at + 4] = bytes(rng.choice([b"\x7f\xc0\x00\x00", b"\x7f\x80\x00\x00", b"\x4f\x7f\xff\xff",
                                                b"\xff\xff\xff\xff"]))
        else:
            base = base[:int(rng.integers(0, len(base)))] + base[int(rng.integers(0, len(base))):]
        out.append(bytes(base))
    return out


@pytest.mark.parametrize("kind", ["vmc", "livelink"])
def test_ten_thousand_fuzzed_packets_neither_crash_nor_hang_a_receiver(kind: str, caplog) -> None:
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
    packets = mutations(valid, 10_000, seed=1 if kind == "vmc" else 2)
    # every packet through the handler directly (none lost to a full socket buffer)...
    tracker = TrackerInput()
    direct = make(tracker, port=0)
    for packet in packets:
        direct.handle(packet, time.monotonic())
    assert sum(direct.counts.values()) > 0
    assert not [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]  # no log flood
    if tracker.sample().sequence:
        assert np.isfinite(tracker.sample().face).all()
        assert ((tracker.sample().face >= 0.0) & (tracker.sample().face <= 1.0)).all()
        assert all(np.isfinite(v).all() for v in tracker.sample().bones.values())
    # ...and all of them through a real socket; the receiver still takes a good packet after them
    live_tracker = TrackerInput()
    receiver = make(live_tracker, port=0, host="127.0.0.1")
    receiver.start()
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for k, packet in enumerate(packets):
            out.sendto(packet, ("127.0.0.1", receiver.port))
            if k % 10 == 9:  # let the receiver drain (UDP drops what a full buffer cannot hold)
                caught_up = time.monotonic() + 0.5
                while receiver.packets <= k and time.monotonic() < caught_up:
                    time.sleep(0.0005)
        before = live_tracker.sample().sequence
        wait_for(lambda: (out.sendto(valid[0], ("127.0.0.1", receiver.port)) and
                          live_tracker.sample().sequence > before + 1), "a good packet after the fuzz")
        assert receiver.running
    finally:
        out.close()
        receiver.stop()
    assert receiver.packets > 9000  # nearly all of them went through the socket


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
