"""Render self-test: does this machine draw the avatar, and do the mouth and eyes visibly move?

Runs headless through EGL, so an installed bundle or a CI box can check its GL stack without a display.
Regions are found by projecting the vertices a shape moves to the screen, so the test works for any avatar.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from studio.avatar.arkit import ARKIT_NAMES
from studio.avatar.model import AvatarModel
from studio.frame import FrameState

SELFTEST_SIZE = (640, 360)
_CHANGED_LEVEL = 12  # per-channel difference (0..255) that counts a pixel as changed
_REGION_PAD_PX = 6


def _background_mask(image: np.ndarray, background_rgb: np.ndarray) -> np.ndarray:
    return np.abs(image[..., :3].astype(np.int16) - background_rgb).max(axis=-1) <= 6


def _changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a[..., :3].astype(np.int16) - b[..., :3].astype(np.int16)).max(axis=-1) > _CHANGED_LEVEL


def _region(points_px: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Boolean mask of the padded screen box around projected points."""
    height, width = shape
    mask = np.zeros(shape, bool)
    if len(points_px) == 0:
        return mask
    x0, y0 = np.floor(points_px.min(axis=0)).astype(int) - _REGION_PAD_PX
    x1, y1 = np.ceil(points_px.max(axis=0)).astype(int) + _REGION_PAD_PX
    mask[max(y0, 0) : min(y1, height), max(x0, 0) : min(x1, width)] = True
    return mask


def shape_vertices(model: AvatarModel, shape: str, fraction: float = 0.2) -> np.ndarray:
    """Indices of the vertices an ARKit shape moves by at least `fraction` of its largest displacement."""
    lengths = np.linalg.norm(model.expr_dirs[:, :, ARKIT_NAMES.index(shape)], axis=1)
    peak = float(lengths.max())
    if peak <= 0.0:
        return np.zeros(0, int)
    return np.flatnonzero(lengths >= fraction * peak)


def _shape_check(renderer, model: AvatarModel, shape: str, fallback_parts: tuple[str, ...], out) -> bool:
    view = renderer.view
    neutral = FrameState()
    weights = np.zeros(len(ARKIT_NAMES), np.float32)
    weights[ARKIT_NAMES.index(shape)] = 1.0
    moved = FrameState(arkit=weights)
    indices = shape_vertices(model, shape)
    if indices.size == 0:
        mask = np.zeros(model.num_vertices, bool)
        for part in fallback_parts:
            mask |= model.part_mask(part)
        indices = np.flatnonzero(mask)
    if indices.size == 0:
        out(f"FAIL {shape}: the avatar has no {shape} displacement and no {'/'.join(fallback_parts)} vertices")
        return False
    points = np.concatenate([view.posed_vertices(neutral)[indices], view.posed_vertices(moved)[indices]])
    before = renderer.render(neutral)
    after = renderer.render(moved)
    region = _region(view.project(points), before.shape[:2])
    changed = _changed(before, after)
    inside = float(changed[region].mean()) if region.any() else 0.0
    outside = float(changed[~region].mean()) if (~region).any() else 0.0
    passed = inside >= 0.03 and inside > 5 * outside
    out(
        f"{'PASS' if passed else 'FAIL'} {shape}: {inside * 100:.1f}% of the {int(region.sum())}-pixel region changed, "
        f"{outside * 100:.2f}% elsewhere (need >= 3% and > 5x elsewhere)"
    )
    return passed


def run_selftest(avatar: AvatarModel | None = None, out: Callable[[str], None] = print) -> bool:
    """Render offscreen and check the avatar is drawn and its mouth and left eye move; True if all pass."""
    from render.offscreen import OffscreenRenderer
    from render.scene import CHROMA_GREEN

    if avatar is None:
        from studio.avatar.io import default_avatar_path, load_avatar

        avatar = load_avatar(default_avatar_path())
    results = []
    try:
        renderer = OffscreenRenderer(avatar, size=SELFTEST_SIZE, background="chroma", camera="body")
    except Exception as error:  # the GL stack itself is what we are testing: report, do not crash
        out(f"FAIL offscreen renderer setup: {type(error).__name__}: {error}")
        return False
    with renderer:
        out(f"INFO renderer: {renderer.gl_renderer()} via vispy app '{renderer.app_backend}'")
        image = renderer.render(FrameState())
        green = np.round(np.array(CHROMA_GREEN[:3]) * 255).astype(np.int16)
        drawn = ~_background_mask(image, green)
        coverage = float(drawn.mean())
        expected = _region(renderer.view.project(renderer.view.posed_vertices(FrameState())), image.shape[:2])
        inside = float(drawn[expected].sum() / max(drawn.sum(), 1))
        passed = coverage >= 0.01 and inside >= 0.95
        out(
            f"{'PASS' if passed else 'FAIL'} avatar drawn: {coverage * 100:.1f}% of pixels, "
            f"{inside * 100:.1f}% of them inside the projected avatar box (need >= 1% and >= 95%)"
        )
        results.append(passed)
        renderer.view.frame_head()
        results.append(_shape_check(renderer, avatar, "jawOpen", ("lips", "teeth"), out))
        results.append(_shape_check(renderer, avatar, "eyeBlinkLeft", ("eyes",), out))
    ok = all(results)
    out(f"{'PASS' if ok else 'FAIL'} render self-test ({sum(results)}/{len(results)} checks)")
    return ok


if __name__ == "__main__":
    raise SystemExit(0 if run_selftest() else 1)
