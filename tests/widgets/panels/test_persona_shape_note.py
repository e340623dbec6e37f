"""The persona panel says, in view and not only in a tooltip, when its avatar has no body-shape space."""

from __future__ import annotations

import os
from pathlib import Path

from studio.avatar.io import default_avatar_path, load_avatar

DATA = Path(__file__).resolve().parents[2] / "data" / "avatars"


def _wear(window, avatar: str) -> None:
    panel = window.panels.persona_panel
    panel.avatar.setText(avatar)
    panel.avatar.editingFinished.emit()
    assert window.panels.apply_look(), window.last_error


def test_an_imported_avatar_disables_the_shape_sliders_with_a_visible_note(studio_window):
    window = studio_window(avatar=load_avatar(default_avatar_path()))
    window.workspaces.switch("design")  # where the persona panel is
    panel = window.panels.persona_panel
    assert all(slider.isEnabled() for slider in panel.betas) and not panel.shape_note.isVisible()

    _wear(window, str(DATA / "humanoid_arkit.glb"))
    assert not any(slider.isEnabled() for slider in panel.betas)
    assert panel.shape_note.isVisible()
    assert "this avatar has no body-shape space" in panel.shape_note.text()
    if os.environ.get("AVATAR_STUDIO_SCREENSHOTS"):
        window.grab().save(os.path.join(os.environ["AVATAR_STUDIO_SCREENSHOTS"], "persona-shapeless.png"))

    _wear(window, "default")
    assert all(slider.isEnabled() for slider in panel.betas) and not panel.shape_note.isVisible()


def test_file_open_avatar_of_a_glb_turns_the_shape_sliders_off_too(studio_window):
    """Else they would shape the persona's own avatar, and the first touch would swap the opened one back."""
    window = studio_window(avatar=load_avatar(default_avatar_path()))
    window.workspaces.switch("design")
    panel = window.panels.persona_panel
    assert window.open_avatar(DATA / "humanoid_arkit.glb")
    assert not panel.betas[0].isEnabled() and panel.shape_note.isVisible()
    assert window.open_avatar(default_avatar_path())
    assert panel.betas[0].isEnabled() and not panel.shape_note.isVisible()
