"""VRM expression material binds on screen: the VRM specification's isBinary samples move their texture with happy
and blink as their READMEs say (a green plane of check marks, no red, and yellow meters showing each expression's
output), and a VRM 0.x `_Color` materialValue tints its material."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from render.offscreen import OffscreenRenderer
from studio.avatar.io import load_avatar
from studio.frame import FrameState
from tests.conftest import arkit_weights as arkit

DATA = Path(__file__).resolve().parents[1] / "data" / "avatars"
METER_SPLIT_ROW = 108  # at 320x240, the happy meter's bar lies above this row, the blink meter's below


def happy(weight: float) -> dict[str, float]:
    smile = 0.15 + 0.45 * weight  # emotions.py: a smile past 0.15, full at 0.6, with raised cheeks
    return {"mouthSmileLeft": smile, "mouthSmileRight": smile, "cheekSquintLeft": 1.0, "cheekSquintRight": 1.0}


BLINK = {"eyeBlinkLeft": 1.0, "eyeBlinkRight": 1.0}
STATES = {"rest": {}, "happy": happy(1.0), "blink": BLINK, "weak happy, blink": {**happy(0.3), **BLINK},
          "strong happy, blink": {**happy(0.7), **BLINK}}
# (happy meter full, blink meter full) as each README says: Overrides' binary happy blends blink away only above
# 0.5; Overridden's binary blink is suppressed by any happy.
METERS = {
    "Overrides": {"rest": (0, 0), "happy": (1, 0), "blink": (0, 1), "weak happy, blink": (0, 1),
                  "strong happy, blink": (1, 0)},
    "Overridden": {"rest": (0, 0), "happy": (1, 0), "blink": (0, 1), "weak happy, blink": (0.3, 0),
                   "strong happy, blink": (0.7, 0)},
}


@pytest.fixture(scope="module", params=["Overrides", "Overridden"])
def sample_renders(request):
    model = load_avatar(DATA / f"VRMC_vrm_expressions_isBinary_{request.param}.vrm")
    with OffscreenRenderer(model, size=(320, 240)) as renderer:
        images = {name: renderer.render(FrameState(arkit=arkit(**shapes)))[..., :3].astype(int)
                  for name, shapes in STATES.items()}
    return request.param, images


def test_the_validation_window_shows_check_marks_and_no_red_in_every_state(sample_renders):
    _, images = sample_renders
    for state, rgb in images.items():
        red = (rgb[..., 0] > rgb[..., 1] + 80) & (rgb[..., 0] > rgb[..., 2] + 80)
        green = (rgb[..., 1] > rgb[..., 0] + 40) & (rgb[..., 1] > rgb[..., 2] + 40)
        white = rgb.min(axis=-1) > 200
        assert green.sum() > 2000 and red.sum() < 50 and white.sum() > 100, (state, green.sum(), red.sum(), white.sum())


def test_the_texture_moves_with_the_expressions(sample_renders):
    """Each state picks its own cell of the sheet: the check marks stand elsewhere than at rest."""
    _, images = sample_renders
    for state in ("happy", "blink"):
        moved = np.abs(images[state] - images["rest"]).max(axis=-1) > 60
        assert moved.sum() > 300, (state, moved.sum())


def test_the_meters_show_each_expressions_output_as_the_readme_says(sample_renders):
    sample, images = sample_renders

    def bars(rgb: np.ndarray) -> tuple[int, int]:
        yellow = (rgb[..., 0] > 200) & (rgb[..., 1] > 170) & (rgb[..., 2] < 120)
        return int(yellow[:METER_SPLIT_ROW].sum()), int(yellow[METER_SPLIT_ROW:].sum())

    full = bars(images["happy"])[0]  # a full bar's pixels
    assert full > 100
    for state, rgb in images.items():
        want = METERS[sample][state]
        assert bars(rgb) == pytest.approx((want[0] * full, want[1] * full), abs=0.12 * full), (state, bars(rgb), full)


def test_a_vrm0_color_material_value_tints_its_material_with_joy(tmp_path):
    data = (DATA / "humanoid_vrm0.vrm").read_bytes()
    length = struct.unpack("<I", data[12:16])[0]
    document = json.loads(data[20:20 + length])
    for group in document["extensions"]["VRM"]["blendShapeMaster"]["blendShapeGroups"]:
        if group["presetName"] == "joy":
            group["materialValues"] = [{"materialName": "Cloth", "propertyName": "_Color", "targetValue": [1, 0, 0, 1]}]
    text = json.dumps(document).encode()
    text += b" " * (-len(text) % 4)
    rest = data[20 + length:]
    path = tmp_path / "joy_red.vrm"
    path.write_bytes(struct.pack("<4sII", b"glTF", 2, 20 + len(text) + len(rest))
                     + struct.pack("<I4s", len(text), b"JSON") + text + rest)
    with OffscreenRenderer(load_avatar(path), size=(240, 320)) as renderer:
        calm, joyful = (renderer.render(FrameState(arkit=arkit(**shapes)))[..., :3].astype(int)
                        for shapes in ({}, happy(1.0)))
    red = [((rgb[..., 0] > rgb[..., 1] + 100) & (rgb[..., 0] > rgb[..., 2] + 100)).sum() for rgb in (calm, joyful)]
    assert red[0] < 100 and red[1] > 2000, red
