"""Live Link Face CSV: write a take's weights and rotations, read one back (as a take, with its audio).

The layout Epic's Live Link Face app records: `Timecode,BlendShapeCount,` the 52 ARKit names in
PascalCase, then `HeadYaw,HeadPitch,HeadRoll,LeftEyeYaw,LeftEyePitch,LeftEyeRoll,RightEyeYaw,RightEyePitch,
RightEyeRoll`; timecode SMPTE `HH:MM:SS:FF.fff` (frame, then its fraction) of the phone's clock. The app's
order is the canonical ARKit order with two pairs swapped (`JawRight,JawLeft`, `MouthRight,MouthLeft`), so
columns are read by name (case and `_ - .` separators ignored) and written in the app's order.

Rotations are radians. The head's is yaw about +y (up), pitch about +x, roll about +z (R = Ry·Rx·Rz), the
neck and head joints together. The eyes' follow the app's sign, measured on a real take (yaw falls as
eyeLookOutLeft rises, pitch rises with eyeLookDown): yaw and roll are mirrored against the skeleton's axes.
The engine animates gaze as the eyeLook* weights only (`studio.engine.motion`), so a written eye angle is
that gaze plus whatever the eye joint adds; an imported eye angle puts on the eye joint what the file's
weights do not already turn, so the avatar's eyes end where the file says and a round trip gives it back.
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

from studio.avatar.arkit import ARKIT_INDEX, ARKIT_NAMES, NUM_ARKIT
from studio.avatar.skeleton import JOINT_INDEX
from studio.engine.motion import EYE_LOOK_FULL_RAD, relaxed_rest_pose
from studio.fileio import atomic_writer, check_output_file
from studio.frame import FrameState
from studio.recording.rotations import euler_to_matrix, matrix_to_euler, matrix_to_rotvec, rotvec_to_matrix


def _app_order() -> tuple[str, ...]:
    names = list(ARKIT_NAMES)
    for a, b in (("jawLeft", "jawRight"), ("mouthLeft", "mouthRight")):
        i, j = names.index(a), names.index(b)
        names[i], names[j] = names[j], names[i]
    return tuple(names)


APP_ORDER = _app_order()  # the 52 as Live Link Face writes them
APP_TO_CANONICAL = np.array([ARKIT_INDEX[name] for name in APP_ORDER])
BLENDSHAPE_COLUMNS = tuple(name[0].upper() + name[1:] for name in APP_ORDER)
ROTATION_COLUMNS = ("HeadYaw", "HeadPitch", "HeadRoll", "LeftEyeYaw", "LeftEyePitch", "LeftEyeRoll",
                    "RightEyeYaw", "RightEyePitch", "RightEyeRoll")
HEADER = ("Timecode", "BlendShapeCount") + BLENDSHAPE_COLUMNS + ROTATION_COLUMNS
SHAPE_COUNT = NUM_ARKIT + len(ROTATION_COLUMNS)  # 61, as the app writes it
STANDARD_RATES = (24.0, 25.0, 30.0, 48.0, 50.0, 60.0, 100.0, 120.0)
VALUE_FORMAT = "{:.10f}"  # the app's own precision; a float32 weight prints back as the app printed it
_BLOCK_ROWS = 256  # rows converted to frames at once
_TIMECODE = re.compile(r"^(\d{1,2}):(\d{2}):(\d{2}):(\d{1,3})(?:\.(\d{1,3}))?$")
_NECK, _HEAD = JOINT_INDEX["neck"], JOINT_INDEX["head"]
_EYES = (JOINT_INDEX["left_eye_smplhf"], JOINT_INDEX["right_eye_smplhf"])
_EYE_MIRROR = np.array([-1.0, 1.0, -1.0])  # the app's eye (yaw, pitch, roll) against the skeleton's
# per eye: (towards the subject's left, away from it, down, up)
_GAZE_CHANNELS = tuple(np.array([ARKIT_INDEX[name] for name in names]) for names in (
    ("eyeLookOutLeft", "eyeLookInLeft", "eyeLookDownLeft", "eyeLookUpLeft"),
    ("eyeLookInRight", "eyeLookOutRight", "eyeLookDownRight", "eyeLookUpRight")))


class LiveLinkFormatError(ValueError):
    """A CSV that is not in Live Link Face's layout; the message says where and why."""


def gaze_euler(arkit: np.ndarray) -> np.ndarray:
    """(..., 2, 3) skeleton-frame (yaw, pitch, roll) of the left and right eye that the eyeLook* weights show."""
    w = np.asarray(arkit, np.float64)
    out = np.zeros(w.shape[:-1] + (2, 3))
    for eye, (side, other, down, up) in enumerate(_GAZE_CHANNELS):
        out[..., eye, 0] = (w[..., side] - w[..., other]) * EYE_LOOK_FULL_RAD
        out[..., eye, 1] = (w[..., down] - w[..., up]) * EYE_LOOK_FULL_RAD
    return out


