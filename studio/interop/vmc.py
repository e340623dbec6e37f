"""VMC (Virtual Motion Capture protocol, OSC over UDP): the avatar out to VSeeFace/Warudo/VNyan-style receivers,
and a VMC tracker in (XR Animator, VSeeFace as a sender, …).

Out, one OSC bundle per frame, in this order: `/VMC/Ext/Blend/Val` for each weight (see `studio.interop.unity`
for the three namings), `/VMC/Ext/Blend/Apply`, `/VMC/Ext/Root/Pos` ("root", position, quaternion),
`/VMC/Ext/Bone/Pos` for each humanoid bone we drive (Unity names, local rotation in Unity's left-handed frame),
then `/VMC/Ext/OK 1` and `/VMC/Ext/T` (the frame's media time, seconds).

In, the same addresses: staged blend values take effect at `/VMC/Ext/Blend/Apply`; ARKit names (any
spelling) or VRM presets; root and bone poses. Packets that do not parse, NaN or infinite values, unknown
names and wrong argument types are ignored and counted; weights outside 0..1 are clamped and counted.
OSC is read and written with python-osc.
"""

from __future__ import annotations

import functools
import math
import struct

import numpy as np
from pythonosc.osc_bundle_builder import IMMEDIATELY, OscBundleBuilder
from pythonosc.osc_message_builder import OscMessageBuilder
from pythonosc.osc_packet import OscPacket

from studio.avatar.arkit import NUM_ARKIT, arkit_index
from studio.avatar.skeleton import JOINT_INDEX, PARENTS
from studio.frame import FrameState
from studio.interop.receiver import UdpReceiver
from studio.interop.sender import MAX_DATAGRAM, FrameSender
from studio.interop.tracking import TrackerInput
from studio.interop.unity import (
    BLEND_NAMINGS,
    JOINT_OF_BONE,
    SENT_JOINTS,
    UNITY_BONE,
    VRM_TO_ARKIT_INDEX,
    blend_values,
    from_unity_quat,
    to_unity_position,
    to_unity_quat,
)
from studio.recording.livelink import gaze_euler
from studio.recording.rotations import euler_to_matrix, matrix_to_rotvec, rotvec_to_matrix

VMC_PORT = 39539
_SENT_INDEX = np.array([JOINT_INDEX[name] for name in SENT_JOINTS])
_EYE_JOINTS = [JOINT_INDEX["left_eye_smplhf"], JOINT_INDEX["right_eye_smplhf"]]
_FLOAT = struct.Struct(">f")
_POSE = struct.Struct(">7f")  # position x y z, quaternion x y z w
_BUNDLE_PREFIX = b"#bundle\x00"
_OSC_TAGS = b"ihfdsbrmtTFN[]"  # the type tags python-osc parses


def _element(address: str, *args) -> bytes:
    """One bundle element (int32 size, then the message) built by python-osc."""
    builder = OscMessageBuilder(address)
    for value in args:
        builder.add_arg(value)
    dgram = builder.build().dgram
    return struct.pack(">i", len(dgram)) + dgram


def _prefix(address: str, name: str | None, floats: int) -> bytes:
    """The constant part of an element whose message ends in `floats` float32 arguments (its size, address,
    type tags and leading name): per frame only the floats are packed after it."""
    element = _element(address, *([name] if name is not None else []), *([0.0] * floats))
    return element[:len(element) - 4 * floats]


