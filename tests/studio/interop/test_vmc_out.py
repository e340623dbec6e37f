"""VMC out, read back by an independent OSC implementation: liblo's `oscdump` (Debian liblo-tools)."""

from __future__ import annotations

import queue
import shutil
import socket
import subprocess
import threading
import time

import numpy as np
import pytest

from studio.avatar.arkit import ARKIT_NAMES, NUM_ARKIT
from studio.avatar.skeleton import JOINT_NAMES, NUM_JOINTS, PARENTS
from studio.engine.motion import relaxed_rest_pose
from studio.frame import FrameState
from studio.interop.unity import UNITY_BONE, VRM_PRESETS, vrm_weights
from studio.interop.vmc import VmcSender

OSCDUMP = shutil.which("oscdump")
MIRROR = np.diag([-1.0, 1.0, 1.0])


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rodrigues(rotvec: np.ndarray) -> np.ndarray:
    angle = float(np.linalg.norm(rotvec))
    if angle < 1e-12:
        return np.eye(3)
    k = rotvec / angle
    kx = np.array(((0, -k[2], k[1]), (k[2], 0, -k[0]), (-k[1], k[0], 0)))
    return np.eye(3) + np.sin(angle) * kx + (1 - np.cos(angle)) * kx @ kx


def quat_matrix(x: float, y: float, z: float, w: float) -> np.ndarray:
    """The rotation matrix of a unit quaternion, as Unity's Quaternion * Vector3 applies it."""
    return np.array(((1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)),
                     (2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)),
                     (2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y))))


def a_frame(seed: int = 3) -> FrameState:
    rng = np.random.default_rng(seed)
    pose = relaxed_rest_pose() + rng.normal(0.0, 0.3, (NUM_JOINTS, 3))
    return FrameState(media_time_s=12.345, arkit=rng.random(NUM_ARKIT), pose=pose, transl=(0.11, -0.02, 0.37))


def parse_dump(lines: list[str]) -> list[tuple[str, list]]:
    """(address, arguments) of each line `oscdump` printed: `<timetag> <address> <types> <args…>`."""
    out = []
    for line in lines:
        parts = line.split(" ", 3)
        address, types = parts[1], parts[2] if len(parts) > 2 else ""
        rest = parts[3] if len(parts) > 3 else ""
        args: list = []
        tokens = rest.split(" ") if rest else []
        for kind, token in zip(types, tokens):
            args.append(token.strip('"') if kind == "s" else int(token) if kind == "i" else float(token))
        out.append((address, args))
    return out


def dump_one_frame(sender: VmcSender, frame: FrameState, port: int) -> list[tuple[str, list]]:
    """Run oscdump on `port`, send `frame` until one whole bundle has come out, and parse that bundle.

    Frames are sent again until oscdump prints (it may not listen yet when the first goes out)."""
    assert OSCDUMP, "oscdump is missing: install Debian's liblo-tools (scripts/setup.sh dev does)"
    dump = subprocess.Popen([OSCDUMP, "-L", str(port)], stdout=subprocess.PIPE, text=True, bufsize=1)
    printed: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [printed.put(line) for line in dump.stdout], daemon=True).start()
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 60.0  # a bound against a hang, not a timing assertion
        while time.monotonic() < deadline:
            if not lines:
                sender.send_frame(frame)
            try:
                line = printed.get(timeout=0.05).rstrip("\n")
            except queue.Empty:
                continue
            if line.split(" ")[1:2] == ["/VMC/Ext/Blend/Val"] and not lines or lines:
                lines.append(line)
            if "/VMC/Ext/T " in line and lines:
                break
    finally:
        dump.kill()
        dump.wait()
    return parse_dump(lines)


def test_every_name_and_value_of_a_vmc_frame_reaches_oscdump_in_unity_terms() -> None:
    port = free_udp_port()
    rest = np.random.default_rng(5).normal(0.0, 0.2, (NUM_JOINTS, 3))
    sender = VmcSender(port=port, rest_joints=rest)
    frame = a_frame()
    try:
        messages = dump_one_frame(sender, frame, port)
    finally:
        sender.close()
    addresses = [address for address, _ in messages]
    assert addresses == (["/VMC/Ext/Blend/Val"] * NUM_ARKIT + ["/VMC/Ext/Blend/Apply", "/VMC/Ext/Root/Pos"]
                         + ["/VMC/Ext/Bone/Pos"] * NUM_JOINTS + ["/VMC/Ext/OK", "/VMC/Ext/T"])
    blends = messages[:NUM_ARKIT]
    assert [args[0] for _, args in blends] == list(ARKIT_NAMES)
    np.testing.assert_allclose([args[1] for _, args in blends], frame.arkit, atol=1e-6)
    assert messages[NUM_ARKIT][1] == []
    root = messages[NUM_ARKIT + 1][1]
    assert root[0] == "root"
    np.testing.assert_allclose(root[1:4], (-0.11, -0.02, 0.37), atol=1e-6)  # x mirrored into Unity's frame
    np.testing.assert_allclose(root[4:], (0.0, 0.0, 0.0, 1.0), atol=1e-6)
    bones = messages[NUM_ARKIT + 2:NUM_ARKIT + 2 + NUM_JOINTS]
    for joint, (_, args) in enumerate(bones):
        name = JOINT_NAMES[joint]
        assert args[0] == UNITY_BONE[name]
        parent = PARENTS[joint]
        offset = rest[joint] - (rest[parent] if parent >= 0 else 0.0)
        np.testing.assert_allclose(args[1:4], MIRROR @ offset, atol=2e-6, err_msg=name)
        quat = np.array(args[4:8])
        assert abs(np.linalg.norm(quat) - 1.0) < 1e-5
        # Unity's matrix of the sent quaternion is our rotation seen through the x mirror: S R S
        expected = MIRROR @ rodrigues(frame.pose[joint].astype(np.float64)) @ MIRROR
        np.testing.assert_allclose(quat_matrix(*quat), expected, atol=1e-5, err_msg=name)
    assert messages[-2][1] == [1]
    assert messages[-1][1] == [pytest.approx(12.345, abs=1e-5)]


