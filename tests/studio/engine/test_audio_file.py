"""Audio files decoded in bounded chunks, and the streaming offline analysis on awkward files."""

import csv

import numpy as np
import pytest
import soundfile

from studio.engine.audio_file import AudioFileStream
from studio.engine.offline import StreamingAnalysis, lipsync_command
from studio.engine.sources import AudioInputError
from studio.speech.visemes import mouth_openness
from tests.studio.engine.helpers import SR, silence_vowel_silence


def _speech(rate: int) -> np.ndarray:
    return silence_vowel_silence(rate)


def test_chunks_are_bounded_and_add_up_to_the_whole_file(tmp_path):
    path = tmp_path / "long.wav"
    audio = np.tile(_speech(48000), 4)
    soundfile.write(path, np.stack([audio, 0.5 * audio], axis=1), 48000)
    stream = AudioFileStream(path, chunk_s=0.25)
    assert (stream.sample_rate, stream.channels) == (48000, 2)
    sizes = [len(chunk) for chunk in stream.chunks(rate=SR)]
    assert max(sizes) <= 0.25 * SR and len(sizes) > 10
    assert sum(sizes) == pytest.approx(len(audio) / 3, abs=32)
    stereo = np.concatenate(list(stream.chunks(channels=2)))
    assert stereo.shape == (len(audio), 2)
    assert np.allclose(stereo[:, 1], 0.5 * stereo[:, 0], atol=1e-4)


