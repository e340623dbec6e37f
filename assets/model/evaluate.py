"""Held-out quality and per-hop cost of the exported face models (onnxruntime only, no torch).

Quality is measured on voices and sentences the model never trained on (the corpus's
held-out split), offline with the lookahead compensated, on the 10 ms grid:
- viseme frame accuracy, overall and per OVR viseme class;
- p/b/m closure recall: a closure interval (target viseme PP) counts as recalled when the
  predicted mouth is closed (`studio.speech.visemes.lips_closed`) on some 60 fps display
  frame within the interval widened by one 60 fps frame on each side;
- false closures: share of frames whose target mouth is clearly open where the prediction
  shuts the lips (keeps closure recall honest: always-closed lips would score 100 % recall);
- silent mouth at rest: share of frames without voice where the predicted jaw and lips rest;
- cost of one 10 ms hop (features + model step, one thread), median and p99.

`evaluate_quality()` and `benchmark_face_model()` are what `avatar-studio bench` calls.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from studio.avatar.arkit import ARKIT_INDEX
from studio.engine.face_model import FaceModel, default_model_path
from studio.engine.features import LogMelExtractor
from studio.speech.visemes import VISEME_INDEX

DISPLAY_FPS = 60.0
FEATURE_FPS = 100.0
REST_JAW_OPEN_MAX = 0.12
REST_MOUTH_SHAPES = ("mouthFunnel", "mouthPucker", "mouthStretchLeft", "mouthStretchRight",
                     "mouthLowerDownLeft", "mouthLowerDownRight", "mouthUpperUpLeft", "mouthUpperUpRight",
                     "mouthSmileLeft", "mouthSmileRight")
REST_MOUTH_MAX = 0.2
HELD_OUT_SEED = 90210


def mouth_at_rest(arkit: np.ndarray) -> np.ndarray:
    """(n, 52) -> (n,) bool: jaw nearly shut and no lip shape held."""
    jaw = arkit[:, ARKIT_INDEX["jawOpen"]] <= REST_JAW_OPEN_MAX
    lips = arkit[:, [ARKIT_INDEX[n] for n in REST_MOUTH_SHAPES]].max(1) <= REST_MOUTH_MAX
    return jaw & lips


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) frame index ranges where flags is True."""
    padded = np.concatenate([[False], flags, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[::2], edges[1::2]))


def _at_display_times(arkit: np.ndarray, times_s: np.ndarray) -> np.ndarray:
    """Linear interpolation of 100 fps outputs at 60 fps display instants."""
    grid = np.arange(len(arkit)) / FEATURE_FPS
    return np.stack([np.interp(times_s, grid, arkit[:, k]) for k in range(arkit.shape[1])], axis=1)


def closure_hits(pred_arkit: np.ndarray, target_viseme: np.ndarray, closure: int) -> tuple[int, int]:
    """(recalled closure intervals, all closure intervals) for one utterance."""
    flags = _closure_flags(pred_arkit, target_viseme, closure)
    return sum(hit for _, hit in flags), len(flags)


def _closure_flags(pred_arkit: np.ndarray, target_viseme: np.ndarray, closure: int) -> list[tuple[tuple[int, int], bool]]:
    """Each closure interval (frames) and whether the lips meet in it (±1 display frame)."""
    from studio.speech.visemes import lips_closed

    flags = []
    for start, stop in _runs(target_viseme == closure):
        begin_s = start / FEATURE_FPS - 1 / DISPLAY_FPS
        end_s = stop / FEATURE_FPS + 1 / DISPLAY_FPS
        first = int(np.ceil(max(0.0, begin_s) * DISPLAY_FPS))
        last = int(np.floor(min((len(pred_arkit) - 1) / FEATURE_FPS, end_s) * DISPLAY_FPS))
        times = np.arange(first, last + 1) / DISPLAY_FPS
        hit = bool(times.size) and any(bool(lips_closed(frame)) for frame in _at_display_times(pred_arkit, times))
        flags.append(((start, stop), hit))
    return flags


