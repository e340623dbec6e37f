"""Train the offline model's refiner on top of a trained live net (torch; `make model` only).

The live net is frozen: its raw outputs over every training utterance are computed once, whole
utterances from a zero state as the runtime streams them, and the refiner trains on crops of
live outputs -> targets with the live net's loss, lagged by its total lookahead, plus an aperture
and a closure loss.
A small network over an already good signal trains many steps in the time one live-net step takes,
which is why the offline model is built this way rather than as a second large net from scratch.
"""

from __future__ import annotations

import math
import time

import numpy as np

from assets.model.train import Example, TrainConfig, closure_class, descend, face_loss, mouth_weights


def live_raw_outputs(live, examples: list[Example]) -> list[np.ndarray]:
    """The live net's raw (pre-sigmoid) outputs per utterance, (T, 68) float32."""
    import torch

    outputs = []
    with torch.no_grad():
        for example in examples:
            features = torch.from_numpy(example.features)[None]
            raw, _ = live.step(features, live.initial_state(1))
            outputs.append(raw[0].numpy().astype(np.float32))
    return outputs


def sample_batch(examples: list[Example], raws: list[np.ndarray], batch: int, crop: int,
                 rng: np.random.Generator):
    """Random crops of the live outputs with their targets; padding repeats the last frame."""
    import torch

    inputs = np.zeros((batch, crop, raws[0].shape[1]), np.float32)
    arkit = np.zeros((batch, crop, 52), np.float32)
    viseme = np.zeros((batch, crop), np.int64)
    vad = np.zeros((batch, crop), np.float32)
    mask = np.zeros((batch, crop), np.float32)
    for row in range(batch):
        index = int(rng.integers(len(examples)))
        example, raw = examples[index], raws[index]
        length = len(raw)
        start = int(rng.integers(0, max(1, length - crop + 1)))
        stop = min(length, start + crop)
        span = stop - start
        inputs[row, :span] = raw[start:stop]
        inputs[row, span:] = raw[stop - 1]
        arkit[row, :span] = example.arkit[start:stop]
        viseme[row, :span] = example.viseme[start:stop]
        vad[row, :span] = example.voice_active[start:stop]
        mask[row, :span] = 1.0
    return tuple(torch.from_numpy(a) for a in (inputs, arkit, viseme, vad, mask))


APERTURE_WEIGHT = 4.0
CLOSURE_WEIGHT = 8.0
CLOSURE_SLACK = 2  # hops either side


def aperture_loss(model, batch, outputs):
    """L1 on how far the lips are apart (`studio.speech.visemes.mouth_openness`), p/b/m frames weighted up.

    The per-shape L1 spreads a closure's error over jawOpen, mouthClose and the lip shapes, so a
    prediction a third shut costs little; the aperture is what a viewer sees, and a closure that is not
    complete is a visible miss.
    """
    import torch

    from studio.speech.visemes import _CLOSE, _JAW, _LIP_PARTING

    _, arkit, viseme, _, mask = batch
    pred = outputs[0]
    lag = model.lookahead
    pred, arkit, viseme, mask = pred[:, lag:], arkit[:, :-lag], viseme[:, :-lag], mask[:, :-lag]

    def openness(weights):
        return torch.relu(weights[..., _JAW] - weights[..., _CLOSE] + 0.25 * weights[..., _LIP_PARTING].mean(-1))

    weight = mask * (1.0 + 3.0 * (viseme == closure_class()).float())
    return ((openness(pred) - openness(arkit)).abs() * weight).sum() / weight.sum()