def test_unity_names_are_the_humanoid_ones_receivers_know() -> None:
    assert UNITY_BONE["pelvis"] == "Hips" and UNITY_BONE["spine3"] == "UpperChest"
    assert UNITY_BONE["left_shoulder"] == "LeftUpperArm" and UNITY_BONE["left_collar"] == "LeftShoulder"
    assert UNITY_BONE["right_pinky2"] == "RightLittleIntermediate" and UNITY_BONE["left_thumb1"] == "LeftThumbProximal"
    assert len(set(UNITY_BONE.values())) == NUM_JOINTS


def test_perfect_sync_and_vrm_namings_reach_oscdump() -> None:
    arkit = np.zeros(NUM_ARKIT)
    arkit[ARKIT_NAMES.index("jawOpen")] = 0.9
    arkit[ARKIT_NAMES.index("eyeBlinkLeft")] = 1.0
    arkit[ARKIT_NAMES.index("eyeBlinkRight")] = 0.4
    frame = FrameState(media_time_s=1.0, arkit=arkit, pose=relaxed_rest_pose())
    for naming in ("perfect_sync", "vrm"):
        port = free_udp_port()
        sender = VmcSender(port=port, naming=naming)
        try:
            messages = dump_one_frame(sender, frame, port)
        finally:
            sender.close()
        blends = {args[0]: args[1] for address, args in messages if address == "/VMC/Ext/Blend/Val"}
        if naming == "perfect_sync":
            assert list(blends) == [name[0].upper() + name[1:] for name in ARKIT_NAMES]
            assert blends["JawOpen"] == pytest.approx(0.9, abs=1e-6)
        else:
            assert list(blends) == list(VRM_PRESETS)
            assert blends == pytest.approx(vrm_weights(arkit), abs=1e-6)
            assert blends["A"] == pytest.approx(0.9, abs=1e-6)  # an open, unrounded, unspread mouth is "A"
            assert (blends["Blink"], blends["Blink_L"], blends["Blink_R"]) == pytest.approx((0.4, 0.6, 0.0), abs=1e-6)


def test_bad_vmc_settings_are_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="naming 'unity' is not known; allowed: arkit, perfect_sync, vrm"):
        VmcSender(naming="unity")
    with pytest.raises(ValueError, match="port 70000 is not allowed"):
        VmcSender(port=70000)
    with pytest.raises(ValueError, match="rate 0.5 Hz is out of range"):
        VmcSender(rate_hz=0.5)
    with pytest.raises(ValueError, match="host 'no such host.invalid' is not a known address"):
        VmcSender(host="no such host.invalid")


def test_with_vrm_names_the_gaze_goes_on_the_eye_bones() -> None:
    from studio.engine.motion import EYE_LOOK_FULL_RAD

    arkit = np.zeros(NUM_ARKIT)
    arkit[ARKIT_NAMES.index("eyeLookOutLeft")] = 1.0  # the left eye looks to the subject's left
    arkit[ARKIT_NAMES.index("eyeLookInRight")] = 1.0  # and so does the right one
    frame = FrameState(media_time_s=1.0, arkit=arkit, pose=relaxed_rest_pose())
    for naming, turned in (("vrm", True), ("arkit", False)):
        port = free_udp_port()
        sender = VmcSender(port=port, naming=naming)
        try:
            messages = dump_one_frame(sender, frame, port)
        finally:
            sender.close()
        bones = {args[0]: np.array(args[4:8]) for address, args in messages if address == "/VMC/Ext/Bone/Pos"}
        for eye in ("LeftEye", "RightEye"):
            yaw = EYE_LOOK_FULL_RAD if turned else 0.0  # about our +y, toward the subject's left (+x)
            expected = MIRROR @ rodrigues(np.array((0.0, yaw, 0.0))) @ MIRROR
            np.testing.assert_allclose(quat_matrix(*bones[eye]), expected, atol=1e-5, err_msg=f"{naming} {eye}")
