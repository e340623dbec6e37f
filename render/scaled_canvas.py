"""Dynamic resolution: draw the scene at a fraction of the canvas's pixels, then scale it up to fill it.

On a software rasteriser the frame time grows with the pixels shaded. When the window cannot hold
the preset's frame rate at its size, `ScaledSceneCanvas` renders into an offscreen texture of
`render_scale` times the width and height and draws that texture over the whole canvas with linear
filtering, before any frame has to be dropped. `DynamicResolution` picks the scale from the measured
draw times.
"""

from __future__ import annotations

import math

import numpy as np
from vispy import gloo, scene

_BLIT_VERTEX = """
attribute vec2 a_corner;
varying vec2 v_uv;
void main() {
    v_uv = a_corner * 0.5 + 0.5;
    gl_Position = vec4(a_corner, 0.0, 1.0);
}
"""

_BLIT_FRAGMENT = """
uniform sampler2D u_frame;
varying vec2 v_uv;
void main() {
    gl_FragColor = texture2D(u_frame, v_uv);
}
"""

MIN_SCALE = 0.5  # below this the face stops reading at a glance


class ScaledSceneCanvas(scene.SceneCanvas):
    """A SceneCanvas that draws at `render_scale` (MIN_SCALE..1) of its pixels and scales the picture up."""

    def __init__(self, *args, **kwargs) -> None:
        self.render_scale = 1.0
        self._target: tuple[tuple[int, int], gloo.FrameBuffer, gloo.Texture2D] | None = None
        self._blit: gloo.Program | None = None
        super().__init__(*args, **kwargs)

    def scaled_size(self) -> tuple[int, int]:
        width, height = self.physical_size
        return max(16, round(width * self.render_scale)), max(16, round(height * self.render_scale))

    def _draw_scene(self, bgcolor=None) -> None:
        if self.render_scale >= 0.999:
            super()._draw_scene(bgcolor)
            return
        size = self.scaled_size()
        if self._target is None or self._target[0] != size:
            texture = gloo.Texture2D((size[1], size[0], 4), interpolation="linear", format="rgba")
            depth = gloo.RenderBuffer((size[1], size[0]), format="depth")
            self._target = (size, gloo.FrameBuffer(color=texture, depth=depth), texture)
        if self._blit is None:
            self._blit = gloo.Program(_BLIT_VERTEX, _BLIT_FRAGMENT)
            self._blit["a_corner"] = np.array([[-1, -1], [1, -1], [-1, 1], [1, 1]], np.float32)
        _, framebuffer, texture = self._target
        # The scene's transforms stay those of the whole canvas (its normalised device coordinates do not
        # change); only the GL viewport shrinks to the texture. vispy's push_fbo would reconfigure the
        # transforms, which its visuals pick up a frame late.
        framebuffer.activate()
        try:
            self.context.set_viewport(0, 0, *size)
            self.context.clear(color=bgcolor if bgcolor is not None else self._bgcolor, depth=True)
            self.draw_visual(self.scene)
        finally:
            framebuffer.deactivate()
            self.context.set_viewport(0, 0, *self.physical_size)
        self._blit["u_frame"] = texture
        gloo.set_state(depth_test=False, blend=False, cull_face=False)
        self._blit.draw("triangle_strip")


class DynamicResolution:
    """Chooses the render scale so a frame's draw fits the frame budget of the preset's fps.

    Draw times are smoothed; when they run over 85 % of the budget the scale drops (pixels shaded go
    with its square), when they stay under half of it the scale creeps back up. Changes are at most
    one every `settle_s` seconds, so the picture does not pump.
    """

    def __init__(self, fps: float = 30.0, settle_s: float = 0.6) -> None:
        self.enabled = True
        self.scale = 1.0
        self.fps = float(fps)
        self.settle_s = settle_s
        self._smoothed_ms: float | None = None
        self._last_change_s = -math.inf
        self.changes = 0

    def set_fps(self, fps: float) -> None:
        self.fps = float(fps)
        self._smoothed_ms = None

    def add_draw(self, time_s: float, draw_ms: float) -> float:
        """Account one draw (ms at the current scale); returns the scale to use next."""
        if not self.enabled:
            self.scale = 1.0
            return self.scale
        self._smoothed_ms = draw_ms if self._smoothed_ms is None else 0.8 * self._smoothed_ms + 0.2 * draw_ms
        if time_s - self._last_change_s < self.settle_s:
            return self.scale
        budget = 1000.0 / self.fps
        wanted = self.scale
        if self._smoothed_ms > 0.85 * budget and self.scale > MIN_SCALE:
            wanted = max(MIN_SCALE, self.scale * math.sqrt(0.7 * budget / self._smoothed_ms))
        elif self._smoothed_ms < 0.5 * budget and self.scale < 1.0:
            wanted = min(1.0, self.scale * 1.1)
        if abs(wanted - self.scale) > 0.02 or (wanted == 1.0 and self.scale != 1.0):
            self.scale = round(wanted, 3)
            self._last_change_s = time_s
            self._smoothed_ms = None
            self.changes += 1
        return self.scale
