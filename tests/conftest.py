"""Shared fixtures: a small synthetic avatar that any test can build in milliseconds."""

from __future__ import annotations

import os
import socket

import numpy as np
import pytest

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

QT_FIXTURES = {"qtbot", "qapp"}


def x_display_problem(display: str | None) -> str | None:
    """Why no X server answers on `display` (None when one does), without touching Qt.

    Qt's xcb platform aborts the whole process when it cannot connect, so the tests check first.
    """
    if not display:
        return "DISPLAY is not set"
    number = display.rpartition(":")[2].split(".")[0]
    if display.startswith(":") and number.isdigit():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(f"/tmp/.X11-unix/X{number}")
        except OSError as error:
            return f"no X server answers on DISPLAY={display} ({error.strerror})"
        finally:
            probe.close()
    return None


DISPLAY_PROBLEM = x_display_problem(os.environ.get("DISPLAY"))
if DISPLAY_PROBLEM:
    # Keep Qt from aborting the run: tests that need a window fail one by one with the reason instead.
    os.environ["QT_QPA_PLATFORM"] = "offscreen"


def pytest_report_header(config) -> str | None:
    if DISPLAY_PROBLEM:
        return f"WARNING: {DISPLAY_PROBLEM}: window tests will fail; run `make test`, which starts Xvfb"
    return None


@pytest.fixture(autouse=True)
def _needs_x_display(request) -> None:
    """Tests that open Qt windows fail with the reason when there is no X server, never abort the run."""
    if DISPLAY_PROBLEM and QT_FIXTURES & set(request.fixturenames):
        pytest.fail(f"{DISPLAY_PROBLEM}: this test opens a window; run `make test`, which starts Xvfb")

from studio.avatar.model import AvatarModel, Material  # noqa: E402


def make_random_avatar(vertex_count: int = 600, seed: int = 0, moving_vertices: int = 60) -> AvatarModel:
    """Random but valid avatar: every joint regressed from 5 vertices no expression moves."""
    rng = np.random.default_rng(seed)
    template = rng.normal(size=(vertex_count, 3)).astype(np.float32) * 0.3
    faces = rng.integers(0, vertex_count, (vertex_count * 2, 3)).astype(np.int32)
    regressor = np.zeros((55, vertex_count), np.float32)
    static = np.arange(moving_vertices, vertex_count)
    for joint in range(55):
        regressor[joint, rng.choice(static, 5, replace=False)] = 0.2
    weights = np.zeros((vertex_count, 55), np.float32)
    for vertex in range(vertex_count):
        weights[vertex, rng.choice(55, 4, replace=False)] = rng.dirichlet(np.ones(4))
    expr = np.zeros((vertex_count, 3, 52), np.float32)
    expr[:moving_vertices] = rng.normal(size=(moving_vertices, 3, 52)) * 0.01
    labels = (np.arange(vertex_count) >= moving_vertices).astype(np.uint8)
    return AvatarModel(
        name="synthetic",
        v_template=template,
        faces=faces,
        joint_regressor=regressor,
        skin_weights=weights,
        shape_dirs=rng.normal(size=(vertex_count, 3, 10)).astype(np.float32) * 0.01,
        expr_dirs=expr,
        part_labels=labels,
        part_names=("face", "body"),
        materials={"face": Material((0.9, 0.7, 0.6)), "body": Material((0.2, 0.3, 0.6), 0.05, 8.0)},
    )


@pytest.fixture
def pulse_audio() -> str:
    """The PulseAudio null sink/source that `make test` starts; without it the audio tests fail, not skip."""
    server = os.environ.get("PULSE_SERVER")
    if not server:
        pytest.fail("PULSE_SERVER is not set: run the tests with `make test`, which starts a PulseAudio null sink")
    return server


@pytest.fixture
def random_avatar() -> AvatarModel:
    return make_random_avatar()


def arkit_weights(**shapes: float) -> np.ndarray:
    """The 52 ARKit weights with these shapes set by name (the rest 0), as a FrameState's `arkit`."""
    from studio.avatar.arkit import ARKIT_INDEX

    out = np.zeros(52, np.float32)
    for name, value in shapes.items():
        out[ARKIT_INDEX[name]] = value
    return out
