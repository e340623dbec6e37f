"""The clean output window: the avatar alone, borderless, at the preset's resolution, on chroma or transparent.

Streaming and meeting software capture it as a window. It holds its own canvas (a second GL surface),
but no engine and no animation of its own: the main window hands it every FrameState it presents, so
both show the same instant and the output costs at most one extra render per presented frame.

Alpha over the transparent background: the canvas's surface holds premultiplied colour (a blended primitive over
nothing leaves colour × alpha, with alpha blended as one + (1 − alpha)). That is what the window must show: Qt
copies a QOpenGLWidget's texture into a WA_TranslucentBackground window's surface as it is, and window compositors
(X11 ARGB visuals, Wayland, DWM) take a translucent window's pixels as premultiplied, so the surface is left so.
Straight alpha there would add the colour again over the desktop. But vispy's Qt canvas, after every draw, clears
the alpha channel to the clear colour's alpha (to keep opaque windows opaque): over a transparent background that
is 0, which left the whole surface at alpha 0, the avatar added onto the desktop as light. So in transparent mode
the draw ends with a zero-size scissor box, which that clear respects; the next draw (and `render_image`) lifts it.
An image handed on (`render_image`, for PNG files and screenshots) is straight alpha, as offscreen renders and
video exports are.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QVBoxLayout, QWidget
from vispy import scene

from render.lod import build_drawn
from render.offscreen import straight_alpha
from render.scene import AvatarView
from studio.avatar.look import BARE, Look
from studio.avatar.model import AvatarModel
from studio.frame import FrameState

OUTPUT_BACKGROUNDS = ("chroma", "transparent")


class OutputWindow(QWidget):
    """No title bar, no menus, no docks: only the avatar. `set_frame` is cheap; drawing waits for Qt's paint."""

    def __init__(self, avatar: AvatarModel, size: tuple[int, int] = (1280, 720), background: str = "chroma",
                 look: Look = BARE) -> None:
        super().__init__(None, Qt.WindowType.Window | Qt.WindowType.FramelessWindowHint)
        self.setWindowTitle("Avatar Studio — Output")
        self.setAttribute(Qt.WidgetAttribute.WA_TranslucentBackground, True)
        self.setAttribute(Qt.WidgetAttribute.WA_NoSystemBackground, True)
        self.canvas = scene.SceneCanvas(app="pyside6", keys=None, show=False, parent=self)
        self.view = AvatarView(self.canvas, background="chroma", camera="body")
        self.set_avatar(avatar, look)
        self.draw_count = 0
        self.canvas.events.draw.connect(self._unclip, position="first")
        self.canvas.events.draw.connect(self._on_draw, position="last")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.canvas.native)
        self.set_background(background)
        self.set_output_size(*size)

    def _unclip(self, _event=None) -> None:
        self.canvas.context.set_state(scissor_test=False)

    def _on_draw(self, _event) -> None:
        self.draw_count += 1
        if self.view.background == "transparent":  # keep the drawn alpha from vispy's alpha clear (module note)
            self.canvas.context.set_scissor(0, 0, 0, 0)
            self.canvas.context.set_state(scissor_test=True)

    def set_output_size(self, width: int, height: int) -> None:
        """The fixed capture size (the preset's resolution), shrunk to fit the screen it is on if larger."""
        screen = self.screen() or QGuiApplication.primaryScreen()
        if screen is not None:
            available = screen.availableGeometry()
            scale = min(1.0, available.width() / width, available.height() / height)
            width, height = max(1, int(width * scale)), max(1, int(height * scale))
        self.setFixedSize(width, height)

    @property
    def background(self) -> str:
        return self.view.background

    def set_background(self, mode: str) -> None:
        if mode not in OUTPUT_BACKGROUNDS:
            raise ValueError(f"output background {mode!r} is not allowed; allowed: {', '.join(OUTPUT_BACKGROUNDS)}")
        self.view.set_background(mode)

    def set_avatar(self, avatar: AvatarModel, look: Look = BARE) -> None:
        """Draw `avatar` dressed in `look`, at full detail (what the viewport draws at the preset's LOD)."""
        model, mesh = build_drawn(avatar, look)
        self.view.set_avatar(model, mesh=mesh)
        self.canvas.update()

    def set_frame(self, state: FrameState) -> None:
        self.view.set_frame(state)
        if self.isVisible():
            self.canvas.update()

    def frame_head(self) -> None:
        self.view.frame_head()

    def frame_body(self) -> None:
        self.view.frame_body()

    def move_to_screen(self, index: int) -> None:
        """Put the window on another screen (top-left corner)."""
        screens = QGuiApplication.screens()
        if not 0 <= index < len(screens):
            raise ValueError(f"screen {index} does not exist; screens 0..{len(screens) - 1}")
        self.move(screens[index].geometry().topLeft())

    def render_image(self) -> np.ndarray:
        """What the window shows, as RGBA (H, W, 4) uint8 with straight alpha (see the module note), drawn now."""
        self._unclip()
        return straight_alpha(self.canvas.render(alpha=True))
