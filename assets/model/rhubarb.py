"""Rhubarb Lip Sync, the offline tool issue 10 names as the reference, scored as our own output is.

Rhubarb (MIT) gives one of nine mouth shapes at a time, A–H and X, meant to be shown as they are (a 2-D mouth
swaps drawings). Each shape becomes the viseme pose it draws (`SHAPE_VISEMES`, from Rhubarb's own table of
which sounds each shape serves), held until the next cue, on the 100 fps grid; `evaluate.articulation_metrics`
then scores it exactly as it scores `lipsync`. The binary is not shipped or downloaded here: pass its path
(`assets/model/SOURCES.md` says where it came from).

Rhubarb runs two ways: its default recognizer (pocketsphinx, English words) without the text, and the same with
the words given (`-d`, as a user who has the script would). Its phonetic recognizer (for other languages) is
not compared: it is for speech the English recognizer cannot read, and our sets are English. The
human dev set's phones were aligned by pocketsphinx with the same US-English acoustic model that Rhubarb's
recognizer uses, so Rhubarb's timing on it is favoured, most of all with the words given.

    python -m assets.model.rhubarb --binary PATH/rhubarb [--out build/rhubarb/comparison.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from assets.model.evaluate import FEATURE_FPS
from studio.speech.visemes import VISEME_POSES

SHAPE_VISEMES = {"A": "PP", "B": "SS", "C": "E", "D": "aa", "E": "oh", "F": "ou", "G": "FF", "H": "E", "X": "sil"}
"""Rhubarb's README: A closed (p, b, m); B slightly open, teeth together (most consonants, ee); C open (eh, ae); D wide
open (aa); E slightly rounded (ao, er); F puckered (uw, ow, w); G teeth on the lower lip (f, v); H a long l, the mouth
"at least as far open as C" (our nn pose is far less open); X rest, lips closed but relaxed."""
MODES = {"words unknown": ("pocketSphinx", False), "words given": ("pocketSphinx", True)}
CACHE = Path("build/rhubarb")


def cues(binary: Path, audio: np.ndarray, recognizer: str, words: str | None, rate: int = 16000) -> list[tuple[float, str]]:
    """Rhubarb's (start s, shape) cues for mono float audio, cached by audio, words and recognizer."""
    import soundfile

    key = hashlib.sha1(np.ascontiguousarray(audio, np.float32).tobytes() + f"{recognizer}|{words}".encode()).hexdigest()
    cached = CACHE / f"{key}.json"
    if cached.is_file():
        return [tuple(cue) for cue in json.loads(cached.read_text())]
    with tempfile.TemporaryDirectory() as folder:
        wav = Path(folder) / "speech.wav"
        soundfile.write(wav, audio, rate, subtype="PCM_16")
        command = [str(binary), "-q", "-f", "tsv", "-r", recognizer, str(wav)]
        if words is not None:
            (Path(folder) / "words.txt").write_text(words + "\n")
            command[1:1] = ["-d", str(Path(folder) / "words.txt")]
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    parsed = [(float(start), shape) for start, shape in (line.split("\t") for line in out.splitlines() if line)]
    CACHE.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(parsed))
    return parsed


def cue_arkit(parsed: list[tuple[float, str]], frames: int) -> np.ndarray:
    """(frames, 52) at 100 fps: each cue's viseme pose, held until the next cue (rest before the first)."""
    out = np.repeat(VISEME_POSES["sil"][None], frames, axis=0).astype(np.float32)
    for (start, shape), (end, _) in zip(parsed, parsed[1:] + [(frames / FEATURE_FPS, "X")]):
        out[int(round(start * FEATURE_FPS)):int(round(end * FEATURE_FPS))] = VISEME_POSES[SHAPE_VISEMES[shape]]
    return out


class RhubarbOutput:
    """Rhubarb as `evaluate` scores a pipeline: `arkit(example)` from the example's audio (and words, where given)."""

    def __init__(self, binary: Path, recognizer: str, words: dict[int, str] | None = None) -> None:
        self.binary, self.recognizer, self.words = Path(binary), recognizer, words

    def arkit(self, example) -> np.ndarray:
        words = self.words.get(id(example)) if self.words is not None else None
        return cue_arkit(cues(self.binary, example.audio, self.recognizer, words), len(example.viseme))

    def prefetch(self, examples, workers: int = 2) -> None:
        """Run Rhubarb on every example, `workers` at a time (each run loads its recognizer: about 3 s)."""
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(self.arkit, examples))


def compare(binary: Path, workers: int = 2, log=print) -> dict:
    """Articulation of `lipsync` and of Rhubarb's two modes on the synthetic held-out set and the human dev set."""
    from assets.model import evaluate, human_dev

    clips, _ = human_dev.load_dev_set(log=log)
    human = human_dev.to_examples(clips)
    synthetic, texts = _synthetic_held_out(60)
    texts.update({id(example): clip.text for clip, example in zip(clips, human)})
    rows = {"lipsync": evaluate.lipsync_pipeline(evaluate.model_paths(None))}
    for name, (recognizer, with_words) in MODES.items():
        rows[f"rhubarb, {name}"] = RhubarbOutput(binary, recognizer, texts if with_words else None)
    report = {}
    for name, model in rows.items():
        if isinstance(model, RhubarbOutput):
            log(f"{name}: {len(synthetic) + len(human)} runs")
            model.prefetch(synthetic + human, workers)
        report[name] = {"synthetic": evaluate.articulation_metrics(model, synthetic),
                        "human": evaluate.articulation_metrics(model, human),
                        "human_by_phone": evaluate.human_breakdown(model, clips, human)}
    return report


def _synthetic_held_out(n: int) -> tuple[list, dict[int, str]]:
    """`evaluate.held_out_examples(n)`, and each example's words (by the example's id)."""
    from assets.model.corpus import synthesize_utterances
    from assets.model.evaluate import HELD_OUT_SEED
    from assets.model.train import utterance_to_example
    from studio.engine.features import LogMelExtractor

    extractor = LogMelExtractor()
    examples, texts = [], {}
    for utterance in synthesize_utterances(n, HELD_OUT_SEED, held_out=True):
        examples.append(utterance_to_example(utterance.audio, utterance.targets, extractor, keep_audio=True))
        texts[id(examples[-1])] = utterance.text
    return examples, texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", type=Path, required=True, help="the rhubarb executable (Rhubarb Lip Sync 1.13)")
    parser.add_argument("--out", type=Path, default=CACHE / "comparison.json")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    report = compare(args.binary, args.workers)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({name: {k: v for k, v in row.items() if k != "human_by_phone"} for name, row in report.items()},
                     indent=2))


if __name__ == "__main__":
    main()
