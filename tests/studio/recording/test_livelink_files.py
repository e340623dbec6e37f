"""Live Link Face CSV against a real take from the iPhone app (tests/data/SOURCES.md): read by name, written in
the app's order, its timecode and rows kept, eye angles in both directions, and `lipsync`'s CSVs imported."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import soundfile

from render.take_export import export_take
from studio.avatar.arkit import ARKIT_INDEX, ARKIT_NAMES
from studio.avatar.io import default_avatar_path, load_avatar
from studio.avatar.skeleton import JOINT_INDEX
from studio.engine.motion import EYE_LOOK_FULL_RAD
from studio.frame import FrameState
from studio.recording.livelink import HEADER, frame_rotations, read_livelink_csv, write_livelink_csv
from studio.recording.session import import_livelink
from tests.studio.engine.helpers import SR, silence_vowel_silence

REAL_TAKE = Path(__file__).parents[2] / "data" / "livelink" / "sentien-take24-first200.csv"


@pytest.fixture(scope="module")
def avatar():
    return load_avatar(default_avatar_path())


def _table(path) -> tuple[list[str], dict[str, np.ndarray]]:
    """(timecodes, column name in lower case -> values) of a Live Link CSV, read by name."""
    rows = list(csv.reader(open(path, newline="")))
    names = [name.lower() for name in rows[0]]
    body = rows[1:]
    values = {name: np.array([float(row[k]) for row in body]) for k, name in enumerate(names)
              if name not in ("timecode", "blendshapecount")}
    return [row[names.index("timecode")] for row in body], values


@pytest.mark.parametrize("count_spelling", ["BlendshapeCount", "BlendShapeCount"])
def test_a_real_take_round_trips_with_its_timecodes_rows_and_values(tmp_path, avatar, count_spelling):
    # the app's v1.4.2 spells it BlendshapeCount; other versions BlendShapeCount, which the old reader took and
    # then refused on the swapped pair: "column 18 is 'JawRight'; Live Link Face has 'JawLeft' there"
    source = tmp_path / "take.csv"
    source.write_text(REAL_TAKE.read_text().replace("BlendshapeCount", count_spelling, 1))
    take = import_livelink(source, tmp_path / "imported", avatar)
    assert take.manifest["timecode_start"] == "11:25:20:22.440" and take.manifest["frame_rate"] == 60
    export_take(take, "csv", tmp_path / "out.csv")

    header = next(csv.reader(open(tmp_path / "out.csv", newline="")))
    assert tuple(header) == HEADER and header[17:20] == ["JawRight", "JawLeft", "JawOpen"]
    assert header[23:26] == ["MouthRight", "MouthLeft", "MouthSmileLeft"]
    codes_in, values_in = _table(source)
    codes_out, values_out = _table(tmp_path / "out.csv")
    assert len(codes_out) == len(codes_in) == 200
    assert codes_out == codes_in  # 11:25:20:22.440 onwards, the phone's 59.9 frames a second kept
    assert sorted(values_out) == sorted(values_in) and len(values_in) == 61
    worst = max(float(np.abs(values_out[name] - values_in[name]).max()) for name in values_in)
    assert worst < 1e-6
    assert np.abs(values_in["lefteyepitch"]).max() > 0.1  # the eye angles are real, and came back


def test_columns_are_found_by_name_whatever_their_order_case_and_separators(tmp_path):
    rows = list(csv.reader(open(REAL_TAKE, newline="")))
    order = np.random.default_rng(1).permutation(len(rows[0]))
    respelled = [_respell(name) for name in rows[0]]
    with open(tmp_path / "shuffled.csv", "w", newline="") as handle:
        csv.writer(handle).writerows([[respelled[k] for k in order]] + [[row[k] for k in order] for row in rows[1:]])
    original, fps = read_livelink_csv(REAL_TAKE)
    shuffled, fps_shuffled = read_livelink_csv(tmp_path / "shuffled.csv")
    assert fps == fps_shuffled == 60 and len(original) == len(shuffled) == 200
    names = rows[0]
    jaw_left = [float(row[names.index("JawLeft")]) for row in rows[1:]]
    assert np.allclose([f.arkit[ARKIT_INDEX["jawLeft"]] for f in original], jaw_left, atol=1e-7)
    assert max(np.abs(jaw_left)) > 0.01  # the column read is not the swapped neighbour (JawRight is all 0 here)
    for a, b in zip(original, shuffled):
        assert np.array_equal(a.arkit, b.arkit) and np.array_equal(a.pose, b.pose) and a.media_time_s == b.media_time_s


def _respell(name: str) -> str:
    """EyeBlinkLeft -> eye_blink-LEFT style: the separators and case peers use."""
    words = "".join(f"_{c}" if c.isupper() else c for c in name).strip("_").split("_")
    return "-".join(words[:-1]).lower() + "_" + words[-1].upper() if len(words) > 1 else name.upper()


def test_a_phone_clocked_take_keeps_its_row_count_and_frames_on_export(tmp_path, avatar):
    # the app's frames come at 59.9 a second under a 60 fps timecode; a 60 fps grid added a row and showed
    # every frame one frame late
    rng = np.random.default_rng(5)
    frames = [FrameState(media_time_s=k * 1.0016 / 60, arkit=rng.random(52), sequence=k) for k in range(300)]
    write_livelink_csv(frames, tmp_path / "phone.csv", 60, start_s=32 * 60 + 9 + 7.867 / 60)
    take = import_livelink(tmp_path / "phone.csv", tmp_path / "take", avatar)
    export_take(take, "csv", tmp_path / "back.csv")
    codes_in, values_in = _table(tmp_path / "phone.csv")
    codes_out, values_out = _table(tmp_path / "back.csv")
    assert codes_in[0] == codes_out[0] == "00:32:09:07.867"
    assert len(codes_out) == 300 and codes_out == codes_in
    assert np.abs(values_out["jawopen"] - values_in["jawopen"]).max() < 1e-6


def _gaze_frame(out_left=0.0, in_left=0.0, in_right=0.0, out_right=0.0, down=0.0):
    arkit = np.zeros(52)
    for name, value in (("eyeLookOutLeft", out_left), ("eyeLookInLeft", in_left), ("eyeLookInRight", in_right),
                        ("eyeLookOutRight", out_right), ("eyeLookDownLeft", down), ("eyeLookDownRight", down)):
        arkit[ARKIT_INDEX[name]] = value
    return FrameState(arkit=arkit)


def test_eye_angles_are_written_from_the_gaze_the_engine_animates():
    # both eyes looking to the subject's left and down: the app's yaw falls (measured on the real take) and its
    # pitch rises; before, the six eye columns were always 0
    values = frame_rotations(_gaze_frame(out_left=0.4, in_right=0.4, down=0.2))
    head, left, right = values[:3], values[3:6], values[6:]
    assert np.allclose(head, 0) and np.allclose(left, right)
    assert left == pytest.approx([-0.4 * EYE_LOOK_FULL_RAD, 0.2 * EYE_LOOK_FULL_RAD, 0.0], abs=1e-6)


def test_imported_eye_angles_turn_the_eyes_the_weights_leave_unturned(tmp_path):
    # a file with eye angles and no eyeLook weights drives the eye joints; one whose weights already show its
    # angles leaves them at rest (the weights' shapes turn the eyeballs: turning the joints as well would double it)
    angles_only = FrameState(arkit=np.zeros(52))
    both = _gaze_frame(out_left=0.4, in_right=0.4)
    rows = [",".join(HEADER)]
    for k, (frame, left_yaw) in enumerate(((angles_only, -0.18), (both, -0.4 * EYE_LOOK_FULL_RAD))):
        values = np.zeros(len(HEADER) - 2)
        values[:52] = [frame.arkit[ARKIT_INDEX[n[0].lower() + n[1:]]] for n in HEADER[2:54]]
        values[HEADER.index("LeftEyeYaw") - 2] = values[HEADER.index("RightEyeYaw") - 2] = left_yaw
        rows.append(f"00:00:00:{k:02d}.000,61," + ",".join(f"{v:.10f}" for v in values))
    (tmp_path / "eyes.csv").write_text("\n".join(rows) + "\n")
    (first, second), _fps = read_livelink_csv(tmp_path / "eyes.csv", 60)
    for eye in ("left_eye_smplhf", "right_eye_smplhf"):
        turned = first.pose[JOINT_INDEX[eye]]
        assert turned[1] == pytest.approx(0.18, abs=1e-6) and np.allclose(turned[[0, 2]], 0, atol=1e-6)  # to the left
        assert np.allclose(second.pose[JOINT_INDEX[eye]], 0, atol=1e-6)
    assert frame_rotations(first)[3] == pytest.approx(-0.18, abs=1e-6)
    assert frame_rotations(second)[3] == pytest.approx(-0.4 * EYE_LOOK_FULL_RAD, abs=1e-6)


@pytest.mark.parametrize("csv_format", ["arkit", "livelink"])
def test_the_studio_imports_its_own_lipsync_csv_in_either_format(tmp_path, avatar, csv_format):
    from studio.engine.offline import lipsync_command

    wav, out = tmp_path / "speech.wav", tmp_path / "speech.csv"
    soundfile.write(wav, silence_vowel_silence(), SR)
    assert lipsync_command(str(wav), str(out), 60, csv_format=csv_format) == 0
    rows = list(csv.reader(open(out, newline="")))
    if csv_format == "livelink":
        assert tuple(rows[0]) == HEADER and rows[1][:2] == ["00:00:00:00.000", "61"]
    take = import_livelink(out, tmp_path / "take", avatar)
    assert len(take.frames) == len(rows) - 1 and take.manifest["frame_rate"] == 60
    names = [n.lower() for n in rows[0]]
    jaw = np.array([float(row[names.index("jawopen")]) for row in rows[1:]])
    assert jaw.max() > 0.1
    assert np.allclose([f.arkit[ARKIT_NAMES.index("jawOpen")] for f in take.frames], jaw, atol=1e-6)
