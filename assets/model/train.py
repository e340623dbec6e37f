"""Train the audio -> face model from our own synthetic corpus, export ONNX, evaluate.

One command rebuilds everything:

    python -m assets.model.train --out assets/models            # full run, about 43 min on 2 cores (see DEADLINE_MINUTES)
    python -m assets.model.train --tiny --out /tmp/models        # CI smoke run, < 2 min

The corpus comes from assets/model/corpus.py (espeak-ng / festival / flite / Piper speech with exact
phoneme timing, augmented) and assets/model/human_voices.py (real people's recordings, most in other
languages, and a game's English dialogue, force-aligned). Loss: L1 on the 52 weights, mouth and jaw shapes weighted up and p/b/m
closure frames weighted up again (lip closure was the weakest part in an earlier experiment),
cross-entropy on the 15 visemes and BCE on voice activity. After the live model, the offline
model's wide-lookahead net is fine-tuned from it (`train_offline`), and the pair is kept only if
`offline_model_is_better`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from studio.avatar.arkit import ARKIT_NAMES
from studio.engine.features import LOG_FLOOR, LogMelExtractor

CROP_FRAMES = 300
FEATURE_FPS = 100.0
MOUTH_WEIGHT = 1.0
OTHER_WEIGHT = 0.25
CLOSURE_WEIGHT = 4.0
ROUNDING_WEIGHT = 2.0  # oo/oh/w frames: rounding was under-done on human voices
LIVE_LOOKAHEAD = 1  # 10 ms: the live model (face_fp32/int8.onnx)
OFFLINE_LOOKAHEAD = 12  # 120 ms: the offline model's wide net (face_offline.onnx, for files, takes and render --audio)
OFFLINE_MINUTES = 10.0  # the wide net's fine-tune from the live model
# `make model` aims to finish within DEADLINE_MINUTES on a 2-core machine. Its corpus phase alone took 12 to 19 minutes
# on such machines (the human voices' alignment most of it), so the two time-boxed trainings share what the corpus
# leaves of the deadline, after EVALUATION_RESERVE_S for the exports and the report (measured 290 s). They never
# shrink below MIN_BUDGET_SHARE of their budgets, so a corpus phase longer than about 32 minutes runs past the
# deadline; `main` then says by how much (`expected_minutes`).
DEADLINE_MINUTES = 43.0
MIN_BUDGET_SHARE = 0.2
EVALUATION_RESERVE_S = 360.0


def fitted_budgets(corpus_s: float, live_minutes: float, offline_minutes: float,
                   deadline_minutes: float = DEADLINE_MINUTES) -> tuple[float, float]:
    """The two trainings' minutes, shrunk in proportion where the corpus phase leaves too little of the deadline
    (never below MIN_BUDGET_SHARE of what they ask: a machine that slow gets a weak model and a late one, said in
    the log, not none)."""
    left_min = (deadline_minutes * 60.0 - corpus_s - EVALUATION_RESERVE_S) / 60.0
    scale = min(1.0, max(MIN_BUDGET_SHARE, left_min / (live_minutes + offline_minutes)))
    return live_minutes * scale, offline_minutes * scale


def expected_minutes(corpus_s: float, live_minutes: float, offline_minutes: float) -> float:
    """When `make model` should end, in minutes from its start: corpus, both trainings, the evaluation reserve."""
    return (corpus_s + EVALUATION_RESERVE_S) / 60.0 + live_minutes + offline_minutes


@dataclass
class Example:
    features: np.ndarray  # (T, 80) float32
    arkit: np.ndarray  # (T, 52) float32
    viseme: np.ndarray  # (T,) int64
    voice_active: np.ndarray  # (T,) float32
    audio: np.ndarray | None = None  # 16 kHz mono, kept for evaluation sets (the lipsync pipeline reads audio)


@dataclass
class TrainConfig:
    n_train: int = 1800
    n_augmented_copies: int = 2  # two degraded copies of each utterance: one was not enough for telephone-band speech
    minutes: float = 20.0
    max_steps: int = 100_000
    batch: int = 24
    crop_frames: int = CROP_FRAMES
    lr: float = 2e-3
    seed: int = 7
    channels: int = 96
    lookahead: int = 3
    human_voice_copies: int | None = 1  # real recordings (human_voices.py): degraded copies of each; None: not used
    equaliser_db: float = 0.0  # > 0: colour half the crops (`colour`); off: it delays the mouth opening (experiment log)

    @classmethod
    def tiny(cls) -> TrainConfig:
        return cls(n_train=12, n_augmented_copies=1, minutes=0.5, max_steps=30, batch=8, crop_frames=200,
                   human_voice_copies=None)

    def with_lookahead(self, lookahead: int) -> TrainConfig:
        return dataclasses.replace(self, lookahead=lookahead)

    def with_lr(self, lr: float) -> TrainConfig:
        return dataclasses.replace(self, lr=lr)


def mouth_weights() -> np.ndarray:
    """Per-shape loss weight: the mouth and jaw carry lip-sync, the rest is secondary."""
    return np.array(
        [MOUTH_WEIGHT if name.startswith(("mouth", "jaw")) else OTHER_WEIGHT for name in ARKIT_NAMES], np.float32
    )


def closure_class() -> int:
    from studio.speech.visemes import VISEMES

    return list(VISEMES).index("PP")


def rounded_classes() -> tuple[int, int]:
    from studio.speech.visemes import VISEMES

    return list(VISEMES).index("oh"), list(VISEMES).index("ou")


def utterance_to_example(audio: np.ndarray, targets, extractor: LogMelExtractor, keep_audio: bool = False) -> Example:
    """Features and targets on the same 10 ms grid (frame t <-> media time t * 10 ms)."""
    if abs(float(getattr(targets, "fps", FEATURE_FPS)) - FEATURE_FPS) > 1e-6:
        raise ValueError(f"corpus targets at {targets.fps} fps; the face model trains on {FEATURE_FPS} fps")
    features = extractor.compute(audio)
    n = min(len(features), len(targets.arkit))
    return Example(
        features=features[:n],
        arkit=np.asarray(targets.arkit[:n], np.float32),
        viseme=np.asarray(targets.viseme[:n], np.int64),
        voice_active=np.asarray(targets.voice_active[:n], np.float32),
        audio=np.asarray(audio, np.float32) if keep_audio else None,
    )


def build_examples(n: int, seed: int, held_out: bool, augmented_copies: int = 0,
                   human_voice_copies: int | None = None, provenance: dict | None = None) -> list[Example]:
    """The synthetic corpus (`n` utterances, each with `augmented_copies` degraded copies) and, for training
    when `human_voice_copies` is not None, the real recordings of `human_voices` with that many copies.
    `provenance`, when given, receives what went in (`save_examples` keeps it with the cache)."""
    from assets.model import corpus

    extractor = LogMelExtractor()
    rng = np.random.default_rng(seed + 1)
    examples = []
    for utterance in corpus.synthesize_utterances(n, seed, voices=None, held_out=held_out):
        examples.append(utterance_to_example(utterance.audio, utterance.targets, extractor, keep_audio=held_out))
        for _ in range(augmented_copies):
            noisy = np.asarray(corpus.augment(utterance.audio, rng), np.float32)
            if len(noisy) == len(utterance.audio):
                examples.append(utterance_to_example(noisy, utterance.targets, extractor))
    human: dict = {}
    if human_voice_copies is not None and not held_out:
        from assets.model.human_voices import training_examples

        examples += training_examples(human_voice_copies, seed, record=human)
    if provenance is not None:
        provenance.update({
            "synthetic": {"utterances": n, "seed": seed, "augmented_copies": augmented_copies, "held_out": held_out,
                          "voices": corpus.default_voices(held_out),
                          "voices_kept_out": [] if held_out else corpus.default_voices(held_out=True)},
            "human_voices": {**human, "copies": human_voice_copies} if human else None})
    return examples


def save_examples(examples: list[Example], path: Path, provenance: dict) -> None:
    """The built corpus as one .npz, so a second training run skips synthesis; `provenance` (what went in:
    `build_examples`) is kept in it, so a cache always says which voices, recordings and game lines it holds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, lengths=np.array([len(e.features) for e in examples]),
             features=np.concatenate([e.features for e in examples]), arkit=np.concatenate([e.arkit for e in examples]),
             viseme=np.concatenate([e.viseme for e in examples]),
             voice_active=np.concatenate([e.voice_active for e in examples]),
             provenance=np.array(json.dumps(provenance, sort_keys=True)))


