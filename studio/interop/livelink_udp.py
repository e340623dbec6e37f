"""Live Link Face's UDP stream: the avatar out as a face an Unreal Live Link source sees, and the iPhone app in.

One packet per frame, big-endian (Unreal's network byte order), version 6:
`u8 version`, `i32 length + device id (UTF-8)`, `i32 length + subject name`, `i32 frame number`,
`f32 sub-frame`, `u32 fps`, `u32 fps denominator`, `u8 count (61)`, then 61 `f32`: the 52 shapes in the
canonical ARKit order (unlike the app's CSV, JawLeft is 15 and JawRight 16), then head yaw/pitch/roll and
each eye's yaw/pitch/roll in radians. `../shared/REFERENCE.md` lists the sub-frame as u32; the independent
decoder `pylivelinkface` reads it as f32 (Unreal's FFrameTime keeps it as a float), which is what we write.
That decoder also reads the device id as 37 fixed bytes (the length's last byte and 36 characters), so our
device id is a 36-character UUID. A second public decoder (think-biq's FaceFrame, after Unreal's
AppleARKitLiveLinkSource) reads the same layout and takes packets of 264..774 bytes, so the subject name is
kept short enough for that.

Head angles follow `studio.recording.livelink` (yaw about +y, pitch about +x, roll about +z, the neck and
head together). Incoming eye angles turn the eye joints by what the packet's eyeLook weights do not already
turn (`eye_joint_rotations`, as an imported take's do), so the avatar's eyes look where the phone says.
"""

from __future__ import annotations

import math
import struct
import uuid

import numpy as np

from studio.avatar.arkit import NUM_ARKIT
from studio.frame import FrameState
from studio.interop.receiver import UdpReceiver
from studio.interop.sender import FrameSender
from studio.interop.tracking import TrackerInput
from studio.recording.livelink import eye_joint_rotations, frame_rotations
from studio.recording.rotations import euler_to_matrix, matrix_to_rotvec

LIVELINK_PORT = 11111
PACKET_VERSION = 6
VALUE_COUNT = 61
_TAIL = struct.Struct(">ifIIB61f")
_NAME_LIMIT = 1024  # longer device or subject names are not Live Link Face's
MAX_PACKET = 774  # Unreal's Live Link Face source reads packets of 264..774 bytes
SUBJECT_LIMIT = MAX_PACKET - (1 + 4 + 36 + 4 + 17 + VALUE_COUNT * 4)  # with our 36-character device id


class LiveLinkPacketError(ValueError):
    """A datagram that is not a Live Link Face packet; the message says which part is wrong."""


def encode_packet(device_id: str, subject: str, frame: int, sub_frame: float, fps: int, values: np.ndarray,
                  denominator: int = 1) -> bytes:
    """One version-6 packet; `values` are the 61 floats (52 weights in canonical order, then 9 angles)."""
    values = np.asarray(values, np.float64).reshape(VALUE_COUNT)
    device, name = device_id.encode(), subject.encode()
    return (struct.pack(">Bi", PACKET_VERSION, len(device)) + device + struct.pack(">i", len(name)) + name
            + _TAIL.pack(int(frame), float(sub_frame), int(fps), int(denominator), VALUE_COUNT, *values.tolist()))


