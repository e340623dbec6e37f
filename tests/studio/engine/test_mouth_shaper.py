"""The mouth shaper shuts the lips when the model believes in a p/b/m and rounds them on oo/oh, smoothly."""

import numpy as np

from studio.avatar.arkit import ARKIT_INDEX, NUM_ARKIT
from studio.engine.mouth_shaper import StreamingMouthShaper, shape_mouth
from studio.speech.visemes import VISEMES, lips_closed, mouth_openness


def _beliefs(values: dict[str, np.ndarray], n: int) -> np.ndarray:
    probs = np.zeros((n, len(VISEMES)), np.float32)
    probs[:, VISEMES.index("sil")] = 1.0
    for name, column in values.items():
        probs[:, VISEMES.index(name)] = column
        probs[:, VISEMES.index("sil")] -= column
    return probs


def _half_open(n: int) -> np.ndarray:
    arkit = np.zeros((n, NUM_ARKIT), np.float32)
    arkit[:, ARKIT_INDEX["jawOpen"]] = 0.25  # a third-closed mouth, as on a missed human /m/
    return arkit


def test_a_confident_closure_shuts_the_lips_and_an_unsure_one_is_left_alone():
    n = 9
    sure = shape_mouth(_half_open(n), _beliefs({"PP": np.full(n, 0.9)}, n))
    assert all(lips_closed(sure)) and np.all(mouth_openness(sure) == 0.0)
    unsure = shape_mouth(_half_open(n), _beliefs({"PP": np.full(n, 0.2)}, n))
    assert np.allclose(unsure, _half_open(n))


def test_rounding_shows_on_oo_and_the_lips_do_not_chatter_on_a_flickering_belief():
    n = 40
    rounded = shape_mouth(_half_open(n), _beliefs({"ou": np.full(n, 0.8)}, n))
    funnel_pucker = rounded[:, [ARKIT_INDEX["mouthFunnel"], ARKIT_INDEX["mouthPucker"]]].max(1)
    assert np.all(funnel_pucker >= 0.4)
    flicker = np.where(np.arange(n) % 2 == 0, 0.75, 0.45)  # around the closure ramp, hop by hop
    shaped = shape_mouth(_half_open(n), _beliefs({"PP": flicker}, n))
    opening = mouth_openness(shaped)
    assert np.abs(np.diff(opening[2:-2])).max() < 0.02  # the 3-hop mean leaves no open/shut alternation


def test_a_confident_oo_narrows_a_wide_open_mouth_to_a_pucker_and_oh_keeps_it_open_and_round():
    n = 9
    wide = np.zeros((n, NUM_ARKIT), np.float32)
    wide[:, ARKIT_INDEX["jawOpen"]] = 0.5  # the model's open mouth on a /w/ after a pause
    wide[:, [ARKIT_INDEX["mouthStretchLeft"], ARKIT_INDEX["mouthStretchRight"]]] = 0.3
    oo = shape_mouth(wide, _beliefs({"ou": np.full(n, 0.9)}, n))
    assert np.all(oo[:, ARKIT_INDEX["jawOpen"]] < 0.2) and np.all(oo[:, ARKIT_INDEX["mouthPucker"]] >= 0.7)
    assert np.all(oo[:, ARKIT_INDEX["mouthStretchLeft"]] < 0.05)  # no pout on a stretched mouth
    oh = shape_mouth(wide, _beliefs({"oh": np.full(n, 0.9)}, n))
    assert np.all(oh[:, ARKIT_INDEX["jawOpen"]] > 0.35) and np.all(oh[:, ARKIT_INDEX["mouthFunnel"]] >= 0.5)
    assert np.all(mouth_openness(oh) > mouth_openness(oo))
    unsure = shape_mouth(wide, _beliefs({"ou": np.full(n, 0.2)}, n))
    assert np.allclose(unsure, wide)
    flicker = _beliefs({"ou": np.where(np.arange(40) % 2 == 0, 0.75, 0.45)}, 40)  # around the rounding ramp
    wide = np.repeat(wide[:1], 40, axis=0)
    for centred in (True, False):
        jaw = shape_mouth(wide, flicker, centred=centred)[:, ARKIT_INDEX["jawOpen"]]
        assert np.abs(np.diff(jaw[2:-2])).max() < 0.02  # the jaw does not pump with the belief


