"""BVH export of the skeleton motion: SMPL-X joint names, offsets from the avatar's rest joints.

Units are centimetres. Every joint rotates with `Zrotation Yrotation Xrotation` (degrees, R = Rz·Ry·Rx,
the joint's local axis-angle converted exactly); the root (pelvis) also carries its position
(rest joint plus the frame's root translation). A joint with no children ends in an End Site half
its bone's length further on.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path
from typing import TextIO

import numpy as np

from studio.avatar.skeleton import JOINT_NAMES, PARENTS
from studio.fileio import atomic_writer
from studio.frame import FrameState
from studio.recording.rotations import matrix_to_euler, rotvec_to_matrix

CM = 100.0
ROTATION_CHANNELS = ("Zrotation", "Yrotation", "Xrotation")


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {j: [] for j in range(len(PARENTS))}
    for joint, parent in enumerate(PARENTS):
        if parent >= 0:
            children[parent].append(joint)
    return children


def _write_bvh(out: TextIO, frames: Collection[FrameState], rest_joints: np.ndarray, fps: float) -> None:
    """Write the BVH for these frames to `out`, a frame at a time; `rest_joints` (55, 3) in metres."""
    rest = np.asarray(rest_joints, np.float64) * CM
    children = _children()
    order: list[int] = []

    def write_joint(joint: int, depth: int) -> None:
        pad = "  " * depth
        order.append(joint)
        if PARENTS[joint] < 0:
            out.write(f"HIERARCHY\nROOT {JOINT_NAMES[joint]}\n{{\n")
            out.write(f"{pad}  OFFSET 0.000000 0.000000 0.000000\n")
            out.write(f"{pad}  CHANNELS 6 Xposition Yposition Zposition {' '.join(ROTATION_CHANNELS)}\n")
        else:
            offset = rest[joint] - rest[PARENTS[joint]]
            out.write(f"{pad}JOINT {JOINT_NAMES[joint]}\n{pad}{{\n")
            out.write(f"{pad}  OFFSET {offset[0]:.6f} {offset[1]:.6f} {offset[2]:.6f}\n")
            out.write(f"{pad}  CHANNELS 3 {' '.join(ROTATION_CHANNELS)}\n")
        for child in children[joint]:
            write_joint(child, depth + 1)
        if not children[joint]:
            tip = (rest[joint] - rest[PARENTS[joint]]) * 0.5 if PARENTS[joint] >= 0 else np.array([0.0, 10.0, 0.0])
            out.write(f"{pad}  End Site\n{pad}  {{\n{pad}    OFFSET {tip[0]:.6f} {tip[1]:.6f} {tip[2]:.6f}\n{pad}  }}\n")
        out.write(f"{pad}}}\n")

    write_joint(0, 0)
    out.write(f"MOTION\nFrames: {len(frames)}\nFrame Time: {1.0 / fps:.8f}\n")
    for frame in frames:
        angles = np.degrees(matrix_to_euler(rotvec_to_matrix(frame.pose.astype(np.float64)), "zyx"))
        position = rest[0] + np.asarray(frame.transl, np.float64) * CM
        values = [position] + [angles[j] for j in order]
        out.write(" ".join(f"{v:.6f}" for v in np.concatenate(values)) + "\n")


def write_bvh(frames: Collection[FrameState], rest_joints: np.ndarray, path: str | os.PathLike, fps: float) -> Path:
    """Write the BVH a frame at a time (memory does not grow with the take), atomically (temp file, rename)."""
    if not len(frames):
        raise ValueError("no frames to write")
    with atomic_writer(path) as out:
        _write_bvh(out, frames, rest_joints, fps)
    return Path(path)
