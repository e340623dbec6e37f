"""The causal audio -> face network (torch; training and export only, never at run time).

A dilated temporal conv network over log-mel frames. Every conv is causal, so the network
can run one 10 ms hop at a time: each dilated conv keeps the last (kernel - 1) * dilation
input frames of its layer as explicit state. `step()` takes k new frames plus one state
tensor holding all those buffers and returns the outputs plus the new state; the ONNX graph
is exactly that step, and a whole sequence is the same step with k = T and a zero state,
so streamed and offline outputs agree by construction.

Lookahead: the network itself is causal, but it is trained so that the output it emits
after frame t depicts frame t - lookahead. The output therefore lags the input by
`lookahead` hops, and the model gets to hear that much audio after the instant it draws
(useful before a p/b/m release, whose closure starts in silence).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

N_MELS = 80
N_ARKIT = 52
N_VISEMES = 15
DEFAULT_DILATIONS = (1, 2, 4, 8, 16, 32, 1, 2)


class CausalBlock(nn.Module):
    """Residual block: causal dilated conv -> ReLU -> 1x1 conv, added back to its input.

    Tensors are time-major (B, T, C) and the dilated conv is written as its taps stacked
    and one matrix multiply, which onnxruntime runs (and INT8-quantises) faster than Conv.
    """

    def __init__(self, channels: int, dilation: int, kernel_size: int) -> None:
        super().__init__()
        self.dilation = dilation
        self.kernel_size = kernel_size
        self.history = (kernel_size - 1) * dilation
        self.temporal = nn.Linear(kernel_size * channels, channels)
        self.mix = nn.Linear(channels, channels)

    def forward(self, x: torch.Tensor, history: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, k, C) new frames, history (B, self.history, C) -> (out (B, k, C), new history)."""
        extended = torch.cat([history, x], dim=1)
        frames = x.shape[1]
        taps = torch.cat([extended[:, j * self.dilation : j * self.dilation + frames] for j in range(self.kernel_size)],
                         dim=2)
        out = x + self.mix(F.relu(self.temporal(taps)))
        return out, extended[:, extended.shape[1] - self.history :]


