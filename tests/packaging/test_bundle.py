"""The PyInstaller one-folder bundle builds, carries no torch, and passes its own selftest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bundle_builds_and_passes_selftest(tmp_path):
    pyinstaller = Path(sys.executable).with_name("pyinstaller")
    build = subprocess.run(
        [str(pyinstaller), "--noconfirm", "--log-level", "WARN", "--distpath", str(tmp_path / "dist"),
         "--workpath", str(tmp_path / "build"), str(ROOT / "packaging" / "avatar-studio.spec")],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    bundle = tmp_path / "dist" / "avatar-studio"
    executable = bundle / ("avatar-studio.exe" if os.name == "nt" else "avatar-studio")
    assert executable.is_file()
    internal = bundle / "_internal"
    assert not (internal / "torch").exists(), "torch must stay out of the runtime bundle"
    assert (internal / "assets" / "avatars" / "default.npz").is_file()

    environment = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    environment["EGL_PLATFORM"] = "surfaceless"
    version = subprocess.run([str(executable), "--version"], capture_output=True, text=True, timeout=120, env=environment)
    assert version.returncode == 0 and version.stdout.startswith("avatar-studio ")
    selftest = subprocess.run([str(executable), "selftest"], capture_output=True, text=True, timeout=300, env=environment)
    assert selftest.returncode == 0, selftest.stdout + selftest.stderr
    assert "selftest: PASS" in selftest.stdout
