"""Piper's joe voice as a training source: IPA grouped into espeak mnemonics, timing that tiles the audio."""

from __future__ import annotations

import numpy as np
import pytest

from assets.model import piper_voice
from assets.model.corpus import synthesize_utterances
from assets.model.piper_voice import PiperError, group_phonemes
from studio.speech.visemes import VISEME_INDEX, closure_intervals


def test_diphthongs_affricates_and_long_vowels_become_one_mnemonic_each():
    aligned = [("^", 100), ("b", 10), ("ˈ", 5), ("a", 20), ("ɪ", 30), (" ", 8), ("tʃ"[0], 4), ("tʃ"[1], 6),
               ("ɑ", 12), ("ː", 3), ("$", 50)]
    assert group_phonemes(aligned) == [("_", 100), ("b", 10), ("aI", 5 + 20 + 30 + 4), ("tS", 4 + 10),
                                       ("A:", 15), ("_", 50)]


def test_a_stress_mark_gives_its_samples_to_the_next_sound_and_a_length_mark_to_the_one_before():
    assert group_phonemes([("m", 10), ("ˈ", 7), ("i", 20), ("ː", 9)]) == [("m", 10), ("i:", 36)]
    assert group_phonemes([("n", 10), ("ʲ", 3), ("u", 20)]) == [("n", 13), ("u:", 20)]


def test_word_gaps_are_split_and_punctuation_is_a_pause():
    assert group_phonemes([("m", 10), (" ", 9), ("p", 10), (",", 40), (" ", 6), ("w", 10)]) == [
        ("m", 14), ("p", 15), ("_", 46), ("w", 10)]
    assert group_phonemes([("^", 10), (" ", 4), ("m", 10), (" ", 6), (".", 20), (" ", 3), ("$", 5)]) == [
        ("_", 14), ("m", 10), ("_", 34)]


def test_an_unknown_phoneme_fails_qc_by_name():
    with pytest.raises(PiperError, match="U\\+0298"):
        group_phonemes([("ʘ", 10)])


def test_joe_speaks_with_phonemes_that_tile_the_audio_and_quiet_bilabial_closures():
    audio, rate, phonemes = piper_voice.synthesize("Bob met Pam by the maple tree.", "joe", varied=False)
    assert rate == 22050 and audio.dtype == np.float32 and np.isfinite(audio).all()
    assert phonemes[0].start_s == 0.0 and phonemes[-1].end_s == pytest.approx(len(audio) / rate, abs=1e-9)
    assert all(a.end_s == pytest.approx(b.start_s) for a, b in zip(phonemes[:-1], phonemes[1:]))
    assert [p.symbol for p in phonemes if p.symbol in ("p", "b", "m")] == ["b", "b", "m", "p", "m", "b", "m", "p"]
    hop = rate // 100
    level = 10 * np.log10(np.convolve(audio ** 2, np.ones(hop) / hop, "same") + 1e-10)
    vowel = np.percentile(np.concatenate([level[int(p.start_s * rate):int(p.end_s * rate)] for p in phonemes
                                           if p.symbol in ("A:", "E", "a", "aI", "eI", "i:")]), 75)
    for phoneme in phonemes:
        if phoneme.symbol in ("p", "b", "m"):
            (start, end), = closure_intervals([phoneme], timing="segment")
            closure = np.median(level[int(start * rate):int(end * rate)])
            assert closure < vowel - (20.0 if phoneme.symbol == "p" else 3.0), (phoneme, closure, vowel)



def test_a_p_closure_ends_at_its_burst():
    audio, rate, phonemes = piper_voice.synthesize("Ursula painted the spectacles and the pepperoni.", "joe",
                                                   varied=False)
    level = piper_voice._level_db(audio, rate, 0.005)
    placed = 0
    for phoneme, following in zip(phonemes[:-1], phonemes[1:]):
        if phoneme.symbol == "p" and following.symbol in ("eI", "E"):
            (start, end), = closure_intervals([phoneme], timing="segment")
            shut = level[int(start / 0.005):int(end / 0.005)]
            after = level[int(end / 0.005):int(end / 0.005) + 4]  # the 20 ms after the lips part
            assert after.max() > np.median(shut) + 20.0, (phoneme, shut, after)
            placed += 1
    assert placed == 3


def test_the_corpus_gives_piper_utterances_segment_timing_and_refuses_unknown_piper_voices():
    utterance = next(synthesize_utterances(1, seed=3, voices=["piper:joe"]))
    assert utterance.voice in ("piper:joe", "espeak:en-us") and utterance.sample_rate == 16000
    if utterance.voice == "piper:joe":
        assert utterance.timing == "segment"
    assert len(utterance.targets.arkit) == int(np.ceil(utterance.duration_s * 100 - 1e-9))
    assert (utterance.targets.viseme != VISEME_INDEX["sil"]).any()
    with pytest.raises(ValueError, match="piper voices are joe"):
        next(synthesize_utterances(1, seed=3, voices=["piper:amy"]))