def cache_provenance(path: Path) -> dict:
    """What a corpus cache holds (see `save_examples`); ValueError for a cache that does not say."""
    with np.load(path) as data:
        if "provenance" not in data.files:
            raise ValueError(f"{path}: this corpus cache does not record its sources and split (built before caches "
                             "did); delete it and let --corpus-cache build it again")
        return json.loads(data["provenance"].item())


def load_examples(path: Path) -> list[Example]:
    """A corpus cache's examples; ValueError for one that does not record its sources (`cache_provenance`)."""
    cache_provenance(path)
    data = np.load(path)
    bounds = np.concatenate([[0], np.cumsum(data["lengths"])])
    arrays = {k: data[k] for k in ("features", "arkit", "viseme", "voice_active")}
    return [Example(**{k: v[a:b] for k, v in arrays.items()}) for a, b in zip(bounds[:-1], bounds[1:])]


def check_member(model, path: Path, member: int) -> int:
    """How many nets the exported face model `model` (an onnx.ModelProto read from `path`) holds (> 1 for
    `export.average_models`'s); ValueError when it has no member `member`."""
    members = int({p.key: p.value for p in model.metadata_props}.get("averaged_models", 1))
    if not 0 <= member < members:
        raise ValueError(f"{path}: no member {member} to start from; it holds {members} model(s) (members 0.."
                         f"{members - 1})")
    return members