def _pout(weights: np.ndarray) -> np.ndarray:
    return weights[:, [ARKIT_INDEX["mouthFunnel"], ARKIT_INDEX["mouthPucker"]]].max(axis=1)


def test_a_weak_oo_belief_that_leads_the_other_vowels_and_silence_is_rounded_and_one_that_trails_is_not():
    """An unheard voice's /w/: oo believed at only 0.2, but more than silence and the open vowels together."""
    n = 9
    for centred in (True, False):
        leading = _beliefs({"ou": np.full(n, 0.2), "aa": np.full(n, 0.03), "RR": np.full(n, 0.72)}, n)
        assert np.all(_pout(shape_mouth(_half_open(n), leading, centred=centred)) >= 0.4)
        trailing = _beliefs({"ou": np.full(n, 0.2), "aa": np.full(n, 0.4), "RR": np.full(n, 0.35)}, n)
        assert np.allclose(shape_mouth(_half_open(n), trailing, centred=centred), _half_open(n))
        pause = _beliefs({"ou": np.full(n, 0.2)}, n)  # silence 0.8: the lips rest
        assert np.allclose(shape_mouth(_half_open(n), pause, centred=centred), _half_open(n))


def test_the_rounding_grows_with_the_lead_without_a_jump():
    n, steps = 5, 200
    pouts = []
    for aa in np.linspace(0.3, 0.0, steps):  # the open vowel fades: oo's lead grows from 0.6 to 4 times
        beliefs = _beliefs({"ou": np.full(n, 0.2), "aa": np.full(n, aa), "RR": np.full(n, 0.75 - aa)}, n)
        pouts.append(_pout(shape_mouth(_half_open(n), beliefs))[2])
    steps_between = np.diff(pouts)
    assert pouts[0] == 0.0 and pouts[-1] >= 0.4
    assert steps_between.min() >= -1e-6 and steps_between.max() < 0.05


def test_a_half_sure_closure_takes_the_pout_from_a_rounded_vowel():
    n = 9
    rounded = shape_mouth(_half_open(n), _beliefs({"ou": np.full(n, 0.6)}, n))
    both = shape_mouth(_half_open(n), _beliefs({"ou": np.full(n, 0.6), "PP": np.full(n, 0.375)}, n))  # half shut
    assert np.all(_pout(both) < 0.5 * 0.5 * _pout(rounded) + 1e-6)  # the closure halves rounding, then the lips


def test_streaming_matches_the_one_sided_offline_shaping():
    n = 30
    rng = np.random.default_rng(1)
    closure = np.clip(rng.random(n), 0, 1)
    beliefs = _beliefs({"PP": 0.9 * closure}, n)
    arkit = _half_open(n)
    offline = shape_mouth(arkit, beliefs, centred=False)
    shaper = StreamingMouthShaper()
    streamed = np.stack([shaper.step(arkit[i], beliefs[i]) for i in range(n)])
    assert np.allclose(streamed, offline, atol=1e-6)


def test_streaming_opens_the_lips_on_the_hop_the_closure_belief_falls_and_shuts_without_chatter():
    n = 12
    closure = np.where(np.arange(n) < 6, 0.9, 0.1)  # a /b/ released into a vowel at hop 6
    shaper = StreamingMouthShaper()
    arkit = _half_open(n)
    streamed = np.stack([shaper.step(arkit[i], b) for i, b in enumerate(_beliefs({"PP": closure}, n))])
    assert all(lips_closed(streamed[:6])) and np.allclose(streamed[6:], arkit[6:])  # open at once on the release
    flicker = np.where(np.arange(40) % 2 == 0, 0.75, 0.45)
    opening = mouth_openness(shape_mouth(_half_open(40), _beliefs({"PP": flicker}, 40), centred=False))
    assert np.abs(np.diff(opening[1:])).max() < 0.02  # a hop-by-hop flicker still cancels when streaming


