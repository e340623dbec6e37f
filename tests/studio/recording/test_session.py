"""Takes made from a file: every frame and its audio, in step, with memory that does not grow with the length."""

import json
import tracemalloc

import numpy as np
import pytest
import soundfile

from studio.avatar.io import default_avatar_path, load_avatar
from studio.engine.sources import ENGINE_RATE, AudioInputError
from studio.presets import resolve_persona, resolve_preset
from studio.recording.session import record_offline
from studio.recording.take import MANIFEST
from studio.speech.visemes import mouth_openness
from tests.studio.engine.helpers import silence_vowel_silence

FPS = 30


@pytest.fixture(scope="module")
def studio_parts():
    persona = resolve_persona("default")
    return load_avatar(default_avatar_path()), persona, resolve_preset("default")


def _speech_file(path, seconds: int):
    phrase = silence_vowel_silence()
    soundfile.write(path, np.tile(phrase, -(-seconds * ENGINE_RATE // len(phrase)))[:seconds * ENGINE_RATE],
                    ENGINE_RATE)
    return path


def _record(tmp_path, parts, seconds: int):
    avatar, persona, preset = parts
    audio = _speech_file(tmp_path / f"speech{seconds}.wav", seconds)
    tracemalloc.start()
    try:
        take = record_offline(tmp_path / f"take{seconds}", avatar, persona, preset, audio_path=str(audio), fps=FPS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return take, peak


def test_a_take_from_a_file_holds_every_frame_and_the_whole_audio_in_step(tmp_path, studio_parts):
    take, _ = _record(tmp_path, studio_parts, 20)
    manifest = json.loads((take.path / MANIFEST).read_text())
    assert manifest["status"] == "complete" and manifest["dropped_frames"] == 0
    assert len(take.frames) == 20 * FPS and manifest["audio_samples"] == 20 * ENGINE_RATE
    opening = np.array([mouth_openness(frame.arkit) for frame in take.frames])  # the speech moved the mouth
    assert opening.max() > 0.2 and np.median(opening) < opening.max() / 2


def test_memory_does_not_grow_with_the_files_length(tmp_path, studio_parts):
    _, short_peak = _record(tmp_path, studio_parts, 15)
    _, long_peak = _record(tmp_path, studio_parts, 120)
    # before: every frame and the whole file in memory (34 MB for 15 s, 90 MB for 120 s)
    assert long_peak < 1.5 * short_peak, f"{short_peak / 1e6:.1f} MB for 15 s, {long_peak / 1e6:.1f} MB for 120 s"


def test_a_file_damaged_part_way_leaves_no_half_take(tmp_path, studio_parts):
    avatar, persona, preset = studio_parts
    samples = np.tile(silence_vowel_silence(), 30)
    samples[len(samples) * 2 // 3:] = np.nan  # a float WAV whose last third is not numbers: found while recording
    damaged = tmp_path / "damaged.wav"
    soundfile.write(damaged, samples, ENGINE_RATE, subtype="FLOAT")
    folder = tmp_path / "take"
    with pytest.raises(AudioInputError, match="damaged.wav"):
        record_offline(folder, avatar, persona, preset, audio_path=str(damaged), fps=FPS)
    assert not any(folder.iterdir())


def test_a_file_cut_off_makes_a_take_of_what_it_holds_and_says_it_ends_early(tmp_path, studio_parts):
    avatar, persona, preset = studio_parts
    audio = _speech_file(tmp_path / "cut.wav", 4)
    audio.write_bytes(audio.read_bytes()[:44 + ENGINE_RATE * 2 * 3 // 2])  # 1.5 of the 4 s its header states
    notices = []
    take = record_offline(tmp_path / "take", avatar, persona, preset, audio_path=str(audio), fps=FPS,
                          on_notice=notices.append)
    assert abs(take.duration_s - 1.5) < 0.05 and len(take.frames) == round(1.5 * FPS)
    assert len(notices) == 1 and "cut.wav ends early" in notices[0] and "of the 4.00 s" in notices[0]
