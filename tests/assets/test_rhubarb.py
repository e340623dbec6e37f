"""Rhubarb's mouth cues become the poses they draw, held until the next cue, and are scored as `lipsync` is."""

import numpy as np

from assets.model.evaluate import articulation_metrics
from assets.model.rhubarb import SHAPE_VISEMES, cue_arkit
from assets.model.train import Example
from studio.avatar.arkit import NUM_ARKIT
from studio.speech.visemes import VISEME_INDEX, VISEME_POSES


def test_each_cue_holds_its_pose_until_the_next_and_rest_comes_first():
    arkit = cue_arkit([(0.05, "A"), (0.12, "F"), (0.30, "X")], 40)
    assert np.array_equal(arkit[:5], np.repeat(VISEME_POSES["sil"][None], 5, axis=0))
    assert np.array_equal(arkit[5:12], np.repeat(VISEME_POSES["PP"][None], 7, axis=0))
    assert np.array_equal(arkit[12:30], np.repeat(VISEME_POSES["ou"][None], 18, axis=0))
    assert np.array_equal(arkit[30:], np.repeat(VISEME_POSES["sil"][None], 10, axis=0))
    assert set(SHAPE_VISEMES) == set("ABCDEFGHX")


class _Cues:
    """What `rhubarb.RhubarbOutput` hands the evaluation: `arkit(example)` from fixed cues."""

    def __init__(self, parsed: list[tuple[float, str]]) -> None:
        self.parsed = parsed

    def arkit(self, example) -> np.ndarray:
        return cue_arkit(self.parsed, len(example.viseme))


def test_a_closed_mouth_cue_on_the_p_scores_a_closure_and_a_late_one_does_not():
    viseme = np.full(60, VISEME_INDEX["sil"], np.int64)
    viseme[20:25] = VISEME_INDEX["PP"]
    viseme[25:45] = VISEME_INDEX["aa"]
    example = Example(np.zeros((60, 80), np.float32), np.zeros((60, NUM_ARKIT), np.float32), viseme,
                      (viseme != VISEME_INDEX["sil"]).astype(np.float32))
    on_time = articulation_metrics(_Cues([(0.0, "X"), (0.19, "A"), (0.25, "D"), (0.45, "X")]), [example])
    late = articulation_metrics(_Cues([(0.0, "X"), (0.15, "B"), (0.30, "A"), (0.34, "D"), (0.45, "X")]), [example])
    assert on_time["closure_recall_pct"] == 100.0 and late["closure_recall_pct"] == 0.0
