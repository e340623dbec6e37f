"""Corpus generation: real espeak (and festival where installed), targets, split and augmentation."""

from __future__ import annotations

import itertools
import shutil

import numpy as np
import pytest

from assets.model.corpus import (
    SAMPLE_RATE,
    augment,
    default_voices,
    is_held_out_voice,
    resample,
    synthesize_utterances,
    telephone_band,
)
from assets.model.sentences import FIXED_SENTENCES, generate_sentences, is_held_out
from studio.speech.espeak import EspeakSynth
from studio.speech.visemes import VISEME_INDEX, VISEMES, closure_intervals, lips_closed

ESPEAK_VOICES = ["espeak:en-us", "espeak:en-gb-x-rp+f3", "espeak:en+m2"]


def _check_utterance(utterance, timing: str) -> None:
    assert utterance.sample_rate == SAMPLE_RATE and utterance.audio.dtype == np.float32
    assert np.isfinite(utterance.audio).all() and 0.05 < np.abs(utterance.audio).max() <= 1.0
    track = utterance.targets
    assert track.fps == 100.0 and track.num_frames == int(np.ceil(utterance.duration_s * 100 - 1e-9))
    assert track.arkit.shape == (track.num_frames, 52) and track.viseme.max() < len(VISEMES)
    assert utterance.timing == timing
    starts = [p.start_s for p in utterance.phonemes]
    assert starts == sorted(starts) and utterance.phonemes[-1].end_s <= utterance.duration_s + 0.02
    for start, end in closure_intervals(utterance.phonemes, timing):
        frames = (track.times_s >= start) & (track.times_s < end)
        assert lips_closed(track.arkit[frames]).all()
    assert (track.viseme != VISEME_INDEX["sil"]).mean() > 0.5


def test_espeak_utterances_are_16k_with_valid_targets_and_deterministic():
    utterances = list(synthesize_utterances(6, seed=3, voices=ESPEAK_VOICES))
    assert len(utterances) == 6 and {u.voice for u in utterances} <= set(ESPEAK_VOICES)
    for utterance in utterances:
        _check_utterance(utterance, "espeak")
    again = list(synthesize_utterances(6, seed=3, voices=ESPEAK_VOICES))
    assert [(u.voice, u.text) for u in again] == [(u.voice, u.text) for u in utterances]
    other_seed = [(u.voice, u.text) for u in synthesize_utterances(6, seed=4, voices=ESPEAK_VOICES)]
    assert other_seed != [(u.voice, u.text) for u in utterances]


def test_resampled_audio_keeps_phoneme_timing():
    clip = EspeakSynth().synthesize("Bob met Pam")
    audio16 = resample(clip.audio, clip.sample_rate, SAMPLE_RATE)
    assert len(audio16) == round(len(clip.audio) * SAMPLE_RATE / clip.sample_rate)
    p = next(ph for ph in clip.phonemes if ph.symbol == "p")
    silent = audio16[int((p.start_s - 0.035) * SAMPLE_RATE):int((p.start_s - 0.002) * SAMPLE_RATE)]
    burst = audio16[int(p.start_s * SAMPLE_RATE):int((p.start_s + 0.03) * SAMPLE_RATE)]
    assert np.abs(silent).max() < 0.01 < np.abs(burst).max()


def test_held_out_split_keeps_sentences_and_voices_apart():
    train = set(itertools.islice(generate_sentences(0), 400))
    assert set(FIXED_SENTENCES) <= train | set(itertools.islice(generate_sentences(0, held_out=True), 400))
    held = set(itertools.islice(generate_sentences(0, held_out=True), 60))
    assert not train & held and all(is_held_out(t) for t in held) and not any(is_held_out(t) for t in train)
    assert len(train) == 400 and any(t in FIXED_SENTENCES for t in train)
    assert not any(is_held_out_voice(v) for v in default_voices(False))
    assert all(is_held_out_voice(v) for v in default_voices(True))
    utterances = list(synthesize_utterances(3, seed=0, held_out=True, voices=["espeak:en-us+f4"]))
    assert all(is_held_out(u.text) for u in utterances)
    with pytest.raises(ValueError, match="'espeak:en-us\\+f4' is a held-out voice"):
        next(synthesize_utterances(1, seed=0, voices=["espeak:en-us+f4"]))
    with pytest.raises(ValueError, match="training voice"):
        next(synthesize_utterances(1, seed=0, voices=["espeak:en-us"], held_out=True))


def test_bad_voice_names_are_refused():
    with pytest.raises(ValueError, match="'en-us'.*espeak:"):
        next(synthesize_utterances(1, seed=0, voices=["en-us"]))
    with pytest.raises(ValueError, match="nowhere"):
        next(synthesize_utterances(1, seed=0, voices=["espeak:nowhere"]))


def test_festival_voices_give_segment_timed_utterances():
    assert shutil.which("festival"), "make test installs festival and its voices; the corpus trains on them"
    voices = ["festival:kal_diphone", "festival:cmu_us_slt_arctic_hts"]
    utterances = list(synthesize_utterances(4, seed=1, voices=voices))
    assert {u.voice for u in utterances} == set(voices)
    for utterance in utterances:
        _check_utterance(utterance, "segment")
        assert sum(p.symbol in ("p", "b", "m") for p in utterance.phonemes) >= 1
    held = next(synthesize_utterances(1, seed=1, voices=["festival:ked_diphone"], held_out=True))
    _check_utterance(held, "segment")


def test_augment_keeps_length_and_finiteness_and_changes_audio():
    audio = next(synthesize_utterances(1, seed=0, voices=["espeak:en-us"])).audio
    changed = 0
    for seed in range(40):
        out = augment(audio, np.random.default_rng(seed))
        assert out.shape == audio.shape and out.dtype == np.float32
        assert np.isfinite(out).all() and np.abs(out).max() <= 1.0
        changed += not np.allclose(out, audio, atol=1e-4)
    assert changed == 40
    assert np.array_equal(augment(audio, np.random.default_rng(5)), augment(audio, np.random.default_rng(5)))
    assert augment(np.zeros(0, np.float32), np.random.default_rng(0)).shape == (0,)


def test_telephone_band_keeps_length_and_only_300_to_3400_hz():
    audio = next(synthesize_utterances(1, seed=0, voices=["espeak:en-us"])).audio
    for mu_law in (False, True):
        line = telephone_band(audio, SAMPLE_RATE, mu_law=mu_law)
        assert line.shape == audio.shape and np.isfinite(line).all()
        power = np.abs(np.fft.rfft(line)) ** 2
        freqs = np.fft.rfftfreq(len(line), 1 / SAMPLE_RATE)
        inside = power[(freqs > 400) & (freqs < 3300)].sum()
        assert power[freqs > 3600].sum() < 1e-3 * inside and power[freqs < 200].sum() < 1e-2 * inside
    plain, coded = telephone_band(audio, mu_law=False), telephone_band(audio, mu_law=True)
    assert 0 < np.mean((plain - coded) ** 2) < 1e-3 * np.mean(plain ** 2)