def run_blocks(blocks: nn.ModuleList, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x through the causal blocks in turn, each with its slice of the packed state; (out, new packed state)."""
    new_states = []
    start = 0
    for block in blocks:
        x, history = block(x, state[:, start : start + block.history])
        new_states.append(history)
        start += block.history
    return x, torch.cat(new_states, dim=1)


class FaceNet(nn.Module):
    """80 log-mel in; 52 ARKit weights, 15 viseme logits and 1 voice-activity logit out."""

    def __init__(
        self,
        channels: int = 96,
        dilations: tuple[int, ...] = DEFAULT_DILATIONS,
        kernel_size: int = 3,
        lookahead: int = 3,
    ) -> None:
        super().__init__()
        self.channels = channels
        self.dilations = tuple(dilations)
        self.kernel_size = kernel_size
        self.lookahead = lookahead
        self.register_buffer("feature_mean", torch.zeros(N_MELS))
        self.register_buffer("feature_std", torch.ones(N_MELS))
        self.inp = nn.Linear(N_MELS, channels)
        self.blocks = nn.ModuleList(CausalBlock(channels, d, kernel_size) for d in self.dilations)
        self.head = nn.Linear(channels, N_ARKIT + N_VISEMES + 1)

    @property
    def state_frames(self) -> int:
        return sum(block.history for block in self.blocks)

    @property
    def receptive_field_frames(self) -> int:
        return self.state_frames + 1

    def initial_state(self, batch: int = 1) -> torch.Tensor:
        return torch.zeros(batch, self.state_frames, self.channels)

    def step(self, features: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """features (B, k, 80) raw log-mel, state (B, S, C) -> (raw head outputs (B, k, 68), new state)."""
        x, new_state = run_blocks(self.blocks, self.inp((features - self.feature_mean) / self.feature_std), state)
        return self.head(F.relu(x)), new_state

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Whole sequences from a zero state: (arkit (B,T,52) in 0..1, viseme logits, VAD logit (B,T))."""
        raw, _ = self.step(features, self.initial_state(features.shape[0]).to(features))
        return split_outputs(raw)


def split_outputs(raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.sigmoid(raw[..., :N_ARKIT]), raw[..., N_ARKIT : N_ARKIT + N_VISEMES], raw[..., -1]


class StreamingExport(nn.Module):
    """What the ONNX graph computes: one step with probabilities out, for onnxruntime."""

    def __init__(self, net: FaceNet) -> None:
        super().__init__()
        self.net = net

    def forward(self, features: torch.Tensor, state: torch.Tensor):
        raw, new_state = self.net.step(features, state)
        arkit, viseme_logits, vad_logit = split_outputs(raw)
        return arkit, torch.softmax(viseme_logits, dim=-1), torch.sigmoid(vad_logit), new_state


N_OUTPUTS = N_ARKIT + N_VISEMES + 1


def either_belief(first: torch.Tensor, second: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """The mean of two viseme distributions, except that each class where the bool mask `chosen` is set takes
    the larger of the two beliefs (the other classes scaled so the whole still sums to 1).

    The offline model's two nets miss different closures: the live net shuts the lips on p/b/m it hears
    while they are held, the wide one on those it knows only from their release. A closure (or a rounding)
    either net believes in is shown; for everything else they vote.
    """
    mean = (first + second) / 2
    surer = torch.maximum(first, second)
    rest_scale = (1.0 - (surer * chosen).sum(-1, keepdim=True)).clamp(min=0.0) / (
        (mean * ~chosen).sum(-1, keepdim=True).clamp(min=1e-6))
    combined = torch.where(chosen, surer, mean * rest_scale)
    return combined / combined.sum(-1, keepdim=True).clamp(min=1e-6)


class OfflineFaceNet(nn.Module):
    """The full-context offline model: the live net and a wide-lookahead net over the same audio.

    `wide` is a FaceNet trained to draw each frame `wide.lookahead` hops after hearing it (it hears a
    voiceless /p/'s release, the vowel after a /w/); the live net's outputs wait in a delay line until
    they depict the same instant. Their shapes are averaged and their visemes combined by
    `either_belief`. One streaming step, three buffers: the two nets' states and the delay line.
    """

    def __init__(self, live: FaceNet, wide: FaceNet, classes: tuple[int, ...]) -> None:
        super().__init__()
        if wide.lookahead <= live.lookahead:
            raise ValueError(f"the wide net's lookahead ({wide.lookahead}) must exceed the live net's ({live.lookahead})")
        self.live = live
        self.wide = wide
        self.register_buffer("chosen", torch.tensor([k in classes for k in range(N_VISEMES)]), persistent=False)
        self.delay = wide.lookahead - live.lookahead

    @property
    def lookahead(self) -> int:
        return self.wide.lookahead

    def initial_states(self, batch: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.live.initial_state(batch), self.wide.initial_state(batch), torch.zeros(batch, self.delay, N_OUTPUTS)

    def forward(self, features: torch.Tensor, state: torch.Tensor, state_wide: torch.Tensor,
                state_delay: torch.Tensor):
        live_raw, new_state = self.live.step(features, state)
        wide_raw, new_wide = self.wide.step(features, state_wide)
        line = torch.cat([state_delay, live_raw], dim=1)
        frames = features.shape[1]
        live_arkit, live_visemes, live_vad = split_outputs(line[:, :frames])
        wide_arkit, wide_visemes, wide_vad = split_outputs(wide_raw)
        visemes = either_belief(torch.softmax(live_visemes, dim=-1), torch.softmax(wide_visemes, dim=-1), self.chosen)
        voice = (torch.sigmoid(live_vad) + torch.sigmoid(wide_vad)) / 2
        return (live_arkit + wide_arkit) / 2, visemes, voice, new_state, new_wide, line[:, frames:]
