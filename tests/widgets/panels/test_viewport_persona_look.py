"""The viewport draws the persona's look (colours and body shape) at every preset's mesh level of detail.

Each part's pixels are found with a part-ID render of the mesh the viewport draws, at the viewport's own
camera and frame, and their median colour is compared with the same part in a reference render of the
persona's avatar at full detail (the persona's colours on the shipped avatar, its betas as the body shape):
what the Clean Output Window and exports show. Lighting and shading are the same in both, so the
medians agree to a few levels unless the colours differ.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from render.offscreen import OffscreenRenderer
from render.part_ids import decode
from studio.avatar.appearance import with_colors
from studio.avatar.io import default_avatar_path, load_avatar
from widgets.preset_control import BUILT_IN_PRESETS

BUILT_IN_PERSONAS = ("default", "teacher", "presenter", "clinician")
REGIONS = {"shirt": "shirt", "skin": "head", "hair": "hair"}  # colour part -> avatar part whose pixels show it
COLOR_TOLERANCE = 0.07  # largest channel difference (0..1) of two medians; the LOD's shading moves them by <= 0.05
SETTLE_MS = 60000  # a mesh level builds in about a second on a quiet machine; a loaded one may need far longer


@functools.cache
def _default_avatar():
    return load_avatar(default_avatar_path())


def _settled(window) -> bool:
    """The viewport draws the mesh its library holds for the current preset's level of detail."""
    viewport = window.viewport
    ready = viewport.lods.get(viewport.lods.key(viewport.plan.lod, viewport.plan.keep_face_detail))
    return ready is not None and viewport.view.avatar.mesh is ready[1]


def _regions(image: np.ndarray, part_ids: np.ndarray, part_names) -> dict[str, np.ndarray]:
    """Median colour (0..1) of each region's pixels; the part-ID image's pixel n means part n - 1."""
    out = {}
    for part, shown_by in REGIONS.items():
        pixels = image[part_ids == part_names.index(shown_by) + 1][:, :3]
        assert len(pixels) > 50, f"only {len(pixels)} pixels of {shown_by} in view"
        out[part] = np.median(pixels, axis=0) / 255.0
    return out


def _part_ids(model, size, camera_state, state) -> np.ndarray:
    with OffscreenRenderer(model, size=size, mode="part_id") as renderer:
        renderer.view.camera.set_state(camera_state)
        return decode(renderer.render(state), model)


def _persona_avatar(persona):
    """The shipped avatar in the persona's colours, its rest mesh shaped by the persona's betas (SMPL-X)."""
    model = with_colors(_default_avatar(), persona.colors)
    betas = np.zeros(model.num_betas)
    betas[: len(persona.betas)] = persona.betas
    shaped = model.v_template + np.asarray(model.shape_dirs, np.float64) @ betas
    return dataclasses.replace(model, v_template=shaped.astype(np.float32))


def _viewport_look(window) -> tuple[dict[str, np.ndarray], np.ndarray, tuple]:
    """(region medians, silhouette mask, (size, camera, frame)) of what the viewport shows now."""
    viewport = window.viewport
    state = window.current_frame
    image = viewport.render_image()
    size, camera = (image.shape[1], image.shape[0]), viewport.view.camera.get_state()
    model = viewport.view.avatar.mesh.model
    ids = _part_ids(model, size, camera, state)
    return _regions(image, ids, model.part_names), ids > 0, (size, camera, state)


def _reference_look(persona, view) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(region medians, silhouette) of the persona's avatar at full detail, in the viewport's view."""
    size, camera, state = view
    model = _persona_avatar(persona)
    with OffscreenRenderer(model, size=size) as renderer:
        renderer.view.camera.set_state(camera)
        image = renderer.render(state)
    ids = _part_ids(model, size, camera, state)
    return _regions(image, ids, model.part_names), ids > 0


def _color_mismatches(got: dict, want: dict) -> list[str]:
    return [f"{part}: viewport {np.round(got[part], 2).tolist()} vs persona {np.round(want[part], 2).tolist()}"
            for part in REGIONS if np.abs(got[part] - want[part]).max() > COLOR_TOLERANCE]


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max(1, (a | b).sum()))


@pytest.fixture
def shipped_avatar_window(studio_window):
    return lambda persona="default": studio_window(avatar=_default_avatar(), persona=persona)


def test_every_built_in_preset_draws_every_built_in_persona_in_its_colours(shipped_avatar_window, qtbot):
    window = shipped_avatar_window()
    panels = window.panels
    wrong = []
    for persona_name in BUILT_IN_PERSONAS:
        assert panels.select_persona(persona_name)
        panels.apply_look()  # what the look timer does 150 ms later
        persona = window.persona
        reference = None
        for preset_name in BUILT_IN_PRESETS:
            assert panels.select_preset(preset_name)
            qtbot.waitUntil(lambda: _settled(window), timeout=SETTLE_MS)
            got, _, view = _viewport_look(window)
            reference = reference or _reference_look(persona, view)
            wrong += [f"{persona_name} under {preset_name} ({window.viewport.lod_key}): {mismatch}"
                      for mismatch in _color_mismatches(got, reference[0])]
    assert not wrong, "\n".join(wrong)


def test_a_colour_and_a_body_shape_changed_live_stay_in_the_viewport(shipped_avatar_window, qtbot):
    window = shipped_avatar_window("teacher")
    panel = window.panels.persona_panel
    assert window.panels.select_preset("default")  # draws a medium mesh
    qtbot.waitUntil(lambda: _settled(window), timeout=SETTLE_MS)
    shirt = window.avatar.part_mask("shirt")
    green = (0.2, 0.75, 0.3)
    assert panel.set_color("shirt", green)
    panel.betas[0].setValue(20)  # beta 0 of the shipped avatar is height: 2.0 is about 20 cm taller
    assert window.persona.betas[0] == 2.0 and window.persona.colors["shirt"] == green
    qtbot.waitUntil(lambda: np.allclose(window.avatar.colors()[shirt].mean(axis=0), green, atol=0.02),
                    timeout=SETTLE_MS)  # the look timer has applied the new look
    qtbot.waitUntil(lambda: _settled(window), timeout=SETTLE_MS)
    qtbot.wait(3000)  # the viewport keeps running: frames presented, background builds finished

    got, silhouette, view = _viewport_look(window)
    want, want_silhouette = _reference_look(window.persona, view)
    assert not _color_mismatches(got, want), _color_mismatches(got, want)
    assert _iou(silhouette, want_silhouette) > 0.95, f"silhouette IoU {_iou(silhouette, want_silhouette):.3f}"
