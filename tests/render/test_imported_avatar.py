"""Imported glTF/VRM avatars drawn by the studio's renderer: textures, the face moving with ARKit weights, the head turning."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from render.offscreen import OffscreenRenderer
from studio.avatar.arkit import ARKIT_INDEX
from studio.avatar.io import load_avatar
from studio.avatar.skeleton import JOINT_INDEX
from studio.frame import FrameState

DATA = Path(__file__).resolve().parents[1] / "data" / "avatars"


def weights(**shapes: float) -> np.ndarray:
    out = np.zeros(52, np.float32)
    for name, value in shapes.items():
        out[ARKIT_INDEX[name]] = value
    return out


def changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a[..., :3].astype(int) - b[..., :3].astype(int)).max(axis=-1) > 24


@pytest.fixture(scope="module", params=["humanoid_arkit.glb", "humanoid_vrm0.vrm"])
def humanoid_renders(request):
    """The Blender humanoid with ARKit shape keys, and as a VRM 0.x file (faces -Z, only vowel and blink groups)."""
    model = load_avatar(DATA / request.param)
    turned = np.zeros((55, 3))
    turned[JOINT_INDEX["head"]] = (0, 0.6, 0)
    with OffscreenRenderer(model, size=(320, 320), camera="head") as renderer:
        return {
            "rest": renderer.render(FrameState()),
            "jaw": renderer.render(FrameState(arkit=weights(jawOpen=1))),
            "blink": renderer.render(FrameState(arkit=weights(eyeBlinkLeft=1, eyeBlinkRight=1))),
            "turned": renderer.render(FrameState(pose=turned)),
        }


def teal(image: np.ndarray) -> np.ndarray:
    """Pixels of the skin texture's teal band (lit): green and blue well above red."""
    rgb = image[..., :3].astype(int)
    return (rgb[..., 1] > rgb[..., 0] + 50) & (rgb[..., 2] > rgb[..., 0] + 50)


def dark_eyes(image: np.ndarray) -> np.ndarray:
    """Dark pixels inside the teal band across the face (where the eyes are drawn; the background is outside it)."""
    band = np.argwhere(teal(image))
    (top, left), (bottom, right) = band.min(axis=0), band.max(axis=0)
    out = np.zeros(image.shape[:2], bool)
    out[top:bottom, left:right] = image[top:bottom, left:right, :3].max(axis=-1) < 80
    return out


def test_the_textured_humanoid_shows_its_texture_and_base_colours(humanoid_renders):
    rest = humanoid_renders["rest"]
    assert rest[..., :3].std() > 10  # not blank
    assert teal(rest).sum() > 500  # the PNG texture's band, not the material's white base colour
    rgb = rest[..., :3].astype(int)
    assert ((rgb[..., 0] > rgb[..., 2] + 30) & (rgb[..., 0] > 120)).sum() > 500  # the skin-tone rows of the texture


def test_jaw_open_moves_the_mouth_below_the_eyes(humanoid_renders):
    mouth = changed(humanoid_renders["rest"], humanoid_renders["jaw"])
    eyes = changed(humanoid_renders["rest"], humanoid_renders["blink"])
    assert mouth.sum() > 100 and eyes.sum() > 20
    assert np.argwhere(mouth)[:, 0].mean() > np.argwhere(eyes)[:, 0].max()  # rows grow downwards


def test_eye_blink_closes_the_eyes(humanoid_renders):
    """The eyes are dark discs; a blink flattens them, so the dark pixels go."""
    open_eyes = dark_eyes(humanoid_renders["rest"]).sum()
    closed = dark_eyes(humanoid_renders["blink"]).sum()
    assert open_eyes > 100 and closed < open_eyes * 0.2


def test_the_head_turns_with_the_head_joint(humanoid_renders):
    rest, turned = humanoid_renders["rest"], humanoid_renders["turned"]
    moved = changed(rest, turned)
    assert moved.sum() > 200
    eyes_rest = np.argwhere(dark_eyes(rest))[:, 1].mean()
    eyes_turned = np.argwhere(dark_eyes(turned))[:, 1].mean()
    assert abs(eyes_turned - eyes_rest) > 5  # the eyes went sideways with the head


def test_a_vrm_sample_renders_with_its_texture():
    """The VRM 1.0 sample's quads carry a red/green texture; their material's base colour is white."""
    model = load_avatar(DATA / "VRMC_vrm_expressions_isBinary_Overrides.vrm")
    with OffscreenRenderer(model, size=(320, 240)) as renderer:
        image = renderer.render(FrameState())
    rgb = image[..., :3].astype(int)
    red = (rgb[..., 0] > rgb[..., 1] + 80) & (rgb[..., 0] > rgb[..., 2] + 80)
    green = (rgb[..., 1] > rgb[..., 0] + 40) & (rgb[..., 1] > rgb[..., 2] + 40)
    assert red.sum() > 500 and green.sum() > 20
