"""Closure and rounding fidelity: the face model's own viseme beliefs finish what its weights start.

On real voices the model often knows a p/b/m is there (its PP viseme probability is high) while its
blendshape output only gets the lips a third of the way shut, and it under-rounds oo/oh/w. Here the
mouth channels are blended towards the viseme's target pose in proportion to that belief:

- PP: towards the closed-lip pose (jaw nearly shut, mouthClose cancelling it, lips pressed), so the
  lips meet (mouth_openness 0) when the model is sure, and partly when it is half sure;
- ou / oh: the lips (jaw included) blended towards the rounded pose the belief names (oo's nearly shut
  pucker, oh's open funnel, mixed by their shares), and funnel and pucker raised to at least the rounded
  pose's level. Funnel and pucker alone on the model's own jaw left a /w/ after a pause or an /u/ in fast
  speech an open mouth with pouted lips, which reads as open, not rounded. A weak belief that still
  leads the other vowels and silence counts for more (LEAD_GAIN), and a p/b/m's belief takes the lips
  from rounding first. Live, so does a weak p/b/m belief that leads silence and every vowel.

The blend weight is a continuous function of the probability (a ramp between LOW and HIGH), not a
switch, so a probability hovering near a threshold cannot make the lips chatter; the probability is
first smoothed over hops so that a hop-by-hop flicker cancels exactly. Offline that is (1, 2, 1) / 4
centred, the shortest centred kernel that cancels it. (1, 2, 2, 2, 1) / 8 shaped the offline mouth until
the twenty-fifth round: its wider reach blurred a short closure's or rounded vowel's belief into its
neighbours, and on the game's 498 unheard English lines the narrower kernel closes 0.3 points more p/b/m,
opens 0.6 points more open vowels and shows 0.4 points fewer unrounded vowel frames rounded, rounding
unchanged (the experiment log). Streaming has no later hops: rounding takes the mean of the hop and
the one before, closure their minimum. A mean holds every release half shut for a hop, the lips opening a
hop after the sound (also on each vowel after a pause, where the model believes the lips are shut); the
minimum releases at once and waits a hop to shut instead, inside the closure.
"""

from __future__ import annotations

import numpy as np

from studio.avatar.arkit import ARKIT_INDEX, ARKIT_NAMES
from studio.speech.visemes import VISEME_POSES, VISEMES

# the channels a speech model drives (the silence gate and take export act on these)
MOUTH_CHANNELS = np.array([i for i, name in enumerate(ARKIT_NAMES)
                           if name.startswith(("jaw", "mouth", "cheekPuff", "tongue"))])
CLOSURE_LOW, CLOSURE_HIGH = 0.25, 0.5
"""Trained on real recordings too, the model is less sure of a human p/b/m (its belief peaks at a median
0.74 on the dev set's closures, where the synthetic-only model's peaked at 0.87) and less tempted inside
vowels (4.8 % of vowel frames above 0.25, against 6.6 % above the old 0.35), so the ramp moved down from
0.35–0.7: see the experiment log, sixth round."""
STREAMING_CLOSURE_LOW, STREAMING_CLOSURE_HIGH = 0.18, 0.42
"""Streaming shuts the lips only on a belief held for two hops (the minimum of the hop and the one before), so a
one-hop flicker cannot shut them and the ramp can start lower than offline: on voices never heard in training
it closes 2.8 points more p/b/m live (72.2 → 75.0 %) for 0.9 points more vowel frames shut (10.9 → 11.8 %),
open vowels unchanged. Offline the same step costs three times as much (the experiment log, eleventh
round)."""
CENTRED_REACH_HOPS = 1
"""How many hops on either side of a hop the centred (offline) shaping reads: the reach of `_smooth`'s (1, 2, 1) / 4
kernel (the offline analysis keeps that much context at its chunk edges)."""
ROUND_LOW, ROUND_HIGH = 0.22, 0.5
"""Voices never heard in training are under-rounded most: their oo/oh belief peaks lower. Moving the ramp down
from 0.35–0.7 rounds 3.8 points more of their rounded sounds (82.7 → 86.5 %, live) for 1.6 points more
unrounded vowel frames shown rounded (8.2 → 9.8 %); a further step to 0.15–0.42 buys half as much rounding
per point of false rounding, so the ramp stops here (the experiment log, eleventh round)."""
LEAD_GAIN, LEAD_LOW, LEAD_HIGH = 4.0, 1.0, 2.0
"""On voices it never heard, the model's oo/oh (or p/b/m) belief is often weak but still larger than silence's and
the vowels' it competes with. Where it leads them, it is raised before its ramp: by a gain that grows from 1 at an
even lead to LEAD_GAIN at a lead of two to one, so it changes continuously (no switch to chatter on). On four nets
that never heard the Fish Fillets big fish (the experiment log, thirteenth round):
- rounding (oo/oh against silence, aa, E, ih; live and offline) rounds 3.3 points more of their rounded sounds
  (86.8 → 90.1 %, live) for 1.2 points more unrounded vowel frames shown rounded (9.2 → 10.4 %), where lowering
  the ramp further bought a point per point; silence among the rivals keeps the lips still in pauses;
- closure (p/b/m against silence and every vowel; live only) closes 3.1 points more of their p/b/m
  (76.4 → 79.5 %) for 0.4 points more vowel frames with the lips shut (11.8 → 12.2 %). Offline the same gain
  shut the lips inside vowels a point for every two closures gained, so the centred path goes without it."""
