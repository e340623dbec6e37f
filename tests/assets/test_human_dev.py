"""The human dev set: real recordings from Debian packages, force-aligned, QC'd, never trained on."""

from __future__ import annotations

import numpy as np
from pocketsphinx import Decoder

from assets.model import human_dev


def _recording(name: str):
    return next(r for r in human_dev._recordings() if r[3] == name)


def test_every_package_gives_recordings_with_words_a_dictionary_knows():
    recordings = human_dev._recordings()
    speakers = {speaker for speaker, *_ in recordings}
    assert speakers == {"klettres/en", "klettres/en_GB", "ktuberling/en", "tuxpaint/en"}
    texts = {text for *_, text, _ in recordings}
    assert {"umbrella", "pepperoni", "palm tree", "moon walker", "b", "w", "a penguin", "an hippopotamus"} <= texts
    assert not any(text.startswith(("egypt", "moon_", "pizzeria", "tv_")) for text in texts)


def test_a_stamp_is_heard_saying_the_first_line_of_its_description(tmp_path):
    description = tmp_path / "boar.txt"
    description.write_text("Two wild boars.\nfr.utf8=Deux sangliers.\n", encoding="utf-8")
    assert human_dev._stamp_words(description) == "two wild boars"
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    assert human_dev._stamp_words(tmp_path / "empty.txt") is None
    assert human_dev._stamp_words(tmp_path / "missing.txt") is None
    tuxpaint = [r for r in human_dev._recordings() if r[0] == "tuxpaint/en"]
    assert tuxpaint and all(path.name.endswith("_desc.ogg") for _, path, _, _ in tuxpaint)  # no translations


def test_a_word_aligns_into_its_phones_inside_the_audible_region():
    decoder = Decoder(samprate=human_dev.SAMPLE_RATE, loglevel="FATAL")
    _, path, text, _ = _recording("ktuberling/en/umbrella.ogg")
    audio = human_dev.decode(path)
    phones = human_dev.align(decoder, audio, text)
    assert phones is not None
    speech = [p for p in phones if p[0] != "SIL"]
    assert [p[0] for p in speech] == ["AH", "M", "B", "R", "EH", "L", "AH"]
    start, end = human_dev._audible(audio)
    assert start - 0.1 <= speech[0][1] and speech[-1][2] <= end + 0.1


