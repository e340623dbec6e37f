"""The output window over a transparent background: its surface holds premultiplied colour (what Qt and the window
compositor take for a translucent window), and the RGBA it hands on as an image is straight, like offscreen renders."""

from __future__ import annotations

import numpy as np
from PySide6.QtGui import QImage

from studio.avatar.io import load_avatar
from studio.frame import FrameState
from tests.render.test_imported_mtoon import flat, quad, write_glb


def test_a_blended_primitive_in_the_transparent_output_keeps_its_colour_with_its_alpha(tmp_path, qtbot):
    from widgets.panels.output_window import OutputWindow

    avatar = load_avatar(write_glb(tmp_path / "alone.glb", [(*quad(0.0, 0.3), 0)], [flat((1, 0, 0), 0.5, "BLEND")]))
    output = OutputWindow(avatar, size=(200, 200), background="transparent")
    qtbot.addWidget(output)
    output.show()
    qtbot.waitExposed(output)
    output.set_frame(FrameState())
    image = output.render_image().astype(int)
    half = (image[..., 3] > 100) & (image[..., 3] < 160)
    assert half.sum() > 100, "the half-transparent quad is in the picture"
    assert np.abs(image[half] - (255, 0, 0, 128)).max() <= 2, image[half][0]  # was (128, 0, 0, 128): red x alpha
    assert (image[..., 3] == 0).any() and not (image[..., 3] == 255).any()
    surface = output.canvas.native.grabFramebuffer().convertToFormat(QImage.Format.Format_RGBA8888_Premultiplied)
    raw = np.frombuffer(surface.constBits(), np.uint8).reshape(surface.height(), surface.bytesPerLine() // 4, 4)
    # premultiplied, as Qt and the compositor take it; was (128, 0, 0, 0): vispy's alpha clear wiped the alpha
    assert np.abs(raw[100, 100].astype(int) - (128, 0, 0, 128)).max() <= 2, raw[100, 100]
    assert raw[..., 3].min() == 0  # and the background stays see-through
