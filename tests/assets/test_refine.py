"""The offline model's refiner: it starts as the live model delayed, and keeps a closure either pass believes."""

import torch

from assets.model.net import N_OUTPUTS, Refiner, either_closure


def test_an_untrained_refiner_gives_the_live_outputs_delay_hops_later_in_any_chunking():
    refiner = Refiner(channels=16, dilations=(1, 2))
    live = torch.randn(1, 40, N_OUTPUTS)
    state, delayed = refiner.initial_states(1)
    whole, base, _, _ = refiner.step(live, state, delayed)
    assert torch.equal(whole, base)
    assert torch.allclose(whole[:, refiner.delay:], live[:, :-refiner.delay])
    pieces = []
    for start in range(0, 40, 7):
        out, _, state, delayed = refiner.step(live[:, start:start + 7], state, delayed)
        pieces.append(out)
    assert torch.allclose(torch.cat(pieces, dim=1), whole)


def test_either_closure_takes_the_surer_closure_belief_and_keeps_a_distribution():
    refined = torch.softmax(torch.randn(2, 10, 15), dim=-1)
    live = torch.softmax(torch.randn(2, 10, 15) * 3, dim=-1)
    closure = 1
    combined = either_closure(refined, live, closure)
    assert torch.allclose(combined[..., closure], torch.maximum(refined[..., closure], live[..., closure]))
    assert torch.allclose(combined.sum(-1), torch.ones(2, 10), atol=1e-6)
    others = [k for k in range(15) if k != closure]
    ratio = combined[..., others] / refined[..., others]
    assert torch.allclose(ratio, ratio[..., :1].expand_as(ratio), atol=1e-5)  # the other classes keep their ratios
