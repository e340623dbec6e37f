"""File → Open Recent Avatar: avatars opened from the menu or worn by a persona, most recent first; a gone file
is shown disabled and marked missing; picking one opens it."""

from __future__ import annotations

import shutil
from pathlib import Path

from studio.presets import persona_by_name
from studio.recent import RecentAvatars
from tests.conftest import make_random_avatar
from widgets.main_window import MainWindow
from widgets.models import EngineController

DATA = Path(__file__).resolve().parents[1] / "data" / "avatars"


def _no_engine():
    raise ImportError("No module named 'studio.engine.pipeline'")


def _entries(window) -> list[tuple[str, bool]]:
    menu = window.recent_avatars_menu
    menu.fill()
    return [(action.text(), action.isEnabled()) for action in menu.menu.actions() if not action.isSeparator()]


def _action(window, text: str):
    return next(action for action in window.recent_avatars_menu.menu.actions() if text in action.text())


def test_opened_avatars_are_listed_most_recent_first_and_open_again(qtbot, studio_home, tmp_path):
    glb, vrm = tmp_path / "mine.glb", tmp_path / "hers.vrm"
    shutil.copy(DATA / "humanoid_arkit.glb", glb)
    shutil.copy(DATA / "humanoid_vrm0.vrm", vrm)
    window = MainWindow(make_random_avatar(), engine=EngineController(_no_engine), show_dialogs=False,
                        persist_layout=False)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    assert _entries(window) == [("No recent avatars", False)]
    assert window.open_avatar(glb) and window.open_avatar(vrm)
    assert not window.open_avatar(tmp_path / "nothing.glb")  # a file that did not open is not remembered
    assert _entries(window) == [("&1  hers.vrm", True), ("&2  mine.glb", True), ("Remove &Missing", False),
                                ("&Clear List", True)]

    _action(window, "mine.glb").trigger()
    assert window.avatar.source == str(glb)
    assert [text for text, _ in _entries(window)][:2] == ["&1  mine.glb", "&2  hers.vrm"]

    vrm.unlink()
    assert _entries(window)[:3] == [("&1  mine.glb", True), ("&2  hers.vrm  (missing)", False), ("Remove &Missing", True)]
    assert "no longer exists" in _action(window, "hers.vrm").toolTip()
    _action(window, "Remove &Missing").trigger()
    assert [text for text, _ in _entries(window)] == ["&1  mine.glb", "Remove &Missing", "&Clear List"]
    assert [e.path for e in RecentAvatars().entries()] == [glb.resolve()]  # kept in the user's config for next time
    window.close()


def test_a_persona_wearing_an_avatar_file_adds_it(qtbot, studio_home, tmp_path):
    vrm = tmp_path / "persona.vrm"
    shutil.copy(DATA / "humanoid_vrm0.vrm", vrm)
    window = MainWindow(make_random_avatar(), engine=EngineController(_no_engine), show_dialogs=False,
                        persist_layout=False, persona=persona_by_name("default"))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    panel = window.panels.persona_panel
    panel.avatar.setText(str(vrm))
    panel.avatar.editingFinished.emit()
    assert window.panels.apply_look()
    assert _entries(window)[0] == ("&1  persona.vrm", True)
    window.close()
