"""Audio sources on real files and real (PulseAudio null) devices."""

import subprocess
import threading
import time
import tracemalloc
from contextlib import contextmanager

import numpy as np
import pytest
import soundfile

from studio.engine.audio_file import AudioFileStream
from studio.engine.output import SpeakerOutput
from studio.engine.sources import (
    ENGINE_RATE,
    SILENCE_LEVEL,
    AudioDeviceError,
    AudioInputError,
    FileSource,
    MicrophoneSource,
    StreamResampler,
    TextSource,
    load_audio,
    resample_clip,
)
from studio.speech.espeak import EspeakSynth
from tests.studio.engine.helpers import silence_vowel_silence, vowel, wait_until

needs_pulse = pytest.mark.usefixtures("pulse_audio")


def _read_all(source):
    chunks, positions = [], []
    while not source.finished:
        start, samples = source.read_available()
        positions.append(start)
        chunks.append(samples)
    return positions, np.concatenate(chunks)


@pytest.mark.parametrize("rate,channels", [(8000, 1), (96000, 2), (44100, 2)])
def test_any_rate_and_channel_count_becomes_mono_16k(tmp_path, rate, channels):
    audio = np.repeat(vowel(1.0, rate)[:, None], channels, axis=1)
    path = tmp_path / f"speech_{rate}.wav"
    soundfile.write(path, audio, rate)
    source = FileSource(path, realtime=False)
    source.start()
    positions, samples = _read_all(source)
    assert positions[0] == 0
    assert abs(len(samples) - ENGINE_RATE) <= 2
    assert samples.dtype == np.float32
    # the vowel's energy survives: same loudness within 2 dB
    ratio_db = 10 * np.log10(np.mean(samples[1000:-1000] ** 2) / np.mean(vowel(1.0, rate) ** 2))
    assert abs(ratio_db) < 2


def test_compressed_formats_decode(tmp_path):
    import av

    ogg = tmp_path / "speech.ogg"
    soundfile.write(ogg, vowel(0.5), ENGINE_RATE)
    m4a = tmp_path / "speech.m4a"
    with av.open(str(m4a), "w") as container:
        stream = container.add_stream("aac", rate=ENGINE_RATE, layout="mono")
        frame = av.AudioFrame.from_ndarray(vowel(0.5)[None], format="flt", layout="mono")
        frame.sample_rate = ENGINE_RATE
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    for path in (ogg, m4a):
        audio, rate = load_audio(path)
        assert rate == ENGINE_RATE and audio.shape[0] >= 0.45 * ENGINE_RATE


def test_bad_files_are_named_and_explained(tmp_path):
    text = tmp_path / "notes.wav"
    text.write_text("this is not audio")
    truncated = tmp_path / "cut.wav"
    soundfile.write(truncated, vowel(0.5), ENGINE_RATE)
    truncated.write_bytes(truncated.read_bytes()[:30])
    for path in (text, truncated, tmp_path / "missing.wav"):
        with pytest.raises(AudioInputError, match=path.name):
            FileSource(path)


def test_a_file_cut_off_plays_what_it_holds_and_its_status_says_it_ends_early(tmp_path):
    path = tmp_path / "cut.wav"
    soundfile.write(path, vowel(2.0), ENGINE_RATE)
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
    source = FileSource(path, realtime=False)
    assert abs(source.duration_s - 1.0) < 0.01
    assert "cut.wav ends early" in source.status and "of the 2.00 s" in source.status


def test_a_long_file_is_streamed_not_loaded(tmp_path, monkeypatch):
    monkeypatch.setattr(FileSource, "STREAM_OVER_S", 30.0)
    path = tmp_path / "long.wav"
    with soundfile.SoundFile(str(path), "w", samplerate=48000, channels=2) as out:
        for _ in range(60):  # one minute, written a second at a time
            out.write(np.zeros((48000, 2), np.float32) + 0.01)
    source = FileSource(path, realtime=False)
    assert source.streamed
    source.start()
    total, largest = 0, 0
    while not source.finished:
        _, samples = source.read_available()
        total += len(samples)
        largest = max(largest, len(samples))
        assert len(source._pending) < ENGINE_RATE  # never more than a decoded chunk held back
    assert total == 60 * ENGINE_RATE and largest <= 10 * ENGINE_RATE