def _spoken(text: str) -> np.ndarray:
    """espeak-ng saying `text` at 16 kHz, between quarter-second pauses with a quiet room's noise floor in them."""
    from assets.model.corpus import resample
    from studio.speech.espeak import EspeakSynth

    clip = EspeakSynth("en-us").synthesize(text)
    speech = resample(np.asarray(clip.audio, np.float32).reshape(-1), clip.sample_rate, human_dev.SAMPLE_RATE)
    pause = np.zeros(human_dev.SAMPLE_RATE // 4, np.float32)
    audio = np.concatenate([pause, speech, pause])
    return audio + np.random.default_rng(0).normal(0.0, 1e-3, len(audio)).astype(np.float32)


def test_a_description_is_aligned_with_its_article_only_when_the_article_is_spoken():
    decoder = Decoder(samprate=human_dev.SAMPLE_RATE, loglevel="FATAL")
    for noun in ("penguin", "dog"):
        assert human_dev.heard_words(decoder, _spoken(f"a {noun}"), f"a {noun}") == f"a {noun}"
        assert human_dev.heard_words(decoder, _spoken(noun), f"a {noun}") == noun
    assert human_dev.heard_words(decoder, _spoken("umbrella"), "umbrella") == "umbrella"
    assert human_dev.heard_words(decoder, _spoken("a"), "a") == "a"  # the letter A is a word, not an article


def test_a_stamp_read_without_its_article_keeps_its_first_stop_at_the_release():
    decoder = Decoder(samprate=human_dev.SAMPLE_RATE, loglevel="FATAL")
    speaker, path, text, _ = _recording("tuxpaint/en/animals/mammals/pig_desc.ogg")
    assert text == "a pig"
    forced = human_dev.aligned_clip(decoder, speaker, path, text, text)
    listener = Decoder(samprate=human_dev.SAMPLE_RATE, loglevel="FATAL")
    heard = human_dev.aligned_clip(decoder, speaker, path, text, text, listener=listener)
    assert forced.text == "a pig" and heard.text == "pig"
    release = 0.065  # the burst: the only broadband stripe before the voicing, 55-75 ms into the file
    forced_p, heard_p = (next(p for p in clip.phones if p[0] == "P") for clip in (forced, heard))
    assert forced_p[1] > release + 0.03  # forced to say "a", the aligner starts /p/ after the lips have parted
    assert heard_p[1] < release < heard_p[2]


def test_qc_rejects_an_alignment_of_the_wrong_words():
    decoder = Decoder(samprate=human_dev.SAMPLE_RATE, loglevel="FATAL")
    _, path, _, _ = _recording("ktuberling/en/umbrella.ogg")
    audio = human_dev.decode(path)
    silence_then_word = np.concatenate([np.zeros(human_dev.SAMPLE_RATE * 3, np.float32), audio])
    assert human_dev.align(decoder, silence_then_word, "pepperoni pineapple salami tomato") is None


def test_qc_rejects_an_alignment_that_gives_up_before_the_last_word():
    _, path, text, _ = _recording("tuxpaint/en/animals/insects/bee_desc.ogg")
    assert text == "a bee"
    audio = human_dev.decode(path)
    search = Decoder(samprate=human_dev.SAMPLE_RATE, loglevel="FATAL")
    search.set_align_text(text)
    search.start_utt()
    search.process_raw((audio * 32767).astype(np.int16).tobytes(), full_utt=True)
    search.end_utt()
    assert search.hyp().hypstr == "a"  # a fresh search never reaches "bee": its /b/ would be labelled silence
    assert human_dev.align(Decoder(samprate=human_dev.SAMPLE_RATE, loglevel="FATAL"), audio, text) is None


def test_the_breakdown_names_each_closure_by_its_phone_and_speaker():
    from assets.model.evaluate import ShapedModel, human_breakdown
    from studio.engine.face_model import FaceModel

    decoder = Decoder(samprate=human_dev.SAMPLE_RATE, loglevel="FATAL")
    speaker, path, text, _ = _recording("ktuberling/en/pizzeria_pepperoni.ogg")
    audio = human_dev.decode(path)
    clip = human_dev.DevClip(path, speaker, text, audio, human_dev.align(decoder, audio, text))
    model = ShapedModel(FaceModel("fp32"), centred=False)
    breakdown = human_breakdown(model, [clip], human_dev.to_examples([clip]))
    assert set(breakdown) == {"closure P", "closure ktuberling/en", "rounding OW", "rounding ktuberling/en",
                              "rounding UW+OW+W"}
    assert breakdown["closure P"] == breakdown["closure ktuberling/en"] and breakdown["closure P"].endswith("/2")
    assert breakdown["rounding OW"] == breakdown["rounding ktuberling/en"] and breakdown["rounding OW"].endswith("/1")
    assert breakdown["rounding UW+OW+W"] == breakdown["rounding OW"]


def test_the_dev_set_can_be_heard_through_a_hotter_microphone_and_in_a_noisy_room():
    decoder = Decoder(samprate=human_dev.SAMPLE_RATE, loglevel="FATAL")
    speaker, path, text, _ = _recording("ktuberling/en/umbrella.ogg")
    audio = human_dev.decode(path)
    clip = human_dev.DevClip(path, speaker, text, audio, human_dev.align(decoder, audio, text))
    recorded, hotter, noisy = (human_dev.to_examples([clip], **room)[0]
                               for room in ({}, {"gain_db": 20.0}, {"snr_db": 10.0}))
    loud = np.abs(recorded.audio) * 10 >= 1.0
    assert loud.any() and np.all(np.abs(hotter.audio[loud]) == 1.0)  # clipped at full scale
    np.testing.assert_allclose(hotter.audio[~loud], recorded.audio[~loud] * 10, rtol=1e-5, atol=1e-7)
    hops = np.arange(len(audio)) // (human_dev.SAMPLE_RATE // 100)
    pause = (recorded.voice_active < 0.5)[np.minimum(hops, len(recorded.voice_active) - 1)]
    rise_db = 10 * np.log10(np.mean(noisy.audio[pause] ** 2) / np.mean(recorded.audio[pause] ** 2))
    assert rise_db > 6  # the room fills the pauses
    assert np.array_equal(human_dev.to_examples([clip], snr_db=10.0)[0].audio, noisy.audio)  # the same room each run
    assert np.array_equal(noisy.viseme, recorded.viseme)  # the labels stay the clip's
