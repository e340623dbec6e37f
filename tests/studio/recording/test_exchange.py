"""Live Link Face CSV and BVH out of a take, read back by the studio and by an independent BVH reader."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from studio.avatar.io import default_avatar_path, load_avatar
from studio.avatar.skeleton import JOINT_NAMES, PARENTS
from studio.frame import FrameState
from studio.recording.bvh import write_bvh
from studio.recording.livelink import (
    BLENDSHAPE_COLUMNS,
    ROTATION_COLUMNS,
    LiveLinkFormatError,
    frame_rotations,
    read_livelink_csv,
    write_livelink_csv,
)
from studio.recording.recorder import take_manifest
from studio.recording.rotations import euler_to_matrix, rotvec_to_matrix
from studio.recording.session import import_livelink, write_take

FPS = 60


@pytest.fixture(scope="module")
def avatar():
    return load_avatar(default_avatar_path())


def _frames(count=150, seed=3):
    rng = np.random.default_rng(seed)
    return [FrameState(media_time_s=i / FPS, arkit=rng.random(52), pose=rng.normal(size=(55, 3)) * 0.4,
                       transl=rng.normal(size=3) * 0.05, sequence=i) for i in range(count)]


def test_csv_is_live_link_face_layout_and_reimports_within_1e4(tmp_path, avatar):
    frames = _frames()
    write_livelink_csv(frames, tmp_path / "take.csv", FPS)
    with open(tmp_path / "take.csv", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0][:2] == ["Timecode", "BlendShapeCount"]
    assert tuple(rows[0][2:54]) == BLENDSHAPE_COLUMNS and BLENDSHAPE_COLUMNS[17] == "JawOpen"
    assert tuple(rows[0][54:]) == ROTATION_COLUMNS and len(rows[0]) == 63
    assert rows[1][0] == "00:00:00:00.000" and rows[61][0] == "00:00:01:00.000" and rows[62][0] == "00:00:01:01.000"
    assert all(row[1] == "61" for row in rows[1:])

    back, fps = read_livelink_csv(tmp_path / "take.csv")
    assert fps == FPS and len(back) == len(frames)
    assert max(float(np.abs(a.arkit - b.arkit).max()) for a, b in zip(frames, back)) < 1e-4
    assert max(abs(a.media_time_s - b.media_time_s) for a, b in zip(frames, back)) < 1e-6
    assert max(float(np.abs(frame_rotations(a) - frame_rotations(b)).max()) for a, b in zip(frames, back)) < 1e-4

    take = import_livelink(tmp_path / "take.csv", tmp_path / "imported", avatar)
    assert take.manifest["source"] == "livelink-csv" and take.manifest["frame_rate"] == FPS
    assert max(float(np.abs(a.arkit - b.arkit).max()) for a, b in zip(frames, take.frames)) < 1e-4


def test_blank_lines_anywhere_in_a_csv_are_skipped(tmp_path):
    write_livelink_csv(_frames(10), tmp_path / "good.csv", FPS)
    lines = (tmp_path / "good.csv").read_text().splitlines()
    (tmp_path / "spaced.csv").write_text("\n\n" + "\n\n".join(lines) + "\n\n")
    good, spaced = read_livelink_csv(tmp_path / "good.csv", FPS)[0], read_livelink_csv(tmp_path / "spaced.csv", FPS)[0]
    assert len(spaced) == 10 and all(np.array_equal(a.arkit, b.arkit) for a, b in zip(good, spaced))


@pytest.mark.parametrize("edit, reason", [
    (lambda rows: [["time", "a", "b"]] + rows[1:], "not a Live Link Face CSV: no Timecode and no ARKit blendshape columns"),
    (lambda rows: [rows[0][:30]] + [r[:30] for r in rows[1:]],
     "header lacks MouthDimpleRight, MouthStretchLeft, MouthStretchRight, MouthRollLower, MouthRollUpper, MouthShrugLower and"),
    (lambda rows: [rows[0][:5] + ["mouthSmile"] + rows[0][6:]] + rows[1:],
     "header lacks EyeLookOutLeft; it has 'mouthSmile', which is no Live Link Face column"),
    (lambda rows: rows[:3] + [rows[3][:-1]] + rows[4:], "line 4 has 62 values; the header has 63"),
    (lambda rows: rows[:2] + [rows[2][:19] + ["abc"] + rows[2][20:]] + rows[3:], "line 3, column JawOpen: 'abc' is not a number"),
    (lambda rows: rows[:2] + [["1:2"] + rows[2][1:]] + rows[3:], "line 3: timecode '1:2' is not HH:MM:SS:FF.mmm"),
    (lambda rows: [rows[0], rows[2], rows[1]] + rows[3:], "line 3: timecode '00:00:00:00.000' does not come after"),
])
def test_csv_not_in_live_link_layout_is_refused_with_the_reason(tmp_path, edit, reason):
    write_livelink_csv(_frames(10), tmp_path / "good.csv", FPS)
    rows = list(csv.reader(open(tmp_path / "good.csv", newline="")))
    with open(tmp_path / "bad.csv", "w", newline="") as handle:
        csv.writer(handle).writerows(edit(rows))
    with pytest.raises(LiveLinkFormatError) as caught:
        read_livelink_csv(tmp_path / "bad.csv")
    assert reason in str(caught.value) and "bad.csv" in str(caught.value)


def test_importing_a_long_csv_with_its_audio_costs_the_memory_a_short_one_does(tmp_path, avatar):
    import tracemalloc

    import soundfile

    peaks = {}
    for seconds in (15, 120):
        rng = np.random.default_rng(seconds)
        frames = (FrameState(media_time_s=i / FPS, arkit=rng.random(52), pose=rng.normal(size=(55, 3)) * 0.4,
                             sequence=i) for i in range(seconds * FPS))
        write_livelink_csv(frames, tmp_path / f"face{seconds}.csv", FPS)
        soundfile.write(tmp_path / f"voice{seconds}.wav", 0.2 * np.sin(np.arange(seconds * 48000) * 0.01), 48000)
        tracemalloc.start()
        try:
            take = import_livelink(tmp_path / f"face{seconds}.csv", tmp_path / f"take{seconds}", avatar,
                                   str(tmp_path / f"voice{seconds}.wav"))
            peaks[seconds] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert len(take.frames) == seconds * FPS and take.duration_s == pytest.approx(seconds, abs=0.05)
    # before: every row's text, every frame and the whole audio in memory (28.7 MB for 15 s, 204.4 MB for 120 s)
    grown = (peaks[120] - peaks[15]) / 1e6
    assert grown < 2.0, f"{peaks[15] / 1e6:.1f} MB for 15 s, {peaks[120] / 1e6:.1f} MB for 120 s"


def test_bvh_parses_with_an_independent_reader_and_reproduces_joint_angles(tmp_path, avatar):
    from bvh import Bvh

    frames = _frames(40)
    write_bvh(frames, avatar.rest_joints(), tmp_path / "take.bvh", FPS)
    mocap = Bvh((tmp_path / "take.bvh").read_text())
    assert mocap.nframes == 40 and mocap.frame_time == pytest.approx(1 / FPS)
    assert sorted(j.name for j in mocap.get_joints()) == sorted(JOINT_NAMES)
    rest = np.asarray(avatar.rest_joints(), np.float64) * 100
    for j, name in enumerate(JOINT_NAMES[1:], start=1):
        assert np.allclose(mocap.joint_offset(name), rest[j] - rest[PARENTS[j]], atol=1e-5)
        assert mocap.joint_parent(name).name == JOINT_NAMES[PARENTS[j]]
    worst = 0.0
    for k, frame in enumerate(frames):
        for j, name in enumerate(JOINT_NAMES):
            z, y, x = np.radians(mocap.frame_joint_channels(k, name, ["Zrotation", "Yrotation", "Xrotation"]))
            parsed = euler_to_matrix(np.array([[z, y, x]]), "zyx")[0]
            worst = max(worst, float(np.abs(parsed - rotvec_to_matrix(frame.pose[j:j + 1])[0]).max()))
        position = mocap.frame_joint_channels(k, "pelvis", ["Xposition", "Yposition", "Zposition"])
        assert np.allclose(position, rest[0] + frame.transl * 100, atol=1e-5)
    assert worst < 1e-4


def test_write_take_keeps_what_it_was_given(tmp_path, avatar):
    frames = _frames(20)
    take = write_take(tmp_path / "t", take_manifest("default", "default", avatar, 16000, FPS), frames)
    assert [f.sequence for f in take.frames] == list(range(20)) and len(take.audio) == 0