def load_onnx_weights(net, path: Path, member: int = 0) -> None:
    """Warm start: copy a previously exported face model's weights (same channels and depth) into `net`.
    From an average of models (`export.average_models`, as the shipped live model is), member `member`'s
    (0: the first).

    torch.onnx.export stores each Linear as a transposed MatMul constant, in module order.
    """
    import onnx
    import torch
    from onnx import numpy_helper

    model = onnx.load(str(path))
    tensors = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    if check_member(model, path, member) > 1:
        prefix = f"member{member}_"
        tensors = {name.removeprefix(prefix): value for name, value in tensors.items() if name.startswith(prefix)}
    matmuls = [tensors[name] for name in sorted((n for n in tensors if n.startswith("onnx::MatMul_")),
                                                key=lambda n: int(n.rsplit("_", 1)[1]))]
    linears = [net.inp] + [layer for block in net.blocks for layer in (block.temporal, block.mix)] + [net.head]
    if len(matmuls) != len(linears):
        raise ValueError(f"{path}: {len(matmuls)} weight matrices, the network has {len(linears)}")
    with torch.no_grad():
        for linear, weight in zip(linears, matmuls):
            linear.weight.copy_(torch.from_numpy(weight.T.copy()))
        for name, parameter in net.named_parameters():
            if name.endswith("bias"):
                parameter.copy_(torch.from_numpy(tensors[f"net.{name}"].copy()))
        for name in ("feature_mean", "feature_std"):
            getattr(net, name).copy_(torch.from_numpy(tensors[f"net.{name}"].copy()))


def feature_statistics(examples: list[Example]) -> tuple[np.ndarray, np.ndarray]:
    stacked = np.concatenate([e.features for e in examples])
    return stacked.mean(0), np.maximum(stacked.std(0), 1e-3)


