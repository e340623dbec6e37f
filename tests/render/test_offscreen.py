"""Real offscreen rendering (vispy EGL on Mesa): the avatar is drawn, its face moves, backgrounds behave."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from render.offscreen import OffscreenRenderer
from render.scene import BACKGROUNDS, CHROMA_GREEN
from render.selftest import run_selftest, shape_vertices
from studio.avatar.arkit import ARKIT_NAMES
from studio.avatar.model import NUM_POSE_CORRECTIVES, AvatarModel
from studio.avatar.skeleton import JOINT_INDEX, NUM_JOINTS
from studio.frame import FrameState

REPO = Path(__file__).resolve().parents[2]
SIZE = (320, 180)
GREEN = np.round(np.array(CHROMA_GREEN[:3]) * 255).astype(int)


@pytest.fixture(scope="module")
def renderer(ellipsoid_avatar):
    with OffscreenRenderer(ellipsoid_avatar, size=SIZE, background="chroma", camera="head") as r:
        yield r


@pytest.fixture(autouse=True)
def _reset(request):
    yield
    if "renderer" in request.fixturenames:
        r = request.getfixturevalue("renderer")
        r.view.set_background("chroma")
        r.view.frame_head()
        r.view.set_frame(FrameState())


def _weights(**named: float) -> np.ndarray:
    out = np.zeros(len(ARKIT_NAMES), np.float32)
    for name, value in named.items():
        out[ARKIT_NAMES.index(name)] = value
    return out


def _changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a[..., :3].astype(int) - b[..., :3].astype(int)).max(axis=-1) > 12


def _screen_box(renderer, model: AvatarModel, shape: str, pad: int = 4) -> np.ndarray:
    view = renderer.view
    index = shape_vertices(model, shape)
    points = np.concatenate([
        view.posed_vertices(FrameState())[index],
        view.posed_vertices(FrameState(arkit=_weights(**{shape: 1.0})))[index],
    ])
    px = view.project(points)
    mask = np.zeros((SIZE[1], SIZE[0]), bool)
    (x0, y0), (x1, y1) = np.floor(px.min(0)).astype(int) - pad, np.ceil(px.max(0)).astype(int) + pad
    mask[max(y0, 0) : y1, max(x0, 0) : x1] = True
    return mask


def test_frame_is_drawn_where_the_avatar_projects(renderer):
    renderer.view.frame_body()
    image = renderer.render(FrameState())
    assert image.shape == (SIZE[1], SIZE[0], 4) and image.dtype == np.uint8
    drawn = np.abs(image[..., :3].astype(int) - GREEN).max(-1) > 6
    assert drawn.mean() > 0.01
    px = renderer.view.project(renderer.view.posed_vertices(FrameState()))
    ys, xs = np.nonzero(drawn)
    assert px[:, 0].min() - 2 <= xs.min() and xs.max() <= px[:, 0].max() + 2
    assert px[:, 1].min() - 2 <= ys.min() and ys.max() <= px[:, 1].max() + 2


def test_mouth_region_changes_when_jaw_opens(renderer, ellipsoid_avatar):
    closed = renderer.render(FrameState())
    opened = renderer.render(FrameState(arkit=_weights(jawOpen=1.0)))
    mouth = _screen_box(renderer, ellipsoid_avatar, "jawOpen")
    changed = _changed(closed, opened)
    assert changed[mouth].mean() > 0.1
    assert changed[~mouth].mean() < 0.2 * changed[mouth].mean()


def test_left_eye_region_changes_on_blink_and_sits_on_the_viewers_right(renderer, ellipsoid_avatar):
    open_eyes = renderer.render(FrameState())
    blink = renderer.render(FrameState(arkit=_weights(eyeBlinkLeft=1.0)))
    eye = _screen_box(renderer, ellipsoid_avatar, "eyeBlinkLeft")
    changed = _changed(open_eyes, blink)
    assert changed[eye].mean() > 0.05
    assert changed[~eye].mean() < 0.2 * changed[eye].mean()
    ys, xs = np.nonzero(changed)
    assert xs.mean() > SIZE[0] / 2, "the subject's left eye must appear on the viewer's right"


def test_head_turn_moves_pixels_through_gpu_skinning(renderer):
    still = renderer.render(FrameState())
    pose = np.zeros((NUM_JOINTS, 3), np.float32)
    pose[JOINT_INDEX["head"]] = (0.0, 0.6, 0.5)
    turned = renderer.render(FrameState(pose=pose))
    assert _changed(still, turned).mean() > 0.05


def test_chroma_corners_are_green(renderer):
    image = renderer.render(FrameState())
    for corner in (image[0, 0], image[0, -1], image[-1, 0], image[-1, -1]):
        assert np.abs(corner[:3].astype(int) - GREEN).max() <= 2
        assert corner[3] == 255


def test_transparent_background_has_zero_alpha_in_corners_and_opaque_avatar(renderer):
    renderer.view.set_background("transparent")
    image = renderer.render(FrameState())
    assert all(corner[3] == 0 for corner in (image[0, 0], image[0, -1], image[-1, 0], image[-1, -1]))
    assert image[SIZE[1] // 2, SIZE[0] // 2, 3] == 255


def test_studio_background_is_a_gradient_lighter_at_the_top(renderer):
    renderer.view.set_background("studio")
    image = renderer.render(FrameState()).astype(int)
    assert image[2, 2, :3].sum() > image[-3, 2, :3].sum() + 30
    assert image[0, 0, 3] == 255


def test_unknown_background_names_the_allowed_modes(renderer):
    with pytest.raises(ValueError) as error:
        renderer.view.set_background("bogus")
    assert "bogus" in str(error.value)
    assert all(mode in str(error.value) for mode in BACKGROUNDS)


def test_gpu_and_cpu_skinning_draw_the_same_posed_avatar(ellipsoid_avatar):
    pose = np.zeros((NUM_JOINTS, 3), np.float32)
    pose[JOINT_INDEX["head"]] = (0.2, 0.5, 0.1)
    pose[JOINT_INDEX["left_hip"]] = (-0.7, 0.0, 0.2)
    state = FrameState(arkit=_weights(jawOpen=0.7, eyeBlinkLeft=1.0), pose=pose, transl=(0.05, 0.0, 0.1))
    images = {}
    for path in ("gpu", "cpu"):
        with OffscreenRenderer(ellipsoid_avatar, size=SIZE, background="chroma", skinning=path) as r:
            images[path] = r.render(state)
    assert _changed(images["gpu"], images["cpu"]).mean() < 0.002


@pytest.mark.parametrize("correctives", [False, True], ids=["no_pose_correctives", "pose_correctives"])
def test_cpu_pose_matches_the_reference_lbs(ellipsoid_avatar, correctives):
    from render.avatar_visual import AvatarMesh
    from studio.avatar import skinning

    rng = np.random.default_rng(3)
    if correctives:
        pose_dirs = np.zeros((ellipsoid_avatar.num_vertices, 3, NUM_POSE_CORRECTIVES), np.float32)
        pose_dirs[::7] = rng.normal(0, 0.002, pose_dirs[::7].shape)
        ellipsoid_avatar = dataclasses.replace(ellipsoid_avatar, pose_dirs=pose_dirs)
    pose = rng.normal(0, 0.3, (NUM_JOINTS, 3)).astype(np.float32)
    arkit = rng.uniform(0, 1, len(ARKIT_NAMES)).astype(np.float32)
    transl = np.array([0.1, -0.05, 0.2], np.float32)
    betas = np.array([1.5, 0.0], np.float32)
    ours = AvatarMesh(ellipsoid_avatar, betas).posed_vertices(FrameState(arkit=arkit, pose=pose, transl=transl))
    reference, _ = skinning.lbs(ellipsoid_avatar, betas, arkit, pose, transl)
    np.testing.assert_allclose(ours, reference, atol=1e-4)


def test_unknown_skinning_path_is_refused(ellipsoid_avatar):
    from render.avatar_visual import AvatarVisual

    with pytest.raises(ValueError, match="gpu, cpu"):
        AvatarVisual(ellipsoid_avatar, skinning="fast")


def test_selftest_passes_on_a_moving_face(ellipsoid_avatar):
    lines: list[str] = []
    assert run_selftest(ellipsoid_avatar, out=lines.append)
    assert sum(line.startswith("PASS") for line in lines) == 4


def test_selftest_fails_when_the_face_cannot_move(ellipsoid_avatar):
    frozen = AvatarModel(
        name="frozen",
        v_template=ellipsoid_avatar.v_template.copy(),
        faces=ellipsoid_avatar.faces.copy(),
        joint_regressor=ellipsoid_avatar.joint_regressor.copy(),
        skin_weights=ellipsoid_avatar.skin_weights.copy(),
        shape_dirs=ellipsoid_avatar.shape_dirs.copy(),
        expr_dirs=np.zeros_like(ellipsoid_avatar.expr_dirs),
        part_labels=ellipsoid_avatar.part_labels.copy(),
        part_names=ellipsoid_avatar.part_names,
        vertex_colors=ellipsoid_avatar.vertex_colors.copy(),
    )
    lines: list[str] = []
    assert not run_selftest(frozen, out=lines.append), lines
    assert any(line.startswith("FAIL jawOpen") for line in lines), lines
    assert any(line.startswith("FAIL eyeBlinkLeft") for line in lines)


_CHILD_PRELUDE = f"""
import json, sys
sys.path[:0] = [{str(REPO)!r}, {str(REPO / "tests" / "render")!r}]
import numpy as np
from conftest import make_ellipsoid_avatar
from studio.frame import FrameState
"""


def _run_child(code: str, env: dict) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", _CHILD_PRELUDE + textwrap.dedent(code)],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_offscreen_renders_with_no_display_at_all():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "EGL_PLATFORM")}
    env["OPENBLAS_NUM_THREADS"] = "1"
    report = _run_child(
        """
        from render.offscreen import OffscreenRenderer
        with OffscreenRenderer(make_ellipsoid_avatar(), size=(160, 90), background="chroma") as r:
            image = r.render(FrameState())
            green = np.abs(image[..., :3].astype(int) - (0, 177, 64)).max(-1) <= 6
            print(json.dumps({"backend": r.app_backend, "drawn": float((~green).mean())}))
        """,
        env,
    )
    assert report["backend"].lower() == "egl"
    assert report["drawn"] > 0.01


def test_qt_canvas_under_xvfb_draws_and_offscreen_reuses_the_qt_app():
    if not os.environ.get("DISPLAY"):
        pytest.fail("DISPLAY is not set: run under the dev services (scripts/services.sh) or make test")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", QT_QPA_PLATFORM="xcb")
    report = _run_child(
        """
        from PySide6.QtWidgets import QApplication
        app = QApplication([])
        from vispy import scene
        from render.scene import AvatarView
        from render.offscreen import OffscreenRenderer
        avatar = make_ellipsoid_avatar()
        canvas = scene.SceneCanvas(app="pyside6", size=(320, 180), show=True)
        view = AvatarView(canvas, avatar, background="chroma", camera="head")
        view.set_frame(FrameState())
        for _ in range(20):
            app.processEvents()
        image = canvas.render()
        green = np.abs(image[..., :3].astype(int) - (0, 177, 64)).max(-1) <= 6
        with OffscreenRenderer(avatar, size=(160, 90), background="chroma") as r:
            other = r.render(FrameState())
            other_green = np.abs(other[..., :3].astype(int) - (0, 177, 64)).max(-1) <= 6
            backend = r.app_backend
        print(json.dumps({"drawn": float((~green).mean()), "offscreen_drawn": float((~other_green).mean()),
                          "offscreen_backend": backend}))
        """,
        env,
    )
    assert report["drawn"] > 0.05
    assert "pyside6" in report["offscreen_backend"].lower()
    assert report["offscreen_drawn"] > 0.01


def test_lights_follow_the_camera_after_orbit_and_zoom(ellipsoid_avatar):
    """An orbited camera must light the avatar exactly as a camera that started there."""
    with OffscreenRenderer(ellipsoid_avatar, size=SIZE, background="chroma", camera="head") as moved:
        moved.render(FrameState())
        moved.view.orbit(40.0, 10.0)
        moved.view.zoom(0.8)
        after_orbit = moved.render(FrameState())
    with OffscreenRenderer(ellipsoid_avatar, size=SIZE, background="chroma", camera="head") as fresh:
        fresh.view.orbit(40.0, 10.0)
        fresh.view.zoom(0.8)
        direct = fresh.render(FrameState())
    assert _changed(after_orbit, direct).mean() < 0.001
    assert np.array_equal(after_orbit[..., 3], direct[..., 3])


def test_default_avatar_passes_the_selftest():
    lines: list[str] = []
    assert run_selftest(out=lines.append), lines


def test_supersampling_gives_partial_coverage_on_edges_and_keeps_the_size(ellipsoid_avatar):
    coverage = {}
    for factor in (1, 2):
        with OffscreenRenderer(ellipsoid_avatar, size=SIZE, background="transparent", supersample=factor) as r:
            image = r.render(FrameState())
        assert image.shape == (SIZE[1], SIZE[0], 4)
        coverage[factor] = int(((image[..., 3] > 0) & (image[..., 3] < 255)).sum())
    assert coverage[1] == 0
    assert coverage[2] > 50


def test_bad_render_sizes_are_refused_clearly(ellipsoid_avatar):
    with pytest.raises(ValueError, match="16..8192"):
        OffscreenRenderer(ellipsoid_avatar, size=(8, 8))
    with pytest.raises(ValueError, match="supersample"):
        OffscreenRenderer(ellipsoid_avatar, size=SIZE, supersample=5)


def test_downsample_averages_colour_by_coverage():
    from render.offscreen import downsample

    block = np.zeros((2, 2, 4), np.uint8)
    block[0, 0] = (200, 100, 50, 255)  # one covered sample of four, the rest transparent black
    np.testing.assert_array_equal(downsample(block, 2)[0, 0], (200, 100, 50, 64))
    opaque = np.full((2, 2, 4), 255, np.uint8)
    opaque[..., 0] = [[0, 100], [200, 100]]
    assert downsample(opaque, 2)[0, 0, 0] == 100 and downsample(opaque, 2)[0, 0, 3] == 255
