"""Live Link Face CSV: write a take's weights and rotations, read one back (as a take, with its audio).

The layout Epic's Live Link Face app records: `Timecode,BlendShapeCount,` the 52 ARKit names in
PascalCase (canonical order), then `HeadYaw,HeadPitch,HeadRoll,LeftEyeYaw,LeftEyePitch,LeftEyeRoll,
RightEyeYaw,RightEyePitch,RightEyeRoll`; timecode SMPTE `HH:MM:SS:FF.mmm`. Rotations are written in
radians, yaw about +y (up), pitch about +x, roll about +z (R = Ry·Rx·Rz); the head's is the neck and
head joints together.
"""

from __future__ import annotations

import csv
import math
import os
import re
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
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
_BLOCK_ROWS = 256  # rows converted to frames at once
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


@dataclass
class LiveLinkCsv:
    """A Live Link Face CSV checked from end to end (`check_livelink_csv`); `frames()` reads it again as it goes.

    Only each row's time is kept between the two passes (8 bytes a row), so importing an hour costs what a
    minute does, and every error is found before a take is written.
    """

    path: Path
    fps: float
    times: np.ndarray  # each data row's time from the first, seconds

    def frames(self) -> Iterator[FrameState]:
        """The rows as frames stamped from 0 s, in file order, converted a block of rows at a time."""
        block: list[list[str]] = []
        first = 0
        for _line, row in _data_rows(self.path):
            block.append(row)
            if len(block) == _BLOCK_ROWS:
                yield from self._frames(block, first)
                first, block = first + len(block), []
        yield from self._frames(block, first)

    def _frames(self, rows: list[list[str]], first: int) -> Iterator[FrameState]:
        if not rows:
            return
        try:
            if first + len(rows) > len(self.times):
                raise ValueError("more rows")
            values = np.array([row[2:] for row in rows], np.float64)
        except ValueError:
            raise LiveLinkFormatError(f"{self.path}: the file changed after it was checked") from None
        weights = np.clip(values[:, :NUM_ARKIT], 0.0, 1.0)
        head, left, right = (matrix_to_rotvec(euler_to_matrix(values[:, NUM_ARKIT + 3 * k:NUM_ARKIT + 3 * k + 3], "yxz"))
                             for k in range(3))
        rest = relaxed_rest_pose()
        rest[_NECK] = 0.0
        for k in range(len(rows)):
            pose = rest.copy()
            pose[_HEAD], pose[_EYES[0]], pose[_EYES[1]] = head[k], left[k], right[k]
            yield FrameState(media_time_s=float(self.times[first + k]), arkit=weights[k], pose=pose, sequence=first + k)


def _rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, cells) of each non-blank row, the header first, read a line at a time."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle)
            yield from ((reader.line_num, row) for row in reader if any(cell.strip() for cell in row))
    except UnicodeDecodeError:
        raise LiveLinkFormatError(f"{path}: not a text CSV (not UTF-8)") from None


def _data_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    rows = _rows(path)
    next(rows, None)  # the header
    return rows


def _check_header(path: Path) -> None:
    _line, header = next(_rows(path), (0, None))
    if header is None:
        raise LiveLinkFormatError(f"{path}: the file is empty")
    header = tuple(cell.strip() for cell in header)
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


def _check_values(path: Path, number: int, row: list[str]) -> None:
    if len(row) != len(HEADER):
        raise LiveLinkFormatError(f"{path}: line {number} has {len(row)} values; expected {len(HEADER)}")
    for k, cell in enumerate(row[2:]):
        try:
            value = float(cell)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise LiveLinkFormatError(f"{path}: line {number}, column {HEADER[k + 2]}: {cell!r} is not a number")


def check_livelink_csv(path: str | os.PathLike, fps: float | None = None) -> LiveLinkCsv:
    """Read the CSV once, a row at a time, and say what is wrong (LiveLinkFormatError) before anything is made of it.

    The frame rate is not in the file: it is the largest frame number in a second plus one, rounded up
    to a standard rate, unless given.
    """
    path = Path(path)
    _check_header(path)
    codes = array("l")  # hours, minutes, seconds, frame, milliseconds of each row
    lines = array("l")
    for number, row in _data_rows(path):
        _check_values(path, number, row)
        match = _TIMECODE.match(row[0].strip())
        if not match:
            raise LiveLinkFormatError(f"{path}: line {number}: timecode {row[0]!r} is not HH:MM:SS:FF.mmm")
        codes.extend(int(g) for g in match.groups()[:4])
        codes.append(int((match.group(5) or "0").ljust(3, "0")))
        lines.append(number)
    if not lines:
        raise LiveLinkFormatError(f"{path}: no data rows after the header")
    parts = np.array(codes, np.float64).reshape(-1, 5)
    if fps is None:
        fastest = int(parts[:, 3].max()) + 1
        fps = next((rate for rate in STANDARD_RATES if rate >= fastest), float(fastest))
    times = parts[:, 0] * 3600 + parts[:, 1] * 60 + parts[:, 2] + (parts[:, 3] + parts[:, 4] / 1000.0) / fps
    if np.any(np.diff(times) <= 0):
        line = lines[int(np.flatnonzero(np.diff(times) <= 0)[0]) + 1]
        code = next(row[0] for number, row in _data_rows(path) if number == line)
        raise LiveLinkFormatError(f"{path}: line {line}: timecode {code!r} does not come after the line before")
    return LiveLinkCsv(path, float(fps), times - times[0])


def read_livelink_csv(path: str | os.PathLike, fps: float | None = None) -> tuple[list[FrameState], float]:
    """(frames stamped from 0 s, frame rate) of a Live Link Face CSV; LiveLinkFormatError says what is wrong."""
    checked = check_livelink_csv(path, fps)
    return list(checked.frames()), checked.fps