def colour(features: np.ndarray, rng: np.random.Generator, equaliser_db: float) -> np.ndarray:
    """Log-mel frames as if heard through another microphone, voice or room: a random smooth gain curve
    over the bands (a tilt of up to ±equaliser_db/2 at the band edges plus three gentler ripples), applied
    to the power under the extractor's floor so that silence stays silence.

    Real voices and microphones differ in spectral balance far more than the corpus's voices do; one dev-set
    speaker carries 7–8 dB less above 5.5 kHz than another, and the model read his rounded vowels as a nasal
    murmur. A fixed curve per crop keeps every frame's timing, so the labels stay valid."""
    band = np.linspace(-0.5, 0.5, features.shape[-1])
    ripple = sum(rng.uniform(-equaliser_db / 4, equaliser_db / 4) * np.cos(np.pi * k * (band + 0.5) + rng.uniform(0, 2 * np.pi))
                 for k in (1, 2, 3))
    gain_db = rng.uniform(-equaliser_db, equaliser_db) * band + ripple
    power = np.maximum(np.exp(features) - LOG_FLOOR, 0.0) * 10 ** (gain_db / 10)
    return np.log(power + LOG_FLOOR).astype(np.float32)


def sample_batch(examples: list[Example], batch: int, crop: int, rng: np.random.Generator,
                 equaliser_db: float = 0.0):
    """Random crops, zero-padded at the end; the mask marks real frames. With `equaliser_db`, half the crops
    are coloured (`colour`)."""
    import torch

    feats = np.zeros((batch, crop, 80), np.float32)
    arkit = np.zeros((batch, crop, 52), np.float32)
    viseme = np.zeros((batch, crop), np.int64)
    vad = np.zeros((batch, crop), np.float32)
    mask = np.zeros((batch, crop), np.float32)
    for row in range(batch):
        example = examples[int(rng.integers(len(examples)))]
        length = len(example.features)
        start = int(rng.integers(0, max(1, length - crop + 1)))
        stop = min(length, start + crop)
        span = stop - start
        feats[row, :span] = example.features[start:stop]
        feats[row, span:] = example.features[stop - 1]
        if equaliser_db and rng.random() < 0.5:
            feats[row] = colour(feats[row], rng, equaliser_db)
        arkit[row, :span] = example.arkit[start:stop]
        viseme[row, :span] = example.viseme[start:stop]
        vad[row, :span] = example.voice_active[start:stop]
        mask[row, :span] = 1.0
    return tuple(torch.from_numpy(a) for a in (feats, arkit, viseme, vad, mask))


def face_loss(net, batch, shape_weights, closure: int, outputs=None):
    """Loss with outputs shifted by the lookahead: output at t + L is compared with target t.

    `outputs`: net(batch features) when the caller has already run it."""
    from torch.nn import functional as F

    feats, arkit, viseme, vad, mask = batch
    pred_arkit, viseme_logits, vad_logit = outputs if outputs is not None else net(feats)
    lag = net.lookahead
    if lag:
        pred_arkit, viseme_logits, vad_logit = pred_arkit[:, lag:], viseme_logits[:, lag:], vad_logit[:, lag:]
        arkit, viseme, vad, mask = arkit[:, :-lag], viseme[:, :-lag], vad[:, :-lag], mask[:, :-lag]
    rounded = sum((viseme == k).float() for k in rounded_classes())
    frame_weight = mask * (1.0 + (CLOSURE_WEIGHT - 1.0) * (viseme == closure).float()
                           + (ROUNDING_WEIGHT - 1.0) * rounded)
    shape_error = (pred_arkit - arkit).abs() * shape_weights
    shape_loss = (shape_error.sum(-1) * frame_weight).sum() / (frame_weight.sum() * shape_weights.sum())
    ce = F.cross_entropy(viseme_logits.reshape(-1, viseme_logits.shape[-1]), viseme.reshape(-1), reduction="none")
    viseme_loss = (ce * frame_weight.reshape(-1)).sum() / frame_weight.sum()
    bce = F.binary_cross_entropy_with_logits(vad_logit, vad, reduction="none")
    vad_loss = (bce * mask).sum() / mask.sum()
    total = 4.0 * shape_loss + 0.5 * viseme_loss + 0.2 * vad_loss
    parts = {"shape": shape_loss.item(), "viseme": viseme_loss.item(), "vad": vad_loss.item()}
    return total, parts


def descend(optimizer, loss, parameters) -> None:
    """One optimiser step on `loss`, gradients clipped to norm 1."""
    import torch

    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(parameters, 1.0)
    optimizer.step()


