"""A preset with a low mesh level draws an imported avatar decimated (and textured), as it does the default avatar."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from studio.presets import Persona, preset_by_name
from tests.conftest import make_random_avatar
from widgets.main_window import MainWindow
from widgets.models import EngineController

DATA = Path(__file__).resolve().parents[1] / "data" / "avatars"


def _no_engine():
    raise ImportError("No module named 'studio.engine.pipeline'")


def test_the_performance_preset_draws_an_opened_glb_at_its_low_level(qtbot, studio_home):
    window = MainWindow(make_random_avatar(), engine=EngineController(_no_engine), show_dialogs=False,
                        persist_layout=False, persona=Persona(name="default"), preset=preset_by_name("performance"))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    assert window.open_avatar(DATA / "humanoid_arkit.glb")
    viewport = window.viewport
    full = viewport.base_avatar
    qtbot.waitUntil(lambda: viewport.lod_key == ("low", False) and viewport.look_drawn, timeout=60000)
    drawn, mesh = viewport.lods.get(viewport.lod_key)
    assert viewport.view.avatar.mesh is mesh
    assert len(drawn.faces) < len(full.faces) and drawn.texture is full.texture
    image = viewport.render_image()
    rgb = image[..., :3].astype(int)
    assert ((rgb[..., 1] > rgb[..., 0] + 50) & (rgb[..., 2] > rgb[..., 0] + 50)).sum() > 100  # the skin texture's band
    if os.environ.get("AVATAR_STUDIO_SCREENSHOTS"):
        window.grab().save(os.path.join(os.environ["AVATAR_STUDIO_SCREENSHOTS"], "imported-low-lod.png"))

    window.apply_preset(preset_by_name("medical"))  # face high, body low: the face region whole
    qtbot.waitUntil(lambda: viewport.lod_key == ("low", True) and viewport.look_drawn, timeout=60000)
    with_face, _ = viewport.lods.get(viewport.lod_key)
    assert len(drawn.faces) < len(with_face.faces) < len(full.faces)
    moved = np.abs(full.expr_dirs).reshape(full.num_vertices, -1).max(axis=1) > 1e-7
    kept = {row.tobytes() for row in np.asarray(with_face.v_template, np.float32)}
    assert all(row.tobytes() in kept for row in np.asarray(full.v_template, np.float32)[moved])
    window.close()
