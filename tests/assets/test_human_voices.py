"""Training speech from real people in other languages: spelled in US phones, aligned, never an English voice."""

from __future__ import annotations

import wave

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


def test_no_english_voice_of_the_dev_sets_packages_is_trained_on_so_the_dev_set_stays_unheard():
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


def test_the_russian_readers_sentences_come_timed_by_the_voices_own_labels():
    clips, dropped = human_voices.labelled_clips()
    assert (len(clips), dropped) == (620, 0)
    first = clips[0]
    assert first.speaker == "festvox/ru/nsh" and first.text.startswith("Корреспондент, американской газеты")
    assert [phone for phone, _, _ in first.phones[:4]] == ["SIL", "K", "AH", "R"]
    assert first.phones[1][1:] == (0.342, 0.392)
    assert abs(first.phones[-1][2] - len(first.audio) / 16000) < 0.05
    spoken = {phone for clip in clips for phone, _, _ in clip.phones}
    assert {"P", "B", "M", "UW", "OW", "V", "F"} <= spoken


def test_training_on_every_source_takes_the_read_sentences_without_aligning_them(monkeypatch):
    monkeypatch.setattr(human_voices, "recordings", lambda: [])
    monkeypatch.setattr(human_voices, "_game_recordings", lambda folder, log: [])
    clips, summary = human_voices.load_clips(log=lambda *_: None, workers=1)
    assert len(clips) == summary["clips"] == summary["recordings"] == 620
    assert summary["speakers"] == [human_voices.LABELLED_SPEAKER] and summary["qc_dropped"] == 0


def _festival_voice(root, labels: dict[str, str], seconds: float = 1.0):
    (root / "etc").mkdir(parents=True)
    (root / "lab").mkdir()
    (root / "wav").mkdir()
    (root / "etc" / "txt.done.data").write_text(
        "".join(f'( {name} "{name} words" )\n' for name in labels), encoding="utf-8")
    for name, label in labels.items():
        (root / "lab" / f"{name}.lab").write_text(label, encoding="utf-8")
        with wave.open(str(root / "wav" / f"{name}.wav"), "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(16000)
            out.writeframes(np.zeros(int(seconds * 16000), np.int16).tobytes())


def test_soft_consonants_keep_their_lips_and_an_affricate_is_split_in_half(tmp_path):
    _festival_voice(tmp_path, {"ru_1": "#\n0.2 125 pau\n0.3 125 mm\n0.5 125 c\n0.6 125 oo\n1.0 125 pau\n"})
    (clip,), dropped = human_voices.labelled_clips(tmp_path)
    assert dropped == 0 and clip.text == "ru_1 words"
    assert [(name, round(start, 3), round(end, 3)) for name, start, end in clip.phones] == [
        ("SIL", 0.0, 0.2), ("M", 0.2, 0.3), ("T", 0.3, 0.4), ("S", 0.4, 0.5), ("OW", 0.5, 0.6), ("SIL", 0.6, 1.0)]


def test_a_recording_whose_labels_cannot_be_trusted_is_dropped(tmp_path):
    _festival_voice(tmp_path, {
        "unknown_phone": "#\n0.5 125 pau\n1.0 125 qq\n",
        "out_of_order": "#\n0.5 125 pau\n0.4 125 m\n1.0 125 pau\n",
        "too_short": "#\n0.5 125 pau\n0.7 125 m\n",
        "no_header": "0.5 125 pau\n1.0 125 m\n",
        "missing": "#\n1.0 125 pau\n",
        "good": "#\n0.5 125 pau\n1.0 125 b\n",
    })
    (tmp_path / "lab" / "missing.lab").unlink()
    clips, dropped = human_voices.labelled_clips(tmp_path)
    assert [clip.path.stem for clip in clips] == ["good"] and dropped == 5


def test_a_french_description_aligns_into_the_phones_espeak_spells():
    item = next(r for r in human_voices.recordings() if r[1].name == "penguin_desc_fr.ogg")
    clips, unspelled, dropped = human_voices.align_all([item])
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
    record: dict = {}
    examples = human_voices.training_examples(1, seed=0, items=items, log=lambda *_: None, record=record)
    assert len(examples) >= 2 and len(examples) % 2 == 0
    assert record["recordings"] == 6 and record["clips_by_speaker"] == {"tuxpaint/fr": record["clips"]}
    assert record["steel_sky_lines"] == [], "what the corpus cache records: no game line went in"
    for clean, degraded in zip(examples[::2], examples[1::2]):
        assert clean.audio is None and degraded.audio is None  # the corpus keeps features only
        assert clean.features.shape == degraded.features.shape and len(clean.features) == len(clean.viseme)
        assert np.array_equal(clean.viseme, degraded.viseme) and not np.allclose(clean.features, degraded.features)
    visemes = np.concatenate([e.viseme for e in examples])
    assert (visemes == VISEMES.index("PP")).any() and (visemes != VISEMES.index("sil")).mean() > 0.3
