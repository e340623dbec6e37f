"""The expression layer: triggers fade in and out over speech, closures stay closed, caps hold."""

from __future__ import annotations

import numpy as np
import pytest

from studio.avatar.arkit import ARKIT_INDEX, ARKIT_NAMES
from studio.documents import Document
from studio.expressions import REGIONS, ExpressionEditor, ExpressionMixer, default_hotkeys
from studio.presets import NamedExpression, Persona, PresetError
from studio.speech.visemes import VISEME_POSES, lips_closed

SMILE = NamedExpression(weights={"mouthSmileLeft": 0.8, "mouthSmileRight": 0.8, "jawOpen": 0.4,
                                 "mouthUpperUpLeft": 0.5}, fade_in_s=0.2, fade_out_s=0.4)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_regions_hold_the_52_names_once():
    names = [n for _, group in REGIONS for n in group]
    assert sorted(names) == sorted(ARKIT_NAMES)


def test_a_trigger_fades_in_holds_and_fades_out():
    clock = Clock()
    mixer = ExpressionMixer(clock=clock)
    rest = np.zeros(52, np.float32)
    smile = ARKIT_INDEX["mouthSmileLeft"]
    mixer.fire("smile", SMILE)
    assert mixer.apply(rest)[smile] == 0.0 and mixer.name == "smile"
    clock.now += 0.1
    assert mixer.apply(rest)[smile] == pytest.approx(0.4)
    clock.now += 1.0
    assert mixer.apply(rest)[smile] == pytest.approx(0.8)
    mixer.release("smile")
    clock.now += 0.2
    assert mixer.apply(rest)[smile] == pytest.approx(0.4)
    clock.now += 0.3
    assert mixer.apply(rest)[smile] == 0.0 and mixer.active_names() == []


def test_a_trigger_blends_over_speech_and_a_closure_still_closes():
    clock = Clock()
    mixer = ExpressionMixer(clock=clock)
    mixer.fire("smile", SMILE)
    clock.now += 1.0
    closure = VISEME_POSES["PP"].astype(np.float32)
    vowel = VISEME_POSES["aa"].astype(np.float32)
    assert lips_closed(closure)
    out = mixer.apply(closure)
    assert lips_closed(out), "the smile must not hold the lips apart during p/b/m"
    assert out[ARKIT_INDEX["mouthSmileLeft"]] >= 0.8
    assert mixer.apply(vowel)[ARKIT_INDEX["jawOpen"]] == pytest.approx(vowel[ARKIT_INDEX["jawOpen"]])
    at_rest = mixer.apply(np.zeros(52, np.float32))
    assert at_rest[ARKIT_INDEX["jawOpen"]] == pytest.approx(0.4), "between words the expression owns the mouth"


def test_neutral_drops_every_trigger_at_once():
    clock = Clock()
    mixer = ExpressionMixer(clock=clock)
    mixer.fire("smile", SMILE)
    clock.now += 1.0
    mixer.neutral()
    assert not mixer.apply(np.zeros(52, np.float32)).any()


def test_editor_caps_gains_mirror_solo_mute_and_before():
    document = Document(Persona(name="p"))
    mixer = ExpressionMixer()
    editor = ExpressionEditor(document, mixer)
    speech = np.zeros(52, np.float32)
    speech[ARKIT_INDEX["jawOpen"]] = 0.9
    editor.set_gain_cap("jawOpen", cap=0.5)
    assert document.item.style.caps == {"jawOpen": 0.5} and document.dirty
    assert mixer.apply(speech)[ARKIT_INDEX["jawOpen"]] == pytest.approx(0.5)
    editor.set_mirror(True)
    editor.set_weight("browOuterUpLeft", 0.7)
    assert editor.weight("browOuterUpRight") == pytest.approx(0.7)
    editor.set_gain_cap("mouthSmileLeft", gain=2.0)
    assert document.item.style.gains == {"mouthSmileLeft": 2.0, "mouthSmileRight": 2.0}
    editor.set_flag("mute", "browOuterUpLeft", True)
    out = mixer.apply(speech)
    assert out[ARKIT_INDEX["browOuterUpLeft"]] == 0.0 and out[ARKIT_INDEX["browOuterUpRight"]] == 0.0
    editor.set_flag("mute", "browOuterUpLeft", False)
    editor.set_flag("solo", "jawOpen", True)
    out = mixer.apply(speech)
    assert out[ARKIT_INDEX["jawOpen"]] == pytest.approx(0.5) and np.count_nonzero(out) == 1
    editor.set_before(True)
    assert mixer.apply(speech)[ARKIT_INDEX["jawOpen"]] == pytest.approx(0.9), "before: no cap, no solo"


def test_named_expressions_save_into_the_persona_and_load_back():
    document = Document(Persona(name="p"))
    editor = ExpressionEditor(document, ExpressionMixer())
    editor.set_weights({"mouthSmileLeft": 0.6, "browInnerUp": 0.3})
    editor.save_expression("warm smile")
    assert document.item.expressions["warm smile"].weights == {"mouthSmileLeft": 0.6, "browInnerUp": 0.3}
    assert default_hotkeys(document.item) == {"warm smile": "1"}
    editor.reset()
    editor.load_expression("warm smile")
    assert editor.weight("mouthSmileLeft") == pytest.approx(0.6)
    with pytest.raises(PresetError, match="not allowed"):
        editor.save_expression("a/b")
    document.update("hotkeys", {"warm smile": "1"})
    editor.delete_expression("warm smile")
    assert document.item.expressions == {} and document.item.hotkeys == {}
