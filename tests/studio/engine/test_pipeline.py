"""The engine thread end to end with real sources, the real face model and real devices."""

import threading

import numpy as np
import pytest
import soundfile

from studio.engine.bench import OPEN_MOUTH, HopFeeder, speech_like
from studio.engine.face_model import FaceModel
from studio.engine.features import LogMelExtractor
from studio.engine.motion import FLOOR_SETTLE_HOPS, HOP_S
from studio.engine.pipeline import HOP, Engine, FrameQueue, LatestFrameSlot
from studio.engine.sources import ENGINE_RATE, AudioSource, FileSource, MicrophoneSource, TextSource
from studio.frame import FrameState
from studio.speech.visemes import closure_intervals, lips_closed, mouth_openness
from tests.studio.engine.helpers import silence_vowel_silence, two_sentences, vowel, wait_until

needs_pulse = pytest.mark.usefixtures("pulse_audio")


def _run_until_finished(engine, source):
    queue = engine.subscribe(100_000)
    engine.set_source(source)
    engine.start()
    try:
        wait_until(lambda: source.finished and engine.status.endswith("finished"), 30, "the source to finish")
        wait_until(lambda: len(queue) > 0, what="frames")
    finally:
        engine.stop()
    offset = engine.source_start_media_s
    return [f for f in queue.drain() if f.media_time_s >= offset], offset


@needs_pulse
def test_file_drives_lips_closed_in_silence_open_on_the_vowel(tmp_path):
    path = tmp_path / "vowel.wav"
    soundfile.write(path, silence_vowel_silence(), ENGINE_RATE)
    frames, offset = _run_until_finished(Engine(), FileSource(path))
    times = np.array([f.media_time_s - offset for f in frames])
    openness = np.array([mouth_openness(f.arkit) for f in frames])
    assert times.max() > 2.0  # the whole file came through
    silent = (times < 0.5) | (times > 1.75)
    vowel = (times > 0.75) & (times < 1.5)
    assert np.all(openness[silent] < 0.08)
    assert np.median(openness[vowel]) > 0.15
    assert all(set(f.timings_ms) == {"capture", "features", "inference", "motion", "anchor"} for f in frames)
    assert np.all(np.diff([f.sequence for f in frames]) > 0)


@needs_pulse
def test_text_keeps_lips_closed_inside_every_b_m_p_closure():
    source = TextSource("Bob met Pam")
    frames, offset = _run_until_finished(Engine(), source)
    closures = closure_intervals(source.phonemes)
    assert len(closures) >= 3
    checked = 0
    for start, end in closures:
        inside = [f for f in frames if start + 0.005 <= f.media_time_s - offset <= end - 0.005]
        checked += len(inside)
        assert all(lips_closed(f.arkit) for f in inside), (start, end)
    assert checked >= 6
    assert max(mouth_openness(f.arkit) for f in frames) > 0.2  # and it does open between them


@needs_pulse
def test_microphone_on_the_null_source_produces_frames():
    engine = Engine(MicrophoneSource("pulse"))
    queue = engine.subscribe()
    engine.start()
    try:
        wait_until(lambda: len(queue) >= 20, what="frames from the microphone")
        assert engine.source.error is None
    finally:
        engine.stop()


@needs_pulse
def test_switching_sources_while_running_leaves_no_thread_behind(tmp_path):
    path = tmp_path / "vowel.wav"
    soundfile.write(path, silence_vowel_silence(), ENGINE_RATE)
    before = set(threading.enumerate())
    engine = Engine()
    queue = engine.subscribe(10_000)
    engine.start()
    for source in (FileSource(path), MicrophoneSource("pulse"), TextSource("Hello"), None, FileSource(path)):
        count = len(queue)
        engine.set_source(source)
        wait_until(lambda c=count: len(queue) > c + 10, what="frames after a switch")
    engine.stop()
    assert not engine.running
    assert set(threading.enumerate()) == before
    times = [f.media_time_s for f in queue.drain()]
    assert np.all(np.diff(times) > 0)  # the session clock never goes back across switches


