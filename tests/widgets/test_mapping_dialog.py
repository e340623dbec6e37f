"""Avatar → Edit Mapping…: the table of engine channels of an imported avatar, its live preview, Save and Cancel,
on the real X server with Mesa GL."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox

from studio.avatar.arkit import ARKIT_INDEX, NUM_ARKIT
from studio.frame import FrameState
from tests.conftest import make_random_avatar
from widgets.main_window import MainWindow
from widgets.mapping_dialog import CHANNEL, MATCHED, MISSING_BACKGROUND, SOURCE, MappingDialog
from widgets.models import EngineController

DATA = Path(__file__).resolve().parents[1] / "data" / "avatars"


def _no_engine():
    raise ImportError("No module named 'studio.engine.pipeline'")


@pytest.fixture
def window(qtbot, studio_home):
    window = MainWindow(make_random_avatar(), engine=EngineController(_no_engine), show_dialogs=False,
                        persist_layout=False)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    return window


@pytest.fixture
def glb(tmp_path) -> Path:
    path = tmp_path / "blender_humanoid.glb"
    path.write_bytes((DATA / "humanoid_arkit.glb").read_bytes())
    return path


def _weights(**shapes: float) -> FrameState:
    weights = np.zeros(NUM_ARKIT, np.float32)
    for name, value in shapes.items():
        weights[ARKIT_INDEX[name]] = value
    return FrameState(arkit=weights)


def _viewport_moves(qtbot, window, **shapes: float) -> np.ndarray:
    """Which pixels of the head close-up change when the main viewport shows these weights instead of rest
    (once the preset's level of detail is drawn, so that no mesh switch falls between the two pictures)."""
    qtbot.waitUntil(lambda: window.viewport.look_drawn, timeout=20000)
    window.viewport.frame_head()
    window.viewport.set_frame(FrameState())
    rest = window.viewport.render_image()[:, :, :3].astype(int)
    window.viewport.set_frame(_weights(**shapes))
    return np.abs(window.viewport.render_image()[:, :, :3].astype(int) - rest).sum(axis=2) > 30


def _overlap(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max(1, (a | b).sum()))


def _preview_moves(dialog: MappingDialog, channel: str) -> np.ndarray:
    """Which pixels of the dialog's preview change when the test slider drives `channel` from 0 to 1."""
    dialog.select_channel(channel)
    dialog.test_slider.setValue(0)
    rest = dialog.preview_image().astype(int)
    dialog.test_slider.setValue(100)
    return np.abs(dialog.preview_image().astype(int) - rest).sum(axis=2) > 30


def _choose_source(qtbot, dialog: MappingDialog, channel: str, choice: str) -> None:
    """As a user does it: double-click the row's Source cell, pick from the combo box."""
    index = dialog.select_channel(channel)
    rect = dialog.table.visualRect(dialog.table.model().index(index, SOURCE))
    qtbot.mouseClick(dialog.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.mouseDClick(dialog.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    combo = dialog.table.viewport().findChild(QComboBox)
    assert combo is not None and combo.findText(choice) >= 0, f"{choice} is not offered"
    combo.setCurrentIndex(combo.findText(choice))
    combo.activated.emit(combo.currentIndex())  # what a click on the item in the open list sends


def test_the_menu_entry_is_enabled_only_for_an_imported_avatar(window, glb):
    assert not window.edit_mapping_action.isEnabled()
    assert window.edit_mapping() is None and "is for imported avatars" in window.last_error
    assert window.open_avatar(glb)
    assert window.edit_mapping_action.isEnabled()


def test_changing_jaw_open_in_the_dialog_saves_the_yaml_and_the_mouth_moves_with_the_new_morph(qtbot, window, glb):
    assert window.open_avatar(glb)
    smile_moves = _viewport_moves(qtbot, window, mouthSmileLeft=1.0)
    jaw_before = _viewport_moves(qtbot, window, jawOpen=1.0)
    assert smile_moves.sum() > 50 and jaw_before.sum() > 50 and _overlap(jaw_before, smile_moves) < 0.5

    window.edit_mapping_action.trigger()
    dialog = window.findChild(MappingDialog)
    assert dialog is not None and dialog.isVisible()
    qtbot.waitExposed(dialog)
    jaw = dialog.mapping.index[("arkit", "jawOpen")]
    assert dialog.table.item(jaw, SOURCE).text() == "jawOpen" and dialog.table.item(jaw, MATCHED).text() == "name"
    pucker = dialog.mapping.index[("arkit", "mouthPucker")]
    assert dialog.table.item(pucker, CHANNEL).background().color() == MISSING_BACKGROUND
    dialog.filter.setText("smile")
    assert [i for i in range(dialog.table.rowCount()) if not dialog.table.isRowHidden(i)] == [
        dialog.mapping.index[("arkit", "mouthSmileLeft")], dialog.mapping.index[("arkit", "mouthSmileRight")]]
    dialog.filter.clear()

    live_frame = window.viewport._shown_state
    smile_preview = _preview_moves(dialog, "mouthSmileLeft")
    assert smile_preview.sum() > 20 and _overlap(_preview_moves(dialog, "jawOpen"), smile_preview) < 0.5

    _choose_source(qtbot, dialog, "jawOpen", "mouthSmileLeft")
    assert dialog.table.item(jaw, SOURCE).text() == "mouthSmileLeft"
    assert dialog.table.item(jaw, MATCHED).text() == "edited" and "unsaved" in dialog.windowTitle()
    assert _overlap(_preview_moves(dialog, "jawOpen"), smile_preview) > 0.9  # the preview shows the unsaved edit
    assert window.viewport._shown_state is live_frame  # and the live viewport was never driven by the preview

    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    saved = yaml.safe_load((glb.parent / "blender_humanoid.mapping.yaml").read_text())
    assert saved["arkit"] == {"jawOpen": [{"morph": "mouthSmileLeft", "weight": 1}]}
    assert window.avatar.info["mapping_file"] == str(glb.parent / "blender_humanoid.mapping.yaml")
    jaw_after = _viewport_moves(qtbot, window, jawOpen=1.0)
    smile_after = _viewport_moves(qtbot, window, mouthSmileLeft=1.0)
    assert smile_after.sum() > 50 and _overlap(jaw_after, smile_after) > 0.9  # jawOpen now moves as mouthSmileLeft


def test_a_bad_entry_is_named_and_not_saved_and_cancel_discards(qtbot, window, glb):
    mapping_file = glb.parent / "blender_humanoid.mapping.yaml"
    mapping_file.write_text("# mine\narkit:\n  cheekPuff: mouthFunnel\n")
    assert window.open_avatar(glb)
    dialog = window.edit_mapping()
    qtbot.waitExposed(dialog)
    index = dialog.select_channel("jawOpen")
    dialog.table.edit(dialog.table.model().index(index, SOURCE))
    combo = dialog.table.viewport().findChild(QComboBox)
    combo.setEditText("")
    qtbot.keyClicks(combo.lineEdit(), "jawOpenn")
    qtbot.keyClick(combo.lineEdit(), Qt.Key.Key_Return)
    assert dialog.table.item(index, SOURCE).text() == "jawOpenn"
    assert "Row jawOpen: morph target 'jawOpenn' is not in the avatar" in dialog.message.text()
    assert not dialog.save()
    assert dialog.message.text().startswith("Not saved: Row jawOpen: morph target 'jawOpenn'")
    assert mapping_file.read_text() == "# mine\narkit:\n  cheekPuff: mouthFunnel\n"
    before = window.viewport.base_avatar
    qtbot.mouseClick(dialog.buttons.button(dialog.buttons.StandardButton.Cancel), Qt.MouseButton.LeftButton)
    assert mapping_file.read_text() == "# mine\narkit:\n  cheekPuff: mouthFunnel\n"
    assert window.viewport.base_avatar is before  # not reloaded
    assert window.findChild(MappingDialog) is None or not window.findChild(MappingDialog).isVisible()


def test_a_bone_set_to_none_is_saved_and_the_avatar_without_it_still_opens(qtbot, window, glb):
    """With no head bone, the head close-up used to frame a zero-height box (a division by zero in the camera)."""
    assert window.open_avatar(glb)
    dialog = window.edit_mapping()
    qtbot.waitExposed(dialog)
    _choose_source(qtbot, dialog, "head", "none")
    assert dialog.table.item(dialog.mapping.index[("bone", "head")], SOURCE).text() == "none"
    dialog.preview_image()
    assert dialog.save()
    assert yaml.safe_load((glb.parent / "blender_humanoid.mapping.yaml").read_text())["bones"] == {"head": "none"}
    assert "head" not in window.avatar.info["humanoid"]
    window.viewport.frame_head()
    assert window.viewport.render_image()[:, :, :3].std() > 5


def test_save_with_nothing_edited_leaves_the_users_file_untouched(qtbot, window, glb):
    mapping_file = glb.parent / "blender_humanoid.mapping.yaml"
    mapping_file.write_text("# my notes\narkit:\n  cheekPuff: mouthFunnel\n")
    assert window.open_avatar(glb)
    dialog = window.edit_mapping()
    qtbot.waitExposed(dialog)
    assert dialog.table.item(dialog.mapping.index[("arkit", "cheekPuff")], SOURCE).text() == "mouthFunnel"
    assert dialog.save()
    assert mapping_file.read_text() == "# my notes\narkit:\n  cheekPuff: mouthFunnel\n"