class VmcSender(FrameSender):
    """VMC out to host:port at `rate_hz`; `naming` is one of BLEND_NAMINGS.

    `rest_joints` (55, 3), the avatar's joint positions at rest in metres, gives each bone's local position
    (its offset from its parent); without it positions are sent as zero, which receivers that retarget by
    rotation (as VMC receivers do) ignore. With VRM preset names, which have no eyeLook shapes, the gaze the
    eyeLook weights show is put on the LeftEye/RightEye bones instead (with ARKit names it stays in the weights,
    so a perfect-sync avatar does not turn its eyes twice). The hips go out as `Hips` at their rest height (the pelvis's offset
    from the origin), rotated by the pelvis; the root carries the root translation and no rotation.

    Every message's address, type tags and name are built once by python-osc; a frame packs only its numbers
    after them (building each message anew cost ~9 ms a frame here, this ~0.1 ms).
    """

    name = "vmc"

    def __init__(self, host: str = "127.0.0.1", port: int = VMC_PORT, rate_hz: float = 30.0, naming: str = "arkit",
                 rest_joints: np.ndarray | None = None) -> None:
        if naming not in BLEND_NAMINGS:
            raise ValueError(f"VMC blendshape naming {naming!r} is not known; allowed: {', '.join(BLEND_NAMINGS)}")
        super().__init__(host, port, rate_hz)
        self.naming = naming
        offsets = np.zeros((len(PARENTS), 3))
        if rest_joints is not None:
            joints = np.asarray(rest_joints, np.float64).reshape(len(PARENTS), 3)
            offsets = joints - np.where(np.array(PARENTS)[:, None] >= 0, joints[np.maximum(PARENTS, 0)], 0.0)
        self._unity_offsets = to_unity_position(offsets)[_SENT_INDEX]
        blend_names = [name for name, _ in blend_values(np.zeros(NUM_ARKIT), naming)]
        self._blend_prefixes = [_prefix("/VMC/Ext/Blend/Val", name, 1) for name in blend_names]
        self._bone_prefixes = [_prefix("/VMC/Ext/Bone/Pos", UNITY_BONE[name], 7) for name in SENT_JOINTS]
        self._root_prefix = _prefix("/VMC/Ext/Root/Pos", "root", 7)
        self._time_prefix = _prefix("/VMC/Ext/T", None, 1)
        self._header = OscBundleBuilder(IMMEDIATELY).build().dgram
        self._apply = _element("/VMC/Ext/Blend/Apply")
        self._ok = _element("/VMC/Ext/OK", 1)

    def encode(self, frame: FrameState) -> bytes:
        parts = [self._header]
        values = [value for _, value in blend_values(frame.arkit, self.naming)]
        parts += [prefix + _FLOAT.pack(value) for prefix, value in zip(self._blend_prefixes, values)]
        parts.append(self._apply)
        parts.append(self._root_prefix + _POSE.pack(*to_unity_position(frame.transl).tolist(), 0.0, 0.0, 0.0, 1.0))
        pose = frame.pose
        if self.naming == "vrm":  # no eyeLook shapes among the presets: the gaze goes on the eye bones
            pose = pose.copy()
            gaze = rotvec_to_matrix(pose[_EYE_JOINTS]) @ euler_to_matrix(gaze_euler(frame.arkit), "yxz")
            pose[_EYE_JOINTS] = matrix_to_rotvec(gaze)
        bones = np.concatenate([self._unity_offsets, to_unity_quat(pose[_SENT_INDEX])], axis=1)
        parts += [prefix + _POSE.pack(*row) for prefix, row in zip(self._bone_prefixes, bones.tolist())]
        parts.append(self._ok)
        parts.append(self._time_prefix + _FLOAT.pack(float(frame.media_time_s)))
        data = b"".join(parts)
        if len(data) > MAX_DATAGRAM:
            raise ValueError(f"a VMC frame of {len(data)} bytes does not fit one UDP packet")
        return data


@functools.lru_cache(maxsize=1024)
def _shape_index(name: str) -> int | None:
    """The ARKit index of a peer's shape name (None when unknown), remembered: a tracker repeats its names."""
    try:
        return arkit_index(name)
    except KeyError:
        return None