def test_analysis_state_stays_small_however_long_the_input(tmp_path):
    analysis = StreamingAnalysis(fps=60, model_variant="fp32")
    chunk = _speech(SR)[: SR // 2]
    frames = 0
    for _ in range(60):  # 30 s in half-second chunks
        block = analysis.push(chunk)
        frames += 0 if block is None else len(block)
        assert len(analysis._hop_voice) < 60 and len(analysis._prosody) < 60 and len(analysis._face[2]) < 60
    frames += len(analysis.finish())
    assert frames == 30 * 60


@pytest.mark.parametrize("name,rate,make", [
    ("8k", 8000, lambda: _speech(8000)),
    ("48k_stereo_one_side", 48000, lambda: np.stack([_speech(48000), np.zeros(len(_speech(48000)))], axis=1)),
    ("clipped", SR, lambda: np.clip(_speech(SR) * 30, -1, 1)),
])
def test_awkward_files_give_a_speaking_mouth_on_the_vowel_only(tmp_path, name, rate, make):
    wav, out = tmp_path / f"{name}.wav", tmp_path / f"{name}.csv"
    audio = make()
    soundfile.write(wav, audio, rate)
    assert lipsync_command(str(wav), str(out), 50) == 0
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == int(np.ceil(len(audio) / rate * 50 - 1e-9))
    weights = np.array([[float(row[k]) for k in list(row)[2:]] for row in rows])
    times = np.array([float(row["media_time_s"]) for row in rows])
    openness = mouth_openness(weights)
    assert np.all(openness[(times < 0.5) | (times > 1.75)] < 0.08)
    assert np.median(openness[(times > 0.75) & (times < 1.5)]) > 0.15


def test_silent_file_keeps_the_mouth_shut(tmp_path):
    wav, out = tmp_path / "silence.flac", tmp_path / "silence.csv"
    soundfile.write(wav, np.zeros(3 * SR, np.float32), SR)
    assert lipsync_command(str(wav), str(out), 30) == 0
    rows = list(csv.reader(out.open()))[1:]
    assert len(rows) == 90
    assert max(mouth_openness(np.array([[float(v) for v in row[2:]] for row in rows]))) == 0.0


def test_a_file_damaged_part_way_fails_with_its_name_and_leaves_no_output(tmp_path, capsys):
    good = tmp_path / "good.mp3"
    import av

    with av.open(str(good), "w") as container:
        stream = container.add_stream("mp3", rate=SR)
        for start in range(0, 4 * SR, 1152):
            frame = av.AudioFrame.from_ndarray(np.tile(_speech(SR), 2)[None, start:start + 1152].astype(np.float32),
                                               format="fltp", layout="mono")
            frame.sample_rate = SR
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    data = bytearray(good.read_bytes())
    data[len(data) // 2:] = np.random.default_rng(0).integers(0, 256, len(data) - len(data) // 2, np.uint8).tobytes()
    damaged = tmp_path / "damaged.mp3"
    damaged.write_bytes(bytes(data))
    out = tmp_path / "damaged.csv"
    code = lipsync_command(str(damaged), str(out), 30)
    if code == 0:  # FFmpeg resynchronises on MP3 garbage: the undamaged part must then be there, and a note
        rows = list(csv.reader(out.open()))
        assert len(rows) > 30 and "damaged.mp3: its sound stops decoding at" in capsys.readouterr().err
    else:
        assert code == 2 and "damaged.mp3" in capsys.readouterr().err and not out.exists()
    header_only = tmp_path / "header.wav"
    soundfile.write(header_only, _speech(SR), SR)
    header_only.write_bytes(header_only.read_bytes()[:44])
    assert lipsync_command(str(header_only), str(tmp_path / "h.csv"), 30) == 2
    error = capsys.readouterr().err.strip()
    assert "header.wav" in error and len(error.splitlines()) == 1 and not (tmp_path / "h.csv").exists()


@pytest.mark.parametrize("suffix", ["wav", "flac"])
def test_a_file_cut_off_gives_lips_for_the_sound_it_holds_and_says_it_ends_early(tmp_path, capsys, suffix):
    whole = tmp_path / f"whole.{suffix}"
    soundfile.write(whole, np.tile(_speech(SR), 2), SR)
    stated = soundfile.info(whole).duration
    assert lipsync_command(str(whole), str(tmp_path / "whole.csv"), 30) == 0
    assert "note" not in capsys.readouterr().err
    cut = tmp_path / f"cut.{suffix}"
    cut.write_bytes(whole.read_bytes()[:whole.stat().st_size * 2 // 5])  # a download or recording that stopped
    out = tmp_path / "cut.csv"
    assert lipsync_command(str(cut), str(out), 30) == 0
    note = capsys.readouterr().err
    assert f"cut.{suffix} ends early" in note and f"of the {stated:.2f} s" in note and "cut off" in note
    held_s = sum(len(chunk) for chunk in AudioFileStream(cut).chunks()) / SR
    assert 0.1 * stated < held_s < 0.6 * stated  # FLAC packs the pauses tighter than the vowels
    frames = len(list(csv.reader(out.open()))) - 1
    assert held_s * 30 - 1 <= frames <= held_s * 30 + 1


def test_a_flac_damaged_part_way_says_the_lips_after_the_damage_run_early(tmp_path, capsys):
    path = tmp_path / "scratched.flac"
    soundfile.write(path, np.tile(_speech(SR), 2), SR)
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 3000] = np.random.default_rng(0).integers(0, 256, 3000, np.uint8).tobytes()
    path.write_bytes(bytes(data))
    assert lipsync_command(str(path), str(tmp_path / "scratched.csv"), 30) == 0
    note = capsys.readouterr().err
    assert "scratched.flac is damaged part-way" in note and "run up to" in note


def test_not_audio_is_refused_up_front(tmp_path):
    text = tmp_path / "notes.wav"
    text.write_text("these are not samples\n" * 20)
    with pytest.raises(AudioInputError, match="notes.wav"):
        AudioFileStream(text)


def test_streamed_frames_do_not_depend_on_the_chunk_size():
    audio = np.tile(_speech(SR), 3)
    whole = StreamingAnalysis(fps=60, model_variant="fp32")
    blocks = [whole.push(audio), whole.finish()]
    pieces = StreamingAnalysis(fps=60, model_variant="fp32")
    blocks_small = [pieces.push(audio[i:i + 777]) for i in range(0, len(audio), 777)] + [pieces.finish()]
    big = np.concatenate([b.arkit for b in blocks if b is not None])
    small = np.concatenate([b.arkit for b in blocks_small if b is not None])
    assert big.shape == small.shape and np.allclose(big, small, atol=1e-6)


@pytest.mark.parametrize("subtype", ["PCM_U8", "PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE"])
def test_every_sample_format_decodes_to_the_same_full_scale(tmp_path, subtype):
    tone = 0.5 * np.sin(2 * np.pi * 440 * np.arange(SR) / SR)
    path = tmp_path / f"tone_{subtype}.wav"
    soundfile.write(path, np.stack([tone, -tone], axis=1), SR, subtype=subtype)
    left = np.concatenate(list(AudioFileStream(path).chunks(channels=2)))[:, 0]
    assert len(left) == SR and np.abs(left - tone).max() < (1.5 / 128 if subtype == "PCM_U8" else 1e-4)


def test_resampling_keeps_a_click_at_its_time(tmp_path):
    path = tmp_path / "click.wav"
    audio = np.zeros(2 * 48000, np.float32)
    audio[48000] = 0.9  # one sample at exactly 1 s
    soundfile.write(path, audio, 48000)
    out = np.concatenate(list(AudioFileStream(path, chunk_s=0.3).chunks(rate=SR)))[:, 0]
    assert len(out) == 2 * SR and int(np.argmax(out)) == SR


def test_surround_is_mixed_to_mono_and_stereo(tmp_path):
    import av

    path = tmp_path / "surround.wav"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("pcm_s16le", rate=SR, layout="5.1")
        tone = (0.3 * np.sin(2 * np.pi * 300 * np.arange(SR) / SR) * 32767).astype(np.int16)
        frame = av.AudioFrame.from_ndarray(np.repeat(tone, 6)[None, :], format="s16", layout="5.1")
        frame.sample_rate = SR
        container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    file = AudioFileStream(path)
    assert file.channels == 6
    mono = np.concatenate(list(file.chunks()))
    stereo = np.concatenate(list(file.chunks(channels=2)))
    assert mono.shape == (SR, 1) and stereo.shape == (SR, 2)
    assert np.abs(mono).max() > 0.2 and np.allclose(stereo[:, 0], stereo[:, 1], atol=1e-3)


def test_a_last_block_too_short_to_give_a_sample_yet_is_resampled_whole(tmp_path):
    path = tmp_path / "word.wav"
    rate = 44100
    length = 22 * 4096 + 100  # the decoder's 4096-sample packets: a first block of 2 s and more, then 100 samples
    soundfile.write(path, 0.3 * np.sin(2 * np.pi * 220 * np.arange(length) / rate), rate)
    out = np.concatenate(list(AudioFileStream(path).chunks(rate=SR)))
    assert abs(len(out) - length * SR / rate) <= 1
