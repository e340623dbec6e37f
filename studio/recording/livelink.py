"""Live Link Face CSV: write a take's weights and rotations, read one back (as a take, with its audio).

The layout Epic's Live Link Face app records: `Timecode,BlendShapeCount,` the 52 ARKit names in
PascalCase (canonical order), then `HeadYaw,HeadPitch,HeadRoll,LeftEyeYaw,LeftEyePitch,LeftEyeRoll,
RightEyeYaw,RightEyePitch,RightEyeRoll`; timecode SMPTE `HH:MM:SS:FF.mmm`. Rotations are written in
radians, yaw about +y (up), pitch about +x, roll about +z (R = Ry·Rx·Rz); the head's is the neck and
head joints together.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

import numpy as np

from studio.avatar.arkit import ARKIT_NAMES, NUM_ARKIT
from studio.avatar.skeleton import JOINT_INDEX
from studio.engine.motion import relaxed_rest_pose
from studio.engine.offline import smpte_timecode
from studio.fileio import atomic_writer
from studio.frame import FrameState
from studio.recording.rotations import euler_to_matrix, matrix_to_euler, matrix_to_rotvec, rotvec_to_matrix

BLENDSHAPE_COLUMNS = tuple(name[0].upper() + name[1:] for name in ARKIT_NAMES)
ROTATION_COLUMNS = ("HeadYaw", "HeadPitch", "HeadRoll", "LeftEyeYaw", "LeftEyePitch", "LeftEyeRoll",
                    "RightEyeYaw", "RightEyePitch", "RightEyeRoll")
HEADER = ("Timecode", "BlendShapeCount") + BLENDSHAPE_COLUMNS + ROTATION_COLUMNS
SHAPE_COUNT = NUM_ARKIT + len(ROTATION_COLUMNS)  # 61, as the app writes it
STANDARD_RATES = (24.0, 25.0, 30.0, 48.0, 50.0, 60.0, 100.0, 120.0)
_TIMECODE = re.compile(r"^(\d{1,2}):(\d{2}):(\d{2}):(\d{1,3})(?:\.(\d{1,3}))?$")
_NECK, _HEAD = JOINT_INDEX["neck"], JOINT_INDEX["head"]
_EYES = (JOINT_INDEX["left_eye_smplhf"], JOINT_INDEX["right_eye_smplhf"])


class LiveLinkFormatError(ValueError):
    """A CSV that is not in Live Link Face's layout; the message says where and why."""


def frame_rotations(frame: FrameState) -> np.ndarray:
    """The 9 rotation values (head yaw/pitch/roll, then each eye) of one frame, radians."""
    head = rotvec_to_matrix(frame.pose[[_NECK, _HEAD]].astype(np.float64))
    eyes = rotvec_to_matrix(frame.pose[list(_EYES)].astype(np.float64))
    return np.concatenate([matrix_to_euler(head[0] @ head[1], "yxz")[0], matrix_to_euler(eyes, "yxz").ravel()])


def _write_livelink_csv(out: TextIO, frames: Iterable[FrameState], fps: float) -> int:
    """Write the header and one row per frame to `out`; returns how many rows."""
    out.write(",".join(HEADER) + "\n")
    rows = 0
    for frame in frames:
        values = ",".join(f"{w:.6f}" for w in frame.arkit)
        rotations = ",".join(f"{r:.6f}" for r in frame_rotations(frame))
        out.write(f"{smpte_timecode(frame.media_time_s, fps)},{SHAPE_COUNT},{values},{rotations}\n")
        rows += 1
    return rows


def write_livelink_csv(frames: Iterable[FrameState], path: str | os.PathLike, fps: float) -> Path:
    """Write frames (stamped with take time) as a Live Link Face CSV a row at a time (memory does not grow
    with the take), atomically (temp file, then rename); no frames is a ValueError and writes nothing."""
    with atomic_writer(path) as out:
        if not _write_livelink_csv(out, frames, fps):
            raise ValueError("no frames to write")
    return Path(path)


def parse_timecode(text: str, fps: float) -> float:
    match = _TIMECODE.match(text.strip())
    if not match:
        raise ValueError(f"timecode {text!r} is not HH:MM:SS:FF.mmm")
    hours, minutes, seconds, frame = (int(g) for g in match.groups()[:4])
    fraction = int((match.group(5) or "0").ljust(3, "0"))
    return hours * 3600 + minutes * 60 + seconds + (frame + fraction / 1000.0) / fps


