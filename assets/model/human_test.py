"""The human test set: recorded English speech scored once, after the shipped models were chosen, and never
used to choose anything.

The rule, fixed before any of it was heard or scored:

- Source: Debian `hedgewars-data` (GPL-2), the game's voice packs: short lines acted by real people
  (`/usr/share/games/hedgewars/Data/Sounds/voices/<pack>/<Line>.ogg`). No recording of this package is in
  training, in the human dev set or in any other set of this project.
- Packs: every English pack, that is every folder whose name has no language suffix (`Default_es`,
  `Russian_pl` and the like speak other languages under the same file names), except `Robot`, whose name says
  the voice is processed into a machine's. Each pack counts as one speaker.
- Words: the file's name without its trailing digits, spelled by `WORDS` (written from the file names alone).
  Names that are not words (grunts, laughs, coughs: `NOT_WORDS`) are left out; so is a line with a word the CMU
  dictionary lacks.
- Alignment: exactly the human dev set's (`human_dev.aligned_clip`: pocketsphinx with its US-English model, the
  same QC, the same listener); a line that fails QC is left out.
- Scoring: `python -m assets.model.human_test`, the shipped models as the live engine and `lipsync` run them,
  scored as the dev set is (`evaluate.articulation_metrics`). The figure goes in `docs/models.md` as the test
  figure, whatever it is.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

VOICES = Path("/usr/share/games/hedgewars/Data/Sounds/voices")
PROCESSED_PACKS = ("Robot",)
WORDS = {
    "Amazing": "amazing", "Boring": "boring", "Brilliant": "brilliant", "Bugger": "bugger", "Byebye": "bye bye",
    "Comeonthen": "come on then", "Coward": "coward", "Cutitout": "cut it out", "Drat": "drat",
    "Enemydown": "enemy down", "Excellent": "excellent", "Fire": "fire", "Firstblood": "first blood",
    "Flawless": "flawless", "Flyaway": "fly away", "Gonnagetyou": "gonna get you", "Grenade": "grenade",
    "Hello": "hello", "Hurry": "hurry", "Illgetyou": "i'll get you", "Incoming": "incoming",
    "Justyouwait": "just you wait", "Kamikaze": "kamikaze", "Leavemealone": "leave me alone", "Melon": "melon",
    "Missed": "missed", "Nooo": "no", "Nutter": "nutter", "Ohdear": "oh dear", "Oops": "oops", "Ouch": "ouch",
    "Reinforcements": "reinforcements", "Revenge": "revenge", "Runaway": "run away", "Sameteam": "same team",
    "Solong": "so long", "Stupid": "stupid", "Takecover": "take cover", "Thisoneismine": "this one is mine",
    "Traitor": "traitor", "Uh-oh": "uh oh", "Victory": "victory", "Watchit": "watch it", "Watchthis": "watch this",
    "Whatthe": "what the", "Yessir": "yes sir", "Youllregretthat": "you'll regret that",
}
NOT_WORDS = ("Firepunch", "Hmm", "Jump", "Laugh", "Ooff", "Ow", "PoisonCough", "PoisonMoan")


def recordings(root: Path = VOICES) -> list[tuple[str, Path, str]]:
    """(speaker, path, words) of every line the rule takes, in a fixed order; a name the rule does not know is an
    error (the package changed: the rule must be looked at again before anything is scored)."""
    items = []
    for pack in sorted(p for p in root.iterdir() if p.is_dir()):
        if "_" in pack.name or pack.name in PROCESSED_PACKS:
            continue
        for path in sorted(pack.glob("*.ogg")):
            line = re.sub(r"\d+$", "", path.stem)
            if line in NOT_WORDS:
                continue
            if line not in WORDS:
                raise ValueError(f"{path}: line {line!r} is neither in WORDS nor in NOT_WORDS")
            items.append((f"hedgewars/{pack.name}", path, WORDS[line]))
    return items


def load_test_set(log=print) -> tuple[list, dict]:
    """The aligned clips that pass the dev set's QC, and a summary (lines seen, left out and why)."""
    from assets.model.human_dev import SAMPLE_RATE, align_recordings

    items = recordings()
    clips, dropped, unknown = align_recordings([(speaker, path, words, f"{speaker}/{path.name}")
                                                for speaker, path, words in items])
    summary = {"source": "Debian hedgewars-data (GPL-2): the English voice packs but Robot, one speaker each",
               "lines": len(items), "clips": len(clips), "speakers": sorted({c.speaker for c in clips}),
               "qc_dropped": dropped, "not_in_dictionary": unknown,
               "audio_s": round(sum(len(c.audio) for c in clips) / SAMPLE_RATE, 1)}
    log(f"human test set: {len(clips)} clips of {len(items)} lines, {len(dropped)} dropped by QC, "
        f"{len(unknown)} with a word not in the dictionary")
    return clips, summary


def score(log=print) -> dict:
    """The shipped models on the test set, as the live engine and `lipsync` show them."""
    from assets.model import evaluate
    from assets.model.human_dev import to_examples

    clips, summary = load_test_set(log)
    examples = to_examples(clips)
    paths = evaluate.model_paths(None)
    rows = {"live_engine": evaluate.LiveEngine("fp32", paths["fp32"]), "lipsync": evaluate.lipsync_pipeline(paths)}
    report: dict = {"test_set": summary}
    for name, row in rows.items():
        report[name] = evaluate.articulation_metrics(row, examples)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description="score the shipped face models once on the human test set")
    parser.add_argument("--out", type=Path, help="write the report here as JSON")
    args = parser.parse_args()
    if not VOICES.is_dir():
        parser.error(f"{VOICES} is missing: apt-get install hedgewars-data")
    report = score()
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
