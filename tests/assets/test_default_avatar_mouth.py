"""The default avatar's mouth, close up, through part-ID renders: teeth and the mouth's inside show only
through the lip opening, the lips seal at mouthClose, the chin faces forward and the inside is dark."""

from __future__ import annotations

import numpy as np
import pytest

from render.offscreen import OffscreenRenderer
from render.part_ids import decode
from studio.avatar.arkit import ARKIT_INDEX, NUM_ARKIT
from studio.avatar.io import default_avatar_path, load_avatar
from studio.frame import FrameState

INSIDE = ("mouth", "teeth", "tongue")


@pytest.fixture(scope="module")
def avatar():
    return load_avatar(default_avatar_path())


def weights(**named: float) -> np.ndarray:
    out = np.zeros(NUM_ARKIT, np.float32)
    for name, value in named.items():
        out[ARKIT_INDEX[name]] = value
    return out


def speech_sequence() -> list[np.ndarray]:
    """Mouth shapes a speech model produces, at several strengths: closures pressed and rolled (p, b, m),
    near-closed consonants, open vowels, rounded and spread lips."""
    shapes = []
    for k in (0.3, 0.6, 1.0):
        shapes += [
            weights(mouthPressLeft=0.45 * k, mouthPressRight=0.45 * k, mouthRollLower=0.33 * k,
                    mouthRollUpper=0.15 * k, jawOpen=0.06 * k, mouthClose=0.06 * k),  # p b m
            weights(mouthRollLower=0.6 * k, mouthUpperUpLeft=0.2 * k, mouthUpperUpRight=0.2 * k,
                    jawOpen=0.08 * k),  # f v
            weights(jawOpen=0.15 * k, mouthStretchLeft=0.35 * k, mouthStretchRight=0.35 * k,
                    mouthSmileLeft=0.3 * k, mouthSmileRight=0.3 * k),  # s, ee
            weights(jawOpen=0.6 * k, mouthLowerDownLeft=0.3 * k, mouthLowerDownRight=0.3 * k,
                    mouthUpperUpLeft=0.1 * k, mouthUpperUpRight=0.1 * k),  # aa
            weights(mouthPucker=0.76 * k, mouthFunnel=0.38 * k, jawOpen=0.14 * k),  # oo
            weights(mouthFunnel=0.57 * k, jawOpen=0.3 * k, tongueOut=0.23 * k),  # oh, th
            weights(mouthShrugUpper=0.4 * k, mouthPressLeft=0.2 * k, mouthPressRight=0.2 * k, jawOpen=0.05 * k),
        ]
    return shapes


def inside_touching_outside(ids: np.ndarray, avatar) -> int:
    """Pixels of teeth or mouth inside that border anything but the lips or the inside itself."""
    names = avatar.part_names
    inside = np.isin(ids, [names.index(n) + 1 for n in INSIDE])
    allowed = inside | (ids == names.index("lips") + 1)
    touching = np.zeros_like(inside)
    for axis in (0, 1):
        for shift in (1, -1):
            touching |= inside & ~np.roll(allowed, shift, axis=axis)
    return int(touching.sum())


def tallest_gap(ids: np.ndarray, avatar) -> int:
    """The tallest vertical run of inside pixels in any column (1: the seam line itself, where the lips meet)."""
    inside = np.isin(ids, [avatar.part_names.index(n) + 1 for n in INSIDE]).astype(np.int32)
    run = np.zeros(inside.shape[1], np.int32)
    tallest = 0
    for row in inside:
        run = (run + 1) * row
        tallest = max(tallest, int(run.max()))
    return tallest


def test_teeth_and_mouth_inside_show_only_through_the_lip_opening(avatar):
    faults = {}
    with OffscreenRenderer(avatar, size=(640, 360), camera="head", mode="part_id") as renderer:
        for k, arkit in enumerate(speech_sequence()):
            count = inside_touching_outside(decode(renderer.render(FrameState(arkit=arkit)), avatar), avatar)
            if count:
                faults[k] = count
    assert not faults, f"mouth shapes (index: pixels) where teeth or the mouth inside show through the skin: {faults}"


