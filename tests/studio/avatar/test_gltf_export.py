"""Exporting an avatar to GLB and VRM 1.0: it reloads equal, and an independent reader (Blender) takes it."""

from __future__ import annotations

import shutil
import subprocess

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
      keys[1].name, keys[52].name, len(meshes[0].vertex_groups))
"""


@pytest.mark.skipif(shutil.which("blender") is None, reason="Blender is not installed (apt-get install blender)")
def test_blender_imports_the_exported_vrm(default_avatar, tmp_path):
    """An independent reader: Blender's own glTF importer, headless (a .vrm is a GLB; Blender wants .glb)."""
    path = tmp_path / "default.glb"
    export_avatar(default_avatar, tmp_path / "default.vrm")
    (tmp_path / "default.vrm").rename(path)
    script = tmp_path / "check.py"
    script.write_text(_BLENDER_CHECK)
    done = subprocess.run(["blender", "-b", "--factory-startup", "--python", str(script), "--", str(path)],
                          capture_output=True, text=True, timeout=600)
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT"))
    bones, meshes, vertices, keys, first, last, groups = line.split()[1:]
    assert (int(bones), int(meshes), int(keys), int(groups)) == (55, 1, 53, 55)  # 52 shapes + Basis
    assert int(vertices) == default_avatar.num_vertices and (first, last) == (ARKIT_NAMES[0], ARKIT_NAMES[-1])