def test_idle_engine_animates_with_the_mouth_at_rest():
    engine = Engine(fps=60)
    queue = engine.subscribe()
    engine.start()
    try:
        wait_until(lambda: len(queue) >= 30, what="idle frames")
    finally:
        engine.stop()
    frames = queue.drain()
    assert engine.status == "stopped"
    assert all(mouth_openness(f.arkit) == 0.0 for f in frames)
    assert len({f.pose.tobytes() for f in frames}) > 1  # breathing, not frozen


def _ungated_and_engine_frames(audio: np.ndarray):
    """The face model's own output for `audio` (no gate) and the engine's frames for it, by hop index."""
    alone = FaceModel("fp32").run_offline(LogMelExtractor().compute(audio))
    engine = Engine(HopFeeder(audio))
    queue = engine.subscribe(10_000)
    while not engine.source.finished:
        engine.run_once()
    return alone, {round((f.media_time_s - engine.source_start_media_s) / HOP_S): f for f in queue.drain()}


def test_the_mouth_stays_shut_on_low_noise_and_the_gate_is_open_by_the_first_hop_of_speech():
    rng = np.random.default_rng(3)
    noise = (0.001 * rng.standard_normal(ENGINE_RATE)).astype(np.float32)  # -60 dBFS: a quiet room
    audio = np.concatenate([noise, vowel(0.5) + noise[:ENGINE_RATE // 2]])
    alone, frames = _ungated_and_engine_frames(audio)
    onset = ENGINE_RATE // HOP  # the first hop with the vowel in it
    assert mouth_openness(np.clip(alone.arkit[:onset - 2], 0.0, 1.0)).max() > 0.04  # the model murmurs on noise
    assert max(mouth_openness(frames[i].arkit) for i in range(onset - 2)) < 0.01  # the gate holds the mouth shut
    # the face model hears the onset only one hop ahead: the gate must be (nearly) open on the onset hop itself
    for i in (onset, onset + 1):
        assert frames[i].voice_activity >= 0.9 * alone.voice_activity[i], i


def test_after_a_pause_a_hard_onset_opens_the_mouth_within_two_hops_whatever_its_phase():
    """The live model reads a hard onset as a /b/ release; the lips are already together after a pause, so the
    shaper must not hold them shut there (it did for one or two hops: up to 43 ms after the onset)."""
    pieces, onsets, position = [], [], 0
    for trial in range(10):  # one stream, as the bench plays it: each onset at another place within its hop
        lead = int(0.8 * ENGINE_RATE) + (trial * 2 % 10) * 16 + 37
        burst = speech_like(0.6)
        onsets.append(position + lead + int(np.flatnonzero(np.abs(burst) > 0.01)[0]))
        pieces += [np.zeros(lead, np.float32), burst]
        position += lead + len(burst)
    feeder = HopFeeder(np.concatenate(pieces + [np.zeros(ENGINE_RATE // 5, np.float32)]))
    engine = Engine(feeder)
    queue = engine.subscribe(100_000)
    shown = []  # (depicted media time, samples fed when it was emitted, openness)
    while not feeder.finished:
        engine.run_once()
        shown += [(f.media_time_s - engine.source_start_media_s, feeder.position, mouth_openness(f.arkit))
                  for f in queue.drain()]
    for onset in onsets:
        fed_when_open = next(fed for depicted, fed, opened in shown
                             if depicted >= onset / ENGINE_RATE - 0.03 and opened > OPEN_MOUTH)
        assert fed_when_open - onset <= 2 * HOP, f"the mouth opened {(fed_when_open - onset) / 16:.1f} ms after the onset"


def test_in_a_noisy_room_the_mouth_rests_around_a_word_and_opens_on_it():
    room = (0.018 * np.random.default_rng(4).standard_normal(3 * ENGINE_RATE)).astype(np.float32)  # -35 dBFS: a fan
    audio = room.copy()
    audio[ENGINE_RATE:ENGINE_RATE * 3 // 2] += vowel(0.5)
    alone, frames = _ungated_and_engine_frames(audio)
    onset, end = ENGINE_RATE // HOP, ENGINE_RATE * 3 // 2 // HOP
    room_only = [*range(FLOOR_SETTLE_HOPS + 30, onset - 2), *range(end + 30, max(frames))]
    # ungated, the model murmurs on the fan (at least twice what the gate allows), so the gate is what holds it shut
    assert mouth_openness(np.clip(alone.arkit[room_only], 0.0, 1.0)).max() > 0.02
    assert max(mouth_openness(frames[i].arkit) for i in room_only) < 0.01  # the gate holds the mouth shut
    assert min(mouth_openness(frames[i].arkit) for i in range(onset + 5, end - 5)) > 0.1  # and lets the word through
    for i in (onset, onset + 1):
        assert frames[i].voice_activity >= 0.9 * alone.voice_activity[i], i


def test_a_word_that_fades_in_through_room_noise_is_let_through_where_the_model_hears_a_voice():
    word = vowel(0.6)
    word[:ENGINE_RATE * 12 // 100] *= (np.arange(ENGINE_RATE * 12 // 100) / (ENGINE_RATE * 12 // 100)) ** 2  # soft onset
    audio = np.concatenate([np.zeros(ENGINE_RATE, np.float32), word, np.zeros(ENGINE_RATE // 2, np.float32)])
    audio += (10 ** (-30 / 20) * 0.3 * np.random.default_rng(0).standard_normal(len(audio))).astype(np.float32)
    alone, frames = _ungated_and_engine_frames(audio)
    onset = ENGINE_RATE // HOP
    # its first hops are too quiet to count as heard, but the model already hears a voice in them
    voiced = [i for i in range(onset, onset + 6) if alone.voice_activity[i] > 0.5]
    assert voiced and frames[voiced[0]].voice_activity > 0.5 * alone.voice_activity[voiced[0]]


def test_a_quiet_voice_moves_the_live_mouth_as_the_same_voice_at_a_normal_level():
    """35 dB down (near -53 dBFS, a microphone's gain turned low): the engine lifts it for the model and lowers the
    silence gate's threshold with it; once it has heard the voice (the second sentence) the mouth moves as for
    the voice at a normal level. A new source starts with no lift. (The model reads this synthetic voice fairly
    well even unlifted, and live the gate also opens on its voice activity; the human dev set is where the lift
    pays, the experiment log. The file test in test_level.py fails without either part.)"""

    def openness(audio):
        engine = Engine(HopFeeder(audio))
        queue = engine.subscribe(10_000)
        while not engine.source.finished:
            engine.run_once()
        frames = {round((f.media_time_s - engine.source_start_media_s) / HOP_S): f for f in queue.drain()}
        return np.array([mouth_openness(frames[i].arkit) for i in range(len(audio) // HOP - 5)]), engine

    normal, _ = openness(two_sentences())
    quiet, engine = openness(two_sentences() * 10 ** (-35 / 20))
    second = slice(len(normal) // 2, None)
    opened = normal[second] > 0.15
    assert opened.sum() > 30
    assert np.median(quiet[second][opened] / normal[second][opened]) > 0.7
    assert np.corrcoef(normal[second], quiet[second])[0, 1] > 0.8
    assert engine.level.lift_db > 10.0
    engine.set_source(HopFeeder(two_sentences()))
    engine.run_once()
    assert engine.level.lift_db == 0.0


@pytest.mark.parametrize("fps", [50, 30])
def test_below_100_fps_each_frame_shows_the_newest_hop_the_model_has_given(fps):
    engine = Engine(HopFeeder(silence_vowel_silence()), fps=fps)  # the model runs on batches of 2 or 3 hops
    queue = engine.subscribe(10_000)
    stale, shown = [], []
    while not engine.source.finished:
        engine.run_once()
        frames = [f for f in queue.drain() if f.media_time_s >= engine.source_start_media_s]
        if frames:
            newest = engine.work.hops_inferred - engine.model.lookahead_frames - 1
            stale.append(newest - round((frames[-1].media_time_s - engine.source_start_media_s) / HOP_S))
            shown += frames
    assert stale.count(0) == len(stale) > 50
    times = np.array([f.media_time_s for f in shown])
    assert np.all(np.diff(times) > 0) and len(set(np.floor(times * fps + 1e-6))) == len(times)  # one frame per period


def test_a_failing_source_leaves_the_engine_idle_with_a_message():
    reads = []

    class Broken(FileSource):
        def read_available(self):
            reads.append(self)
            raise OSError("device on fire")

    engine = Engine()
    source = _broken_source(Broken)
    queue = engine.subscribe()
    engine.set_source(source)
    engine.start()
    try:
        wait_until(lambda: "device on fire" in engine.status, what="the error in the status")
        queue.drain()
        wait_until(lambda: len(queue) > 10, what="idle frames after the error")
        assert engine.running, "the engine thread survives its source"
        assert len(reads) == 1, "idle: a source that failed is not read again"
        assert engine.source_error == f"{source.name}: device on fire" and engine.status == engine.source_error
        after = queue.drain()
        assert all(f.voice_activity == 0.0 and mouth_openness(f.arkit) < 0.05 for f in after), "the mouth rests"
        assert all(b.media_time_s > a.media_time_s for a, b in zip(after, after[1:])), "idle frames go on"
    finally:
        engine.stop()


def _broken_source(cls):
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".wav", delete=False) as handle:
        soundfile.write(handle.name, np.zeros(1600, np.float32), ENGINE_RATE)
    return cls(handle.name, play=False)


def test_latest_slot_interpolates_between_bracketing_frames_and_queues_drop_oldest():
    slot = LatestFrameSlot()
    assert slot.get(1.0) is None
    a = FrameState(media_time_s=1.0, arkit=np.zeros(52))
    b = FrameState(media_time_s=1.1, arkit=np.ones(52), sequence=1)
    slot.put(a)
    slot.put(b)
    assert slot.get(1.05).arkit[0] == pytest.approx(0.5)
    assert slot.get(5.0) is b and slot.get(0.0) is a and slot.get() is b
    queue = FrameQueue(maxlen=2)
    for frame in (a, b, a):
        queue.put(frame)
    assert queue.dropped == 1 and queue.drain() == [b, a]
    assert queue.get(timeout=0.01) is None


class _JumpingSource(AudioSource):
    """Speech that loses 0.5 s in the middle, as a microphone ring does when the engine stalls."""

    def __init__(self, audio, gap_at, gap):
        super().__init__("jumping")
        self.audio, self.gap_at, self.gap = audio, gap_at, gap
        self._read = 0

    @property
    def finished(self):
        return self._read >= len(self.audio)

    def start(self):
        self._read = 0

    def stop(self):
        pass

    def read_available(self):
        start = self._read
        if start == self.gap_at:
            start += self.gap  # these samples were dropped: the next ones are later on the media clock
        self._read = start + 1000
        return start, self.audio[start:start + 1000]


def test_audio_after_a_gap_is_stamped_on_its_true_media_time():
    audio = np.tile(silence_vowel_silence(), 2)
    source = _JumpingSource(audio, gap_at=20_000, gap=8_123)
    engine = Engine()
    queue = engine.subscribe(10_000)
    engine.set_source(source)
    while not source.finished:
        engine.run_once()
    times = np.array([f.media_time_s for f in queue.drain()]) - engine.source_start_media_s
    assert np.all(np.diff(times) > 0)
    step = np.diff(times)
    assert step.max() == pytest.approx((8_123 + 160) / ENGINE_RATE, abs=0.011)  # one jump, over the lost audio
    assert np.sum(step > 0.011) == 1
    after = times[times > 1.3]
    assert np.allclose(after * 100, np.round(after * 100), atol=1e-6)  # still on the 10 ms hop grid
    assert times[-1] == pytest.approx((len(audio) - 1) / ENGINE_RATE, abs=0.011)


def test_run_once_refuses_while_the_thread_runs_and_says_how_long_to_sleep():
    engine = Engine(fps=50)
    assert 0.0 <= engine.run_once() <= 1 / 50 + 1e-6  # idle: until the next frame is due
    engine.start()
    try:
        with pytest.raises(RuntimeError, match="running"):
            engine.run_once()
    finally:
        engine.stop()