def eye_joint_rotations(eye_angles: np.ndarray, arkit: np.ndarray) -> np.ndarray:
    """(..., 2, 3) axis-angle of the left and right eye joints from Live Link Face's six eye angles (..., 6:
    LeftEyeYaw … RightEyeRoll, radians, the app's signs) and the weights (..., 52) worn with them: the turn the
    eyeLook* weights do not already give, so that joint and weights together look where the angles say."""
    angles = np.asarray(eye_angles, np.float64)
    eyes = angles.reshape(angles.shape[:-1] + (2, 3)) * _EYE_MIRROR - gaze_euler(arkit)
    return matrix_to_rotvec(euler_to_matrix(eyes.reshape(-1, 3), "yxz")).reshape(eyes.shape)


def rotation_values(arkit: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """(k, 9) head yaw/pitch/roll, then each eye's, as the app writes them, from (k, 52) weights and (k, 55, 3) poses."""
    arkit = np.asarray(arkit).reshape(-1, NUM_ARKIT)
    pose = np.asarray(pose, np.float64).reshape(-1, pose.shape[-2], 3)
    neck, head = rotvec_to_matrix(pose[:, _NECK]), rotvec_to_matrix(pose[:, _HEAD])
    head_euler = matrix_to_euler(neck @ head, "yxz")
    eyes = matrix_to_euler(rotvec_to_matrix(pose[:, list(_EYES)].reshape(-1, 3)), "yxz").reshape(-1, 2, 3)
    eyes = (eyes + gaze_euler(arkit)) * _EYE_MIRROR
    return np.concatenate([head_euler, eyes.reshape(-1, 6)], axis=1)


def frame_rotations(frame: FrameState) -> np.ndarray:
    """The 9 rotation values (head yaw/pitch/roll, then each eye) of one frame as the app writes them, radians."""
    return rotation_values(frame.arkit[None], frame.pose[None])[0]


def livelink_timecode(seconds: float, fps: float) -> str:
    """`HH:MM:SS:FF.fff` of a time of day in seconds: the frame within the second, then its fraction.

    Counted in thousandths of a frame, so a timecode read by `parse_timecode` at the same rate prints back
    the same."""
    rate = round(fps)
    if abs(fps - rate) > 1e-9:  # a rate like 29.97: frames of 1/fps within each wall-clock second
        whole = math.floor(seconds + 1e-9)
        milli = int(round((seconds - whole) * fps * 1000))
        frame, fraction = divmod(milli, 1000)
    else:
        frames, fraction = divmod(int(round(seconds * rate * 1000)), 1000)
        whole, frame = divmod(frames, rate)
    hours, rest = divmod(int(whole), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}:{frame:02d}.{fraction:03d}"


def parse_timecode(code: str, fps: float) -> float:
    """Seconds of a `HH:MM:SS:FF[.fff]` timecode at `fps`; ValueError when it is not one."""
    match = _TIMECODE.match(code.strip())
    if not match:
        raise ValueError(f"timecode {code!r} is not HH:MM:SS:FF.fff")
    hours, minutes, seconds, frame = (int(g) for g in match.groups()[:4])
    fraction = int((match.group(5) or "0").ljust(3, "0"))
    return hours * 3600 + minutes * 60 + seconds + (frame + fraction / 1000.0) / fps


def take_timecode_start(manifest: dict) -> float:
    """Seconds of the timecode at a take's first frame: the source's (an imported take keeps it), else 0."""
    code = manifest.get("timecode_start")
    try:
        return parse_timecode(code, float(manifest.get("frame_rate") or 30.0)) if isinstance(code, str) else 0.0
    except ValueError:
        return 0.0


def _row_text(timecode: str, arkit: np.ndarray, rotations: np.ndarray) -> str:
    values = ",".join(VALUE_FORMAT.format(v) for v in np.asarray(arkit)[APP_TO_CANONICAL].tolist())
    angles = ",".join(VALUE_FORMAT.format(r) for r in rotations.tolist())
    return f"{timecode},{SHAPE_COUNT},{values},{angles}\n"


def _write_livelink_csv(out: TextIO, frames: Iterable[FrameState], fps: float, start_s: float) -> int:
    """Write the header and one row per frame to `out`; returns how many rows."""
    out.write(",".join(HEADER) + "\n")
    rows = 0
    for frame in frames:
        out.write(_row_text(livelink_timecode(start_s + frame.media_time_s, fps), frame.arkit, frame_rotations(frame)))
        rows += 1
    return rows


def write_livelink_csv(frames: Iterable[FrameState], path: str | os.PathLike, fps: float, start_s: float = 0.0) -> Path:
    """Write frames (stamped with take time) as a Live Link Face CSV a row at a time (memory does not grow
    with the take), atomically (temp file, then rename); no frames is a ValueError and writes nothing.
    `start_s` is the timecode of take time 0, in seconds of the day."""
    with atomic_writer(path) as out:
        if not _write_livelink_csv(out, frames, fps, start_s):
            raise ValueError("no frames to write")
    return Path(path)


def write_livelink_csv_blocks(blocks: Iterable, path: str | os.PathLike, fps: float) -> int:
    """A Live Link Face CSV from blocks with `times` (k,), `arkit` (k, 52) and `pose` (k, 55, 3) (the offline
    analysis's FrameBlocks, for `lipsync --format livelink`), written as they come and atomically; the timecode
    starts at 0. Returns the number of rows."""
    check_output_file(Path(path))  # before the first block is analysed
    rows = 0
    with atomic_writer(path) as out:
        out.write(",".join(HEADER) + "\n")
        for block in blocks:
            rotations = rotation_values(block.arkit, block.pose)
            out.write("".join(_row_text(livelink_timecode(t, fps), arkit, angles)
                              for t, arkit, angles in zip(np.asarray(block.times).tolist(), block.arkit, rotations)))
            rows += len(block.times)
    return rows


def _simple(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.strip().lower())


_SHAPE_BY_KEY = {_simple(name): k for k, name in enumerate(ARKIT_NAMES)}


def _shape_index(name: str) -> int | None:
    """Canonical index of an ARKit name in any case and with any separators (`EyeBlinkLeft`, `eye_blink_left`,
    `eyeBlink_L`); None for another name."""
    found = _SHAPE_BY_KEY.get(_simple(name))
    side = re.fullmatch(r"(.+?)[_\-. ]([LlRr])", name.strip())
    if found is None and side:
        found = _SHAPE_BY_KEY.get(_simple(side.group(1)) + ("left" if side.group(2) in "Ll" else "right"))
    return found


@dataclass(frozen=True)
class Columns:
    """Where each value lies in a row, found by the header's names."""

    count: int  # cells a row has
    timecode: int
    shapes: np.ndarray  # (52,) column of each canonical ARKit weight
    rotations: np.ndarray  # (9,) column of each of ROTATION_COLUMNS, -1 where the file has none

    def numeric(self) -> list[tuple[int, str]]:
        """(column, name) of every number a row must hold."""
        named = [(int(c), ARKIT_NAMES[k]) for k, c in enumerate(self.shapes)]
        return named + [(int(c), ROTATION_COLUMNS[k]) for k, c in enumerate(self.rotations) if c >= 0]


def _columns(path: Path, header: list[str]) -> Columns:
    """The header's columns by name: every ARKit weight and the timecode are needed, the rotations are not."""
    rotation_by_name = {_simple(name): k for k, name in enumerate(ROTATION_COLUMNS)}
    ignored = {_simple("BlendShapeCount"), _simple("media_time_s")}  # the app's count; the lipsync CSV's seconds
    timecode, shapes, rotations, unknown = -1, {}, {}, []
    for column, cell in enumerate(header):
        key = _simple(cell)
        index, into = _shape_index(cell), shapes
        if index is None:
            index, into = rotation_by_name.get(key), rotations
        if key == "timecode":
            index, into = 0, None
        if index is None:
            if key not in ignored:
                unknown.append(cell.strip())
            continue
        found = timecode if into is None else into.get(index, -1)
        if found >= 0:
            raise LiveLinkFormatError(f"{path}: columns {found + 1} and {column + 1} are both {cell.strip()!r}")
        if into is None:
            timecode = column
        else:
            into[index] = column
    missing = ([] if timecode >= 0 else ["Timecode"]) + [name[0].upper() + name[1:] for name in APP_ORDER
                                                         if ARKIT_INDEX[name] not in shapes]
    if missing:
        if not shapes and timecode < 0:
            raise LiveLinkFormatError(f"{path}: not a Live Link Face CSV: no Timecode and no ARKit blendshape columns "
                                      f"in the header (it starts {header[:3]})")
        listed = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
        raise LiveLinkFormatError(f"{path}: header lacks {listed}" + (
            f"; it has {', '.join(repr(u) for u in unknown)}, which is no Live Link Face column" if unknown else ""))
    return Columns(len(header), timecode, np.array([shapes[k] for k in range(NUM_ARKIT)]),
                   np.array([rotations.get(k, -1) for k in range(len(ROTATION_COLUMNS))]))


@dataclass
class LiveLinkCsv:
    """A Live Link Face CSV checked from end to end (`check_livelink_csv`); `frames()` reads it again as it goes.

    Only each row's time is kept between the two passes (8 bytes a row), so importing an hour costs what a
    minute does, and every error is found before a take is written.
    """

    path: Path
    fps: float
    times: np.ndarray  # each data row's time from the first, seconds
    columns: Columns
    timecode_start: str  # the first row's timecode, as the file has it

    @property
    def start_s(self) -> float:
        """The first row's timecode in seconds of the day."""
        return parse_timecode(self.timecode_start, self.fps)

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
        columns = self.columns
        try:
            if first + len(rows) > len(self.times) or any(len(row) != columns.count for row in rows):
                raise ValueError("more rows")
            weights = np.array([[row[c] for c in columns.shapes] for row in rows], np.float64)
            angles = np.zeros((len(rows), len(ROTATION_COLUMNS)))
            present = np.flatnonzero(columns.rotations >= 0)
            if len(present):
                angles[:, present] = np.array([[row[c] for c in columns.rotations[present]] for row in rows], np.float64)
        except ValueError:
            raise LiveLinkFormatError(f"{self.path}: the file changed after it was checked") from None
        weights = np.clip(weights, 0.0, 1.0).astype(np.float32)  # as the take stores them
        head = matrix_to_rotvec(euler_to_matrix(angles[:, :3], "yxz"))
        eyes = eye_joint_rotations(angles[:, 3:], weights)
        rest = relaxed_rest_pose()
        rest[_NECK] = 0.0
        for k in range(len(rows)):
            pose = rest.copy()
            pose[_HEAD], pose[_EYES[0]], pose[_EYES[1]] = head[k], eyes[k, 0], eyes[k, 1]
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


def _check_header(path: Path) -> Columns:
    _line, header = next(_rows(path), (0, None))
    if header is None:
        raise LiveLinkFormatError(f"{path}: the file is empty")
    return _columns(path, header)


def _check_values(path: Path, number: int, row: list[str], columns: Columns) -> None:
    if len(row) != columns.count:
        raise LiveLinkFormatError(f"{path}: line {number} has {len(row)} values; the header has {columns.count}")
    for column, name in columns.numeric():
        cell = row[column]
        try:
            value = float(cell)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise LiveLinkFormatError(f"{path}: line {number}, column {name[0].upper() + name[1:]}: {cell!r} is not a number")


def check_livelink_csv(path: str | os.PathLike, fps: float | None = None) -> LiveLinkCsv:
    """Read the CSV once, a row at a time, and say what is wrong (LiveLinkFormatError) before anything is made of it.

    The frame rate is not in the file: it is the largest frame number in a second plus one, rounded up
    to a standard rate, unless given.
    """
    path = Path(path)
    columns = _check_header(path)
    codes = array("l")  # hours, minutes, seconds, frame, thousandths of a frame of each row
    lines = array("l")
    first_code = ""
    for number, row in _data_rows(path):
        _check_values(path, number, row, columns)
        code = row[columns.timecode].strip()
        match = _TIMECODE.match(code)
        if not match:
            raise LiveLinkFormatError(f"{path}: line {number}: timecode {code!r} is not HH:MM:SS:FF.mmm")
        codes.extend(int(g) for g in match.groups()[:4])
        codes.append(int((match.group(5) or "0").ljust(3, "0")))
        lines.append(number)
        first_code = first_code or code
    if not lines:
        raise LiveLinkFormatError(f"{path}: no data rows after the header")
    parts = np.array(codes, np.int64).reshape(-1, 5)
    if fps is None:
        fastest = int(parts[:, 3].max()) + 1
        fps = next((rate for rate in STANDARD_RATES if rate >= fastest), float(fastest))
    seconds = parts[:, 0] * 3600 + parts[:, 1] * 60 + parts[:, 2]
    # in thousandths of a frame from the first row, so that a time from the take's start is exact
    milli = (seconds - seconds[0]) * round(fps * 1000) + (parts[:, 3] * 1000 + parts[:, 4]) - (parts[0, 3] * 1000 + parts[0, 4])
    times = milli / (float(fps) * 1000.0) if float(fps).is_integer() else (
        (seconds - seconds[0]) + ((parts[:, 3] - parts[0, 3]) + (parts[:, 4] - parts[0, 4]) / 1000.0) / fps)
    if np.any(np.diff(times) <= 0):
        line = lines[int(np.flatnonzero(np.diff(times) <= 0)[0]) + 1]
        code = next(row[columns.timecode] for number, row in _data_rows(path) if number == line)
        raise LiveLinkFormatError(f"{path}: line {line}: timecode {code!r} does not come after the line before")
    return LiveLinkCsv(path, float(fps), np.asarray(times, np.float64), columns, first_code)


def read_livelink_csv(path: str | os.PathLike, fps: float | None = None) -> tuple[list[FrameState], float]:
    """(frames stamped from 0 s, frame rate) of a Live Link Face CSV; LiveLinkFormatError says what is wrong."""
    checked = check_livelink_csv(path, fps)
    return list(checked.frames()), checked.fps
