"""File → Open Avatar with glTF/VRM files: the avatar is drawn, the window says how its face is driven,
and a refused file keeps the avatar the studio had."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import make_random_avatar
from widgets.main_window import MainWindow
from widgets.models import EngineController

DATA = Path(__file__).resolve().parents[1] / "data" / "avatars"


def _no_engine():
    raise ImportError("No module named 'studio.engine.pipeline'")


@pytest.fixture
def window(qtbot, studio_home):
    window = MainWindow(make_random_avatar(), engine=EngineController(_no_engine))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    return window


def test_opening_a_glb_draws_it_and_says_which_face_mapping_is_active(window):
    path = DATA / "humanoid_arkit.glb"
    assert window.open_avatar(path) is True
    assert window.avatar.source == str(path) and window.avatar.texture is not None
    assert "face mapping: arkit (partial), 6 of 52 ARKit shapes" in window.avatar_label.toolTip()
    assert "face mapping" in window.statusBar().currentMessage()


def test_a_vrm_without_face_morphs_opens_with_the_note_and_a_broken_one_keeps_it(window, tmp_path):
    assert window.open_avatar(DATA / "VRMC_vrm_expressions_isBinary_Overrides.vrm") is True
    assert "only its head and body will move" in window.avatar_label.toolTip()
    before = window.avatar
    bad = tmp_path / "truncated.vrm"
    bad.write_bytes((DATA / "VRMC_vrm_expressions_isBinary_Overrides.vrm").read_bytes()[:5000])
    assert window.open_avatar(bad) is False
    assert window.avatar is before
    assert str(bad) in window.last_error and "truncated GLB" in window.last_error


def test_export_avatar_command_writes_a_vrm_that_loads(tmp_path, studio_home, capsys):
    from studio.avatar.io import load_avatar
    from widgets.app import main

    out = tmp_path / "me.vrm"
    assert main(["export-avatar", str(out)]) == 0
    assert "VRM 1.0" in capsys.readouterr().out
    assert load_avatar(out).info["format"] == "VRM 1.0"
    assert main(["export-avatar", str(tmp_path / "me.fbx")]) == 2
    assert "export writes .glb or .vrm files, not .fbx" in capsys.readouterr().err
    addon = Path(__file__).resolve().parents[1] / "data" / "avatars" / "addon_vrm1.vrm"
    assert main(["export-avatar", str(out), "--avatar", str(addon)]) == 0
    assert "6024 vertices, 55 joints, 9 of 52 ARKit morph targets, emotions happy" in capsys.readouterr().out


def test_a_persona_wearing_a_vrm_disables_the_body_shape_sliders_and_missing_colour_parts(qtbot, studio_home):
    from studio.presets import persona_by_name

    window = MainWindow(make_random_avatar(), engine=EngineController(_no_engine), show_dialogs=False,
                        persist_layout=False, persona=persona_by_name("default"))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    panel = window.panels.persona_panel
    for avatar, shaped in ((str(DATA / "humanoid_vrm0.vrm"), False), ("default", True)):
        panel.avatar.setText(avatar)
        panel.avatar.editingFinished.emit()
        assert window.panels.apply_look()
        assert panel.betas[0].isEnabled() is shaped
        assert ("no body-shape space" in panel.betas[0].toolTip()) is not shaped
        assert panel.color_buttons["skin"].isEnabled() is shaped  # the VRM has no part labels to tint ("face" is skin)
    assert window.avatar.info == {}  # back on the shipped avatar
