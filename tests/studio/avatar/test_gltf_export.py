"""Exporting an avatar to GLB and VRM 1.0: it reloads equal, and an independent reader (Blender) takes it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from studio.avatar.arkit import ARKIT_NAMES
from studio.avatar.export import export_avatar
from studio.avatar.gltf import read_gltf
from studio.avatar.io import default_avatar_path, load_avatar
from studio.avatar.vrm import read_vrm


@pytest.fixture(scope="module")
def default_avatar():
    return load_avatar(default_avatar_path())


@pytest.mark.parametrize("suffix", ["glb", "vrm"])
def test_the_default_avatar_exports_and_reloads_equal(default_avatar, tmp_path, suffix):
    path = tmp_path / f"default.{suffix}"
    export_avatar(default_avatar, path)
    back = load_avatar(path)
    count = default_avatar.num_vertices
    assert np.array_equal(back.faces, default_avatar.faces)
    assert np.abs(back.v_template[:count] - default_avatar.v_template).max() < 1e-5
    assert np.abs(back.skin_weights[:count] - default_avatar.skin_weights).max() < 1e-5
    assert np.abs(back.expr_dirs[:count] - default_avatar.expr_dirs).max() < 1e-5
    assert np.abs(back.rest_joints() - default_avatar.rest_joints()).max() < 1e-5
    assert np.abs(back.vertex_colors[:count] - default_avatar.colors()).max() < 1e-5
    assert back.info["mapping"] == "arkit" and back.info["arkit_missing"] == []
    assert len(back.info["humanoid"]) == 55  # every SMPL-X joint has its humanoid bone
    if suffix == "vrm":
        info = read_vrm(read_gltf(path))
        assert info.version == "1.0" and set(ARKIT_NAMES) <= set(info.expressions)
        assert {"aa", "ih", "ou", "ee", "oh", "blink", "blinkLeft", "blinkRight"} <= set(info.expressions)


DATA = Path(__file__).resolve().parents[2] / "data" / "avatars"


@pytest.mark.parametrize("name", ["addon_vrm1.vrm", "humanoid_vrm0.vrm"])
def test_an_imported_avatar_exports_its_emotions(tmp_path, name):
    """Re-exported, an imported VRM keeps its emotion expressions (their morphs, isBinary and overrides) and gains
    no vowel or emotion the avatar never had (a preset whose ARKit shapes it lacks is left out)."""
    original = load_avatar(DATA / name)
    assert original.expression_drive is not None and original.expression_drive.emotions == ("happy",)
    path = tmp_path / "again.vrm"
    export_avatar(original, path)
    back = load_avatar(path)
    count = int(original.faces.max()) + 1
    assert back.num_vertices == count + 55  # the imported avatar's joint points are not written as loose vertices
    assert back.expr_dirs.shape[2] == original.expr_dirs.shape[2]
    assert np.abs(back.expr_dirs[:count] - original.expr_dirs[:count]).max() < 1e-5
    assert np.abs(back.v_template[:count] - original.v_template[:count]).max() < 1e-5
    drive, again = original.expression_drive, back.expression_drive
    assert again.emotions == drive.emotions and again.binary == drive.binary
    assert [{key: rule.get(key, "none") for key in again.overrides[0]} for rule in drive.overrides] == list(again.overrides)
    happy = read_vrm(read_gltf(path)).expressions["happy"]
    assert len(happy.binds) == 1 and happy.is_binary == drive.binary[0]
    fell_back = {entry.split("←")[0] for entry in original.info["fallback"]}  # written as the ARKit shapes they drove
    assert back.info["fallback"] == []
    assert back.info["arkit_missing"] == [shape for shape in original.info["arkit_missing"] if shape not in fell_back]


def test_export_refuses_other_suffixes(default_avatar, tmp_path):
    with pytest.raises(ValueError, match=r"\.glb or \.vrm"):
        export_avatar(default_avatar, tmp_path / "default.fbx")


_BLENDER_CHECK = """
import sys, bpy, numpy
numpy.bool = bool  # Blender 3.4's glTF importer still says np.bool, which Debian 12's numpy no longer has
bpy.ops.wm.read_factory_settings(use_empty=True)
bpy.ops.import_scene.gltf(filepath=sys.argv[sys.argv.index("--") + 1])
armatures = [o for o in bpy.data.objects if o.type == "ARMATURE"]
meshes = [o for o in bpy.data.objects if o.type == "MESH"]
keys = meshes[0].data.shape_keys.key_blocks
print("RESULT", len(armatures[0].data.bones), len(meshes), len(meshes[0].data.vertices), len(keys),
      keys[1].name, keys[-1].name, len(meshes[0].vertex_groups))
print("KEYS", ",".join(key.name for key in keys))
"""


def _blender_import(model, tmp_path) -> list[str]:
    """Blender's lines (RESULT, KEYS) for the avatar exported as VRM (a .vrm is a GLB; Blender wants .glb)."""
    path = tmp_path / "exported.glb"
    export_avatar(model, tmp_path / "exported.vrm")
    (tmp_path / "exported.vrm").rename(path)
    script = tmp_path / "check.py"
    script.write_text(_BLENDER_CHECK)
    done = subprocess.run(["blender", "-b", "--factory-startup", "--python", str(script), "--", str(path)],
                          capture_output=True, text=True, timeout=600)
    return [line for line in done.stdout.splitlines() if line.startswith(("RESULT", "KEYS"))]


@pytest.fixture
def blender() -> str:
    """Debian's blender, which `make test` installs: without it the independent-reader checks fail, never skip."""
    path = shutil.which("blender")
    if path is None:
        pytest.fail("blender is not installed: run the tests with `make test`, which installs it (apt-get install blender)")
    return path


needs_blender = pytest.mark.usefixtures("blender")


@needs_blender
def test_blender_imports_the_exported_vrm(default_avatar, tmp_path):
    """An independent reader: Blender's own glTF importer, headless."""
    line = _blender_import(default_avatar, tmp_path)[0]
    bones, meshes, vertices, keys, first, last, groups = line.split()[1:]
    assert (int(bones), int(meshes), int(keys), int(groups)) == (55, 1, 53, 55)  # 52 shapes + Basis
    assert int(vertices) == default_avatar.num_vertices and (first, last) == (ARKIT_NAMES[0], ARKIT_NAMES[-1])


@needs_blender
def test_blender_imports_a_reexported_vrm_with_its_emotion(tmp_path):
    original = load_avatar(DATA / "addon_vrm1.vrm")
    result, keys = _blender_import(original, tmp_path)
    bones, meshes, vertices = result.split()[1:4]
    assert (int(bones), int(meshes), int(vertices)) == (55, 1, int(original.faces.max()) + 1)
    assert "happy" in keys.split()[1].split(",") and "jawOpen" in keys.split()[1].split(",")
