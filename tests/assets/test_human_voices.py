"""Training speech from real people in other languages: spelled in US phones, aligned, never an English voice."""

from __future__ import annotations

import numpy as np

from assets.model import human_voices
from assets.model.human_dev import DevClip


def test_lips_keep_their_shape_when_a_language_is_spelled_in_us_phones():
    assert human_voices.cmu_phones(["b", "'o", "n", "_:"], "fr") == ["B", "OW", "N"]
    assert human_voices.cmu_phones(["l", "y", "n"], "fr") == ["L", "UW", "N"]  # French "lune": rounded
    assert human_voices.cmu_phones(["m", "y", "S"], "ru") == ["M", "IH", "SH"]  # Russian "мышь": spread
    assert human_voices.cmu_phones(["?y", "W"], "da") == ["UW", "OW"]  # stød dropped, ø stays rounded
    assert human_voices.cmu_phones(["m;", "a", "s."], "be") == ["M", "AA", "S"]  # palatal, retroflex marks


def test_dutch_and_czech_sounds_keep_what_the_lips_do():
    assert human_voices.cmu_phones(["v#", "'A", "t"], "nl") == ["V", "AA", "T"]  # "wat": lip to teeth, not rounded
    assert human_voices.cmu_phones(["b", "l", "'EI", "f"], "nl") == ["B", "L", "EY", "F"]  # "blijf"
    assert human_voices.cmu_phones(["s", "l", "'Y:", "t", "@", "l"], "nl")[2] == "OW"  # "sleutel": rounded
    assert human_voices.cmu_phones(["d", "'r-", "Z", "e", "t"], "cs") == ["D", "ER", "ZH", "EH", "T"]  # "držet"


def test_a_word_with_a_sound_it_cannot_spell_faithfully_is_dropped():
    assert human_voices.cmu_phones(["p", "a", "B", "o"], "es") is None  # /β/: lips neither shut nor open
    assert human_voices.cmu_phones(["p", "a", "\u00a7"], "es") is None  # a mnemonic nobody mapped


def test_no_english_voice_is_trained_on_so_the_dev_set_stays_unheard():
    recordings = human_voices.recordings()
    speakers = {speaker for speaker, _, _ in recordings}
    assert {"tuxpaint/fr", "tuxpaint/ru", "klettres/de"} <= speakers
    assert not any(speaker.split("/")[1].startswith("en") for speaker in speakers)
    assert all(text.strip() for _, _, text in recordings)
    penguin = [text for speaker, path, text in recordings
               if speaker == "tuxpaint/fr" and path.name == "penguin_desc_fr.ogg"]
    assert penguin == ["Un pingouin."]


def test_fish_fillets_lines_are_read_in_the_language_they_are_spoken_in():
    lines = {(speaker, path.name): text for speaker, path, text in human_voices.recordings()
             if speaker.startswith("fillets/")}
    assert lines[("fillets/nl/small", "vit-m-hlava.ogg")] == "Ik krijg hoofdpijn van dat hoofd."
    assert lines[("fillets/cs/small", "vit-m-hlava.ogg")] == "Už mě z té hlavy bolí hlava."
    assert {"fillets/cs/small", "fillets/cs/big", "fillets/nl/small", "fillets/nl/big"} <= {s for s, _ in lines}
    assert len(lines) > 3000


def test_a_level_whose_dialogue_has_no_recording_gives_no_line(tmp_path):
    (tmp_path / "script" / "shore").mkdir(parents=True)
    (tmp_path / "sound" / "shore" / "cs").mkdir(parents=True)
    (tmp_path / "script" / "shore" / "dialogs_cs.lua").write_text(
        'dialogId("sh-m-voda", "font_small", "Water.")\ndialogStr("Voda.")\n\n'
        'dialogId("sh-v-nic", "font_big", "Nothing.")\ndialogStr("Nic.")\n', encoding="utf-8")
    (tmp_path / "sound" / "shore" / "cs" / "sh-m-voda.ogg").write_bytes(b"")
    assert human_voices._fillets_recordings(tmp_path) == [
        ("fillets/cs/small", tmp_path / "sound" / "shore" / "cs" / "sh-m-voda.ogg", "Voda.")]


def test_a_french_description_aligns_into_the_phones_espeak_spells():
    item = next(r for r in human_voices.recordings() if r[1].name == "penguin_desc_fr.ogg")
    clips, unspelled, dropped = human_voices._align_all([item])
    assert (len(clips), unspelled, dropped) == (1, 0, 0)
    speech = [phone for phone, _, _ in clips[0].phones if phone != "SIL"]
    assert speech[-5:] == ["P", "EH", "G", "W", "EH"]  # "pingouin", its nasal vowels spread


def test_joined_clips_keep_each_phone_on_its_own_audio():
    seconds = {"M": 1.0, "B": 1.5, "P": 2.0, "W": 0.5}

    def clip(speaker: str, phone: str) -> DevClip:
        audio = np.zeros(int(seconds[phone] * 16000), np.float32)
        return DevClip(None, speaker, phone, audio, ((phone, 0.1, seconds[phone] - 0.1),))

    clips = [clip("a", "M"), clip("a", "B"), clip("a", "P"), clip("b", "W")]
    joined = human_voices.chained(clips, 2.0, np.random.default_rng(0))
    assert sorted(j.speaker for j in joined) == ["a", "a", "b"]
    assert sorted(p for j in joined for p, _, _ in j.phones) == ["B", "M", "P", "W"]
    for j in joined:
        offset = 0.0
        for phone, (name, start, end) in zip(j.text.split(" | "), j.phones):
            assert name == phone and abs(start - (offset + 0.1)) < 1e-9 and abs(end - (offset + seconds[phone] - 0.1)) < 1e-9
            offset += seconds[phone]
        assert len(j.audio) == round(offset * 16000)


def test_training_examples_hold_the_clean_recordings_and_degraded_copies_on_the_same_labels():
    from studio.speech.visemes import VISEMES

    items = [r for r in human_voices.recordings() if r[0] == "tuxpaint/fr"][:6]
    examples = human_voices.training_examples(1, seed=0, items=items, log=lambda *_: None)
    assert len(examples) >= 2 and len(examples) % 2 == 0
    for clean, degraded in zip(examples[::2], examples[1::2]):
        assert clean.audio is None and degraded.audio is None  # the corpus keeps features only
        assert clean.features.shape == degraded.features.shape and len(clean.features) == len(clean.viseme)
        assert np.array_equal(clean.viseme, degraded.viseme) and not np.allclose(clean.features, degraded.features)
    visemes = np.concatenate([e.viseme for e in examples])
    assert (visemes == VISEMES.index("PP")).any() and (visemes != VISEMES.index("sil")).mean() > 0.3