def train(config: TrainConfig, log=print, examples: list[Example] | None = None, corpus_s: float = 0.0,
          init: Path | None = None, init_member: int = 0):
    """Train a FaceNet (on `examples`, else a corpus built here; from `init`'s weights when given, member
    `init_member`'s of an average); returns (net, training summary dict)."""
    import torch

    from assets.model.net import FaceNet

    torch.set_num_threads(2)
    torch.manual_seed(config.seed)
    if examples is None:
        started = time.perf_counter()
        examples = build_examples(config.n_train, config.seed, held_out=False,
                                  augmented_copies=config.n_augmented_copies,
                                  human_voice_copies=config.human_voice_copies)
        corpus_s = time.perf_counter() - started
    total_frames = sum(len(e.features) for e in examples)
    log(f"corpus: {len(examples)} examples, {total_frames / 100 / 60:.1f} min of audio, built in {corpus_s:.0f} s")
    net = FaceNet(channels=config.channels, lookahead=config.lookahead)
    mean, std = feature_statistics(examples)
    net.feature_mean.copy_(torch.from_numpy(mean))
    net.feature_std.copy_(torch.from_numpy(std))
    if init is not None:
        load_onnx_weights(net, init, init_member)
        config = config.with_lr(config.lr / 2)  # fine-tuning: a gentler start keeps what the weights know
    shape_weights = torch.from_numpy(mouth_weights())
    closure = closure_class()
    optimizer = torch.optim.AdamW(net.parameters(), lr=config.lr, weight_decay=1e-4)
    rng = np.random.default_rng(config.seed)
    budget_s = config.minutes * 60
    train_started = time.perf_counter()
    step = 0
    parts: dict[str, float] = {}
    net.train()
    while step < config.max_steps:
        elapsed = time.perf_counter() - train_started
        if elapsed > budget_s:
            break
        progress = min(1.0, max(elapsed / budget_s, step / config.max_steps))
        lr = config.lr * (min(1.0, (step + 1) / 100) * 0.5 * (1 + math.cos(math.pi * progress)) + 0.02)
        for group in optimizer.param_groups:
            group["lr"] = lr
        loss, parts = face_loss(net, sample_batch(examples, config.batch, config.crop_frames, rng, config.equaliser_db),
                                shape_weights, closure)
        descend(optimizer, loss, net.parameters())
        step += 1
        if step % 50 == 0 or step == 1:
            log(f"step {step} t={time.perf_counter() - train_started:.0f}s lr={lr:.2e} loss={loss.item():.4f} {parts}")
    net.eval()
    summary = {
        "train_utterances": config.n_train,
        "train_examples": len(examples),
        "train_audio_min": round(total_frames / 100 / 60, 2),
        "corpus_build_s": round(corpus_s, 1),
        "train_steps": step,
        "train_s": round(time.perf_counter() - train_started, 1),
        "final_loss_parts": {k: round(v, 4) for k, v in parts.items()},
        "parameters": sum(p.numel() for p in net.parameters()),
        "receptive_field_ms": net.receptive_field_frames * 10,
        "lookahead_ms": net.lookahead * 10,
        "warm_start": (f"{init} (member {init_member})" if init_member else str(init)) if init else None,
        "equaliser_db": config.equaliser_db,
    }
    return net, summary


def live_model_from_onnx(path: Path, config: TrainConfig):
    """A trained live FaceNet back from its exported ONNX file (the offline model's first net)."""
    from assets.model.net import FaceNet

    net = FaceNet(channels=config.channels, lookahead=config.lookahead)
    load_onnx_weights(net, path)
    return net.eval()


def _previous_training_summary(report: Path | None) -> dict:
    """The live model's training figures from the existing report, kept when only the offline model is retrained."""
    previous = (report or Path("docs/model_report.md")).with_suffix(".json")
    if previous.is_file():
        return dict(json.loads(previous.read_text()).get("training") or {})
    return {}


def save_checkpoint(net, config: TrainConfig, path: Path) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"config": {"channels": config.channels, "lookahead": config.lookahead},
                "state_dict": net.state_dict()}, path)


