"""Render the default avatar's 52 ARKit shapes (weight 1.0) and a few body poses to one PNG grid.

    python assets/contact_sheet.py [--avatar PATH] [--out docs/contact_sheet.png]

A designer's check that every shape reads at a glance; labels come from vispy's text visual.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from studio.avatar.arkit import ARKIT_NAMES, NUM_ARKIT  # noqa: E402
from studio.avatar.io import default_avatar_path, load_avatar  # noqa: E402
from studio.avatar.skeleton import JOINT_INDEX, NUM_JOINTS  # noqa: E402
from studio.frame import FrameState  # noqa: E402

TILE = 200
COLUMNS = 8
SPEECH_LINE = "Bob met Pam by the maple tree. Would you move to Oslo?"
CLOSURES = {"p", "b", "m"}
ROUNDED = {"w", "u:", "U", "oU", "O:", "0", "aU"}


def body_poses() -> dict[str, np.ndarray]:
    """Named (55, 3) axis-angle poses: T-pose, relaxed, waving, fist and pointing."""
    poses = {"T-pose": np.zeros((NUM_JOINTS, 3))}
    relaxed = np.zeros((NUM_JOINTS, 3))
    relaxed[JOINT_INDEX["left_shoulder"]] = (0, 0, -1.2)
    relaxed[JOINT_INDEX["right_shoulder"]] = (0, 0, 1.2)
    relaxed[JOINT_INDEX["left_elbow"]] = (0, -0.3, 0)
    relaxed[JOINT_INDEX["right_elbow"]] = (0, 0.3, 0)
    poses["relaxed"] = relaxed
    waving = relaxed.copy()
    waving[JOINT_INDEX["right_shoulder"]] = (0, 0, -0.3)
    waving[JOINT_INDEX["right_elbow"]] = (0, 0, -1.5)  # forearm up, in the plane of the raised arm
    poses["waving"] = waving
    fist = relaxed.copy()
    pointing = relaxed.copy()
    for side, sign in (("left", 1.0), ("right", -1.0)):
        for finger in ("index", "middle", "ring", "pinky"):
            for k in (1, 2, 3):
                fist[JOINT_INDEX[f"{side}_{finger}{k}"]] = (0, 0, -1.3 * sign)
                if finger != "index":
                    pointing[JOINT_INDEX[f"{side}_{finger}{k}"]] = (0, 0, -1.3 * sign)
        fist[JOINT_INDEX[f"{side}_thumb2"]] = (0, -0.8 * sign, 0)
    fist[JOINT_INDEX["left_elbow"]] = (0, -1.4, 0)
    fist[JOINT_INDEX["right_elbow"]] = (0, 1.4, 0)
    pointing[JOINT_INDEX["right_shoulder"]] = (0, 0.3, 0.0)
    poses["fists"] = fist
    poses["pointing"] = pointing
    return poses


def _label(image: np.ndarray, text: str) -> np.ndarray:
    """Write `text` into the top of a tile with vispy's text visual (rendered offscreen)."""
    from vispy import scene

    canvas = scene.SceneCanvas(size=(image.shape[1], 22), bgcolor=(1, 1, 1, 1), show=False)
    scene.visuals.Text(text, color="black", font_size=8, pos=(image.shape[1] / 2, 11), parent=canvas.scene)
    strip = canvas.render()
    canvas.close()
    out = image.copy()
    out[: strip.shape[0], :, :3] = strip[:, :, :3]
    return out


def speech_frames(line: str = SPEECH_LINE) -> list[tuple[str, FrameState]]:
    """The line spoken by espeak-ng and read back from its audio by the offline analysis (the face model and the
    mouth shaper, as a recording gets them): every lip closure at its most closed frame, every rounded sound
    at its middle.

    espeak's event for a stop marks its release or its closure depending on the context ("Bob met" spends
    the /b/'s closure inside the /b/ event, "met Pam" the /p/'s in the /t/ event before it), so a closure
    is searched from 40 ms before its event to the event's end."""
    from studio.engine.offline import analyze_audio
    from studio.engine.sources import trim_leading_silence
    from studio.speech.espeak import EspeakSynth
    from studio.speech.visemes import base_symbol, mouth_openness

    clip = trim_leading_silence(EspeakSynth("en-us", 150).synthesize(line))
    frames = analyze_audio(clip.audio, fps=100, sample_rate=clip.sample_rate)
    openness = mouth_openness(np.stack([frame.arkit for frame in frames]))
    last = len(frames) - 1
    picked = []
    for phoneme in clip.phonemes:
        symbol = base_symbol(phoneme.symbol)
        if symbol in CLOSURES:
            first, end = max(0, round((phoneme.start_s - 0.04) * 100)), min(last, round(phoneme.end_s * 100))
            index = first + int(np.argmin(openness[first:end + 1]))
        elif symbol in ROUNDED:
            index = min(last, round((phoneme.start_s + phoneme.end_s) / 2 * 100))
        else:
            continue
        picked.append((f"/{symbol}/ {index / 100:.2f}s", frames[index]))
    return picked


def render_sheet(avatar_path: Path, out: Path) -> None:
    from vispy import io

    from render.offscreen import OffscreenRenderer

    model = load_avatar(avatar_path)
    tiles = []
    with OffscreenRenderer(model, size=(TILE, TILE), camera="head") as renderer:
        for k, name in enumerate(ARKIT_NAMES):
            weights = np.zeros(NUM_ARKIT)
            weights[k] = 1.0
            tiles.append(_label(renderer.render(FrameState(arkit=weights)), name))
    with OffscreenRenderer(model, size=(TILE, TILE), camera="body") as renderer:
        for name, pose in body_poses().items():
            tiles.append(_label(renderer.render(FrameState(pose=pose)), name))
    blank = np.full_like(tiles[0], 255)
    while len(tiles) % COLUMNS:
        tiles.append(blank)
    # the speech strip: "Bob met Pam by the maple tree. Would you move to Oslo?" closures and rounding
    with OffscreenRenderer(model, size=(TILE, TILE), camera="head") as renderer:
        for name, frame in speech_frames():
            tiles.append(_label(renderer.render(FrameState(arkit=frame.arkit)), name))
    while len(tiles) % COLUMNS:
        tiles.append(blank)
    rows = [np.concatenate(tiles[i:i + COLUMNS], axis=1) for i in range(0, len(tiles), COLUMNS)]
    out.parent.mkdir(parents=True, exist_ok=True)
    io.write_png(str(out), np.concatenate(rows, axis=0)[:, :, :3])


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--avatar", type=Path, default=default_avatar_path())
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "contact_sheet.png")
    args = parser.parse_args(argv)
    render_sheet(args.avatar, args.out)
    print(f"{args.out}: {args.out.stat().st_size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