def closure_loss(model, batch, outputs):
    """Every p/b/m frame should have the lips shut on some frame within ±CLOSURE_SLACK hops: the mean, over
    p/b/m frames, of the smallest predicted aperture near each. A half-closure costs its whole aperture,
    while when exactly the lips meet is left to the other losses (the aligners' timing is ±2 hops anyway)."""
    import torch
    from torch.nn import functional as F

    from studio.speech.visemes import _CLOSE, _JAW, _LIP_PARTING

    _, _, viseme, _, mask = batch
    pred = outputs[0]
    lag = model.lookahead
    pred, viseme, mask = pred[:, lag:], viseme[:, :-lag], mask[:, :-lag]
    aperture = torch.relu(pred[..., _JAW] - pred[..., _CLOSE] + 0.25 * pred[..., _LIP_PARTING].mean(-1))
    nearest_closed = -F.max_pool1d(-aperture[:, None], 2 * CLOSURE_SLACK + 1, stride=1, padding=CLOSURE_SLACK)[:, 0]
    closures = mask * (viseme == closure_class()).float()
    return (nearest_closed * closures).sum() / closures.sum().clamp(min=1.0)


def train_refiner(live, examples: list[Example], config: TrainConfig, log=print, channels: int = 64):
    """A Refiner for `live` (a trained FaceNet); returns (OfflineFaceNet, summary dict)."""
    import torch

    from assets.model.net import CachedRefiner, OfflineFaceNet, Refiner

    torch.set_num_threads(2)
    torch.manual_seed(config.seed + 1)
    live = live.eval()
    for parameter in live.parameters():
        parameter.requires_grad_(False)
    started = time.perf_counter()
    raws = live_raw_outputs(live, examples)
    precompute_s = time.perf_counter() - started
    log(f"refiner: live outputs for {len(examples)} utterances in {precompute_s:.0f} s")
    refiner = Refiner(channels=channels)
    stacked = np.concatenate(raws)
    refiner.raw_mean.copy_(torch.from_numpy(stacked.mean(0)))
    refiner.raw_std.copy_(torch.from_numpy(np.maximum(stacked.std(0), 1e-3)))
    del stacked
    model = CachedRefiner(refiner, live)
    crop = config.crop_frames + 2 * model.lookahead  # the lagged loss sees as many frames as the live net's
    shape_weights = torch.from_numpy(mouth_weights())
    closure = closure_class()
    optimizer = torch.optim.AdamW(refiner.parameters(), lr=config.lr, weight_decay=1e-4)
    rng = np.random.default_rng(config.seed + 1)
    budget_s = config.minutes * 60
    train_started = time.perf_counter()
    step, parts = 0, {}
    first_parts = None
    model.train()
    while step < config.max_steps and time.perf_counter() - train_started < budget_s:
        progress = min(1.0, max((time.perf_counter() - train_started) / budget_s, step / config.max_steps))
        lr = config.lr * (min(1.0, (step + 1) / 50) * 0.5 * (1 + math.cos(math.pi * progress)) + 0.02)
        for group in optimizer.param_groups:
            group["lr"] = lr
        batch = sample_batch(examples, raws, config.batch, crop, rng)
        outputs = model(batch[0])
        loss, parts = face_loss(model, batch, shape_weights, closure, outputs)
        aperture = aperture_loss(model, batch, outputs)
        closed = closure_loss(model, batch, outputs)
        loss = loss + APERTURE_WEIGHT * aperture + CLOSURE_WEIGHT * closed
        parts["aperture"], parts["closure"] = aperture.item(), closed.item()
        first_parts = first_parts or parts
        descend(optimizer, loss, refiner.parameters())
        step += 1
        if step % 100 == 0 or step == 1:
            log(f"refiner step {step} t={time.perf_counter() - train_started:.0f}s lr={lr:.2e} "
                f"loss={loss.item():.4f} {parts}")
    refiner.eval()
    summary = {
        "refiner_train_steps": step,
        "refiner_train_s": round(time.perf_counter() - train_started, 1),
        "refiner_precompute_s": round(precompute_s, 1),
        "refiner_first_loss_parts": {k: round(v, 4) for k, v in (first_parts or {}).items()},
        "refiner_final_loss_parts": {k: round(v, 4) for k, v in parts.items()},
        "refiner_parameters": sum(p.numel() for p in refiner.parameters()),
        "refiner_context_ms": {"before": refiner.state_frames * 10 - refiner.delay * 10, "after": refiner.delay * 10},
        "lookahead_ms": model.lookahead * 10,
    }
    return OfflineFaceNet(live, refiner, closure).eval(), summary
