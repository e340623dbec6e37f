"""VRM expression material binds (1.0 materialColorBinds / textureTransformBinds, 0.x materialValues) read from the
files and turned into the renderer's per-material table by the expression weights the ARKit weights give."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from studio.avatar.io import load_avatar
from studio.avatar.model import AvatarFormatError
from tests.conftest import arkit_weights as arkit

DATA = Path(__file__).resolve().parents[2] / "data" / "avatars"
OVERRIDES = DATA / "VRMC_vrm_expressions_isBinary_Overrides.vrm"
OVERRIDDEN = DATA / "VRMC_vrm_expressions_isBinary_Overridden.vrm"


def happy(weight: float) -> dict[str, float]:
    """ARKit weights that `studio.avatar.emotions` reads as this much `happy` (a smile with raised cheeks)."""
    smile = 0.15 + 0.45 * weight
    return {"mouthSmileLeft": smile, "mouthSmileRight": smile, "cheekSquintLeft": 1.0, "cheekSquintRight": 1.0}


BLINK = {"eyeBlinkLeft": 1.0, "eyeBlinkRight": 1.0}


def rewrite_glb(source: Path, target: Path, change) -> Path:
    """A copy of a GLB with its JSON chunk changed by `change(document)`."""
    data = source.read_bytes()
    length = struct.unpack("<I", data[12:16])[0]
    document = json.loads(data[20:20 + length])
    change(document)
    text = json.dumps(document).encode()
    text += b" " * (-len(text) % 4)
    rest = data[20 + length:]
    target.write_bytes(struct.pack("<4sII", b"glTF", 2, 12 + 8 + len(text) + len(rest))
                       + struct.pack("<I4s", len(text), b"JSON") + text + rest)
    return target


def test_the_samples_texture_binds_follow_happy_and_blink_from_their_own_transform():
    model = load_avatar(OVERRIDES)
    binds = model.material_binds
    assert binds.materials == (0, 2, 3)  # validation window, happy meter, blink meter
    window, happy_meter = 1, 2
    rest = binds.table(arkit())
    # At rest each material shows what its KHR_texture_transform picks (the importer leaves it to the table).
    np.testing.assert_allclose(rest[window, 2], (0.125, 0.125, 0.0, 0.0))
    np.testing.assert_allclose(rest[happy_meter, 2], (0.498046875, 0.0, 0.5009765625, 0.0))
    np.testing.assert_allclose(rest[:, :2], [[[0, 0, 0, 0], [1, 1, 1, 1]]] * 4)  # no colour binds
    # Full happy: the window shows the bind's cell, the meter slides to its full end.
    table = binds.table(arkit(**happy(1.0)))
    np.testing.assert_allclose(table[window, 2], (0.125, 0.125, 0.875, 0.0))
    np.testing.assert_allclose(table[happy_meter, 2], (0.498046875, 0.0, 0.0009765625, 0.0))
    # Blink comes from both eyeBlinks (the VRM blink fallback), half each.
    np.testing.assert_allclose(binds.table(arkit(eyeBlinkLeft=1.0))[window, 2], (0.125, 0.125, 0.0, 0.4375))
    np.testing.assert_allclose(binds.table(arkit(**BLINK))[window, 2], (0.125, 0.125, 0.0, 0.875))
    # The vertices of each bound material carry its row; the rest carry row 0.
    assert sorted(np.unique(model.material_slot).tolist()) == [0, 1, 2, 3]


def test_binary_happy_overrides_blink_only_above_one_half_and_a_binary_blink_is_suppressed_by_any_happy():
    overrides = load_avatar(OVERRIDES).material_binds
    assert overrides.expression_weights(arkit(**happy(0.3), **BLINK)) == pytest.approx({"happy": 0.0, "blink": 1.0})
    assert overrides.expression_weights(arkit(**happy(0.7), **BLINK)) == pytest.approx({"happy": 1.0, "blink": 0.0})
    overridden = load_avatar(OVERRIDDEN).material_binds
    assert overridden.expression_weights(arkit(**happy(0.3), **BLINK)) == pytest.approx({"happy": 0.3, "blink": 0.0})
    assert overridden.expression_weights(arkit(**BLINK)) == pytest.approx({"happy": 0.0, "blink": 1.0})


def with_material_values(tmp_path: Path, values: dict[str, list[dict]]) -> Path:
    """The VRM 0.x test humanoid with these materialValues on its blend shape groups (by preset name)."""
    def change(document):
        for group in document["extensions"]["VRM"]["blendShapeMaster"]["blendShapeGroups"]:
            group["materialValues"] = values.get(group["presetName"], [])
    return rewrite_glb(DATA / "humanoid_vrm0.vrm", tmp_path / "values.vrm", change)


def test_vrm0_material_values_become_colour_and_texture_binds(tmp_path):
    path = with_material_values(tmp_path, {
        "joy": [{"materialName": "Cloth", "propertyName": "_Color", "targetValue": [1.0, 0.0, 0.0, 1.0]},
                {"materialName": "Cloth", "propertyName": "_ShadeColor", "targetValue": [1.0, 0.0, 0.0, 1.0]}],
        "blink": [{"materialName": "Skin", "propertyName": "_MainTex_ST", "targetValue": [0.5, 0.5, 0.25, 0.0]}],
    })
    model = load_avatar(path)
    binds = model.material_binds
    skin, cloth = 1, 2  # materials 0 and 3, in order
    assert binds.materials == (0, 3)
    table = binds.table(arkit(**happy(1.0)))
    np.testing.assert_allclose(table[cloth, 0], (1.0, 0.0, 0.0, 1.0))  # Unity gamma red is linear red
    np.testing.assert_allclose(table[cloth, 1], (0.0, 0.0, 0.0, 0.0))
    # Unity's _MainTex_ST has v upwards: offset y becomes 1 - offset - scale, as three-vrm converts it.
    np.testing.assert_allclose(binds.table(arkit(**BLINK))[skin, 2], (0.5, 0.5, 0.25, 0.5))
    assert any("shadeColor" in note for note in model.info["notes"])  # not drawn, and said so


def test_a_bind_to_a_material_the_file_lacks_is_refused_naming_it(tmp_path):
    def change(document):
        happy_spec = document["extensions"]["VRMC_vrm"]["expressions"]["preset"]["happy"]
        happy_spec["textureTransformBinds"][0]["material"] = 99
    path = rewrite_glb(OVERRIDES, tmp_path / "bad.vrm", change)
    with pytest.raises(AvatarFormatError, match=r"bad\.vrm.*'happy' binds material 99; the file has 4"):
        load_avatar(path)