def quality_metrics(model: FaceModel, examples) -> dict:
    """Held-out quality of one model over a list of train.Example."""
    from studio.speech.visemes import LIPS_CLOSED_MAX_OPENNESS, VISEMES, lips_closed, mouth_openness

    closure = list(VISEMES).index("PP")
    n_classes = len(VISEMES)
    correct = np.zeros(n_classes)
    counts = np.zeros(n_classes)
    closure_hit = closure_total = 0
    silent_rest = silent_total = 0
    mouth_error = []
    vad_correct = vad_total = 0
    open_closed = open_total = 0
    for example in examples:
        out = model.run_offline(example.features)
        predicted = out.visemes.argmax(1)
        np.add.at(counts, example.viseme, 1)
        np.add.at(correct, example.viseme[predicted == example.viseme], 1)
        hits, total = closure_hits(out.arkit, example.viseme, closure)
        closure_hit += hits
        closure_total += total
        silent = (example.voice_active < 0.5) & (example.arkit.max(1) < 0.02)  # target itself at rest
        silent_rest += int(mouth_at_rest(out.arkit[silent]).sum())
        silent_total += int(silent.sum())
        mouth = [ARKIT_INDEX["jawOpen"]] + [i for n, i in ARKIT_INDEX.items() if n.startswith("mouth")]
        mouth_error.append(np.abs(out.arkit[:, mouth] - example.arkit[:, mouth]).mean())
        target_open = mouth_openness(example.arkit) > 3 * LIPS_CLOSED_MAX_OPENNESS
        open_closed += int(np.asarray(lips_closed(out.arkit[target_open])).sum())
        open_total += int(target_open.sum())
        vad_correct += int(((out.voice_activity >= 0.5) == (example.voice_active >= 0.5)).sum())
        vad_total += len(example.voice_active)
    per_class = {
        f"viseme_{name}_frame_accuracy_pct": round(100 * correct[i] / counts[i], 1) if counts[i] else None
        for i, name in enumerate(VISEMES)
    }
    return {
        "held_out_utterances": len(examples),
        "held_out_frames": int(counts.sum()),
        "viseme_frame_accuracy_pct": round(100 * correct.sum() / max(1, counts.sum()), 2),
        "viseme_balanced_accuracy_pct": round(100 * float(np.mean(correct[counts > 0] / counts[counts > 0])), 2),
        "closure_intervals": closure_total,
        "closure_recall_pct": round(100 * closure_hit / max(1, closure_total), 2),
        "open_mouth_false_closure_pct": round(100 * open_closed / max(1, open_total), 2),
        "silent_frames": silent_total,
        "silent_mouth_at_rest_pct": round(100 * silent_rest / max(1, silent_total), 2),
        "mouth_weight_mae": round(float(np.mean(mouth_error)), 4),
        "voice_activity_frame_accuracy_pct": round(100 * vad_correct / max(1, vad_total), 2),
        "per_class": per_class,
    }


def hop_cost(model: FaceModel, hops: int = 2000, seed: int = 0) -> dict:
    """Wall time of one 10 ms hop: 160 new samples -> log-mel frame -> model step (median, p99)."""
    rng = np.random.default_rng(seed)
    audio = (0.1 * rng.standard_normal(160 * (hops + 100))).astype(np.float32)
    extractor = LogMelExtractor()
    model.reset()
    times = []
    for hop in range(hops + 100):
        started = time.perf_counter()
        model.step(extractor.push(audio[hop * 160 : (hop + 1) * 160]))
        times.append(time.perf_counter() - started)
    cost = np.array(times[100:]) * 1e3
    return {"median_ms": round(float(np.median(cost)), 4), "p99_ms": round(float(np.percentile(cost, 99)), 4)}


def held_out_examples(n: int = 40, seed: int = HELD_OUT_SEED):
    from assets.model.train import build_examples

    return build_examples(n, seed, held_out=True)


def model_paths(paths: dict | None) -> dict[str, Path]:
    """The given variant -> file map, else the shipped models (the offline one where it is installed)."""
    if paths is None:
        paths = {v: default_model_path(v) for v in ("fp32", "int8", "offline")}
        paths = {v: p for v, p in paths.items() if v != "offline" or p.is_file()}
    return {v: Path(p) for v, p in paths.items()}


