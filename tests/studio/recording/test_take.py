"""Takes: the live engine's FrameState stream recorded and read back exactly; damaged takes reported and repaired."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from studio.avatar.io import default_avatar_path, load_avatar
from studio.engine.pipeline import Engine
from studio.engine.sources import ENGINE_RATE, FileSource
from studio.frame import FrameState
from studio.recording.recorder import DiskSpaceError, TakeRecorder, take_manifest
from studio.recording.session import write_take
from studio.recording.take import (
    AUDIO,
    EVENTS,
    FRAMES,
    MANIFEST,
    TakeError,
    find_unfinished,
    inspect_take,
    list_takes,
    open_take,
    rename_take,
    repair_take,
    restore_take,
    size_text,
    trash_take,
)
from tests.studio.engine.helpers import silence_vowel_silence


@pytest.fixture(scope="module")
def avatar():
    return load_avatar(default_avatar_path())


def _same(a: FrameState, b: FrameState) -> bool:
    return (a.media_time_s == b.media_time_s and a.sequence == b.sequence and a.voice_activity == b.voice_activity
            and a.expression == b.expression and dict(a.timings_ms) == dict(b.timings_ms)
            and np.array_equal(a.arkit, b.arkit) and np.array_equal(a.pose, b.pose) and np.array_equal(a.transl, b.transl)
            and ((a.visemes is None and b.visemes is None) or np.array_equal(a.visemes, b.visemes)))


def test_live_engine_stream_records_and_plays_back_exactly(tmp_path, avatar):
    import soundfile

    wav = tmp_path / "speech.wav"
    soundfile.write(wav, silence_vowel_silence(), ENGINE_RATE)
    engine = Engine(fps=60)
    reference = engine.subscribe(100_000)
    manifest = take_manifest("default", "default", avatar, ENGINE_RATE, 60)
    recorder = TakeRecorder(tmp_path / "take", manifest, engine.subscribe(100_000))
    recorder.start()
    engine.listen_audio(recorder.add_audio)
    source = FileSource(wav, play=False, realtime=False)
    engine.set_source(source)
    recorder.add_event("expression", 0.5, name="smile")
    while not source.finished:
        engine.run_once()
    for _ in range(5):
        engine.run_once()
    engine.unlisten_audio(recorder.add_audio)
    manifest = recorder.stop()
    sent = reference.drain()

    take = open_take(tmp_path / "take")
    assert manifest["status"] == "complete" and manifest["frames"] == len(sent) > 120
    assert len(take.frames) == len(sent)
    assert all(_same(a, b) for a, b in zip(sent, take.frames))
    assert any(f.visemes is not None for f in take.frames)  # the model's frames carry visemes, kept exactly
    # the audio sits on the take's timeline: the vowel starts 0.6 s into the file
    offset = int(round((engine.source_start_media_s - take.start_media_s) * ENGINE_RATE))
    onset = int(np.flatnonzero(np.abs(take.audio) > 0.01)[0])
    assert abs(onset - (offset + int(0.6 * ENGINE_RATE))) <= 2
    assert take.events == [{"t": 0.5, "kind": "expression", "name": "smile"}]
    assert take.frame_at(take.take_times()[10] + 1e-4).sequence == take.frames[10].sequence == sent[10].sequence


def _small_take(tmp_path, avatar, name="take", frames=90):
    rng = np.random.default_rng(1)
    states = [FrameState(media_time_s=i / 30, arkit=rng.random(52), pose=rng.normal(size=(55, 3)) * 0.1, sequence=i)
              for i in range(frames)]
    audio = (0.1 * np.sin(np.arange(frames * 16000 // 30) * 0.05)).astype(np.float32)
    events = [{"kind": "cue", "media_time_s": 0.2, "text": "hello"}]
    return write_take(tmp_path / name, take_manifest("default", "default", avatar, 16000, 30), states, audio, events), states


def test_frames_and_audio_are_read_from_disk_as_asked_for(tmp_path, avatar):
    take, states = _small_take(tmp_path, avatar)
    written = (0.1 * np.sin(np.arange(90 * 16000 // 30) * 0.05)).astype(np.float32)
    middle = take.frames[30:60]  # a view: nothing read yet
    assert len(middle) == 30 and all(_same(a, b) for a, b in zip(states[30:60], middle))
    assert _same(take.frames[-1], states[-1]) and _same(take.frames[5], states[5])
    with pytest.raises(IndexError):
        take.frames[90]
    np.testing.assert_allclose(np.asarray(take.audio[1000:2000]), written[1000:2000], atol=1 / 32767)
    assert take.audio[1500] == pytest.approx(written[1500], abs=1 / 32767)
    longer = take.audio[len(written) - 100:].padded(300)  # past the recording: silence
    assert len(longer) == 300 and np.all(np.asarray(longer)[100:] == 0) and np.abs(np.asarray(longer)[:100]).max() > 0
    pieces = list(take.audio.chunks(rate=48000, channels=2))
    assert all(piece.shape[1] == 2 for piece in pieces)
    assert abs(sum(len(piece) for piece in pieces) - 3 * len(written)) <= 2


def test_truncated_take_is_reported_precisely_and_repaired(tmp_path, avatar):
    take, states = _small_take(tmp_path, avatar)
    path = take.path / FRAMES
    data = path.read_bytes()
    path.write_bytes(data[:-300])  # the last record half-written
    with pytest.raises(TakeError) as caught:
        open_take(take.path)
    message = str(caught.value)
    assert "half-written record" in message and "89 readable frames; the manifest says 90" in message
    assert caught.value.repairable
    done = repair_take(take.path)
    assert any("kept 89 frames" in line for line in done)
    repaired = open_take(take.path)
    assert repaired.manifest["status"] == "recovered" and len(repaired.frames) == 89
    assert all(_same(a, b) for a, b in zip(states, repaired.frames))


def test_tampered_record_fails_its_checksum_and_is_dropped_on_repair(tmp_path, avatar):
    take, states = _small_take(tmp_path, avatar)
    path = take.path / FRAMES
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(TakeError, match="changed on disk after the take was opened"):
        list(take.frames)  # opened before the damage: an error, not a wrong frame
    with pytest.raises(TakeError, match="fail their checksum"):
        open_take(take.path)
    repair_take(take.path)
    repaired = open_take(take.path)
    assert len(repaired.frames) == 89
    assert "dropped 1 damaged record" in json.dumps(repaired.manifest["repairs"])


def test_consistently_changed_frames_are_refused_not_played(tmp_path, avatar):
    take, states = _small_take(tmp_path, avatar)
    from studio.recording.take import encode_frame, frames_header

    edited = [s.replace(arkit=np.zeros(52)) if i == 5 else s for i, s in enumerate(states)]
    (take.path / FRAMES).write_bytes(frames_header() + b"".join(encode_frame(f) for f in edited))
    with pytest.raises(TakeError, match="sha256 does not match") as caught:
        open_take(take.path)
    assert not caught.value.repairable
    with pytest.raises(TakeError):
        repair_take(take.path)


def test_foreign_and_incomplete_folders_say_what_is_missing(tmp_path, avatar):
    foreign = tmp_path / "holiday-photos"
    foreign.mkdir()
    (foreign / "a.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(TakeError, match="no manifest.json"):
        open_take(foreign)
    (foreign / MANIFEST).write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(TakeError, match="not an Avatar Studio take manifest"):
        open_take(foreign)
    take, _ = _small_take(tmp_path, avatar, "no-frames")
    (take.path / FRAMES).unlink()
    with pytest.raises(TakeError, match="frames.bin is missing"):
        open_take(take.path)
    take, _ = _small_take(tmp_path, avatar, "bad-audio")
    (take.path / AUDIO).write_bytes(b"RIFF....not a wav")
    with pytest.raises(TakeError, match="audio.wav is not the take's 16-bit PCM WAV layout"):
        open_take(take.path)
    take, _ = _small_take(tmp_path, avatar, "half-event")
    with open(take.path / EVENTS, "ab") as events:
        events.write(b'{"t": 1.0, "ki')
    found = inspect_take(take.path)
    assert any("half-written (the last line)" in p for p in found.repairable)
    assert any("sha256" in p for p in found.fatal)  # and the file changed after the take was finished


def test_unfinished_take_is_found_and_repaired(tmp_path, avatar):
    take, states = _small_take(tmp_path, avatar)
    manifest = json.loads((take.path / MANIFEST).read_text())
    manifest["status"] = "recording"
    for key in ("files", "frames", "duration_s"):
        manifest.pop(key)
    (take.path / MANIFEST).write_text(json.dumps(manifest))
    (take.path / "recording.lock").write_text("999999999\n")  # a recorder process that no longer exists
    assert find_unfinished(tmp_path) == [take.path]
    with pytest.raises(TakeError, match="interrupted"):
        open_take(take.path)
    repair_take(take.path)
    assert find_unfinished(tmp_path) == []
    assert len(open_take(take.path).frames) == 90


def test_rename_trash_and_undo(tmp_path, avatar):
    take, _ = _small_take(tmp_path, avatar)
    renamed = rename_take(take.path, "Demo for ACME")
    with pytest.raises(ValueError, match="not allowed"):
        rename_take(renamed, "../escape")
    trashed = trash_take(renamed)
    assert [row.name for row in list_takes(tmp_path)] == []
    restore_take(trashed, renamed)
    rows = list_takes(tmp_path)
    assert [(r.name, r.persona, r.status) for r in rows] == [("Demo for ACME", "default", "complete")]
    assert rows[0].duration_s == pytest.approx(3.0) and rows[0].size_bytes > 90 * 900


def test_disk_space_checked_before_and_during(tmp_path, avatar):
    from studio.engine.pipeline import FrameQueue
    from studio.recording.take import free_bytes

    free_mb = free_bytes(tmp_path) / 2**20
    manifest = take_manifest("default", "default", avatar, 16000, 30)
    with pytest.raises(DiskSpaceError, match="MB free, at least"):
        TakeRecorder(tmp_path / "refused", manifest, FrameQueue(), min_free_mb=free_mb * 2).start()
    stopped = []
    queue = FrameQueue(1000)
    recorder = TakeRecorder(tmp_path / "stops", manifest, queue, min_free_mb=1, on_stopped=stopped.append)
    recorder.warn_free_mb = free_mb * 2
    recorder.start()
    assert "disk space low" in recorder.low_space  # a warning before the stop
    for i in range(30):
        queue.put(FrameState(media_time_s=i / 30, sequence=i))
    recorder.min_free_mb = free_mb * 2  # the disk "fills up" while recording
    deadline = time.monotonic() + 20
    while recorder.recording and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not recorder.recording and stopped and "disk almost full" in stopped[0]
    take = open_take(tmp_path / "stops")  # a clean, complete take, not a corrupt file
    assert take.manifest["status"] == "complete" and len(take.frames) == 30
    assert "disk almost full" in take.manifest["stopped_reason"]


def test_expression_changes_in_the_stream_become_events(tmp_path, avatar):
    names = ["", "", "smile", "smile", "smile+wink", ""]
    frames = [FrameState(media_time_s=i / 30, expression=name, sequence=i) for i, name in enumerate(names)]
    take = write_take(tmp_path / "t", take_manifest("default", "default", avatar, 16000, 30), frames)
    assert [(e["kind"], e["name"], round(e["t"] * 30)) for e in take.events] == [
        ("expression", "smile", 2), ("expression", "smile+wink", 4), ("expression", "", 5)]


@pytest.mark.parametrize(("size", "text"), [(0, "0 kB"), (1536, "2 kB"), (2**20, "1.0 MB"), (5 * 2**20 // 2, "2.5 MB"),
                                            (-1, "0 kB"), (-2048, "0 kB"), (-3 * 2**20, "0 kB")])
def test_a_size_reads_in_kb_or_mb_and_never_below_zero(size, text):
    assert size_text(size) == text
