"""Per-vertex arrays for what a glTF/VRM material asks of the renderer beyond its colour: MToon's rim light,
outline and UV animation, and alpha blending (which primitive each blended vertex belongs to, so the renderer can
sort them).

Per vertex, like the avatar's other look arrays, so that one draw serves every material and a decimated level of
detail carries them by indexing, as it carries colours.
"""

from __future__ import annotations

import numpy as np

from studio.avatar.gltf import GltfScene

OUTLINE_MODES = {"world": 1.0, "screen": 2.0}


def mtoon_extras(scene: GltfScene) -> tuple[np.ndarray | None, ...]:
    """(rim (V, 6), outline (V, 6), blend group (V,), blend queue (V, 2), UV motion (V, 3)) over the scene's
    primitives in order; each None where no material asks for it (see AvatarModel.rim, .outline, .blend_group,
    .blend_queue and .uv_motion)."""
    count = sum(len(p.positions) for p in scene.primitives)
    rim = np.zeros((count, 6), np.float32)
    outline = np.zeros((count, 6), np.float32)
    blend = np.full(count, -1, np.int32)
    queue = np.zeros((count, 2), np.int32)
    motion = np.zeros((count, 3), np.float32)
    start = 0
    for index, piece in enumerate(scene.primitives):
        rows = slice(start, start + len(piece.positions))
        start += len(piece.positions)
        if piece.material is None:
            continue
        material = scene.materials[piece.material]
        if material.rim is not None:
            rim[rows] = (*material.rim.color, material.rim.fresnel_power, material.rim.lift, material.rim.lighting_mix)
        if material.outline is not None:
            line = material.outline
            outline[rows] = (*line.color, line.width, OUTLINE_MODES[line.mode], line.lighting_mix)
        if material.uv_motion is not None:
            motion[rows] = material.uv_motion
        if material.alpha_mode == "BLEND":
            blend[rows] = index
            queue[rows] = (material.blend_queue, material.blend_depth_write)
    blended = (blend >= 0).any()
    return (rim if rim[:, :3].any() else None, outline if outline[:, 4].any() else None,
            blend if blended else None, queue if blended else None, motion if motion.any() else None)


__all__ = ["OUTLINE_MODES", "mtoon_extras"]