def test_a_cue_line_spoken_through_the_engine_shows_the_inside_only_through_the_lips(avatar):
    """The same check on what the real pipeline makes of the default persona's first cue line (TTS, face model,
    motion), every second frame at 30 fps."""
    from studio.engine import offline
    from studio.presets import persona_by_name

    persona = persona_by_name("default")
    voice = persona.voice
    _clip, frames = offline.analyze_text(persona.cue_lines[0], voice.name, voice.rate_wpm, voice.pitch, fps=30,
                                         style=persona.motion_style())
    faults = {}
    with OffscreenRenderer(avatar, size=(640, 360), camera="head", mode="part_id") as renderer:
        for k, frame in enumerate(frames[::2]):
            count = inside_touching_outside(decode(renderer.render(frame), avatar), avatar)
            if count:
                faults[2 * k] = count
    assert not faults, f"frames (index: pixels) where teeth or the mouth inside show through the skin: {faults}"


def test_lips_meet_without_gaps_at_mouth_close(avatar):
    gaps = {}
    with OffscreenRenderer(avatar, size=(1280, 720), camera="head", mode="part_id") as renderer:
        for jaw in (0.1, 0.3, 0.6, 1.0):
            for extra in ({}, {"mouthPressLeft": 0.4, "mouthPressRight": 0.4},
                          {"mouthSmileLeft": 0.4, "mouthSmileRight": 0.4}, {"mouthPucker": 0.5}):
                if jaw > 0.6 and extra.get("mouthPressLeft"):
                    continue  # a hard press over a wide-open jaw is not a mouth shape speech makes
                ids = decode(renderer.render(FrameState(arkit=weights(jawOpen=jaw, mouthClose=jaw, **extra))), avatar)
                tallest = tallest_gap(ids, avatar)
                if tallest > 1:
                    gaps[(jaw, *extra)] = tallest
    assert not gaps, f"closed lips with a gap (shape: tallest gap in pixels at 1280x720): {gaps}"


def test_the_mouth_inside_is_dark_when_wide_open(avatar):
    """Its walls, seen edge-on, were lit light grey by the rim light and by their own colour."""
    state = FrameState(arkit=weights(jawOpen=0.6, mouthLowerDownLeft=0.3, mouthLowerDownRight=0.3))
    with OffscreenRenderer(avatar, size=(640, 360), camera="head", mode="part_id") as renderer:
        ids = decode(renderer.render(state), avatar)
    with OffscreenRenderer(avatar, size=(640, 360), camera="head") as renderer:
        shaded = renderer.render(state)[..., :3].astype(np.float64) / 255
    inside = ids == avatar.part_names.index("mouth") + 1
    assert inside.sum() > 200
    luminance = shaded[inside] @ np.array([0.2126, 0.7152, 0.0722])
    assert np.percentile(luminance, 90) < 0.25, "the brightest tenth of the mouth's inside is a lit, pale wall"


def test_the_chin_below_the_lower_lip_faces_forward(avatar):
    """A chin that curved straight under the lower lip read short, and its downward face as a dark beard."""
    from render.avatar_visual import AvatarMesh

    mesh = AvatarMesh(avatar)
    normals = np.empty_like(mesh.normals)
    normals[mesh.order] = mesh.normals
    points = avatar.v_template
    skin = avatar.part_mask("head")
    lips = points[avatar.part_mask("lips")]
    lip_bottom = lips[:, 1].min()
    head_bottom = points[skin & (np.abs(points[:, 0]) < 0.01) & (points[:, 2] > 0.02), 1].min()
    assert lip_bottom - head_bottom > 0.028, "the chin reaches well below the lower lip"
    front_of_chin = skin & (np.abs(points[:, 0]) < 0.012) & (points[:, 1] < lip_bottom - 0.004) \
        & (points[:, 1] > lip_bottom - 0.018) & (points[:, 2] > 0.06)
    assert front_of_chin.sum() > 10
    assert np.median(normals[front_of_chin, 1]) > -0.45, "the front of the chin faces forward, not down"
