"""scripts/setup.sh installs every Debian package the README's two commands need on a minimal system."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEBIAN_PYTHON = Path("/usr/bin/python3")


def wanted_packages(*args: str, python: str = sys.executable) -> list[str]:
    result = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh"), "packages", *args],
                            env=dict(os.environ, PYTHON=python), capture_output=True, text=True, check=True)
    return result.stdout.split()


def test_a_debian_interpreter_brings_its_shared_library_for_the_bundle():
    assert DEBIAN_PYTHON.exists(), "the README's machine has Debian's python3"
    version = subprocess.run([str(DEBIAN_PYTHON), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert f"libpython{version}" in wanted_packages("dev", python=str(DEBIAN_PYTHON))


def test_the_test_setup_adds_the_devices_and_voices_to_what_the_studio_needs():
    runtime, dev = set(wanted_packages()), set(wanted_packages("dev"))
    assert {"xvfb", "xauth", "x11-utils", "libportaudio2", "fonts-dejavu-core"} <= runtime
    assert runtime < dev
    assert {"pulseaudio", "pulseaudio-utils", "festival", "binutils"} <= dev
