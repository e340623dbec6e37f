"""The mapping of an imported avatar as the mapping dialog edits it (Qt-free): rows, edits, checks, saving."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from studio.avatar.arkit import ARKIT_INDEX
from studio.avatar.io import load_avatar
from studio.avatar.skeleton import JOINT_INDEX

DATA = Path(__file__).resolve().parents[2] / "data" / "avatars"


def copy_avatar(folder: Path, name: str = "humanoid_arkit.glb", mapping: str | None = None) -> Path:
    path = folder / name
    path.write_bytes((DATA / name).read_bytes())
    if mapping is not None:
        path.with_name(path.stem + ".mapping.yaml").write_text(mapping)
    return path


def test_a_mapping_file_may_say_a_guessed_bone_is_not_driven(tmp_path):
    guessed = load_avatar(copy_avatar(tmp_path))
    assert "head" in guessed.info["humanoid"]
    unmapped = load_avatar(copy_avatar(tmp_path, mapping="bones:\n  head: none\n"))
    assert "head" not in unmapped.info["humanoid"]
    assert np.allclose(unmapped.rest_joints()[JOINT_INDEX["head"]], unmapped.rest_joints()[JOINT_INDEX["neck"]])
