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
REFINER_DILATIONS = (1, 2, 4, 8, 16)


class Refiner(nn.Module):
    """The offline model's second pass: corrects the live net's raw outputs with context on both sides.

    It reads the live net's raw outputs (not the audio: a refiner that also read the log-mel frames
    learned the training voices' sound and was no better on held-out voices), and is causal like the
    live net, but its output is the live output `delay` hops back plus a learned correction: so it has
    seen `delay` hops after the instant it corrects (a p/b/m's release, the vowel after a /w/) as well
    as the hops before. The correction's last layer starts at zero, so training starts from the live
    model's own output.
    """

    def __init__(self, channels: int = 64, dilations: tuple[int, ...] = REFINER_DILATIONS, kernel_size: int = 3,
                 delay: int | None = None) -> None:
        super().__init__()
        self.channels = channels
        self.dilations = tuple(dilations)
        self.kernel_size = kernel_size
        self.register_buffer("raw_mean", torch.zeros(N_OUTPUTS))
        self.register_buffer("raw_std", torch.ones(N_OUTPUTS))
        self.inp = nn.Linear(N_OUTPUTS, channels)
        self.blocks = nn.ModuleList(CausalBlock(channels, d, kernel_size) for d in self.dilations)
        self.head = nn.Linear(channels, N_OUTPUTS)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)
        self.delay = max(1, self.state_frames // 2) if delay is None else delay  # centred: as much ahead as behind

    @property
    def state_frames(self) -> int:
        return sum(block.history for block in self.blocks)

    def initial_states(self, batch: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros(batch, self.state_frames, self.channels), torch.zeros(batch, self.delay, N_OUTPUTS)

    def step(self, live_raw: torch.Tensor, state: torch.Tensor,
             delayed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """live raw outputs (B, k, 68), conv state, delay line (B, delay, 68) -> (corrected raw outputs (B, k, 68)
        depicting `delay` hops earlier than the live ones, the live outputs they correct, new state, new delay line)."""
        x, new_state = run_blocks(self.blocks, self.inp((live_raw - self.raw_mean) / self.raw_std), state)
        line = torch.cat([delayed, live_raw], dim=1)
        frames = live_raw.shape[1]
        base = line[:, :frames]
        return base + self.head(F.relu(x)), base, new_state, line[:, frames:]


class CachedRefiner(nn.Module):
    """Training view of a Refiner over whole crops of live outputs computed beforehand, (B, T, 68).

    `lookahead` is the total lag behind the audio (live lookahead + delay), which the training loss compensates.
    """

    def __init__(self, refiner: Refiner, live: FaceNet) -> None:
        super().__init__()
        self.refiner = refiner
        self.lookahead = live.lookahead + refiner.delay

    def forward(self, live_raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        state, delayed = (s.to(live_raw) for s in self.refiner.initial_states(live_raw.shape[0]))
        raw, _, _, _ = self.refiner.step(live_raw, state, delayed)
        return split_outputs(raw)


def either_closure(visemes: torch.Tensor, live_visemes: torch.Tensor, closure: int) -> torch.Tensor:
    """Viseme probabilities whose p/b/m belief is the larger of the two passes' (the others scaled to sum to 1).

    The live net, trained far longer, finds more of the closures of voices it never heard; the refiner is
    surer of everything else. A closure either pass believes in is shown.
    """
    mine = visemes[..., closure]
    either = torch.maximum(mine, live_visemes[..., closure])
    scaled = visemes * ((1.0 - either) / (1.0 - mine).clamp(min=1e-6))[..., None]
    return torch.cat([scaled[..., :closure], either[..., None], scaled[..., closure + 1 :]], dim=-1)


class OfflineFaceNet(nn.Module):
    """The full-context offline model: the live net, then the refiner; one streaming step, three buffers."""

    def __init__(self, live: FaceNet, refiner: Refiner, closure: int) -> None:
        super().__init__()
        self.live = live
        self.refiner = refiner
        self.closure = closure

    @property
    def lookahead(self) -> int:
        return self.live.lookahead + self.refiner.delay

    def initial_states(self, batch: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return (self.live.initial_state(batch), *self.refiner.initial_states(batch))

    def forward(self, features: torch.Tensor, state: torch.Tensor, state_refiner: torch.Tensor,
                state_delay: torch.Tensor):
        live_raw, new_state = self.live.step(features, state)
        raw, base, new_refiner, new_delay = self.refiner.step(live_raw, state_refiner, state_delay)
        arkit, viseme_logits, vad_logit = split_outputs(raw)
        visemes = either_closure(torch.softmax(viseme_logits, dim=-1),
                                 torch.softmax(split_outputs(base)[1], dim=-1), self.closure)
        return arkit, visemes, torch.sigmoid(vad_logit), new_state, new_refiner, new_delay
