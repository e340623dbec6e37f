"""The central viewport: a vispy SceneCanvas inside the Qt window, showing one AvatarView.

Also measures what presenting a frame costs on the GUI thread (state upload plus the GL
draw), which the latency dock shows as the render/present stage.

The frame is finished with `glFinish` (through ctypes, which releases the GIL) before the buffer
swap. Qt's `swapBuffers`, called through PySide, keeps the GIL while a software rasteriser
(Mesa llvmpipe) finishes the frame: tens of milliseconds for the head close-up at 1280×720, and
hundreds under load, during which the speaker's audio callback could not run and the sound broke
up. Finishing first leaves the swap nothing to wait for.

The canvas widget gets its own native window (`native_window=True`, the default). A QOpenGLWidget
without one makes Qt compose the whole main window through GL on every frame (docks included:
on software GL a full-window texture upload and swap); with one, only the viewport's own pixels
are swapped. Measured with the docks open on the 2-core llvmpipe machine: ~50 ms of process CPU
per presented frame with a native window against 67-97 ms without (`gui_native_window` in the bench).
"""

from __future__ import annotations

import time

import numpy as np
import vispy
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget
from vispy.gloo import gl

from render.lod import LodLibrary
from render.scaled_canvas import DynamicResolution, ScaledSceneCanvas
from render.scene import BACKGROUNDS, CAMERA_FRAMINGS, AvatarView
from studio.avatar.model import AvatarModel
from studio.frame import FrameState
from widgets.models import Event

vispy.use(app="pyside6")


class Viewport(QWidget):
    """Hosts the canvas; `set_frame` is cheap and the draw happens on Qt's next paint."""

    def __init__(self, avatar: AvatarModel, background: str = "studio", parent: QWidget | None = None,
                 native_window: bool = True) -> None:
        super().__init__(parent)
        self.canvas = ScaledSceneCanvas(app="pyside6", keys=None, show=False, bgcolor=(0.2, 0.21, 0.24, 1.0),
                                        parent=self, autoswap=False)
        self.dynamic_resolution = DynamicResolution()  # render scale that holds the preset's fps
        self.view = AvatarView(self.canvas, avatar, background=background)
        self.avatar = avatar
        self.lods = LodLibrary(avatar, self.view.avatar.mesh)
        self.lod_key = self._wanted_lod = ("high", True)  # (level of detail, face kept whole) drawn / asked for
        self.plan = None
        self.last_draw_ms = 0.0
        self.draw_count = 0
        self._shown_state: FrameState | None = None
        self.drawn = Event()  # (monotonic time s, render/present ms) after every draw
        self._upload_ms = 0.0
        self._draw_started = 0.0
        self.canvas.events.draw.connect(self._on_draw_start, position="first")
        self.canvas.events.draw.connect(self._on_draw_end, position="last")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.canvas.native)
        self.canvas.native.setMinimumSize(320, 240)
        self.native_window = native_window
        if native_window:
            self.canvas.native.setAttribute(Qt.WidgetAttribute.WA_NativeWindow)

    def _on_draw_start(self, _event) -> None:
        self._draw_started = time.perf_counter()

    def _on_draw_end(self, _event) -> None:
        gl.glFinish()  # the rasteriser's work, done without the GIL (see the module docstring)
        self.canvas.swap_buffers()
        self.last_draw_ms = (time.perf_counter() - self._draw_started) * 1000.0 + self._upload_ms
        self.draw_count += 1
        self.canvas.render_scale = self.dynamic_resolution.add_draw(time.monotonic(), self.last_draw_ms)
        self.drawn.emit(time.monotonic(), self.last_draw_ms)

    def apply_plan(self, plan) -> None:
        """Module levels the viewport draws (studio.precision.ModulePlan): cloth springs now, the mesh LOD
        as soon as it is loaded (in the background; the current mesh stays until then)."""
        self.plan = plan
        self.view.set_cloth(plan.cloth_regions)
        self._wanted_lod = self.lods.request(plan.lod, plan.keep_face_detail)
        self._switch_lod_when_ready()

    def _switch_lod_when_ready(self) -> None:
        ready = self.lods.get(self._wanted_lod)
        if ready is not None and self._wanted_lod != self.lod_key:
            self.view.set_lod(*ready)
            self.lod_key = self._wanted_lod

    def set_frame(self, state: FrameState) -> None:
        started = time.perf_counter()
        self._shown_state = state
        if self._wanted_lod != self.lod_key:
            self._switch_lod_when_ready()
        self.view.set_frame(state)
        self.canvas.update()
        self._upload_ms = (time.perf_counter() - started) * 1000.0

    def identity_key(self) -> tuple:
        """What the operator may change on purpose and an identity render depends on: avatar, LOD, background, size."""
        return id(self.avatar), self.lod_key, self.view.background, tuple(self.canvas.physical_size)

    def render_identity(self, state: FrameState, size: tuple[int, int] = (256, 256)) -> np.ndarray:
        """`state` drawn by this canvas (the session's own GL resources) at the fixed head camera and full
        resolution into an offscreen buffer, for the drift dock's identity check; the view is put back after."""
        camera = self.view.camera
        saved_camera, framing, scale = camera.get_state(), self.view.framing, self.canvas.render_scale
        try:
            self.view.frame_head()
            self.view.set_frame(state)
            self.canvas.render_scale = 1.0
            image = self.canvas.render(size=size, alpha=False)
        finally:
            self.canvas.render_scale = scale
            camera.set_state(saved_camera)
            self.view.framing = framing
            if self._shown_state is not None:
                self.view.set_frame(self._shown_state)
            self.canvas.update()
        return image

    def set_avatar(self, model: AvatarModel, betas=None) -> None:
        self.view.set_avatar(model, betas)
        self.avatar = model
        self.lods = LodLibrary(model, self.view.avatar.mesh)
        self.lod_key = self._wanted_lod = ("high", True)
        if self.plan is not None:
            self.apply_plan(self.plan)
        self.canvas.update()

    @property
    def background(self) -> str:
        return self.view.background

    def set_background(self, mode: str) -> None:
        if mode not in BACKGROUNDS:
            raise ValueError(f"background {mode!r} is not known; allowed: {', '.join(BACKGROUNDS)}")
        self.view.set_background(mode)

    def frame_head(self) -> None:
        self.view.frame_head()

    def frame_body(self) -> None:
        self.view.frame_body()

    @property
    def framing(self) -> str:
        """'head' or 'body': what the camera was last framed on."""
        return self.view.framing

    def set_framing(self, framing: str) -> None:
        if framing not in CAMERA_FRAMINGS:
            raise ValueError(f"camera framing {framing!r} is not known; allowed: {', '.join(CAMERA_FRAMINGS)}")
        if framing == "head":
            self.view.frame_head()
        else:
            self.view.frame_body()

    def render_image(self) -> np.ndarray:
        """The viewport as an RGBA (H, W, 4) uint8 array, drawn now (offscreen read-back)."""
        return self.canvas.render(alpha=True)

    def close_canvas(self) -> None:
        self.canvas.close()