_PP = VISEMES.index("PP")
_ROUND = (VISEMES.index("ou"), VISEMES.index("oh"))
_ROUND_RIVALS = np.array([VISEMES.index(name) for name in ("sil", "aa", "E", "ih")])
_CLOSURE_RIVALS = np.array([VISEMES.index(name) for name in ("sil", "aa", "E", "ih", "oh", "ou")])
_LIPS = np.array(sorted({ARKIT_INDEX[name] for name in ARKIT_INDEX
                         if name.startswith(("jaw", "mouth"))} - {ARKIT_INDEX["jawForward"], ARKIT_INDEX["jawLeft"],
                                                                  ARKIT_INDEX["jawRight"]}))
_ROUNDING = np.array([ARKIT_INDEX["mouthFunnel"], ARKIT_INDEX["mouthPucker"]])
_CLOSED_POSE = VISEME_POSES["PP"]
_ROUND_POSES = (VISEME_POSES["ou"], VISEME_POSES["oh"])
_ROUND_FLOOR = np.maximum(*_ROUND_POSES)[_ROUNDING] * 0.6


def _ramp(p: np.ndarray, low: float, high: float) -> np.ndarray:
    x = np.clip((p - low) / (high - low), 0.0, 1.0)
    return x * x * (3.0 - 2.0 * x)


def shape_mouth(arkit: np.ndarray, visemes: np.ndarray, centred: bool = True, closures: bool = True) -> np.ndarray:
    """(n, 52) weights and (n, 15) viseme probabilities -> shaped (n, 52) weights (a new array).

    `centred` smooths each hop's beliefs with two neighbours on either side (offline); False uses the hop
    and the one before (streaming: see the module's note). `closures=False` leaves p/b/m to the model (rounding
    is still shaped).
    """
    weights = np.array(arkit, np.float32, copy=True)
    probs = np.asarray(visemes, np.float32)
    if len(weights) == 0:
        return weights
    if not closures:
        shut = np.zeros((len(weights), 1), np.float32)
    elif centred:
        shut = _ramp(_smooth(probs[:, _PP], centred), CLOSURE_LOW, CLOSURE_HIGH)[:, None]
    else:
        closure = _raised_where_leading(probs[:, _PP], probs[:, _CLOSURE_RIVALS].sum(axis=1))
        shut = _ramp(_min_with_previous(closure), STREAMING_CLOSURE_LOW, STREAMING_CLOSURE_HIGH)[:, None]
    rounding = _smooth(_raised_where_leading(probs[:, _ROUND].sum(axis=1), probs[:, _ROUND_RIVALS].sum(axis=1)), centred)
    rounded = _ramp(rounding, ROUND_LOW, ROUND_HIGH)[:, None] * (1.0 - shut)  # a p/b/m's lips are not pouted
    weights[:, _LIPS] = (1.0 - rounded) * weights[:, _LIPS] + rounded * _rounded_pose(probs)[:, _LIPS]
    weights[:, _ROUNDING] = np.maximum(weights[:, _ROUNDING], rounded * _ROUND_FLOOR)
    # last: a p/b/m shuts the lips whatever the vowel
    weights[:, _LIPS] = (1.0 - shut) * weights[:, _LIPS] + shut * _CLOSED_POSE[_LIPS]
    return weights


def _raised_where_leading(belief: np.ndarray, rivals: np.ndarray) -> np.ndarray:
    """(n,): `belief`, raised where it leads the summed beliefs of its `rivals` (see LEAD_GAIN)."""
    lead = belief / np.maximum(rivals, 1e-6)
    return np.minimum(belief * (1.0 + (LEAD_GAIN - 1.0) * _ramp(lead, LEAD_LOW, LEAD_HIGH)), 1.0)


def _rounded_pose(probs: np.ndarray) -> np.ndarray:
    """(n, 52): oo's and oh's poses mixed by their shares of each hop's rounding belief."""
    shares = probs[:, _ROUND] / np.maximum(probs[:, _ROUND].sum(axis=1, keepdims=True), 1e-6)
    return shares[:, :1] * _ROUND_POSES[0] + shares[:, 1:] * _ROUND_POSES[1]


def _smooth(values: np.ndarray, centred: bool) -> np.ndarray:
    if centred:
        padded = np.concatenate([values[:1], values, values[-1:]])
        return (padded[:-2] + 2 * padded[1:-1] + padded[2:]) / 4.0
    padded = np.concatenate([values[:1], values])
    return (padded[:-1] + padded[1:]) / 2.0


def _min_with_previous(values: np.ndarray) -> np.ndarray:
    return np.minimum(np.concatenate([values[:1], values[:-1]]), values)


class StreamingMouthShaper:
    """`shape_mouth` one hop at a time, for the live engine (keeps the previous hop's beliefs)."""

    def __init__(self) -> None:
        self._previous: np.ndarray | None = None

    def reset(self) -> None:
        self._previous = None

    def step(self, arkit: np.ndarray, visemes: np.ndarray | None, closures: bool = True) -> np.ndarray:
        """One hop shaped; `closures=False`: this hop's p/b/m belief does not shut the lips (it still counts as
        the previous hop's for the next one)."""
        if visemes is None:
            return arkit
        previous = self._previous if self._previous is not None else visemes
        self._previous = np.asarray(visemes, np.float32)
        pair = np.stack([previous, self._previous])
        return shape_mouth(np.stack([arkit, arkit]), pair, centred=False, closures=closures)[1]
