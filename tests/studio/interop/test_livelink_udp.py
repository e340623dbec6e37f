"""Live Link Face over UDP, checked against an independent implementation (PyPI `pylivelinkface`) on loopback."""

from __future__ import annotations

import socket
import struct
import time

import numpy as np
import pytest
from pylivelinkface import FaceBlendShape, PyLiveLinkFace

from studio.avatar.arkit import ARKIT_NAMES, NUM_ARKIT
from studio.engine.motion import relaxed_rest_pose
from studio.frame import FrameState
from studio.interop.livelink_udp import LiveLinkReceiver, LiveLinkSender, decode_packet, frame_values
from studio.interop.tracking import TrackerInput
from studio.recording.livelink import frame_rotations


def wait_for(condition, what: str, limit_s: float = 30.0) -> None:
    """Poll until `condition()`; the limit only keeps a broken build from hanging the run."""
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.01)


def a_frame() -> FrameState:
    rng = np.random.default_rng(11)
    pose = relaxed_rest_pose()
    pose[15] = (0.2, -0.3, 0.1)  # the head turned
    arkit = rng.random(NUM_ARKIT)
    arkit[ARKIT_NAMES.index("jawLeft")], arkit[ARKIT_NAMES.index("jawRight")] = 0.9, 0.05
    return FrameState(media_time_s=3.25, arkit=arkit, pose=pose)


def test_our_packet_is_what_pylivelinkface_decodes_with_the_canonical_order() -> None:
    sender = LiveLinkSender(port=9, subject="Avatar", rate_hz=60.0)
    frame = a_frame()
    try:
        packet = sender.encode(frame)
    finally:
        sender.close()
    found, face = PyLiveLinkFace.decode(packet)
    assert found
    assert face.name == "Avatar" and face.uuid == "$" + sender.device_id
    assert face.fps == 60 and face._denominator == 1
    values = np.array(face._blend_shapes)
    np.testing.assert_allclose(values, frame_values(frame), atol=1e-6)
    # the stream's enum: JawLeft 15, JawRight 16 (the CSV swaps them; the stream does not)
    assert values[FaceBlendShape.JawLeft.value] == pytest.approx(0.9, abs=1e-6)
    assert values[FaceBlendShape.JawRight.value] == pytest.approx(0.05, abs=1e-6)
    np.testing.assert_allclose(values[FaceBlendShape.HeadYaw.value:], frame_rotations(frame), atol=1e-6)
    assert abs(values[FaceBlendShape.HeadYaw.value]) > 0.1
    # golden layout: u8 version, i32 + device id, i32 + subject, i32 frame, f32 sub-frame, u32 fps, u32 den, u8 61
    assert packet[0] == 6
    assert struct.unpack(">i", packet[1:5])[0] == 36 and packet[5:41].decode() == sender.device_id
    assert struct.unpack(">i", packet[41:45])[0] == 6 and packet[45:51] == b"Avatar"
    frame_number, sub_frame, fps, denominator, count = struct.unpack(">ifIIB", packet[51:68])
    assert (frame_number, fps, denominator, count) == (195, 60, 1, 61) and sub_frame == pytest.approx(0.0, abs=1e-6)
    assert len(packet) == 68 + 61 * 4


def test_a_pylivelinkface_sender_drives_the_tracker_through_a_real_socket() -> None:
    tracker = TrackerInput()
    receiver = LiveLinkReceiver(tracker, port=0, host="127.0.0.1")
    receiver.start()
    phone = PyLiveLinkFace(name="iPhone", fps=60)
    phone.set_blendshape(FaceBlendShape.EyeBlinkLeft, 0.75, no_filter=True)
    phone.set_blendshape(FaceBlendShape.JawLeft, 0.4, no_filter=True)
    phone.set_blendshape(FaceBlendShape.HeadYaw, 0.3, no_filter=True)
    phone.set_blendshape(FaceBlendShape.HeadPitch, -0.1, no_filter=True)
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        out.sendto(phone.encode(), ("127.0.0.1", receiver.port))
        wait_for(lambda: tracker.sample().sequence > 0, "the packet")
    finally:
        out.close()
        receiver.stop()
    sample = tracker.sample()
    assert sample.face_known.all()
    assert sample.face[ARKIT_NAMES.index("eyeBlinkLeft")] == pytest.approx(0.75, abs=1e-6)
    assert sample.face[ARKIT_NAMES.index("jawLeft")] == pytest.approx(0.4, abs=1e-6)
    assert sample.face[ARKIT_NAMES.index("jawRight")] == 0.0
    # the head turned by yaw 0.3 about +y, then pitch -0.1 about +x: for small angles the rotation vector's y and x
    head = sample.bones[15]
    assert head[1] == pytest.approx(0.3, abs=0.02) and head[0] == pytest.approx(-0.1, abs=0.02)
    assert receiver.stats().packets == 1 and receiver.stats().counts == {}
    assert "iPhone" in receiver.subjects


def test_bad_live_link_values_are_ignored_or_clamped_and_counted() -> None:
    tracker = TrackerInput()
    receiver = LiveLinkReceiver(tracker, port=0)
    values = np.full(61, 0.5)
    values[0] = np.nan  # eyeBlinkLeft: ignored, the rest kept
    values[17] = 1.7  # jawOpen: clamped to 1
    values[18] = -0.2  # mouthClose: clamped to 0
    packet = LiveLinkSender(port=9).encode(FrameState())
    good = bytearray(packet)
    struct.pack_into(">61f", good, len(good) - 61 * 4, *values)
    receiver.handle(bytes(good), time.monotonic())
    receiver.handle(packet[:-3], time.monotonic())  # truncated
    receiver.handle(b"\x07" + packet[1:], time.monotonic())  # another version
    sample = tracker.sample()
    assert not sample.face_known[0] and sample.face_known[1:].all()
    assert sample.face[17] == 1.0 and sample.face[18] == 0.0 and sample.face[5] == pytest.approx(0.5)
    assert receiver.counts == {"nonfinite": 1, "clamped": 2, "malformed": 2}
    assert sample.sequence == 1


def test_decode_says_what_is_wrong() -> None:
    packet = LiveLinkSender(port=9).encode(FrameState())
    with pytest.raises(ValueError, match="version 7 is not 6"):
        decode_packet(b"\x07" + packet[1:])
    with pytest.raises(ValueError, match="needs"):
        decode_packet(packet + b"\x00")
    with pytest.raises(ValueError, match="device id length"):
        decode_packet(b"\x06\x7f\xff\xff\xff")


def test_a_port_in_use_is_said_in_plain_words() -> None:
    first = LiveLinkReceiver(TrackerInput(), port=0, host="127.0.0.1")
    first.start()
    try:
        second = LiveLinkReceiver(TrackerInput(), port=first.port, host="127.0.0.1")
        with pytest.raises(ValueError, match=f"^port {first.port} is in use by another program$"):
            second.start()
        assert second.stats().last_error == f"port {first.port} is in use by another program"
    finally:
        first.stop()


def test_a_subject_name_too_long_for_unreal_is_refused() -> None:
    LiveLinkSender(port=9, subject="s" * 400).close()
    assert len(LiveLinkSender(port=9, subject="s" * 468).encode(FrameState())) == 774
    with pytest.raises(ValueError, match="must be 1..468 bytes \\(Unreal drops packets over 774 bytes\\)"):
        LiveLinkSender(port=9, subject="s" * 469)