def test_stream_resampler_matches_the_signal():
    for rate in (48000, 44100, 8000):
        resampler = StreamResampler(rate, ENGINE_RATE)
        t = np.arange(rate) / rate
        tone = np.sin(2 * np.pi * 440 * t)
        out = np.concatenate([resampler.push(tone[i:i + rate // 100]) for i in range(0, rate, rate // 100)])
        expected = np.sin(2 * np.pi * 440 * np.arange(len(out)) / ENGINE_RATE)
        assert len(out) > 0.99 * ENGINE_RATE
        assert np.abs(out[200:] - expected[200:]).max() < 1e-3


def test_a_leading_resampler_finishes_each_hop_with_the_block_that_ends_it():
    """A 48 kHz microphone's 5 ms blocks end on every 10 ms hop: the hop must not wait for the next block."""
    rate, block = 48000, 240
    resampler = StreamResampler(rate, ENGINE_RATE, lead=True)
    tone = np.sin(2 * np.pi * 440 * np.arange(rate) / rate)
    out = []
    for start in range(0, rate, block):
        out.append(resampler.push(tone[start:start + block]))
        assert sum(map(len, out)) == (start + block) // 3, "a block's last outputs were held for the next block"
    out = np.concatenate(out)
    # output j is the input's time j / 16000 less the lead
    expected = np.sin(2 * np.pi * 440 * (np.arange(len(out)) / ENGINE_RATE - resampler.lead_in / rate))
    assert 0 < resampler.lead_in <= rate // 1000
    assert np.abs(out[200:] - expected[200:]).max() < 1e-3
    assert StreamResampler(ENGINE_RATE, ENGINE_RATE, lead=True).lead_in == 0


@needs_pulse
def test_file_plays_on_the_speakers_and_the_clock_follows_playback(tmp_path):
    path = tmp_path / "speech.wav"
    soundfile.write(path, silence_vowel_silence(), ENGINE_RATE)
    source = FileSource(path, play=True)
    source.start()
    try:
        got = []
        wait_until(lambda: got.append(source.read_available()[1]) or source.finished, what="playback to finish")
        assert source.error is None
        assert sum(len(g) for g in got) == len(source.audio)
        assert source.clock.observations > 10
    finally:
        source.stop()


@needs_pulse
def test_a_streamed_file_plays_through_to_its_end(tmp_path, monkeypatch):
    monkeypatch.setattr(FileSource, "STREAM_OVER_S", 0.5)
    path = tmp_path / "speech.wav"
    soundfile.write(path, silence_vowel_silence(), ENGINE_RATE)
    source = FileSource(path, play=True)
    assert source.streamed
    source.start()
    try:
        got = []
        wait_until(lambda: got.append(source.read_available()[1]) or source.finished, what="playback to finish")
        assert source.error is None and source.silent_reason is None
        assert abs(sum(len(g) for g in got) - len(silence_vowel_silence())) <= 2
        assert source.clock.observations > 10
    finally:
        source.stop()


@needs_pulse
def test_text_source_speaks_and_exposes_phonemes():
    source = TextSource("Bob met Pam")
    assert [p.symbol for p in source.phonemes if p.symbol.strip("_'")]  # real phonemes
    assert source.duration_s > 0.5
    with pytest.raises(ValueError):
        TextSource("   ")


@needs_pulse
def test_unknown_device_lists_the_available_inputs():
    with pytest.raises(AudioDeviceError, match="available: .*pulse"):
        MicrophoneSource("no-such-microphone")
    with pytest.raises(AudioDeviceError, match="index 999"):
        MicrophoneSource(999)


@needs_pulse
def test_microphone_records_from_the_null_source():
    source = MicrophoneSource("pulse")
    source.start()
    try:
        got = wait_until(lambda: len(source.read_available()[1]) > 0, what="microphone samples")
        assert got and source.error is None and source.clock.ready
    finally:
        source.stop()


@needs_pulse
def test_a_stream_that_dies_is_reported_and_restart_recovers():
    source = MicrophoneSource("pulse")
    source.start()
    try:
        wait_until(lambda: len(source.read_available()[1]) > 0, what="samples before the failure")
        source._stream.abort()  # what PortAudio does when the device goes away under it
        wait_until(lambda: source.read_available() and source.error, what="the device loss to be reported")
        assert "restart()" in source.status
        assert source.read_available()[1].size == 0  # no exception, no audio
        source.restart()
        wait_until(lambda: len(source.read_available()[1]) > 0 and source.error is None, what="recovery")
    finally:
        source.stop()


def _pactl(*args: str) -> str:
    return subprocess.run(["pactl", *args], check=True, capture_output=True, text=True).stdout.strip()


def _source_of_the_only_capture_stream() -> str:
    """The name of the PulseAudio source this process's one capture stream records from."""
    streams = _pactl("list", "short", "source-outputs").splitlines()
    assert len(streams) == 1, f"expected one capture stream, PulseAudio has {streams}"
    index = streams[0].split()[1]
    return next(line.split()[1] for line in _pactl("list", "short", "sources").splitlines() if line.split()[0] == index)


@contextmanager
def _listening_to_a_new_source(monkeypatch, name: str):
    """A PulseAudio null source made for the test and a MicrophoneSource capturing from it (audio flowing);
    both gone afterwards, whatever the test did to the source."""
    module = _pactl("load-module", "module-null-source", f"source_name={name}")
    monkeypatch.setenv("PULSE_SOURCE", name)
    source = MicrophoneSource("pulse")
    try:
        source.start()
        wait_until(lambda: len(source.read_available()[1]) > 0, what=f"samples from {name}")
        yield source, module
    finally:
        source.stop()
        if any(line.split()[0] == module for line in _pactl("list", "short", "modules").splitlines()):
            _pactl("unload-module", module)


@needs_pulse
def test_unloading_the_pulse_source_moves_the_capture_to_the_default_input(monkeypatch):
    """PulseAudio rescues a stream whose source goes away: the microphone carries on from the default input
    (the services' `vmic`), with no error, and the media clock keeps counting."""
    with _listening_to_a_new_source(monkeypatch, "c3_vanishing_mic") as (source, module):
        assert _source_of_the_only_capture_stream() == "c3_vanishing_mic"
        _pactl("unload-module", module)
        position = source.read_available()[0]
        wait_until(lambda: source.error or source.read_available()[0] > position + ENGINE_RATE,
                   what="a second of audio or an error after unplugging")
        assert source.error is None and source.status.endswith(": listening")
        assert _source_of_the_only_capture_stream() == "vmic"


@needs_pulse
def test_an_input_that_stops_delivering_audio_is_reported_as_lost(monkeypatch):
    with _listening_to_a_new_source(monkeypatch, "c3_sleepy_mic") as (source, _module):
        _pactl("suspend-source", "c3_sleepy_mic", "1")  # no more blocks, as from a stalled USB microphone
        wait_until(lambda: source.read_available() and source.error, what="the lost input reported")
        assert "no audio from the input device" in source.error and "restart()" in source.error
        assert source.status.endswith(source.error)


def test_resample_clip_keeps_speech_band_tones_at_every_usual_rate():
    for rate in (8000, 22050, 44100, 48000, 96000):
        t = np.arange(rate) / rate
        tone = 0.5 * np.sin(2 * np.pi * 440 * t) + 0.2 * np.sin(2 * np.pi * 3000 * t)
        out = resample_clip(tone, rate, ENGINE_RATE)
        assert out.shape == (ENGINE_RATE,) and out.dtype == np.float32
        t16 = np.arange(ENGINE_RATE) / ENGINE_RATE
        expected = 0.5 * np.sin(2 * np.pi * 440 * t16) + 0.2 * np.sin(2 * np.pi * 3000 * t16)
        edge = ENGINE_RATE // 100  # the tone starts and stops with a step: the filter rings there for 10 ms
        np.testing.assert_allclose(out[edge:-edge], expected[edge:-edge], atol=1e-3)


def test_resample_clip_removes_what_would_alias_and_upsamples_to_the_same_level():
    t = np.arange(96000) / 96000
    aliased = resample_clip(np.sin(2 * np.pi * 12000 * t), 96000, ENGINE_RATE)  # would fold to 4 kHz
    assert np.abs(aliased[200:-200]).max() < 1e-3
    t8 = np.arange(8000) / 8000
    up = resample_clip(np.sin(2 * np.pi * 1000 * t8), 8000, ENGINE_RATE)
    np.testing.assert_allclose(up[500:-500], np.sin(2 * np.pi * 1000 * np.arange(16000) / 16000)[500:-500], atol=1e-3)


@pytest.mark.parametrize("length", [0, 1, 2, 5, 441, 22051])
def test_resample_clip_gives_every_output_sample_the_clip_reaches(length):
    out = resample_clip(np.ones(length), 44100, ENGINE_RATE)
    assert len(out) == -(-length * ENGINE_RATE // 44100)  # ceil: a partial last output sample is kept


def test_resample_clip_refuses_stereo_and_bad_rates():
    with pytest.raises(ValueError, match="mono"):
        resample_clip(np.zeros((10, 2)), 22050, ENGINE_RATE)
    with pytest.raises(ValueError, match="positive"):
        resample_clip(np.zeros(10), 0, ENGINE_RATE)


@needs_pulse
def test_text_source_starts_speaking_at_once():
    source = TextSource("Hello there", play=False)
    first_phoneme = next(p for p in source.phonemes if p.symbol.strip("_'"))
    assert np.abs(source.clip.audio[: int(0.002 * source.clip.sample_rate)]).max() > SILENCE_LEVEL
    assert first_phoneme.start_s < 0.005  # the phoneme times moved with the trimmed audio
    untrimmed = EspeakSynth().synthesize("Hello there")
    assert source.clip.duration_s < untrimmed.duration_s
    assert source.phonemes[-1].end_s == pytest.approx(source.clip.duration_s, abs=1e-6)


@needs_pulse
def test_microphone_callbacks_wake_the_reader():
    source = MicrophoneSource("pulse")
    source.data_event = threading.Event()
    source.start()
    try:
        assert source.data_event.wait(5.0), "no callback set data_event"
        assert source.next_data_in_s() is None  # device-paced: the event, not a timer, says when
    finally:
        source.stop()


@needs_pulse
def test_microphone_audio_dropped_by_the_ring_still_counts_on_the_media_clock():
    source = MicrophoneSource("pulse", ring_seconds=0.1)
    source.start()
    try:
        wait_until(lambda: len(source.read_available()[1]) > 0, what="microphone samples")
        start, samples = source.read_available()
        expected_next = start + len(samples)
        time.sleep(0.6)  # the reader stalls: the 0.1 s ring overflows
        start, samples = source.read_available()
        assert source.dropped_s > 0.3
        assert start - expected_next > 0.3 * ENGINE_RATE  # stamped where it really is, not right after the last read
        assert len(samples) <= 0.1 * ENGINE_RATE + 1
    finally:
        source.stop()


def test_a_short_file_is_decoded_straight_to_16k_mono_never_held_at_its_own_rate(tmp_path):
    rate, seconds = 48000, 25
    path = tmp_path / "stereo48k.wav"
    soundfile.write(path, np.zeros((seconds * rate, 2), np.float32) + 0.01, rate)
    file_float32_bytes = seconds * rate * 2 * 4
    tracemalloc.start()
    try:
        source = FileSource(path, play=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not source.streamed and source.play_audio.size == 0
    assert len(source.audio) == seconds * ENGINE_RATE
    streamed = np.concatenate([chunk[:, 0] for chunk in AudioFileStream(path).chunks(rate=ENGINE_RATE, channels=1)])
    np.testing.assert_array_equal(source.audio, streamed)  # the same samples the streamed path and lipsync read
    # before: the file at 48 kHz stereo, its mono mix and two float64 copies for resampling, 52 MB here
    assert peak < file_float32_bytes, f"{peak / 1e6:.1f} MB allocated to open a {file_float32_bytes / 1e6:.1f} MB file"


@needs_pulse
def test_a_streamed_file_whose_output_is_lost_stops_its_decoder(tmp_path, monkeypatch):
    monkeypatch.setattr(FileSource, "STREAM_OVER_S", 0.5)
    path = tmp_path / "speech.wav"
    soundfile.write(path, np.tile(silence_vowel_silence(), 20), ENGINE_RATE)
    source = FileSource(path, play=True)
    source.start()
    try:
        wait_until(lambda: len(source.read_available()[1]) > 0, what="playback to start")
        decoder = source._clip._thread
        monkeypatch.setattr(SpeakerOutput, "check", lambda self: False)  # the device vanished
        wait_until(lambda: source.read_available() and source.silent_reason, what="the loss to be noticed")
        decoder.join(timeout=5.0)
        assert not decoder.is_alive()  # it used to wait for the gone device forever, holding the file open
        assert "playing without sound" in source.status
    finally:
        source.stop()
