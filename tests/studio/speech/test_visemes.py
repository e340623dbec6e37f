"""Phonemes → visemes → ARKit mouth poses, checked on real espeak output."""

from __future__ import annotations

import numpy as np
import pytest

from studio.avatar.arkit import ARKIT_INDEX, NUM_ARKIT
from studio.speech.espeak import EspeakSynth, Phoneme
from studio.speech.visemes import (
    CLOSURE_LEAD_S,
    VISEME_INDEX,
    VISEME_POSES,
    VISEMES,
    closure_intervals,
    lips_closed,
    mouth_openness,
    phoneme_track,
    phoneme_visemes,
)


@pytest.fixture(scope="module")
def bob_clip():
    return EspeakSynth().synthesize("Bob met Pam. Then he jumped up, mumbling.")


def test_viseme_order_is_ovr():
    assert VISEMES == ("sil", "PP", "FF", "TH", "DD", "kk", "CH", "SS", "nn", "RR", "aa", "E", "ih", "oh", "ou")


def test_viseme_poses_are_valid_arkit_rows():
    for name, pose in VISEME_POSES.items():
        assert pose.shape == (NUM_ARKIT,) and pose.min() >= 0 and pose.max() <= 1, name
        assert pose[ARKIT_INDEX["mouthClose"]] <= pose[ARKIT_INDEX["jawOpen"]], name
    assert not VISEME_POSES["sil"].any()
    assert lips_closed(VISEME_POSES["PP"]) and lips_closed(VISEME_POSES["sil"])
    for name in ("aa", "E", "ih", "oh", "ou", "FF", "TH", "DD", "kk", "SS", "CH"):
        assert not lips_closed(VISEME_POSES[name]), name
    assert VISEME_POSES["TH"][ARKIT_INDEX["tongueOut"]] > 0
    assert VISEME_POSES["ou"][ARKIT_INDEX["mouthPucker"]] > VISEME_POSES["aa"][ARKIT_INDEX["mouthPucker"]]
    assert mouth_openness(VISEME_POSES["aa"]) > mouth_openness(VISEME_POSES["E"]) > mouth_openness(VISEME_POSES["ih"])


@pytest.mark.parametrize(("symbol", "visemes"), [
    ("p", ("PP",)), ("b", ("PP",)), ("m", ("PP",)), ("f", ("FF",)), ("T", ("TH",)), ("D", ("TH",)),
    ("t", ("DD",)), ("k", ("kk",)), ("tS", ("CH",)), ("S", ("CH",)), ("s", ("SS",)), ("n", ("nn",)),
    ("l", ("nn",)), ("r", ("RR",)), ("'a", ("aa",)), ("'E", ("E",)), ("I", ("ih",)), ("'O:", ("oh",)),
    ("u:", ("ou",)), ("w", ("ou",)), ("'aI", ("aa", "ih")), ("',oU", ("oh", "ou")), ("_:", ("sil",)),
    ("_", ("sil",)), ("@2", ("E",)), ("I#", ("ih",)), ("'aI2", ("aa", "ih")), ("a#", ("aa",)),
])
def test_espeak_mnemonics_map_to_visemes(symbol, visemes):
    assert phoneme_visemes(symbol) == visemes


def test_every_mnemonic_espeak_emits_for_english_maps_to_a_known_viseme():
    text = ("The quick brown fox jumps over the lazy dog. Thirty thousand feathers; the measure of pleasure. "
            "Which witch wished? Hair, here, sure, poor, tour, bird, father, caught, boy, cure, book, button, bottle.")
    for voice in ("en-us", "en", "en-gb-x-rp", "en-gb-scotland"):
        for phoneme in EspeakSynth(voice).synthesize(text).phonemes:
            assert set(phoneme_visemes(phoneme.symbol)) <= set(VISEMES), phoneme.symbol


