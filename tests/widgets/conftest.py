"""GUI tests run on the real X server from scripts/services.sh (DISPLAY) with Mesa GL: never offscreen."""

from __future__ import annotations

import os

import pytest

from tests.conftest import DISPLAY_PROBLEM

if not DISPLAY_PROBLEM:  # with no X server, the root conftest keeps Qt from aborting and fails these tests
    os.environ["QT_QPA_PLATFORM"] = "xcb"
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")


@pytest.fixture
def studio_home(tmp_path, monkeypatch):
    """A private AVATAR_STUDIO_HOME, so layout files never touch the user's."""
    monkeypatch.setenv("AVATAR_STUDIO_HOME", str(tmp_path / "home"))
    return tmp_path / "home"