def test_streaming_shuts_on_a_belief_held_two_hops_and_never_on_a_one_hop_spike():
    n = 12
    spike = np.where(np.arange(n) == 5, 0.95, 0.05)  # one hop of certainty: a flicker, not a /p/
    shaped = shape_mouth(_half_open(n), _beliefs({"PP": spike}, n), centred=False)
    assert np.allclose(shaped, _half_open(n))
    held = np.where((np.arange(n) >= 4) & (np.arange(n) < 7), 0.38, 0.05)  # a human /p/ the model is unsure of
    shaped = shape_mouth(_half_open(n), _beliefs({"PP": held}, n), centred=False)
    assert all(lips_closed(shaped[5:7])) and not any(lips_closed(shaped[:4]))
    offline = shape_mouth(_half_open(n), _beliefs({"PP": held}, n), centred=True)
    assert not any(lips_closed(offline))  # offline asks for a surer belief: it has no lead gain for closures


def test_offline_a_short_closure_held_two_hops_shuts_the_lips_and_its_neighbours_stay_open():
    """A /b/ in fast speech lasts about 20 ms: two hops of a fair belief. The centred smoothing reaches one hop on
    either side, so it neither dilutes those two hops below the ramp nor shuts the vowels around them."""
    n = 12
    short = np.where((np.arange(n) >= 5) & (np.arange(n) < 7), 0.6, 0.05)
    shaped = shape_mouth(_half_open(n), _beliefs({"PP": short}, n), centred=True)
    assert all(lips_closed(shaped[5:7]))
    assert not any(lips_closed(shaped[:4])) and not any(lips_closed(shaped[8:]))


def test_live_a_weak_p_belief_that_leads_silence_and_the_vowels_shuts_the_lips_and_one_that_trails_does_not():
    """An unheard voice's /m/: the model believes p/b/m at only 0.2 over three hops, but the nasal's hum leaves
    silence and the vowels further behind."""
    n = 12
    held = (np.arange(n) >= 4) & (np.arange(n) < 7)
    leading = _beliefs({"PP": np.where(held, 0.2, 0.0), "aa": np.where(held, 0.05, 0.0),
                        "nn": np.where(held, 0.7, 0.0)}, n)
    shaped = shape_mouth(_half_open(n), leading, centred=False)
    assert all(lips_closed(shaped[5:7])) and not any(lips_closed(shaped[:4]))
    trailing = _beliefs({"PP": np.where(held, 0.2, 0.0), "aa": np.where(held, 0.35, 0.0),
                         "nn": np.where(held, 0.4, 0.0)}, n)
    assert not any(lips_closed(shape_mouth(_half_open(n), trailing, centred=False)))
    assert not any(lips_closed(shape_mouth(_half_open(n), leading, centred=True)))  # offline goes without the gain


def test_streaming_without_closures_leaves_p_b_m_to_the_model_and_still_rounds():
    """The engine's first hops after a pause: the lips are already together, and a /b/ opens on its first sound."""
    n = 6
    shaper = StreamingMouthShaper()
    sure = _beliefs({"PP": np.full(n, 0.9)}, n)
    arkit = _half_open(n)
    first = [shaper.step(arkit[i], sure[i], closures=i >= 2) for i in range(n)]
    assert np.allclose(first[:2], arkit[:2])  # the model's own half-open mouth
    assert all(lips_closed(np.stack(first[2:])))  # the belief still counts once closures are back
    rounded = shape_mouth(_half_open(n), _beliefs({"ou": np.full(n, 0.8)}, n), centred=False, closures=False)
    assert rounded[:, [ARKIT_INDEX["mouthFunnel"], ARKIT_INDEX["mouthPucker"]]].max(1).min() >= 0.4
