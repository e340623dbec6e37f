"""The articulation figures count what a viewer sees: here, lips that shut in the middle of a vowel, and
lips pouted on a vowel that is not rounded."""

import numpy as np

from assets.model.evaluate import articulation_metrics, report_markdown
from assets.model.train import Example
from studio.avatar.arkit import ARKIT_INDEX, NUM_ARKIT
from studio.engine.face_model import FaceOutput
from studio.speech.visemes import VISEME_INDEX


class _Shows:
    """A 'model' that shows a fixed face track, so the metric is checked on a known picture."""

    def __init__(self, arkit: np.ndarray) -> None:
        self.arkit = arkit

    def run_offline(self, features: np.ndarray) -> FaceOutput:
        n = len(self.arkit)
        return FaceOutput(self.arkit, np.zeros((n, 15), np.float32), np.ones(n, np.float32))


def _vowel_between_pauses() -> Example:
    viseme = np.full(60, VISEME_INDEX["sil"], np.int64)
    viseme[10:50] = VISEME_INDEX["ou"]  # a 400 ms "oo" trailing off, as an isolated word does
    arkit = np.zeros((60, NUM_ARKIT), np.float32)
    arkit[10:50, ARKIT_INDEX["jawOpen"]] = 0.3
    return Example(np.zeros((60, 80), np.float32), arkit, viseme, (viseme != VISEME_INDEX["sil"]).astype(np.float32))


def test_lips_shut_through_the_tail_of_a_vowel_count_as_false_closures_and_its_edges_do_not():
    example = _vowel_between_pauses()
    held_open = articulation_metrics(_Shows(example.arkit), [example])
    assert held_open["vowel_lips_shut_pct"] == 0.0 and held_open["vowel_frames"] == 34  # 30 ms off each edge
    shut_early = example.arkit.copy()
    shut_early[30:50, ARKIT_INDEX["jawOpen"]] = 0.0  # the mouth closes while the vowel still sounds
    assert articulation_metrics(_Shows(shut_early), [example])["vowel_lips_shut_pct"] == 50.0  # 17 of 34
    edges_only = example.arkit.copy()
    edges_only[10:13, ARKIT_INDEX["jawOpen"]] = edges_only[47:50, ARKIT_INDEX["jawOpen"]] = 0.0
    assert articulation_metrics(_Shows(edges_only), [example])["vowel_lips_shut_pct"] == 0.0


def test_pouted_lips_on_an_unrounded_vowel_count_as_false_rounding_and_on_a_rounded_one_do_not():
    example = _vowel_between_pauses()  # "oo": rounded, so it never counts
    pouted = example.arkit.copy()
    pouted[10:50, ARKIT_INDEX["mouthPucker"]] = 0.5
    assert articulation_metrics(_Shows(pouted), [example])["unrounded_vowel_frames"] == 0
    example.viseme[10:50] = VISEME_INDEX["E"]
    assert articulation_metrics(_Shows(example.arkit), [example])["unrounded_vowel_rounded_pct"] == 0.0
    half_pouted = example.arkit.copy()
    half_pouted[30:50, ARKIT_INDEX["mouthFunnel"]] = 0.3  # the lips round while the "e" still sounds
    figures = articulation_metrics(_Shows(half_pouted), [example])
    assert figures["unrounded_vowel_rounded_pct"] == 50.0 and figures["unrounded_vowel_frames"] == 34
    barely = example.arkit.copy()
    barely[10:50, ARKIT_INDEX["mouthFunnel"]] = 0.2  # below the visible level
    assert articulation_metrics(_Shows(barely), [example])["unrounded_vowel_rounded_pct"] == 0.0


def test_the_report_spells_out_nested_training_figures_one_per_row():
    report = report_markdown({"training": {"train_steps": 4000, "offline_model": {"train_steps": 4099, "lookahead_ms": 120}}})

    assert "| train_steps | 4000 |" in report
    assert "| offline_model.train_steps | 4099 |" in report
    assert "| offline_model.lookahead_ms | 120 |" in report
    assert "{" not in report


def test_onset_delay_is_how_much_later_than_the_target_the_mouth_opens_after_a_pause():
    example = _vowel_between_pauses()  # the target opens at frame 10, after 100 ms of silence ...
    example.voice_active[:] = 0.0
    example.arkit[:30] = 0.0  # ... made a pause over 250 ms: the "oo" now opens at frame 30
    example.voice_active[30:50] = 1.0
    assert articulation_metrics(_Shows(example.arkit), [example])["onset_delay_ms"] == 0.0
    late = np.roll(example.arkit, 2, axis=0)
    figures = articulation_metrics(_Shows(late), [example])
    assert figures["onset_delay_ms"] == 20.0 and figures["onsets"] == 1
    never = example.arkit.copy()
    never[:, ARKIT_INDEX["jawOpen"]] = 0.0
    assert articulation_metrics(_Shows(never), [example])["onset_delay_ms"] == 300.0
    no_pause = _vowel_between_pauses()  # 100 ms of silence before the vowel is not a pause
    assert articulation_metrics(_Shows(no_pause.arkit), [no_pause])["onsets"] == 0


def test_the_live_engine_row_scores_what_the_engine_shows_at_the_examples_frame_times():
    from assets.model.evaluate import LiveEngine
    from studio.engine.face_model import default_model_path
    from studio.speech.visemes import mouth_openness
    from tests.studio.engine.helpers import SR, silence_vowel_silence

    audio = silence_vowel_silence()  # 0.6 s silence, 1 s vowel, 0.6 s silence
    frames = len(audio) * 100 // SR
    example = Example(np.zeros((frames, 80), np.float32), np.zeros((frames, NUM_ARKIT), np.float32),
                      np.zeros(frames, np.int64), np.zeros(frames, np.float32), audio)
    engine = LiveEngine("fp32", default_model_path("fp32"))
    for _ in range(2):  # one engine, example after example
        shown = mouth_openness(engine.arkit(example))
        assert len(shown) == frames
        assert shown[:50].max() < 0.05 and shown[175:].max() < 0.05
        assert np.median(shown[70:150]) > 0.15
