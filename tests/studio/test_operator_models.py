"""Cue list and hotkey map: what plays and what is next; keys never bound twice."""

from __future__ import annotations

import numpy as np
import pytest

from studio.cues import CueList, remaining_clip
from studio.hotkeys import HotkeyMap, normalise_key
from studio.presets import PresetError
from studio.speech.espeak import Phoneme, SpeechClip


def test_cue_list_tracks_playing_and_next():
    cues, ticks = CueList(["One.", "Two.", "Three."]), []
    cues.changed.connect(lambda: ticks.append((cues.playing, cues.next_index)))
    assert cues.start() == "One." and (cues.playing, cues.next_index) == (0, 1)
    cues.finish()
    assert cues.start(2) == "Three." and cues.next_index is None and cues.ended
    assert ticks == [(0, 1), (None, 1), (2, None)]


def test_next_at_the_end_of_the_cue_list_wraps_or_says_the_list_ended():
    cues = CueList(["One.", "Two."])
    cues.start(1)
    assert cues.ended and cues.start() == "One." and (cues.playing, cues.next_index) == (0, 1)
    cues.start(1)
    cues.set_wrap(False)
    with pytest.raises(PresetError, match="the cue list has ended .all 2 cues spoken.: turn on Wrap around"):
        cues.start()
    with pytest.raises(PresetError, match="the cue list is empty"):
        CueList([]).start()


@pytest.mark.parametrize(("line", "why"), [("", "it is empty"), ("   ", "it is empty"),
                                           ("x" * 10000, "has 10000 characters; allowed 1..500")])
def test_unspeakable_cue_lines_are_refused_naming_the_cue(line, why):
    with pytest.raises(PresetError, match=f"cue 2: .*{why}"):
        CueList(["Fine.", line])


def test_hotkeys_refuse_a_key_already_bound():
    keys = HotkeyMap({"smile": "1", "frown": "2"}, reserved={"H": "Frame Head"})
    assert keys.key_for("neutral") == "0" and keys.action_for("1") == "smile"
    with pytest.raises(PresetError, match="already bound to 'smile'"):
        keys.bind("frown", "1")
    with pytest.raises(PresetError, match="already bound to 'neutral'"):
        keys.bind("frown", "0")
    with pytest.raises(PresetError, match="taken by the window"):
        keys.bind("frown", "h")
    keys.bind("frown", "ctrl+2")
    assert keys.expression_bindings() == {"smile": "1", "frown": "Ctrl+2"}
    with pytest.raises(PresetError, match="not allowed"):
        normalise_key("Hyper+F99")


def test_remaining_clip_shifts_the_phonemes():
    clip = SpeechClip(np.arange(22050, dtype=np.float32), 22050, (Phoneme("h", 0.0, 0.4), Phoneme("@", 0.4, 1.0)), "hi")
    rest = remaining_clip(clip, 0.5)
    assert len(rest.audio) == 22050 - 11025 and rest.phonemes == (Phoneme("@", 0.0, 0.5),)


def test_cost_table_round_trips_and_names_the_module_to_lower(tmp_path):
    from studio.costs import load_cost_table, module_to_lower, save_cost_table, verdict
    from studio.presets import Modules, Preset

    table = {"face": {"high": 1.2, "medium": 0.5, "low": 0.4}, "hands": {"high": 0.3, "medium": 0.2, "low": 0.1},
             "body": {"high": 0.9, "medium": 0.6, "low": 0.3}, "cloth": {"high": 0.2, "medium": 0.1, "low": 0.1}}
    path = save_cost_table(table, tmp_path / "costs.json")
    assert load_cost_table(path) == table
    modules = Modules(face="high", hands="medium", body="medium", cloth="low")
    assert module_to_lower(table, modules) == ("face", "medium", pytest.approx(0.7))
    preset = Preset(name="p", modules=modules)
    ok, line = verdict(table, preset, 80.0)
    assert not ok and "lower face to medium" in line and "80.0 ms > 50 ms" in line
    assert verdict(table, preset, 20.0)[0]
    (tmp_path / "bad.json").write_text("{")
    assert load_cost_table(tmp_path / "bad.json") is None


def test_each_module_level_is_measured():
    from studio.costs import MODULES, measure_module_costs

    table = measure_module_costs(seconds=0.5, rounds=1)
    assert set(table) == set(MODULES) and all(set(row) == {"high", "medium", "low"} for row in table.values())
    assert all(cost > 0 for row in table.values() for cost in row.values())


def test_hotkeys_a_persona_brings_that_the_window_uses_are_left_unbound_and_said_why():
    keys = HotkeyMap({"smile": "Ctrl+1", "frown": "2", "wink": "2"}, reserved={"Ctrl+1": "Operate"})
    assert keys.expression_bindings() == {"frown": "2"}
    assert keys.refused == {"smile": "hotkey Ctrl+1 is taken by the window (Operate); choose another",
                            "wink": "hotkey 2 is already bound to 'frown'; unbind it first or choose another"}
    with pytest.raises(PresetError, match="taken by the window"):
        keys.set_bindings({"smile": "Ctrl+1"})
    assert keys.expression_bindings() == {"frown": "2"}
