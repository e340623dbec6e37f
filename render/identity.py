"""The identity check of a long session: the neutral pose rendered offscreen at a fixed camera and
compared with the session's first render by SSIM (scikit-image's `structural_similarity`).

One renderer serves the whole session: its GL buffers are updated in place, never re-created.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from studio.avatar.look import BARE, Look, drawn_model
from studio.avatar.model import AvatarModel
from studio.frame import FrameState


def _gray(image: np.ndarray) -> np.ndarray:
    rgb = image[..., :3].astype(np.float64)
    return rgb @ np.array((0.299, 0.587, 0.114))


def live_gl_objects(canvas) -> int:
    """GL objects (buffers, textures, programs, framebuffers) alive in this canvas's context."""
    parser = canvas.context.shared.parser
    return sum(1 for value in parser._objects.values() if hasattr(value, "handle"))


class IdentityCheck:
    """Call with a FrameState: renders it (head camera) and returns SSIM against the first render (1.0 then).

    By default it draws `avatar` in `look` (`studio.avatar.look.drawn_model`, full detail) with its own
    offscreen renderer (the soak); `render` draws with another one instead, such as the studio window's own
    canvas, so the check sees the session's GL resources and the mesh the viewport draws.
    """

    def __init__(self, avatar: AvatarModel | None = None, size: tuple[int, int] = (256, 256),
                 render: Callable[[FrameState], np.ndarray] | None = None, look: Look = BARE) -> None:
        self.renderer = None
        if render is None:
            from render.offscreen import OffscreenRenderer

            if avatar is None:
                raise ValueError("IdentityCheck needs an avatar to render, or a render function")
            self.renderer = OffscreenRenderer(drawn_model(avatar, look), size=size, background="chroma", camera="head")
            render = self.renderer.render
        self.render = render
        self.first: np.ndarray | None = None
        self.renders = 0

    def __call__(self, state: FrameState) -> float:
        from skimage.metrics import structural_similarity

        image = _gray(self.render(state))
        self.renders += 1
        if self.first is None:  # the reference; comparing it with itself loads and warms the SSIM code now
            self.first = image
        return float(structural_similarity(self.first, image, data_range=255.0))

    def close(self) -> None:
        if self.renderer is not None:
            self.renderer.close()