def benchmark_face_model(paths: dict | None = None, hops: int = 2000) -> dict:
    """Per-hop cost of each model variant on one CPU thread (ms)."""
    result = {}
    for variant, path in model_paths(paths).items():
        cost = hop_cost(FaceModel(variant, path=path, threads=1), hops)
        result[f"hop_cost_{variant}_median_ms"] = cost["median_ms"]
        result[f"hop_cost_{variant}_p99_ms"] = cost["p99_ms"]
    return result


def evaluate_quality(paths: dict | None = None, n_utterances: int = 40, examples=None) -> dict:
    """Held-out quality per variant; fp32 figures unprefixed, the others prefixed with their variant."""
    examples = examples if examples is not None else held_out_examples(n_utterances)
    result = {}
    for variant, path in model_paths(paths).items():
        metrics = quality_metrics(FaceModel(variant, path=path), examples)
        if variant == "fp32":
            result.update(metrics)
        else:
            result.update({f"{variant}_{k}": v for k, v in metrics.items() if k != "per_class"})
    return result


def report_markdown(results: dict) -> str:
    """The face model report (report.md) from the evaluation results."""
    lines = ["# Face model report", "",
             "Generated by `python -m assets.model.train`. Held-out voices and sentences, never trained on;",
             "offline pass with lookahead compensated; hop cost = 160 samples -> log-mel -> model step, 1 thread.", "",
             "| metric | value |", "| --- | --- |"]
    for key, value in results.items():
        if not isinstance(value, dict):
            lines.append(f"| {key} | {value} |")
    articulation = results.get("articulation") or {}
    keys = ("closure_recall_pct", "rounding_recall_pct", "open_vowel_recall_pct", "pause_mouth_at_rest_pct",
            "aperture_lag_ms", "onset_delay_ms", "vowel_lips_shut_pct")
    if articulation:
        lines += ["", "## articulation: synthetic held-out / human dev (validation) / human dev through a telephone band "
                  "(validation) (as shown: mouth shaper on)", "",
                  "| model, path | " + " | ".join(keys) + " |", "| --- |" + " --- |" * len(keys)]
        for name, sets in articulation.items():
            human, telephone = sets.get("human") or {}, sets.get("human_telephone") or {}
            cells = [f"{sets['synthetic'].get(k)} / {human.get(k, '—')} / {telephone.get(k, '—')}" for k in keys]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    rooms = results.get("lipsync_human_dev_by_level_and_room") or {}
    if rooms:
        lines += ["", "## lipsync on the human dev set (validation) at other levels and in room noise (silence gate on)", "",
                  "| condition | " + " | ".join(keys) + " |", "| --- |" + " --- |" * len(keys)]
        lines += [f"| {name} | " + " | ".join(str(cells.get(k)) for k in keys) + " |" for name, cells in rooms.items()]
    for section in ("per_class", "training", "human_dev_set", "human_dev_by_phone_and_speaker"):
        if isinstance(results.get(section), dict):
            label = " (validation: it chose the models)" if section.startswith("human_dev") else ""
            lines += ["", f"## {section.replace('_', ' ')}{label}", "", "| key | value |", "| --- | --- |"]
            lines += [f"| {k} | {v} |" for k, v in _flat_items(results[section])]
    return "\n".join(lines) + "\n"


