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
from psygnal import Signal
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget
from vispy.gloo import gl

from render.lod import FULL_DETAIL, LodLibrary, build_drawn
from render.scaled_canvas import DynamicResolution, ScaledSceneCanvas
from render.scene import BACKGROUNDS, CAMERA_FRAMINGS, AvatarView
from studio.avatar.look import BARE, Look, drawn_model
from studio.avatar.model import AvatarModel
from studio.frame import FrameState

vispy.use(app="pyside6")


class Viewport(QWidget):
    """Hosts the canvas; `set_frame` is cheap and the draw happens on Qt's next paint.

    It draws `base_avatar` in `look` (a persona's colours and body shape) at the preset's level of detail,
    every mesh built by `render.lod` from `studio.avatar.look.drawn_model`; `avatar` is that look at full
    detail, for whoever needs the avatar rather than its pixels (recording, the persona panel).
    """

    drawn = Signal(float, float)  # (monotonic time s, render/present ms) after every draw

    def __init__(self, avatar: AvatarModel, background: str = "studio", parent: QWidget | None = None,
                 native_window: bool = True, look: Look = BARE) -> None:
        super().__init__(parent)
        self.canvas = ScaledSceneCanvas(app="pyside6", keys=None, show=False, bgcolor=(0.2, 0.21, 0.24, 1.0),
                                        parent=self, autoswap=False)
        self.dynamic_resolution = DynamicResolution()  # render scale that holds the preset's fps
        self.view = AvatarView(self.canvas, background=background)
        self.plan = None
        self._show(avatar, look, build_drawn(avatar, look))
        self.last_draw_ms = 0.0
        self.draw_count = 0
        self._shown_state: FrameState | None = None
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
        if ready is not None and ready is not self._drawn:
            self.view.set_lod(*ready, reframe=self.lods.look.betas != self.drawn_look.betas)
            self._drawn, self.lod_key, self.drawn_look = ready, self._wanted_lod, self.lods.look

    @property
    def look_drawn(self) -> bool:
        """Whether the drawn mesh is the current look at the preset's level of detail (False while one builds)."""
        return self.lods.get(self._wanted_lod) is self._drawn

    def set_frame(self, state: FrameState) -> None:
        started = time.perf_counter()
        self._shown_state = state
        self._switch_lod_when_ready()
        self.view.set_frame(state)
        self.canvas.update()
        self._upload_ms = (time.perf_counter() - started) * 1000.0

    def identity_key(self) -> tuple:
        """What the operator may change on purpose and an identity render depends on: avatar, look, LOD, background,
        size."""
        return id(self.base_avatar), self.drawn_look, self.lod_key, self.view.background, tuple(self.canvas.physical_size)

    def render_identity(self, state: FrameState, size: tuple[int, int] = (256, 256)) -> np.ndarray:
        """`state` drawn by this canvas (the session's own GL resources) at the fixed head camera and full
        resolution into an offscreen buffer, for the drift dock's identity check; the view is put back after.

        The canvas renders at its own size and the centred square (the head) is sampled down to `size`: asked
        for another size, vispy's `render` drew the scene's lower-left corner (background only for the head
        close-up), so the check never saw the avatar."""
        camera = self.view.camera
        saved_camera, framing, scale = camera.get_state(), self.view.framing, self.canvas.render_scale
        try:
            self.view.frame_head()
            self.view.set_frame(state)
            self.canvas.render_scale = 1.0
            image = _centred_square(self.canvas.render(alpha=False), size)
        finally:
            self.canvas.render_scale = scale
            camera.set_state(saved_camera)
            self.view.framing = framing
            if self._shown_state is not None:
                self.view.set_frame(self._shown_state)
            self.canvas.update()
        return image

    def set_avatar(self, model: AvatarModel, look: Look | None = None) -> None:
        """Draw another avatar (in `look`, else the current one): at full detail at once, then at the preset's LOD."""
        look = self.look if look is None else look
        self._show(model, look, build_drawn(model, look))
        if self.plan is not None:
            self.apply_plan(self.plan)
        self.canvas.update()

    def set_look(self, look: Look) -> None:
        """Dress the same avatar anew (colours, body shape). `avatar` changes at once; the drawn mesh when the
        new look's mesh at the current level of detail is built (in the background, a fraction of a second)."""
        if look == self.look:
            return
        self.look = look
        self.avatar = drawn_model(self.base_avatar, look)
        self.lods.set_look(look)
        self._wanted_lod = self.lods.request(*self._wanted_lod)
        self._switch_lod_when_ready()

    def _show(self, base: AvatarModel, look: Look, full_detail) -> None:
        self.view.set_avatar(full_detail[0], mesh=full_detail[1])
        self.base_avatar, self.look, self.avatar = base, look, full_detail[0]
        self.lods = LodLibrary(base, look, full_detail)
        self._drawn, self.drawn_look = full_detail, look
        self.lod_key = self._wanted_lod = FULL_DETAIL  # (level of detail, face kept whole) drawn / asked for

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


def _centred_square(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The middle square of `image`, sampled (nearest pixel) to `size` (width, height)."""
    height, width = image.shape[:2]
    side = min(height, width)
    top, left = (height - side) // 2, (width - side) // 2
    rows = top + np.linspace(0, side - 1, size[1]).round().astype(int)
    columns = left + np.linspace(0, side - 1, size[0]).round().astype(int)
    return np.ascontiguousarray(image[rows][:, columns])
