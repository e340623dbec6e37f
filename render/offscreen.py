"""Rendering without a window: vispy's EGL backend on a surfaceless display (no X, no DISPLAY needed).

vispy holds one application backend per process. When a GUI backend (Qt) is already in use we render
through a hidden canvas of that backend instead of starting EGL beside it.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from studio.avatar.model import AvatarModel
from studio.frame import FrameState

_GL_DEPTH_COMPONENT24 = 0x81A6
RENDER_MODES = ("shaded", "part_id")


def _application():
    """The vispy Application to render with: the one already in use, else EGL (surfaceless)."""
    os.environ.setdefault("EGL_PLATFORM", "surfaceless")
    import vispy.app
    from vispy.app import _default_app

    if _default_app.default_app is not None:
        return _default_app.default_app
    qt = sys.modules.get("PySide6.QtWidgets")
    if qt is not None and qt.QApplication.instance() is not None:
        return vispy.app.use_app("pyside6")
    return vispy.app.use_app("egl")


def straight_alpha(image: np.ndarray) -> np.ndarray:
    """The RGBA image with its colour not multiplied by alpha, as video files and compositors take it.

    Over a transparent background a blended primitive (glTF BLEND) leaves colour × alpha in the framebuffer; every
    other pixel is opaque or empty and is left as it is.
    """
    alpha = image[..., 3]
    partial = (alpha > 0) & (alpha < 255)
    if not partial.any():
        return image
    out = image.copy()
    scaled = image[partial, :3].astype(np.uint32) * 255 + alpha[partial, None] // 2
    out[partial, :3] = np.minimum(scaled // alpha[partial, None], 255).astype(np.uint8)
    return out


def downsample(image: np.ndarray, factor: int) -> np.ndarray:
    """Box-filter an RGBA image by `factor`, averaging colour by coverage so transparent edges stay clean.

    Sums strided slices in integers: ten times faster than a float reshape-mean at 2560x1440.
    """
    height, width = image.shape[0] // factor, image.shape[1] // factor
    blocks = image.reshape(height, factor, width, factor, 4)
    parts = [blocks[:, i, :, j] for i in range(factor) for j in range(factor)]
    count = factor * factor
    if int(image[..., 3].min()) == 255:
        total = sum(part.astype(np.uint16) for part in parts)
        return ((total + count // 2) // count).astype(np.uint8)
    alphas = [part[..., 3:4].astype(np.uint32) for part in parts]
    alpha_sum = sum(alphas)
    rgb = sum(part[..., :3].astype(np.uint32) * alpha for part, alpha in zip(parts, alphas))
    rgb = (rgb + alpha_sum // 2) // np.maximum(alpha_sum, 1)
    return np.concatenate([rgb, (alpha_sum + count // 2) // count], axis=-1).astype(np.uint8)


class OffscreenRenderer:
    """Renders FrameStates of one avatar to RGBA arrays (h, w, 4) uint8, top row first.

    `supersample` renders at that many times the size and box-filters down: smooth edges for exports,
    at roughly supersample² the raster cost. `mode="part_id"` draws every triangle in its part's flat ID
    colour on black instead (render.part_ids.decode turns a frame into part indices).
    """

    def __init__(
        self,
        avatar: AvatarModel,
        size: tuple[int, int] = (1280, 720),
        background: str = "studio",
        camera: str = "body",
        skinning: str = "gpu",
        supersample: int = 1,
        mode: str = "shaded",
    ) -> None:
        width, height = (int(v) for v in size)
        if width < 16 or height < 16 or width > 8192 or height > 8192:
            raise ValueError(f"render size {size!r} is out of range; width and height must be 16..8192 pixels")
        if supersample not in (1, 2, 3, 4) or max(width, height) * supersample > 8192:
            raise ValueError(f"supersample {supersample!r} is not allowed; use 1..4 with size x supersample <= 8192")
        if mode not in RENDER_MODES:
            raise ValueError(f"render mode {mode!r} is not known; allowed: {', '.join(RENDER_MODES)}")
        if mode == "part_id" and supersample != 1:
            raise ValueError("a part-ID render cannot be supersampled: averaging would mix the ID colours")
        self.mode = mode
        self.size = (width, height)
        self.supersample = int(supersample)
        app = _application()
        from vispy import gloo, scene

        from render.scene import AvatarView

        self.canvas = scene.SceneCanvas(app=app, size=self.size, show=False, keys=None, dpi=96)
        self.canvas.set_current()
        self.view = AvatarView(self.canvas, avatar, background=background, camera=camera, skinning=skinning)
        self._part_ids = None
        if mode == "part_id":
            from render.part_ids import PartIds

            self.view.set_background("transparent")
            self.view.avatar.visible = False
            self._part_ids = PartIds(avatar, parent=self.view.view.scene)
        fbo_shape = (height * self.supersample, width * self.supersample)
        self._fbo = gloo.FrameBuffer(
            color=gloo.RenderBuffer(fbo_shape + (4,)), depth=gloo.RenderBuffer(fbo_shape, format=_GL_DEPTH_COMPONENT24)
        )
        self._closed = False

    @property
    def app_backend(self) -> str:
        return self.canvas.app.backend_name

    def render(self, state: FrameState | None = None) -> np.ndarray:
        """Draw one frame and read it back."""
        if self._closed:
            raise RuntimeError("OffscreenRenderer is closed")
        if state is not None:
            self.view.set_frame(state)
        if self._part_ids is not None:
            self._part_ids.set_positions(self.view.posed_vertices())
        canvas = self.canvas
        canvas.set_current()
        canvas.push_fbo(self._fbo, (0, 0), self.size)
        if self.supersample > 1:
            # push_fbo assumes the FBO has the canvas's size; map the canvas onto the larger FBO ourselves.
            fbo_size = (self.size[0] * self.supersample, self.size[1] * self.supersample)
            canvas.transforms.configure(viewport=(0, 0) + fbo_size, fbo_size=fbo_size, fbo_rect=(0, 0) + self.size)
        try:
            canvas.context.clear(color=canvas.bgcolor, depth=True)
            canvas.draw_visual(canvas.scene)
            image = straight_alpha(self._fbo.read())
        finally:
            canvas.pop_fbo()
        return image if self.supersample == 1 else downsample(image, self.supersample)

    def gl_renderer(self) -> str:
        """GL_RENDERER of the context we draw with (e.g. 'llvmpipe (LLVM 15.0.6, 256 bits)')."""
        from vispy import gloo

        self.canvas.set_current()
        return str(gloo.gl.glGetParameter(gloo.gl.GL_RENDERER))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.canvas.close()

    def __enter__(self) -> OffscreenRenderer:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