def decode_packet(data: bytes) -> tuple[str, str, int, float, int, int, np.ndarray]:
    """(device id, subject, frame, sub-frame, fps, denominator, 61 values); LiveLinkPacketError when malformed."""
    if len(data) < 5 or data[0] != PACKET_VERSION:
        raise LiveLinkPacketError(f"version {data[0] if data else None} is not {PACKET_VERSION}")
    at = 1
    texts = []
    for what in ("device id", "subject name"):
        if len(data) < at + 4:
            raise LiveLinkPacketError(f"packet ends before the {what}")
        (length,) = struct.unpack_from(">i", data, at)
        if not 0 <= length <= _NAME_LIMIT or len(data) < at + 4 + length:
            raise LiveLinkPacketError(f"{what} length {length} does not fit the packet")
        try:
            texts.append(data[at + 4:at + 4 + length].decode())
        except UnicodeDecodeError:
            raise LiveLinkPacketError(f"{what} is not UTF-8") from None
        at += 4 + length
    if len(data) != at + _TAIL.size:
        raise LiveLinkPacketError(f"packet is {len(data)} bytes; a face of {VALUE_COUNT} values needs {at + _TAIL.size}")
    frame, sub_frame, fps, denominator, count, *values = _TAIL.unpack_from(data, at)
    if count != VALUE_COUNT:
        raise LiveLinkPacketError(f"value count {count} is not {VALUE_COUNT}")
    return texts[0], texts[1], frame, sub_frame, fps, denominator, np.array(values, np.float64)


def frame_values(frame: FrameState) -> np.ndarray:
    """The 61 values of a frame: its 52 weights, then head and eye angles as the app sends them."""
    return np.concatenate([frame.arkit.astype(np.float64), frame_rotations(frame)])


class LiveLinkSender(FrameSender):
    """The avatar as a Live Link Face subject, sent to host:port (an Unreal editor's Live Link source)."""

    name = "livelink"

    def __init__(self, host: str = "127.0.0.1", port: int = LIVELINK_PORT, rate_hz: float = 60.0,
                 subject: str = "AvatarStudio", device_id: str | None = None) -> None:
        super().__init__(host, port, rate_hz)
        if not subject or len(subject.encode()) > SUBJECT_LIMIT:
            raise ValueError(f"Live Link subject name {subject!r} must be 1..{SUBJECT_LIMIT} bytes "
                             f"(Unreal drops packets over {MAX_PACKET} bytes)")
        self.subject = subject
        self.device_id = device_id or str(uuid.uuid4())

    def encode(self, frame: FrameState) -> bytes:
        position = frame.media_time_s * self.rate_hz
        whole = math.floor(position)
        return encode_packet(self.device_id, self.subject, whole % 2**31, position - whole, round(self.rate_hz),
                             frame_values(frame))


class LiveLinkReceiver(UdpReceiver):
    """Live Link Face in on `port` (11111 by default) into a TrackerInput: 52 weights, the head and the eyes."""

    name = "livelink"

    def __init__(self, tracker: TrackerInput, port: int = LIVELINK_PORT, host: str = "0.0.0.0") -> None:
        super().__init__(port, host)
        self.tracker = tracker
        self.subjects: set[str] = set()

    def handle(self, data: bytes, arrived: float) -> None:
        try:
            _device, subject, _frame, _sub, _fps, _den, values = decode_packet(data)
        except (LiveLinkPacketError, struct.error):
            self.count("malformed")
            return
        if len(self.subjects) < 64:
            self.subjects.add(subject)
        finite = np.isfinite(values)
        if not finite.all():
            self.count("nonfinite", int((~finite).sum()))
        weights = values[:NUM_ARKIT].copy()
        outside = finite[:NUM_ARKIT] & ((weights < 0.0) | (weights > 1.0))
        if outside.any():
            self.count("clamped", int(outside.sum()))
        weights = np.where(finite[:NUM_ARKIT], np.clip(weights, 0.0, 1.0), np.nan)
        head = None
        if finite[NUM_ARKIT:NUM_ARKIT + 3].all():
            head = matrix_to_rotvec(euler_to_matrix(values[NUM_ARKIT:NUM_ARKIT + 3], "yxz"))[0]
        eyes = None
        if finite[NUM_ARKIT + 3:].all():  # turned against the weights the tracker then has (a NaN one keeps its last)
            worn = np.where(np.isnan(weights), self.tracker.sample().face, weights)
            eyes = eye_joint_rotations(values[NUM_ARKIT + 3:], worn)
        self.tracker.put_face(weights, head, arrived, eyes)