def test_bob_met_pam_lips_closed_over_every_closure(bob_clip):
    bilabials = [p for p in bob_clip.phonemes if p.symbol in ("p", "b", "m")]
    assert [p.symbol for p in bilabials][:5] == ["b", "b", "m", "p", "m"]
    track = phoneme_track(bob_clip.phonemes, bob_clip.duration_s)
    assert track.arkit.shape == (track.num_frames, NUM_ARKIT) and track.arkit.dtype == np.float32
    assert track.num_frames == int(np.ceil(bob_clip.duration_s * 100))
    intervals = closure_intervals(bob_clip.phonemes)
    checked = 0
    for start, end in intervals:
        frames = np.flatnonzero((track.times_s >= start) & (track.times_s < end))
        assert len(frames) > 0
        assert lips_closed(track.arkit[frames]).all(), (start, end, mouth_openness(track.arkit[frames]))
        assert (track.viseme[frames] == VISEME_INDEX["PP"]).all()
        checked += len(frames)
    assert checked >= 30
    # the mouth opens for the vowels in between
    vowel = next(p for p in bob_clip.phonemes if p.symbol == "'a")
    middle = int(round((vowel.start_s + vowel.end_s) / 2 * track.fps))
    assert mouth_openness(track.arkit[middle]) > 0.3


def test_p_closure_starts_before_the_espeak_event(bob_clip):
    p = next(ph for ph in bob_clip.phonemes if ph.symbol == "p")
    start, end = next(span for span in closure_intervals(bob_clip.phonemes) if span[0] <= p.start_s < span[1])
    assert start == pytest.approx(p.start_s - CLOSURE_LEAD_S["p"])
    track = phoneme_track(bob_clip.phonemes, bob_clip.duration_s)
    before_event = int(np.ceil((p.start_s - 0.03) * track.fps))
    assert lips_closed(track.arkit[before_event])


def test_silence_far_from_speech_is_at_rest(bob_clip):
    track = phoneme_track(bob_clip.phonemes, bob_clip.duration_s + 0.5)
    last_end = max(p.end_s for p in bob_clip.phonemes)
    tail = track.times_s > last_end + 0.1
    assert tail.sum() >= 30
    assert not track.arkit[tail].any() and (track.viseme[tail] == VISEME_INDEX["sil"]).all()
    assert not track.voice_active[tail].any()
    pause = next(p for p in bob_clip.phonemes if p.symbol == "_:" and p.end_s - p.start_s > 0.25)
    inner = (track.times_s > pause.start_s + 0.1) & (track.times_s < pause.end_s - 0.1)
    assert inner.any() and not track.arkit[inner].any()
    speaking = track.voice_active > 0
    assert speaking.mean() > 0.5 and track.arkit[speaking].any(axis=1).mean() > 0.9


def test_track_is_smooth_enough_to_render(bob_clip):
    track = phoneme_track(bob_clip.phonemes, bob_clip.duration_s)
    largest_step = np.abs(np.diff(mouth_openness(track.arkit))).max()
    assert largest_step < 0.25


def test_segment_timing_closes_whole_segment_minus_release():
    phonemes = [Phoneme("a", 0.0, 0.2), Phoneme("m", 0.2, 0.3), Phoneme("a", 0.3, 0.5)]
    assert closure_intervals(phonemes, timing="segment") == [(0.2, pytest.approx(0.28))]
    track = phoneme_track(phonemes, 0.5, timing="segment")
    assert lips_closed(track.arkit[21:28]).all() and not lips_closed(track.arkit[40])


def test_fps_sets_the_frame_grid_and_bad_arguments_are_named():
    phonemes = [Phoneme("'a", 0.1, 0.3)]
    track = phoneme_track(phonemes, 0.5, fps=30.0)
    assert track.num_frames == 15 and track.fps == 30.0
    assert (track.viseme[3:9] == VISEME_INDEX["aa"]).all() and track.voice_active[3:9].all()
    with pytest.raises(ValueError, match="timing"):
        closure_intervals(phonemes, timing="praat")
    with pytest.raises(ValueError, match="fps"):
        phoneme_track(phonemes, 0.5, fps=0)
    with pytest.raises(ValueError, match="duration_s"):
        phoneme_track(phonemes, float("nan"))


def test_openness_helpers_work_on_rows_and_batches():
    batch = np.stack([VISEME_POSES["PP"], VISEME_POSES["aa"]])
    assert isinstance(lips_closed(batch[0]), bool) and isinstance(mouth_openness(batch[1]), float)
    assert lips_closed(batch).tolist() == [True, False]
    assert mouth_openness(batch).shape == (2,)