def _flat_items(values: dict, prefix: str = ""):
    """(key, value) rows with nested dicts spelled out as dotted keys: one fact per table row."""
    for key, value in values.items():
        if isinstance(value, dict) and value:
            yield from _flat_items(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


class LipsyncPipeline:
    """What `avatar-studio lipsync` writes, at 100 fps: the whole offline analysis (features, model, silence
    gate, mouth shaper) run on an example's audio, so the report scores the output users get."""

    def __init__(self, variant: str, path: Path) -> None:
        self.variant, self.path = variant, Path(path)

    def arkit(self, example) -> np.ndarray:
        from studio.engine.offline import StreamingAnalysis
        from studio.engine.sources import ENGINE_RATE

        if example.audio is None:
            raise ValueError("LipsyncPipeline needs examples built with their audio")
        analysis = StreamingAnalysis(fps=FEATURE_FPS, model_variant=self.variant, face_only=True, model_path=self.path)
        blocks = [analysis.push(chunk) for chunk in np.array_split(example.audio, max(1, len(example.audio) //
                                                                                     ENGINE_RATE))]
        blocks.append(analysis.finish())
        arkit = np.concatenate([block.arkit for block in blocks if block is not None])
        frames = len(example.viseme)
        return np.concatenate([arkit, np.repeat(arkit[-1:], max(0, frames - len(arkit)), axis=0)])[:frames]


class LiveEngine:
    """What the studio shows live, at 100 fps: the engine (features, model, streaming shaper, silence gate, motion)
    fed an example's audio hop by hop as a microphone delivers it, its frames read at the example's frame times."""

    def __init__(self, variant: str, path: Path) -> None:
        from studio.engine.pipeline import Engine

        self.engine = Engine(model_variant=variant, model_path=path)

    def arkit(self, example) -> np.ndarray:
        from studio.engine.bench import HopFeeder
        from studio.engine.sources import ENGINE_RATE

        if example.audio is None:
            raise ValueError("LiveEngine needs examples built with their audio")
        # 100 ms of silence after the audio: the model's lookahead still owes the last hops
        feeder = HopFeeder(np.concatenate([example.audio, np.zeros(ENGINE_RATE // 10, np.float32)]))
        queue = self.engine.subscribe(len(feeder.audio) // 100 + 100)
        self.engine.set_source(feeder)
        while not feeder.finished:
            self.engine.run_once()
        frames = queue.drain()
        self.engine.unsubscribe(queue)
        times = np.array([frame.media_time_s for frame in frames]) - self.engine.source_start_media_s
        shown = np.stack([frame.arkit for frame in frames])
        grid = np.arange(len(example.viseme)) / FEATURE_FPS
        return np.stack([np.interp(grid, times, shown[:, k]) for k in range(shown.shape[1])], axis=1)


def _predict(model, example) -> np.ndarray:
    """(T, 52) at 100 fps for one example: a pipeline (anything with `arkit(example)`: LipsyncPipeline, LiveEngine,
    rhubarb.RhubarbOutput) reads its audio, a model its features."""
    if callable(getattr(model, "arkit", None)):
        return model.arkit(example)
    return model.run_offline(example.features).arkit


class ShapedModel:
    """A face model as the studio shows it: its output through the mouth shaper (studio.engine.mouth_shaper)."""

    def __init__(self, model: FaceModel, centred: bool) -> None:
        self.model, self.centred = model, centred

    def run_offline(self, features: np.ndarray):
        from studio.engine.face_model import FaceOutput
        from studio.engine.mouth_shaper import shape_mouth

        out = self.model.run_offline(features)
        return FaceOutput(shape_mouth(out.arkit, out.visemes, self.centred), out.visemes, out.voice_activity)


def articulation_report(paths: dict, synthetic, human, human_telephone=()) -> dict:
    """Per-class articulation of each variant as shown live (shaper streaming) and offline (centred), on the
    synthetic held-out set, the human dev set and that set through a telephone band side by side; row
    `live_engine`, of what the live engine shows from the audio (the fp32 model, silence gate and motion
    included); and row `lipsync`, of what the offline analysis writes from the audio (the full-context model
    where given, else the live fp32 one)."""

    def on_each_set(model) -> dict:
        return {"synthetic": articulation_metrics(model, synthetic),
                "human": articulation_metrics(model, human) if human else None,
                "human_telephone": articulation_metrics(model, human_telephone) if human_telephone else None}

    report = {}
    for variant, path in model_paths(paths).items():
        model = FaceModel(variant, path=path)
        modes = (("full_context", True),) if variant == "offline" else (("live", False), ("offline", True))
        for mode, centred in modes:
            report[f"{variant}_{mode}"] = on_each_set(ShapedModel(model, centred))
    if "fp32" in model_paths(paths):
        report["live_engine"] = on_each_set(LiveEngine("fp32", model_paths(paths)["fp32"]))
    pipeline = lipsync_pipeline(paths)
    if pipeline is not None:
        report["lipsync"] = on_each_set(pipeline)
    return report


def lipsync_pipeline(paths: dict) -> LipsyncPipeline | None:
    """What `lipsync` runs for these models: the full-context model where given, else the live fp32 one."""
    models = model_paths(paths)
    variant = "offline" if "offline" in models else "fp32"
    return LipsyncPipeline(variant, models[variant]) if variant in models else None


ROOM_CONDITIONS = (("20 dB quieter", -20.0, None), ("10 dB hotter", 10.0, None), ("20 dB hotter", 20.0, None),
                   ("room noise 20 dB below the speech", 0.0, 20.0), ("room noise 10 dB below the speech", 0.0, 10.0))


def room_report(pipeline: LipsyncPipeline, clips, as_recorded: dict) -> dict:
    """What `lipsync` writes from the human dev set through a quieter or hotter microphone gain and in a noisy room
    (`ROOM_CONDITIONS`), after `as_recorded` (its articulation on the clips as they are, already measured):
    a user's level and room decide whether the mouth rests in pauses."""
    from assets.model import human_dev

    report = {"as recorded": as_recorded}
    for name, gain_db, snr_db in ROOM_CONDITIONS:
        report[name] = articulation_metrics(pipeline, human_dev.to_examples(clips, gain_db=gain_db, snr_db=snr_db))
    return report


def evaluate_and_report(paths: dict, report_md: Path, training: dict | None = None, tiny: bool = False) -> dict:
    """Quality + cost for the given model files; writes report_md and the .json beside it."""
    results = evaluate_quality(paths, n_utterances=6 if tiny else 60)
    results.update(benchmark_face_model(paths, hops=300 if tiny else 3000))
    from assets.model import human_dev

    human, telephone, clips = [], [], []
    human_summary = {"note": "klettres-data, ktuberling-data, tuxpaint-stamps-default or pocketsphinx not installed: "
                             "no human dev set"}
    try:
        if human_dev.available() and not tiny:
            clips, human_summary = human_dev.load_dev_set()
            human = human_dev.to_examples(clips)
            telephone = human_dev.to_examples(clips, telephone=True)
    except ImportError:
        pass
    results["human_dev_set"] = human_summary
    results["articulation"] = articulation_report(paths, held_out_examples(6 if tiny else 60), human, telephone)
    if human and "fp32" in model_paths(paths):
        live = ShapedModel(FaceModel("fp32", path=model_paths(paths)["fp32"]), centred=False)
        results["human_dev_by_phone_and_speaker"] = human_breakdown(live, clips, human)
        results["lipsync_human_dev_by_level_and_room"] = room_report(
            lipsync_pipeline(paths), clips, results["articulation"]["lipsync"]["human"])
    if training:
        results["training"] = training
        results["train_s"] = training.get("train_s")
    report_md = Path(report_md)
    report_md.parent.mkdir(parents=True, exist_ok=True)
    report_md.write_text(report_markdown(results))
    report_md.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    return results


def main() -> None:
    """Re-evaluate the shipped models, keeping the training section of an existing report."""
    report = Path("docs/model_report.md")
    previous = report.with_suffix(".json")
    training = json.loads(previous.read_text()).get("training") if previous.is_file() else None
    print(json.dumps(evaluate_and_report(model_paths(None), report, training=training), indent=2))



ROUNDED = ("mouthFunnel", "mouthPucker")
ROUND_VISIBLE = 0.25  # funnel or pucker at least this, and half the target's own peak
ROUND_CHANNELS = [ARKIT_INDEX[name] for name in ROUNDED]
CLOSURE_VISEME = VISEME_INDEX["PP"]
ROUNDED_VISEMES = {VISEME_INDEX["ou"], VISEME_INDEX["oh"]}
PAUSE_MIN_FRAMES = 25  # pauses over 250 ms
PAUSE_EDGE_FRAMES = 5  # the mouth may still be closing or opening 50 ms into or before a pause
MAX_LAG_FRAMES = 10
VOWEL_VISEMES = [VISEME_INDEX[name] for name in ("aa", "E", "ih", "oh", "ou")]
SPREAD_VISEMES = [VISEME_INDEX[name] for name in ("aa", "E", "ih")]  # unrounded vowels
VOWEL_EDGE_FRAMES = 3
ONSET_OPEN = 0.1  # mouth_openness above this: the mouth has opened (the bench's speech_to_frame threshold)
ONSET_EARLY_FRAMES, ONSET_LATE_FRAMES = 10, 30  # an opening searched from 100 ms before to 300 ms after the target's
ISSUE_ROUNDED_PHONES = ("UW", "OW", "W")  # CMU phones: the human dev set's rounding target is stated on these


def _interval_hits(pred: np.ndarray, target: np.ndarray, classes: np.ndarray, wanted: set[int],
                   channels: list[int], need_abs: float) -> tuple[int, int]:
    flags = _interval_flags(pred, target, classes, wanted, channels, need_abs)
    return sum(hit for _, hit in flags), len(flags)


def _interval_flags(pred: np.ndarray, target: np.ndarray, classes: np.ndarray, wanted: set[int],
                    channels: list[int], need_abs: float) -> list[tuple[tuple[int, int], bool]]:
    """Intervals of `wanted` visemes whose target peak on `channels` is clear, each with whether it is hit:
    the prediction's peak within the interval (±1 display frame) reaches half the target's and `need_abs`."""
    flags = []
    slack = int(np.ceil(FEATURE_FPS / DISPLAY_FPS))
    for start, stop in _runs(np.isin(classes, list(wanted))):
        target_peak = float(target[start:stop][:, channels].max())
        if target_peak < 0.2:
            continue
        lo, hi = max(0, start - slack), min(len(pred), stop + slack)
        flags.append(((start, stop), float(pred[lo:hi][:, channels].max()) >= max(need_abs, 0.5 * target_peak)))
    return flags


def human_breakdown(model, clips, examples) -> dict:
    """Closures and rounded sounds of the human dev set by aligned phone and by speaker ("hits/intervals"):
    which sounds and voices the misses come from (a British GOAT vowel is rounded far less than the US
    dictionary's OW says, for one). `rounding UW+OW+W` totals the phones the rounding target names; the
    articulation table's rounding also counts the other sounds of the rounded visemes (AO, AW, OY)."""
    tally: dict[str, list[int]] = {}
    for clip, example in zip(clips, examples):
        out = _predict(model, example)
        kinds = (("closure", _closure_flags(out, example.viseme, CLOSURE_VISEME)),
                 ("rounding", _interval_flags(out, example.arkit, example.viseme, ROUNDED_VISEMES, ROUND_CHANNELS,
                                              ROUND_VISIBLE)))
        for kind, flags in kinds:
            for (start, stop), hit in flags:
                middle = (start + stop) / 2 / FEATURE_FPS
                phone = next((name for name, a, b in clip.phones if a <= middle < b), "?")
                keys = [f"{kind} {phone}", f"{kind} {clip.speaker}"]
                if kind == "rounding" and phone in ISSUE_ROUNDED_PHONES:
                    keys.append("rounding " + "+".join(ISSUE_ROUNDED_PHONES))
                for key in keys:
                    tally.setdefault(key, [0, 0])
                    tally[key][0] += hit
                    tally[key][1] += 1
    return {key: f"{hits}/{total}" for key, (hits, total) in sorted(tally.items())}


def _interiors(out: np.ndarray, target_viseme: np.ndarray, classes: list[int]):
    """The output frames of each run of `classes` in the target, VOWEL_EDGE_FRAMES in from either edge."""
    for start, stop in _runs(np.isin(target_viseme, classes)):
        yield out[start + VOWEL_EDGE_FRAMES:stop - VOWEL_EDGE_FRAMES]


def articulation_metrics(model: FaceModel, examples) -> dict:
    """Per-class articulation on any labelled set: closure recall (±1 frame at 60 fps), rounding on UW/OW/W,
    open vowels, mouth at rest in pauses over 250 ms, the lag that maximises the aperture correlation, and
    false closures: the lips shut inside a vowel (30 ms in from either edge, where a neighbouring p/b/m or
    the aligner's timing does not reach; lower is better), and false rounding: an unrounded vowel (a, e, i)
    shown rounded, funnel or pucker at the visible level, measured the same way (lower is better). And the
    onset delay: after each pause over 250 ms, how much later than the target the mouth opens (mean ms; the
    bench's speech_to_frame times the same moment on a synthetic burst, this on speech)."""
    from studio.speech.visemes import lips_closed, mouth_openness

    open_vowel = {VISEME_INDEX["aa"]}
    jaw = [ARKIT_INDEX["jawOpen"]]
    counts = dict.fromkeys(("closure_hit", "closure", "round_hit", "round", "open_hit", "open", "rest", "pause",
                            "vowel_shut", "vowel", "spread_rounded", "spread"), 0)
    onset_delays: list[int] = []
    pred_open, target_open = [], []
    for example in examples:
        out = _predict(model, example)
        hits, total = closure_hits(out, example.viseme, CLOSURE_VISEME)
        counts["closure_hit"] += hits
        counts["closure"] += total
        hits, total = _interval_hits(out, example.arkit, example.viseme, ROUNDED_VISEMES, ROUND_CHANNELS, ROUND_VISIBLE)
        counts["round_hit"] += hits
        counts["round"] += total
        hits, total = _interval_hits(out, example.arkit, example.viseme, open_vowel, jaw, 0.2)
        counts["open_hit"] += hits
        counts["open"] += total
        silent = (example.voice_active < 0.5) & (example.arkit.max(1) < 0.02)
        for start, stop in _runs(silent):
            if stop - start >= PAUSE_MIN_FRAMES:
                inner = out[start + PAUSE_EDGE_FRAMES:stop - PAUSE_EDGE_FRAMES]
                counts["rest"] += int(mouth_at_rest(inner).sum())
                counts["pause"] += len(inner)
                onset_delays += _onset_delays(out, example.arkit, stop)
        for inner in _interiors(out, example.viseme, VOWEL_VISEMES):
            counts["vowel_shut"] += int(lips_closed(inner).sum())
            counts["vowel"] += len(inner)
        for inner in _interiors(out, example.viseme, SPREAD_VISEMES):
            counts["spread_rounded"] += int((inner[:, ROUND_CHANNELS].max(axis=1, initial=0.0) >= ROUND_VISIBLE).sum())
            counts["spread"] += len(inner)
        pred_open.append(mouth_openness(out))
        target_open.append(mouth_openness(example.arkit))
    pred, target = np.concatenate(pred_open), np.concatenate(target_open)
    pred, target = pred - pred.mean(), target - target.mean()
    lags = range(-MAX_LAG_FRAMES, MAX_LAG_FRAMES + 1)
    corr = [float(np.dot(pred[max(0, k):len(pred) + min(0, k)], target[max(0, -k):len(target) - max(0, k)]))
            for k in lags]

    def pct(hit: str, total: str) -> float | None:
        return round(100 * counts[hit] / counts[total], 1) if counts[total] else None

    return {
        "closure_recall_pct": pct("closure_hit", "closure"), "closure_intervals": counts["closure"],
        "rounding_recall_pct": pct("round_hit", "round"), "rounding_intervals": counts["round"],
        "open_vowel_recall_pct": pct("open_hit", "open"), "open_vowel_intervals": counts["open"],
        "pause_mouth_at_rest_pct": pct("rest", "pause"), "pause_frames": counts["pause"],
        "aperture_lag_ms": 10 * lags[int(np.argmax(corr))],  # + : the mouth moves after the target
        "vowel_lips_shut_pct": pct("vowel_shut", "vowel"), "vowel_frames": counts["vowel"],
        "unrounded_vowel_rounded_pct": pct("spread_rounded", "spread"), "unrounded_vowel_frames": counts["spread"],
        "onset_delay_ms": round(10 * float(np.mean(onset_delays)), 1) if onset_delays else None,
        "onsets": len(onset_delays),
    }


def _onset_delays(out: np.ndarray, target: np.ndarray, pause_end: int) -> list[int]:
    """Frames from the target's mouth opening after a pause to the output's (+: late), as a list of one or none.

    An output that does not open within ONSET_LATE_FRAMES counts as that late; one that opened more than
    ONSET_EARLY_FRAMES early was open in the pause already, which the rest figure counts, so it counts as that early.
    """
    from studio.speech.visemes import mouth_openness

    opens = np.flatnonzero(mouth_openness(target[pause_end:pause_end + ONSET_LATE_FRAMES]) > ONSET_OPEN)
    if not opens.size:
        return []
    at = pause_end + int(opens[0])
    start = max(0, at - ONSET_EARLY_FRAMES)
    shown = np.flatnonzero(mouth_openness(out[start:at + ONSET_LATE_FRAMES]) > ONSET_OPEN)
    return [start + int(shown[0]) - at if shown.size else ONSET_LATE_FRAMES]


if __name__ == "__main__":
    main()