def _message_ok(data: bytes) -> bool:
    """A message whose type tags are all ones python-osc reads (it logs a warning for each other one)."""
    end = data.find(b"\x00")
    if end < 0:
        return False
    at = (end // 4 + 1) * 4  # the address, padded to 4 bytes
    if at >= len(data):
        return True
    tags_end = data.find(b"\x00", at)
    return tags_end > at and data[at:at + 1] == b"," and not data[at + 1:tags_end].translate(None, _OSC_TAGS)


def osc_shape_ok(data: bytes, depth: int = 0) -> bool:
    """Whether a datagram is a message, or a bundle whose elements all have sane sizes and kinds.

    Checked before python-osc parses it: python-osc 1.10 loops forever on a bundle element of negative size
    (it steps back onto the same size) and logs a warning for every element that is neither a message nor a
    bundle and for every unknown type tag, so one crafted packet could hang the receiver or flood the log."""
    if data.startswith(b"/"):
        return _message_ok(data)
    if depth > 8 or len(data) < 16 or not data.startswith(_BUNDLE_PREFIX):
        return False
    at = 16
    while at < len(data):
        if at + 4 > len(data):
            return False
        size = int.from_bytes(data[at:at + 4], "big", signed=True)
        at += 4
        if size <= 0 or size % 4 or at + size > len(data):
            return False
        if not osc_shape_ok(data[at:at + size], depth + 1):
            return False
        at += size
    return True


class VmcReceiver(UdpReceiver):
    """VMC in on `port` (0.0.0.0 by default, as trackers on the network send to it), into a TrackerInput."""

    name = "vmc"

    def __init__(self, tracker: TrackerInput, port: int = VMC_PORT, host: str = "0.0.0.0") -> None:
        super().__init__(port, host)
        self.tracker = tracker
        self._staged = np.full(NUM_ARKIT, np.nan)
        self._bones: dict[int, np.ndarray] = {}
        self._root: tuple[np.ndarray, np.ndarray] | None = None
        self._staged_poses: dict[int, list] = {}  # joint index (-1: the root) -> Unity position and quaternion

    def handle(self, data: bytes, arrived: float) -> None:
        if not osc_shape_ok(data):
            self.count("malformed")
            return
        try:
            messages = [timed.message for timed in OscPacket(data).messages]
        except Exception:  # noqa: BLE001 - python-osc raises several kinds on garbage; all mean "not OSC"
            self.count("malformed")
            return
        posed = False
        for message in messages:
            address, args = message.address, list(message.params)
            if address == "/VMC/Ext/Blend/Val":
                self._blend(args)
            elif address == "/VMC/Ext/Blend/Apply":
                self._apply(arrived)
            elif address in ("/VMC/Ext/Bone/Pos", "/VMC/Ext/Root/Pos"):
                posed = self._pose(address, args) or posed
            elif address.startswith("/VMC/"):
                continue  # OK, T, camera, devices…: nothing the avatar wears
            else:
                self.count("unknown_name")
        if posed:
            self._convert_poses()
            self.tracker.put_pose(self._bones, self._root, arrived)

    def _blend(self, args: list) -> None:
        if len(args) != 2 or not isinstance(args[0], str) or not isinstance(args[1], (int, float)):
            self.count("malformed")
            return
        name, value = args[0], float(args[1])
        if not math.isfinite(value):
            self.count("nonfinite")
            return
        if not 0.0 <= value <= 1.0:
            self.count("clamped")
            value = min(max(value, 0.0), 1.0)
        vrm = VRM_TO_ARKIT_INDEX.get(name.lower())
        if vrm is not None:
            current = self._staged[vrm]
            self._staged[vrm] = np.where(np.isnan(current), value, np.fmax(current, value))
            return
        index = _shape_index(name)
        if index is None:
            self.count("unknown_name")
            return
        self._staged[index] = value

    def _apply(self, arrived: float) -> None:
        staged = self._staged
        if np.isnan(staged).all():
            return
        self.tracker.put_face(staged.copy(), None, arrived)
        self._staged = np.full(NUM_ARKIT, np.nan)

    def _pose(self, address: str, args: list) -> bool:
        """Stage one root or bone pose (converted with the rest of the packet's in `_convert_poses`)."""
        if len(args) < 8 or not isinstance(args[0], str) or not all(isinstance(v, (int, float)) for v in args[1:8]):
            self.count("malformed")
            return False
        values = args[1:8]
        if not all(math.isfinite(v) for v in values) or sum(v * v for v in values[3:]) < 1e-12:
            self.count("nonfinite")
            return False
        if address == "/VMC/Ext/Root/Pos":
            self._staged_poses[-1] = values
            return True
        joint = JOINT_OF_BONE.get(args[0])
        if joint is None:
            self.count("unknown_name")
            return False
        self._staged_poses[joint] = values
        return True

    def _convert_poses(self) -> None:
        """The packet's staged poses into our frame, all at once (per message, numpy's overhead cost ~2 ms a packet)."""
        keys = list(self._staged_poses)
        values = np.array([self._staged_poses[key] for key in keys], np.float64)
        self._staged_poses.clear()
        rotations = from_unity_quat(values[:, 3:])
        for key, position, rotation in zip(keys, to_unity_position(values[:, :3]), rotations):
            if key < 0:
                self._root = (position, rotation)
            else:
                self._bones[key] = rotation
