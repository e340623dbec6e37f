"""A live take from a microphone keeps the device's own rate and channels (48 kHz stereo here: a PulseAudio null
sink's monitor), and so do its MP4 and ProRes exports; the engine analyses a 16 kHz mono copy of the same sound.
Was: the microphone was opened at 16 kHz mono and the take held nothing above 8 kHz."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

from studio.avatar.io import default_avatar_path, load_avatar
from studio.engine.pipeline import Engine
from studio.engine.sources import AudioDeviceError, MicrophoneSource, resample_clip
from studio.recording.recorder import TakeRecorder, live_take_format, take_manifest
from studio.recording.take import open_take
from studio.speech.visemes import mouth_openness
from tests.studio.engine.helpers import SR, silence_vowel_silence, wait_until

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
RATE = 48000
HIGH_HZ = 12000.0  # only a take above 24 kHz keeps it; a 16 kHz one ends at 8 kHz
SINK = "mtake_feed"


def _pactl(*args: str) -> str:
    return subprocess.run(["pactl", *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def stereo_microphone():
    """A 48 kHz stereo null sink whose monitor is the microphone's input (PULSE_SOURCE); gone afterwards."""
    if not os.environ.get("PULSE_SERVER"):
        pytest.fail("no PULSE_SERVER: run under scripts/with-services.sh (PulseAudio null devices)")
    module = _pactl("load-module", "module-null-sink", f"sink_name={SINK}", f"rate={RATE}", "channels=2")
    # as services.sh does for vsink: a null sink stalls (and its monitor goes quiet) unless kept busy
    keeper = subprocess.Popen(["pacat", "--playback", "--latency-msec=20", "-d", SINK, "--raw", "/dev/zero"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    previous = os.environ.get("PULSE_SOURCE")
    os.environ["PULSE_SOURCE"] = f"{SINK}.monitor"
    try:
        yield SINK
    finally:
        keeper.terminate()
        keeper.wait(timeout=10)
        if previous is None:
            os.environ.pop("PULSE_SOURCE", None)
        else:
            os.environ["PULSE_SOURCE"] = previous
        _pactl("unload-module", module)


def _stereo_voice() -> np.ndarray:
    """The engine's test vowel at 48 kHz on both channels, with a 12 kHz tone under it on the left only."""
    voice = resample_clip(silence_vowel_silence(), SR, RATE)
    tone = 0.1 * np.sin(2 * np.pi * HIGH_HZ * np.arange(len(voice)) / RATE)
    return np.stack([0.5 * voice + tone, 0.5 * voice], axis=1).astype(np.float32)


def _high_share(samples: np.ndarray, rate: int) -> float:
    """Share of the signal's energy above 8 kHz."""
    spectrum = np.abs(np.fft.rfft(samples.astype(np.float64))) ** 2
    frequencies = np.fft.rfftfreq(len(samples), 1.0 / rate)
    return float(spectrum[frequencies > 8000].sum() / max(spectrum.sum(), 1e-12))


def _decoded_audio(path) -> tuple[int, int, np.ndarray]:
    """(rate, channels, float (n, channels) samples) of a video's first audio stream, decoded back with PyAV."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        rate, channels = stream.rate, stream.channels
        blocks = []
        for frame in container.decode(audio=0):
            block = frame.to_ndarray()
            block = block.reshape(-1, channels) if frame.format.is_packed else block.T
            blocks.append(block.astype(np.float64) / (32768.0 if block.dtype.kind == "i" else 1.0))
    return rate, channels, np.concatenate(blocks)


def test_a_microphone_take_and_its_exports_keep_the_devices_48_khz_stereo(stereo_microphone, tmp_path):
    from render.take_export import export_take

    avatar = load_avatar(default_avatar_path())
    microphone = MicrophoneSource("pulse")
    assert microphone.capture_format == (RATE, 2)
    engine = Engine(microphone)
    rate, channels = live_take_format(engine)  # as the window and the API begin a take
    manifest = take_manifest("default", "default", avatar, rate, engine.fps, channels=channels)
    recorder = TakeRecorder(tmp_path / "take", manifest, engine.subscribe(100_000))
    recorder.start()
    engine.listen_source_audio(recorder.add_audio)
    analysed: list[tuple[float, np.ndarray]] = []  # the engine's 16 kHz mono copy, as it analysed it
    engine.listen_audio(lambda media_s, samples: analysed.append((media_s, samples.copy())))
    played = tmp_path / "voice.f32"
    played.write_bytes(_stereo_voice().tobytes())
    engine.start()
    try:
        wait_until(lambda: engine.source_start_media_s > 0 and recorder.audio_samples > RATE // 2,
                   what="the microphone's first half second in the take")
        subprocess.run(["pacat", "--playback", "-d", stereo_microphone, "--raw", "--format=float32le",
                        f"--rate={RATE}", "--channels=2", "--latency-msec=20", str(played)], check=True, timeout=60)
        written = recorder.audio_samples
        wait_until(lambda: recorder.audio_samples > written + RATE // 2, what="half a second more after the voice")
    finally:
        engine.unlisten_source_audio(recorder.add_audio)
        engine.stop()
        recorder.stop()

    take = open_take(tmp_path / "take")
    assert (take.sample_rate, take.audio.channels, take.manifest["channels"]) == (RATE, 2, 2)
    kept = take.audio.read_channels()
    left, right = kept[:, 0], kept[:, 1]
    assert np.abs(right).max() > 0.1  # the voice came through
    assert _high_share(left, RATE) > 0.05 and _high_share(right, RATE) < 0.01  # the tone, on its own channel only
    assert max(mouth_openness(frame.arkit) for frame in take.frames) > 0.2  # the engine heard the vowel (16 kHz copy)
    # the take's audio sits where the engine's copy of it does: same media time, to a sample at 16 kHz
    copy = np.zeros(int((analysed[-1][0] - take.start_media_s) * SR) + len(analysed[-1][1]) + 1, np.float32)
    for media_s, samples in analysed:
        at = int(round((media_s - take.start_media_s) * SR))
        if at >= 0:
            copy[at:at + len(samples)] = samples
    kept_16k = resample_clip(right, RATE, SR)
    loud = np.flatnonzero(np.abs(copy) > 0.05)
    window = slice(int(loud[0]) - SR // 10, int(loud[0]) + SR // 2)  # around the vowel's onset
    lags = range(-40, 41)
    lag = max(lags, key=lambda k: float(np.dot(copy[window], kept_16k[window.start + k:window.stop + k])))
    assert abs(lag) <= 1, f"the take's audio is {lag} samples (16 kHz) off the engine's copy"

    for kind in ("mov", "mp4", "webm"):
        export_take(take, kind, tmp_path / f"take.{kind}", avatar=avatar, size=(64, 48))
        rate, channels, decoded = _decoded_audio(tmp_path / f"take.{kind}")
        assert (rate, channels) == (RATE, 2), kind
        assert _high_share(decoded[:, 0], rate) > 0.05 and _high_share(decoded[:, 1], rate) < 0.01, kind


@pytest.mark.parametrize(("asked", "says"), [({"rate": 1000}, "input sample rate 1000 .* use an integer 8000..384000 Hz"),
                                             ({"channels": 3}, "input channels 3 .* use 1 or 2"),
                                             ({"rate": 44100.5}, "input sample rate 44100.5")])
def test_a_microphone_format_the_studio_cannot_use_is_refused_in_one_line(stereo_microphone, asked, says):
    with pytest.raises(AudioDeviceError, match=says):
        MicrophoneSource("pulse", **asked)


def test_a_microphone_asked_for_16_khz_mono_records_so_and_its_takes_are_so(stereo_microphone):
    microphone = MicrophoneSource("pulse", rate=SR, channels=1)
    assert microphone.capture_format == (SR, 1) and live_take_format(Engine(microphone)) == (SR, 1)
    microphone.start()
    try:
        got = wait_until(lambda: microphone.read_available()[1].size and microphone.captured_audio(),
                         what="microphone samples")
    finally:
        microphone.stop()
    media_s, frames, rate = got
    assert rate == SR and frames.ndim == 1 and media_s >= 0.0


def test_a_48_khz_take_keeps_16_khz_mono_audio_on_its_time_through_gaps(tmp_path):
    """A window take begun before any source is 48 kHz stereo (live_take_format); a line of text or a file then
    hands the analysed 16 kHz mono copy, which the writer resamples as one stream (no seams between the engine's
    small chunks), and each run after a gap starts where its media time says."""
    from studio.engine.pipeline import FrameQueue
    from studio.frame import FrameState

    assert live_take_format(Engine()) == (RATE, 2)
    queue = FrameQueue(1000)
    recorder = TakeRecorder(tmp_path / "take", take_manifest("default", "default", load_avatar(default_avatar_path()),
                                                            RATE, 30, channels=2), queue)
    recorder.start()
    for index in range(60):
        queue.put(FrameState(media_time_s=index / 30, arkit=np.zeros(52)))
    tone = 0.5 * np.sin(2 * np.pi * 1000 * np.arange(SR * 2) / SR).astype(np.float32)
    runs = [(0.0, 0.8), (1.0, 1.5)]  # seconds of media time; nothing arrives between them
    for begin, end in runs:
        for first in range(int(begin * SR), int(end * SR), SR // 100):  # the engine's 10 ms chunks
            recorder.add_audio(first / SR, tone[first:first + SR // 100], SR)
    recorder.stop()

    take = open_take(tmp_path / "take")
    audio = take.audio.read_channels()
    assert (take.sample_rate, audio.shape[1]) == (RATE, 2) and np.array_equal(audio[:, 0], audio[:, 1])
    expected = 0.5 * np.sin(2 * np.pi * 1000 * np.arange(len(audio)) / RATE)
    edge = RATE // 100  # the filter rings for a few ms where a run starts and stops with a step
    for begin, end in runs:
        inside = slice(int(begin * RATE) + edge, int(end * RATE) - edge)
        assert np.abs(audio[inside, 0] - expected[inside]).max() < 2e-3, (begin, end)
    assert np.abs(audio[int(0.8 * RATE) + edge:int(1.0 * RATE) - edge]).max() < 1e-3  # the gap stays silent
    assert abs(len(audio) - int(1.5 * RATE)) <= edge


def test_a_16_khz_mono_take_from_before_still_opens_and_exports_as_it_is(tmp_path):
    """A take written before takes kept their source's format: 16 kHz mono, no `channels` in its manifest."""
    import json

    from render.take_export import export_take
    from studio.frame import FrameState
    from studio.recording.session import write_take

    avatar = load_avatar(default_avatar_path())
    voice = silence_vowel_silence()
    frames = [FrameState(media_time_s=index / 30, arkit=np.zeros(52)) for index in range(len(voice) * 30 // SR)]
    write_take(tmp_path / "old", take_manifest("default", "default", avatar, SR, 30), frames, voice)
    manifest_path = tmp_path / "old" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["channels"]
    manifest_path.write_text(json.dumps(manifest))

    take = open_take(tmp_path / "old")
    assert (take.sample_rate, take.audio.channels) == (SR, 1)
    np.testing.assert_allclose(take.audio.read_channels()[:, 0], voice, atol=1 / 32767)
    for kind, rate in (("mp4", SR), ("webm", RATE)):  # Opus carries 48 kHz
        export_take(take, kind, tmp_path / f"old.{kind}", avatar=avatar, size=(64, 48))
        assert _decoded_audio(tmp_path / f"old.{kind}")[:2] == (rate, 1), kind


def test_a_live_take_of_a_line_of_text_keeps_the_voice_above_8_khz_on_its_time(tmp_path):
    """The voice's own 22.05 kHz audio goes into the (48 kHz) take, not the engine's 16 kHz copy, at the media time
    of the frames that show it."""
    from studio.engine.sources import TextSource

    engine = Engine(fps=30)
    source = TextSource("Sixty-six sisters sail past the seashore.", play=False, realtime=False)
    rate, channels = live_take_format(engine)
    assert (rate, channels) == (RATE, 2) and source.capture_format == (source.clip.sample_rate, 1) != (SR, 1)
    recorder = TakeRecorder(tmp_path / "take", take_manifest("default", "default", load_avatar(default_avatar_path()),
                                                            rate, 30, channels=channels), engine.subscribe(100_000))
    recorder.start()
    engine.listen_source_audio(recorder.add_audio)
    engine.set_source(source)
    while not source.finished:
        engine.run_once()
    for _ in range(5):
        engine.run_once()
    engine.unlisten_source_audio(recorder.add_audio)
    recorder.stop()

    take = open_take(tmp_path / "take")
    kept = take.audio.read_channels()[:, 0]
    assert _high_share(kept, RATE) > 1e-3  # the hiss of its s's; a 16 kHz copy holds none
    voice = resample_clip(source.clip.audio, source.clip.sample_rate, RATE)
    # where the voice begins on the take's timeline (sample 0: the first frame, which may come after it)
    at = int(round((engine.source_start_media_s - take.start_media_s) * RATE))
    kept, voice = kept[max(at, 0):], voice[max(-at, 0):]
    stretch = min(len(voice), len(kept))
    assert stretch > RATE and np.abs(kept[:stretch] - voice[:stretch]).max() < 1e-3


@pytest.mark.parametrize("streamed", [False, True], ids=["decoded whole", "streamed"])
def test_a_live_take_of_a_48_khz_stereo_file_keeps_it_sample_for_sample(tmp_path, monkeypatch, streamed):
    """A file played into a live take: the take (48 kHz stereo) holds the file's own frames, not the engine's copy,
    where the frames that show them are; for a short file decoded whole and for a long one streamed from disk."""
    import soundfile

    from studio.engine.sources import FileSource

    if streamed:
        monkeypatch.setattr(FileSource, "STREAM_OVER_S", 1.0)
    source_audio = _stereo_voice()
    soundfile.write(tmp_path / "voice.wav", source_audio, RATE, subtype="FLOAT")
    engine = Engine(fps=30)
    source = FileSource(tmp_path / "voice.wav", play=False, realtime=False)
    assert source.streamed == streamed and source.capture_format == (RATE, 2)
    rate, channels = live_take_format(engine)
    recorder = TakeRecorder(tmp_path / "take", take_manifest("default", "default", load_avatar(default_avatar_path()),
                                                            rate, 30, channels=channels), engine.subscribe(100_000))
    recorder.start()
    engine.listen_source_audio(recorder.add_audio)
    engine.set_source(source)
    while not source.finished:
        engine.run_once()
    for _ in range(5):
        engine.run_once()
    engine.unlisten_source_audio(recorder.add_audio)
    recorder.stop()
    source.stop()

    take = open_take(tmp_path / "take")
    kept = take.audio.read_channels()
    at = int(round((engine.source_start_media_s - take.start_media_s) * RATE))
    kept, played = kept[max(at, 0):], source_audio[max(-at, 0):]
    assert len(kept) >= len(played) and np.abs(kept[:len(played)] - played).max() < 2 / 32767