def train_offline(live, live_path: Path, examples: list[Example], config: TrainConfig, log=print,
                  wide_member: int = 0):
    """The offline model for `live` (exported at `live_path`): a copy of it fine-tuned to draw each frame
    OFFLINE_LOOKAHEAD hops after hearing it, paired with it (net.OfflineFaceNet); (model, summary dict).
    `wide_member` > 0: when `live_path` is an average (the live net its member 0), the wide net starts from
    that other member instead. Nets from other starts miss different sounds: the shipped pair, H's live net
    with a wide net grown from M's, rounds more than H's own pair and closes more than M's
    (the experiment log, twenty-fifth round).

    A wider lookahead alone closes fewer human p/b/m than the live net (it is surer of its visemes, and on
    an unheard voice surely wrong), but it closes others the live net misses: the voiceless closures it
    knows only by their release. Together they close more than either (the experiment log, tenth round).
    """
    from assets.model.net import OfflineFaceNet

    wide, summary = train(config.with_lookahead(OFFLINE_LOOKAHEAD), log=log, examples=examples, init=live_path,
                          init_member=wide_member)
    return OfflineFaceNet(live, wide, (closure_class(), *rounded_classes())).eval(), summary


def offline_model_is_better(results: dict) -> bool:
    """Keep the offline model only if, as `lipsync` shows it, it closes and rounds at least as many held-out
    p/b/m and oo/oh/w as the live model run offline (both through the centred mouth shaper) on the synthetic
    held-out set and on the human dev set, and its mouth keeps within 10 ms of the speech on both."""
    articulation = results.get("articulation") or {}
    offline, live = articulation.get("offline_full_context"), articulation.get("fp32_offline")
    if not offline or not live:
        return False
    for kind in ("synthetic", "human"):
        mine, theirs = offline.get(kind), live.get(kind)
        if not mine or not theirs:
            continue
        for key in ("closure_recall_pct", "rounding_recall_pct"):
            if mine.get(key) is not None and theirs.get(key) is not None and mine[key] < theirs[key]:
                return False
        if abs(mine.get("aperture_lag_ms") or 0) > 10:
            return False
    return True


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse (parser.error, before any work) options that do not go together, and a member --init lacks."""
    if args.offline_only and args.init is None:
        parser.error("--offline-only needs --init LIVE_MODEL.onnx (the live model the offline model starts from)")
    if args.wide_from_member and not args.offline_only:
        parser.error("--wide-from-member needs --offline-only (it picks the wide net's start from --init's average)")
    if args.init_member and (args.init is None or args.offline_only):
        parser.error("--init-member needs --init and no --offline-only (it picks the live model's start from --init's "
                     "average; --offline-only keeps member 0 as the live net)")
    chosen = {option: member for option, member in (("--wide-from-member", args.wide_from_member),
                                                   ("--init-member", args.init_member)) if member}
    if chosen:
        import onnx

        averaged = onnx.load(str(args.init), load_external_data=False)
        for option, member in chosen.items():
            try:
                check_member(averaged, args.init, member)
            except ValueError as error:
                parser.error(f"{option}: {error}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("assets/models"), help="where the .onnx files go")
    parser.add_argument("--tiny", action="store_true", help="a few sentences and steps, for CI (< 2 min)")
    parser.add_argument("--minutes", type=float, help="training time budget per model (default 14, tiny 0.5)")
    parser.add_argument("--report", type=Path, help="model report path (.md; .json beside it); default docs/")
    parser.add_argument("--checkpoint", type=Path, help="where the torch checkpoint goes (default build/)")
    parser.add_argument("--init", type=Path, help="warm start both models from this exported face model (.onnx)")
    parser.add_argument("--init-member", type=int, default=0, metavar="K",
                        help="with an averaged --init: warm start the live model from member K's weights (default 0)")
    parser.add_argument("--corpus-cache", type=Path, help="reuse (or create) the built corpus here (.npz)")
    parser.add_argument("--offline-only", action="store_true",
                        help="keep the live model given by --init; train only the offline model's wide net from it")
    parser.add_argument("--wide-from-member", type=int, default=0, metavar="K",
                        help="with --offline-only and an averaged --init: grow the wide net from member K's weights "
                             "(the live net stays member 0)")
    parser.add_argument("--offline-minutes", type=float,
                        help=f"the offline model's wide net's time budget (default {OFFLINE_MINUTES:g})")
    parser.add_argument("--equaliser-db", type=float,
                        help="colour half the training crops by a random equaliser this wide (train.colour; default off)")
    args = parser.parse_args(argv)
    check_arguments(parser, args)
    config = TrainConfig.tiny() if args.tiny else TrainConfig(minutes=14.0)
    if args.minutes is not None:
        config.minutes = args.minutes
    if args.equaliser_db is not None:
        config.equaliser_db = args.equaliser_db
    offline_minutes = args.offline_minutes or (config.minutes if args.tiny else OFFLINE_MINUTES)
    started = time.perf_counter()
    if args.corpus_cache and args.corpus_cache.is_file():
        try:
            examples = load_examples(args.corpus_cache)
        except ValueError as error:
            parser.error(f"--corpus-cache: {error}")
    else:
        provenance: dict = {}
        examples = build_examples(config.n_train, config.seed, held_out=False,
                                  augmented_copies=config.n_augmented_copies,
                                  human_voice_copies=config.human_voice_copies, provenance=provenance)
        if args.corpus_cache:
            save_examples(examples, args.corpus_cache, provenance)
    corpus_s = time.perf_counter() - started
    print(f"corpus built in {corpus_s:.0f} s", flush=True)
    if not args.tiny and args.minutes is None and args.offline_minutes is None:
        fitted = fitted_budgets(corpus_s, config.minutes, offline_minutes)
        if fitted != (config.minutes, offline_minutes):
            ends = expected_minutes(corpus_s, *fitted)
            target = (f"to finish within {DEADLINE_MINUTES:g} minutes" if ends <= DEADLINE_MINUTES + 1e-6 else
                      f"(their floor, {MIN_BUDGET_SHARE:g} of each): it ends after about {ends:.0f} minutes, past "
                      f"the {DEADLINE_MINUTES:g}-minute target")
            print(f"training budgets {config.minutes:g} + {offline_minutes:g} min shortened to {fitted[0]:.1f} + "
                  f"{fitted[1]:.1f} min {target}", flush=True)
            config.minutes, offline_minutes = fitted

    from assets.model.evaluate import evaluate_and_report
    from assets.model.export import export_all, export_offline

    checkpoint = args.checkpoint or Path("build/face_model") / ("face_tiny.pt" if args.tiny else "face.pt")
    live_config = config.with_lookahead(LIVE_LOOKAHEAD)
    if args.offline_only:
        live = live_model_from_onnx(args.init, live_config)
        paths = {"fp32": args.init, "int8": args.init.with_name("face_int8.onnx")}
        summary = _previous_training_summary(args.report)
    else:
        live, summary = train(live_config, examples=examples, corpus_s=corpus_s, init=args.init,
                              init_member=args.init_member)
        save_checkpoint(live, live_config, checkpoint)
        paths = export_all(live, args.out)
    offline, offline_summary = train_offline(live, paths["fp32"], examples,
                                             dataclasses.replace(config, minutes=offline_minutes),
                                             wide_member=args.wide_from_member)
    paths["offline"] = export_offline(offline, Path(args.out) / "face_offline.onnx")
    summary["offline_model"] = offline_summary
    elapsed = round(time.perf_counter() - started, 1)
    if args.offline_only:
        offline_summary["offline_only_run_s"] = elapsed
    else:
        summary["total_pipeline_s"] = elapsed
    report = args.report or (Path(args.out) / "model_report.md" if args.tiny else Path("docs/model_report.md"))
    results = evaluate_and_report(paths, report, training=summary, tiny=args.tiny)
    if not args.tiny and not offline_model_is_better(results):
        # selection: the offline path uses face_offline.onnx only when it is at least as good as the live model
        paths["offline"].unlink(missing_ok=True)
        print("face_offline.onnx is not at least as good as the live model on held-out and human dev speech: "
              "removed, offline analysis uses the live model")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
