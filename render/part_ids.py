"""A part-ID render: every triangle in one flat, unlit colour that names its part.

It answers "which part covers this pixel" exactly (no lighting, no blending, no antialiasing), so tests and
designers can check where parts show: teeth only inside the lip opening, lips that meet when closed.
Positions come from the same CPU morph and skinning as `AvatarView.posed_vertices`.
"""

from __future__ import annotations

import numpy as np
from vispy import gloo
from vispy.scene.visuals import create_visual_node
from vispy.visuals import Visual

from studio.avatar.model import AvatarModel

BACKGROUND_ID = 0

_VERTEX = """
attribute vec3 a_position;
attribute vec3 a_id_color;
varying vec3 v_id_color;
void main() {
    v_id_color = a_id_color;
    gl_Position = $transform(vec4(a_position, 1.0));
}
"""

_FRAGMENT = """
varying vec3 v_id_color;
void main() {
    gl_FragColor = vec4(v_id_color, 1.0);
}
"""


def id_color(part_id: int) -> np.ndarray:
    """RGB (0..255) that encodes part number `part_id` (0 is the background, black); the red channel alone is
    unique for 0..255 (53 is odd), green and blue only spread the colours apart for a person looking."""
    k = int(part_id)
    return np.array([(53 * k) % 256, (97 * k + 31) % 256 if k else 0, (151 * k + 7) % 256 if k else 0], np.uint8)


def face_labels(model: AvatarModel) -> np.ndarray:
    """Part index of each triangle: the label most of its corners carry (the first corner's on a three-way tie)."""
    if model.part_labels is None:
        return np.zeros(len(model.faces), np.int64)
    corners = np.asarray(model.part_labels, np.int64)[np.asarray(model.faces, np.int64)]
    a, b, c = corners.T
    return np.where((b == c) & (a != b), b, a)


def decode(image: np.ndarray, model: AvatarModel) -> np.ndarray:
    """Per-pixel part index + 1 (0 = background) from a part-ID render (h, w, 3 or 4) uint8."""
    table = np.stack([id_color(k) for k in range(len(model.part_names) + 1)]).astype(np.int64)
    keys = (table[:, 0] << 16) | (table[:, 1] << 8) | table[:, 2]
    pixels = image[..., :3].astype(np.int64)
    found = (pixels[..., 0] << 16) | (pixels[..., 1] << 8) | pixels[..., 2]
    order = np.argsort(keys)
    index = np.searchsorted(keys[order], found).clip(0, len(keys) - 1)
    ids = order[index]
    if not np.array_equal(keys[ids], found):
        raise ValueError("image holds colours that are not part IDs (was it rendered with mode='part_id'?)")
    return ids


class PartIdVisual(Visual):
    """The avatar's triangles, each in its part's ID colour, from posed vertex positions set per frame."""

    def __init__(self, model: AvatarModel) -> None:
        Visual.__init__(self, vcode=_VERTEX, fcode=_FRAGMENT)
        self.set_gl_state("opaque", depth_test=True, cull_face=False, blend=False)
        self._draw_mode = "triangles"
        self._faces = np.asarray(model.faces, np.int64)
        labels = face_labels(model)
        colors = np.stack([id_color(k + 1) for k in range(len(model.part_names))]).astype(np.float32) / 255.0
        self.shared_program["a_id_color"] = gloo.VertexBuffer(np.repeat(colors[labels], 3, axis=0))
        self._positions = gloo.VertexBuffer(np.zeros((len(self._faces) * 3, 3), np.float32))
        self.shared_program["a_position"] = self._positions

    def set_positions(self, vertices: np.ndarray) -> None:
        """Posed vertices (V, 3) in the model's order."""
        self._positions.set_data(np.ascontiguousarray(vertices[self._faces].reshape(-1, 3), np.float32))
        self.update()

    def _prepare_transforms(self, view) -> None:
        view.view_program.vert["transform"] = view.get_transform()

    def _compute_bounds(self, axis: int, view):
        return None


PartIds = create_visual_node(PartIdVisual)
