"""Quiet voices lifted for the face model: a normal voice untouched, a quiet one brought up, silence never."""

import numpy as np
import pytest

from studio.engine import level
from studio.engine.features import LOG_FLOOR, LogMelExtractor
from studio.engine.level import SpeechLevelLift
from studio.engine.offline import stream_frame_blocks
from studio.speech.visemes import mouth_openness
from tests.studio.engine.helpers import SR, two_sentences


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    return two_sentences()


def _band_level_db(features: np.ndarray) -> np.ndarray:
    return 10 * np.log10(np.maximum(np.exp(features.astype(np.float64)) - LOG_FLOOR, 0).sum(1) + 1e-30)


def test_a_voice_at_a_normal_level_reaches_the_model_untouched(speech):
    features = LogMelExtractor().compute(speech)
    lift = SpeechLevelLift()
    assert np.array_equal(lift.push(features), features)
    assert lift.lift_db == 0.0


@pytest.mark.parametrize("quieter_db", [20.0, 30.0])
def test_a_quiet_voice_is_lifted_to_the_target_once_its_level_is_known(speech, quieter_db):
    normal = LogMelExtractor().compute(speech)
    quiet = LogMelExtractor().compute(speech * 10 ** (-quieter_db / 20))
    lift = SpeechLevelLift()
    lifted = lift.push(quiet)
    heard = SpeechLevelLift()
    heard.push(normal)
    assert heard.voice_db > level.TARGET_DBFS and heard.lift_db == 0.0
    assert lift.voice_db == pytest.approx(heard.voice_db - quieter_db, abs=2.0)
    assert lift.lift_db == pytest.approx(level.TARGET_DBFS - lift.voice_db)
    speaking = _band_level_db(normal) > _band_level_db(normal).max() - 30
    second_sentence = speaking & (np.arange(len(normal)) > len(normal) // 2)
    gap = _band_level_db(normal)[second_sentence] - _band_level_db(lifted)[second_sentence]
    assert np.median(gap) == pytest.approx(quieter_db - lift.lift_db, abs=1.5)
    assert np.array_equal(lifted[:30], quiet[:30])  # nothing is lifted before the voice's first syllables


def test_streamed_in_any_chunks_the_lift_is_the_same(speech):
    quiet = LogMelExtractor().compute(speech * 0.02)
    whole = SpeechLevelLift().push(quiet)
    lift = SpeechLevelLift()
    pieces = np.concatenate([lift.push(quiet[i:i + n]) for i, n in zip(range(0, len(quiet), 7), [7] * len(quiet))])
    assert np.array_equal(pieces, whole)


def test_voices_far_under_the_speaker_do_not_earn_a_lift_when_the_speaker_falls_silent(speech):
    """A speaker, then half a minute of another voice 25 dB under them (a television across the room)."""
    background = np.tile(speech * 10 ** (-25 / 20), 6)
    lift = SpeechLevelLift()
    lift.push(LogMelExtractor().compute(np.concatenate([speech, background])))
    assert lift.lift_db == 0.0
    alone = SpeechLevelLift()
    alone.push(LogMelExtractor().compute(background))
    assert alone.lift_db > 5.0  # the same voice with no louder speaker before it is the speaker, and lifted


@pytest.mark.parametrize("name,audio", [
    ("digital silence", np.zeros(3 * SR, np.float32)),
    ("a steady fan at -60 dBFS", (0.001 * np.random.default_rng(1).standard_normal(3 * SR)).astype(np.float32)),
    ("a muted microphone's hiss at -90 dBFS", (3e-5 * np.random.default_rng(2).standard_normal(3 * SR)).astype(np.float32)),
])
def test_a_room_without_a_voice_is_never_lifted(name, audio):
    lift = SpeechLevelLift()
    features = LogMelExtractor().compute(audio)
    assert np.array_equal(lift.push(features), features), name


def test_a_quiet_voice_in_a_file_moves_the_mouth_as_the_same_voice_at_a_normal_level(speech):
    """The whole path (features, lift, model, silence gate): 35 dB down, speech near -53 dBFS, is neither held
    shut by the gate nor mumbled by the model once the lift has settled (the second sentence)."""

    def openness(audio):
        blocks = list(stream_frame_blocks(audio, fps=100, sample_rate=SR, face_only=True))
        return mouth_openness(np.concatenate([b.arkit for b in blocks]))

    normal, quiet = openness(speech), openness(speech * 10 ** (-35 / 20))
    second = slice(len(normal) // 2, None)
    opened = normal[second] > 0.15
    assert opened.sum() > 30
    assert np.median(quiet[second][opened] / normal[second][opened]) > 0.7
    assert np.corrcoef(normal[second], quiet[second])[0, 1] > 0.8