def read_livelink_csv(path: str | os.PathLike, fps: float | None = None) -> tuple[list[FrameState], float]:
    """(frames stamped from 0 s, frame rate) of a Live Link Face CSV; LiveLinkFormatError says what is wrong.

    The frame rate is not in the file: it is the largest frame number in a second plus one, rounded up
    to a standard rate, unless given.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise LiveLinkFormatError(f"{path}: not a text CSV (not UTF-8)") from None
    rows = list(csv.reader(io.StringIO(text)))
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    if not rows:
        raise LiveLinkFormatError(f"{path}: the file is empty")
    header = tuple(cell.strip() for cell in rows[0])
    if header[:2] != HEADER[:2]:
        raise LiveLinkFormatError(f"{path}: not a Live Link Face CSV: the first columns are {list(header[:2])}, "
                                  f"expected ['Timecode', 'BlendShapeCount']")
    for k, expected in enumerate(HEADER):
        if k >= len(header):
            raise LiveLinkFormatError(f"{path}: header has {len(header)} columns; Live Link Face has {len(HEADER)} "
                                      f"(missing from {expected!r} on)")
        if header[k].lower() != expected.lower():
            raise LiveLinkFormatError(f"{path}: column {k + 1} is {header[k]!r}; Live Link Face has {expected!r} there")
    if len(header) > len(HEADER):
        raise LiveLinkFormatError(f"{path}: header has {len(header) - len(HEADER)} extra column(s) after RightEyeRoll")
    if len(rows) < 2:
        raise LiveLinkFormatError(f"{path}: no data rows after the header")
    timecodes, values = [], np.empty((len(rows) - 1, len(HEADER) - 2))
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(HEADER):
            raise LiveLinkFormatError(f"{path}: line {number} has {len(row)} values; expected {len(HEADER)}")
        timecodes.append(row[0])
        for k, cell in enumerate(row[2:]):
            try:
                value = float(cell)
            except ValueError:
                value = math.nan
            if not math.isfinite(value):
                raise LiveLinkFormatError(f"{path}: line {number}, column {HEADER[k + 2]}: {cell!r} is not a number")
            values[number - 2, k] = value
    if fps is None:
        frame_numbers = []
        for number, code in enumerate(timecodes, start=2):
            match = _TIMECODE.match(code.strip())
            if not match:
                raise LiveLinkFormatError(f"{path}: line {number}: timecode {code!r} is not HH:MM:SS:FF.mmm")
            frame_numbers.append(int(match.group(4)))
        fastest = max(frame_numbers) + 1
        fps = next((rate for rate in STANDARD_RATES if rate >= fastest), float(fastest))
    try:
        times = np.array([parse_timecode(code, fps) for code in timecodes])
    except ValueError as error:
        raise LiveLinkFormatError(f"{path}: {error}") from None
    if np.any(np.diff(times) <= 0):
        at = int(np.flatnonzero(np.diff(times) <= 0)[0]) + 3
        raise LiveLinkFormatError(f"{path}: line {at}: timecode {timecodes[at - 2]!r} does not come after the line before")
    times -= times[0]
    weights = np.clip(values[:, :NUM_ARKIT], 0.0, 1.0)
    head = euler_to_matrix(values[:, NUM_ARKIT:NUM_ARKIT + 3], "yxz")
    left = euler_to_matrix(values[:, NUM_ARKIT + 3:NUM_ARKIT + 6], "yxz")
    right = euler_to_matrix(values[:, NUM_ARKIT + 6:NUM_ARKIT + 9], "yxz")
    rest = relaxed_rest_pose()
    rest[_NECK] = 0.0
    frames = []
    for k in range(len(times)):
        pose = rest.copy()
        pose[_HEAD] = matrix_to_rotvec(head[k])[0]
        pose[_EYES[0]] = matrix_to_rotvec(left[k])[0]
        pose[_EYES[1]] = matrix_to_rotvec(right[k])[0]
        frames.append(FrameState(media_time_s=float(times[k]), arkit=weights[k], pose=pose, sequence=k))
    return frames, float(fps)
