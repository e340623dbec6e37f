"""The offline model pairs the live net with a wide-lookahead net: the live outputs wait until they depict
the wide net's instant, and a closure or rounding either net believes in is kept."""

import pytest
import torch

from assets.model.net import FaceNet, OfflineFaceNet, either_belief


def test_the_live_outputs_wait_until_they_depict_the_wide_nets_instant():
    torch.manual_seed(0)
    live = FaceNet(channels=8, dilations=(1, 2), lookahead=1).eval()
    twin = FaceNet(channels=8, dilations=(1, 2), lookahead=4).eval()
    twin.load_state_dict(live.state_dict())
    pair = OfflineFaceNet(live, twin, classes=(1,)).eval()
    features = torch.randn(1, 40, 80)
    with torch.no_grad():
        arkit, visemes, _, _, _, _ = pair(features, *pair.initial_states(1))
        live_arkit, _, _ = live(features)
    assert pair.lookahead == 4 and pair.delay == 3
    delayed, current = live_arkit[:, :-pair.delay], live_arkit[:, pair.delay:]  # the twin's are the live net's
    assert torch.allclose(arkit[:, pair.delay:], (delayed + current) / 2, atol=1e-6)
    assert torch.allclose(visemes.sum(-1), torch.ones(1, 40), atol=1e-5)


def test_the_pair_streams_in_any_chunking_as_it_runs_whole():
    torch.manual_seed(1)
    pair = OfflineFaceNet(FaceNet(channels=8, dilations=(1, 2), lookahead=1),
                          FaceNet(channels=8, dilations=(1, 2, 4), lookahead=6), classes=(1, 13, 14)).eval()
    features = torch.randn(1, 50, 80)
    with torch.no_grad():
        whole = pair(features, *pair.initial_states(1))
        states, pieces = pair.initial_states(1), []
        for start in range(0, 50, 7):
            arkit, visemes, voice, *states = pair(features[:, start:start + 7], *states)
            pieces.append(arkit)
    assert torch.allclose(torch.cat(pieces, dim=1), whole[0], atol=1e-5)


def test_the_wide_net_must_look_further_ahead_than_the_live_one():
    live = FaceNet(channels=8, dilations=(1,), lookahead=2)
    with pytest.raises(ValueError, match="lookahead"):
        OfflineFaceNet(live, FaceNet(channels=8, dilations=(1,), lookahead=2), classes=(1,))


def test_either_belief_keeps_the_surer_belief_in_the_chosen_classes_and_a_distribution():
    first = torch.softmax(torch.randn(2, 10, 15), dim=-1)
    second = torch.softmax(torch.randn(2, 10, 15) * 3, dim=-1)
    combined = either_belief(first, second, torch.tensor([k in (1, 14) for k in range(15)]))
    assert torch.allclose(combined.sum(-1), torch.ones(2, 10), atol=1e-6)
    surer = torch.maximum(first, second)[..., [1, 14]]
    room = surer.sum(-1, keepdim=True) <= 1
    assert torch.allclose(torch.where(room, combined[..., [1, 14]], surer), surer, atol=1e-6)
    others = [k for k in range(15) if k not in (1, 14)]
    ratio = combined[..., others] / ((first + second) / 2)[..., others]
    assert torch.allclose(ratio, ratio[..., :1].expand_as(ratio), atol=1e-5)  # the others keep their ratios
