"""Real libespeak-ng through ctypes: audio, phoneme timing and input validation."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from studio.speech.espeak import EspeakSynth, SpeechError, benchmark_tts, variants, voices
from studio.speech.visemes import base_symbol, is_pause


def test_bob_met_pam_has_bilabials_in_order_and_audible_audio():
    clip = EspeakSynth().synthesize("Bob met Pam")
    symbols = [base_symbol(p.symbol) for p in clip.phonemes]
    assert [s for s in symbols if s in ("b", "m", "p")] == ["b", "b", "m", "p", "m"]
    starts = [p.start_s for p in clip.phonemes]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    assert all(p.end_s > p.start_s for p in clip.phonemes)
    assert clip.phonemes[-1].end_s <= clip.duration_s + 1e-9
    assert clip.audio.dtype == np.float32 and clip.audio.ndim == 1
    assert 0.05 < np.abs(clip.audio).max() <= 1.0
    assert clip.sample_rate == 22050
    assert 0.5 < clip.duration_s < 2.0


def test_p_closure_is_silent_before_its_event():
    """espeak's /p/ event marks the release: the 40 ms before it are silent closure."""
    clip = EspeakSynth().synthesize("Bob met Pam")
    p = next(ph for ph in clip.phonemes if ph.symbol == "p")
    rate = clip.sample_rate
    closure = clip.audio[int((p.start_s - 0.035) * rate):int(p.start_s * rate)]
    release = clip.audio[int(p.start_s * rate):int((p.start_s + 0.03) * rate)]
    assert np.abs(closure).max() < 0.01 < np.abs(release).max()


def test_synthesis_repeats_within_a_pitch_period_and_voice_changes_audio():
    first = EspeakSynth().synthesize("Hello there")
    again = EspeakSynth().synthesize("Hello there")
    other = EspeakSynth("en-us+f3", rate_wpm=220, pitch=70).synthesize("Hello there")
    assert [p.symbol for p in first.phonemes] == [p.symbol for p in again.phonemes]
    assert max(abs(a.start_s - b.start_s) for a, b in zip(first.phonemes, again.phonemes)) < 0.015
    assert other.duration_s < first.duration_s  # faster rate
    assert not np.array_equal(first.audio[:1000], other.audio[:1000])


def test_pause_between_sentences_is_a_pause_phoneme():
    clip = EspeakSynth().synthesize("Stop. Go.")
    pauses = [p for p in clip.phonemes if is_pause(p.symbol) and p.end_s - p.start_s > 0.1]
    assert pauses, [p.symbol for p in clip.phonemes]


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_text_is_rejected(text):
    with pytest.raises(SpeechError, match="empty"):
        EspeakSynth().synthesize(text)


def test_punctuation_only_is_rejected():
    with pytest.raises(SpeechError, match="no letter or digit"):
        EspeakSynth().synthesize("... !?")


def test_text_in_a_script_the_voice_cannot_read_is_rejected_but_its_own_voice_speaks_it():
    with pytest.raises(SpeechError, match="Latin"):
        EspeakSynth("en-us").synthesize("你好世界")
    clip = EspeakSynth("cmn").synthesize("你好世界")
    assert any(not is_pause(p.symbol) for p in clip.phonemes)


def test_unknown_voice_names_it_and_lists_allowed():
    with pytest.raises(SpeechError, match="'xx-nowhere'.*en-us"):
        EspeakSynth("xx-nowhere")
    with pytest.raises(SpeechError, match="'nosuchvariant'.*allowed"):
        EspeakSynth("en-us+nosuchvariant")


@pytest.mark.parametrize(("kwargs", "allowed"), [({"rate_wpm": 40}, "80..450"), ({"rate_wpm": 999}, "80..450"),
                                                 ({"pitch": -1}, "0..100"), ({"pitch": 101}, "0..100")])
def test_rate_and_pitch_out_of_range_say_the_range(kwargs, allowed):
    with pytest.raises(SpeechError, match=allowed):
        EspeakSynth(**kwargs)


def test_voices_and_variants_listed():
    names = voices()
    assert {"en-us", "en-gb-x-rp"} <= set(names)
    assert {"f3", "m1", "croak", "whisper"} <= set(variants())
    assert "en-us+f3" in names and EspeakSynth.voices() == names
    for name in ("en-gb-x-rp", "en+whisper", "en-us+m7"):
        assert EspeakSynth(name).synthesize("a test").duration_s > 0.2


def test_concurrent_synthesis_from_threads_keeps_each_voice_and_text_apart():
    jobs = {"bob": (EspeakSynth("en-us"), "Bob met Pam"), "hello": (EspeakSynth("en-gb-x-rp+f3", 220), "Hello there")}
    expected = {key: [p.symbol for p in synth.synthesize(text).phonemes] for key, (synth, text) in jobs.items()}
    results: list[tuple[str, list[str]]] = []

    def work(key: str) -> None:
        synth, text = jobs[key]
        for _ in range(5):
            results.append((key, [p.symbol for p in synth.synthesize(text).phonemes]))

    threads = [threading.Thread(target=work, args=(key,)) for key in ("bob", "hello", "bob", "hello")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 20 and all(symbols == expected[key] for key, symbols in results)


def test_benchmark_reports_units():
    report = benchmark_tts(repeats=2)
    assert set(report) >= {"tts_synth_ms_per_s_audio", "tts_first_audio_ms", "tts_audio_s"}
    assert report["tts_audio_s"] > 1.0 and report["tts_synth_ms_per_s_audio"] > 0


def test_every_built_in_persona_voice_speaks():
    """'en-gb' is a language of the voice file 'en', not a file name: it must still load (the clinician's voice)."""
    from studio.library import Library
    from studio.presets import Persona

    personas = Library(Persona)
    for name in personas.names():
        voice = personas.load(name).voice
        clip = EspeakSynth(voice.name, voice.rate_wpm, voice.pitch).synthesize("Hello there.")
        assert clip.audio.size > 0, name
