"""Workspaces and the window layout on the real X server: nothing under the viewport's native window, the
operator's buttons in reach, reset and reopen keep what they should, hotkeys wait while the user edits."""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QRegion
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QDockWidget, QTabBar, QToolButton

from studio.presets import Persona, PresetError, persona_by_name
from studio.workspaces import WORKSPACES
from tests.conftest import make_random_avatar
from widgets.main_window import MainWindow, apply_studio_theme
from widgets.models import EngineController
from widgets.settings import default_layout_path

SIZES = ((960, 640), (1280, 720))


def _no_engine():
    raise ImportError("No module named 'studio.engine.pipeline'")


@pytest.fixture
def open_window(qtbot, studio_home):
    """build(persist_layout=True) → a shown window with the teacher persona (its layout goes under studio_home)."""

    def build(persist_layout: bool = True) -> MainWindow:
        window = MainWindow(make_random_avatar(), engine=EngineController(_no_engine), show_dialogs=False,
                            persist_layout=persist_layout, persona=persona_by_name("teacher"))
        qtbot.addWidget(window)
        window.show()
        qtbot.waitExposed(window)
        return window

    return build


def _in_window(window: MainWindow, widget) -> QRect:
    return QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())


def _docked(window: MainWindow) -> list[QDockWidget]:
    """Docks the user can see now: shown, docked, and in front of their tab group."""
    return [dock for dock in window.findChildren(QDockWidget)
            if dock.isVisible() and not dock.isFloating() and not dock.visibleRegion().isEmpty()]


def _overlaps(window: MainWindow) -> list[str]:
    """'dock/viewport' or 'dock/dock' for every pair of rectangles that intersect."""
    native = _in_window(window, window.viewport.canvas.native)
    docks = [(dock.objectName(), _in_window(window, dock)) for dock in _docked(window)]
    found = [f"{name}/viewport" for name, rect in docks if rect.intersects(native)]
    found += [f"{a}/{b}" for i, (a, ra) in enumerate(docks) for b, rb in docks[i + 1:] if ra.intersects(rb)]
    return found


def _settled(window: MainWindow, size: tuple[int, int]) -> bool:
    return window.size().toTuple() == size and not _overlaps(window)


def _pump(ms: int) -> None:
    """Run the event loop for `ms` with pauses, as a user's session does (the X server gets its turn)."""
    deadline = time.monotonic() + ms / 1000
    while time.monotonic() < deadline:
        QApplication.processEvents()
        time.sleep(0.01)


def _fully_visible(widget) -> bool:
    return not widget.visibleRegion().isEmpty() and QRegion(widget.rect()).subtracted(widget.visibleRegion()).isEmpty()


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_no_visible_dock_covers_the_viewport_or_another_dock_in_any_workspace(open_window, qtbot, size):
    window = open_window(persist_layout=False)
    for workspace in ("operate", "design", "record"):
        window.resize(1440, 900)
        window.switch_workspace(workspace)
        window.resize(*size)
        qtbot.waitUntil(lambda: window.size().toTuple() == size, timeout=5000)
        try:
            qtbot.waitUntil(lambda: _settled(window, size), timeout=8000)
        except qtbot.TimeoutError:
            pytest.fail(f"{workspace} at {size}: {_overlaps(window)} still overlap 8 s after the resize")
        assert window.viewport.canvas.native.width() >= 320, "the viewport was squeezed below its minimum"
        assert {dock.objectName() for dock in _docked(window)}, f"{workspace} shows no panel"


def test_mute_pause_and_neutral_are_fully_visible_at_1280x720_in_operate(open_window, qtbot):
    window = open_window(persist_layout=False)
    window.switch_workspace("operate")
    window.resize(1280, 720)
    operator = window.panels.operator_panel
    buttons = (operator.mute_button, operator.pause_button, operator.neutral_button)
    qtbot.waitUntil(lambda: window.size().toTuple() == (1280, 720), timeout=5000)
    try:
        qtbot.waitUntil(lambda: all(_fully_visible(button) for button in buttons), timeout=8000)
    except qtbot.TimeoutError:
        shown = {button.text(): button.visibleRegion().boundingRect().getRect() for button in buttons}
        pytest.fail(f"not fully visible (visible part of each): {shown}")


def test_each_workspace_shows_its_panels_in_front(open_window):
    window = open_window(persist_layout=False)
    for workspace in WORKSPACES:
        window.switch_workspace(workspace.name)
        shown = {dock.objectName() for dock in window.findChildren(QDockWidget) if dock.isVisible()}
        assert shown == set(workspace.docks), workspace.name
        fronts = {dock.objectName() for dock in _docked(window)}
        assert {group.docks[0] for group in workspace.groups} <= fronts, workspace.name
        assert window.workspaces.tabs.tabText(window.workspaces.tabs.currentIndex()) == workspace.title
        assert window.workspaces.actions[workspace.name].isChecked()


@pytest.fixture
def studio_theme(qapp):
    """The window as the studio shows it (Fusion, its palette and stylesheet), put back afterwards."""
    style, palette, sheet = qapp.style().name(), qapp.palette(), qapp.styleSheet()
    apply_studio_theme(qapp)
    yield
    qapp.setStyleSheet(sheet)
    qapp.setPalette(palette)
    qapp.setStyle(style)


def test_every_tab_bar_on_screen_names_panels_that_are_shown_and_the_workspace_tabs_are_whole(
        studio_theme, qtbot, studio_home):
    window = MainWindow(make_random_avatar(), engine=EngineController(_no_engine), show_dialogs=False,
                        persist_layout=False, persona=persona_by_name("teacher"))
    qtbot.addWidget(window)
    window.switch_workspace("design")  # before the window is first shown, as a restored session does
    window.show()
    qtbot.waitExposed(window)
    _pump(1000)
    window.panels.editor_dock.raise_()
    _pump(500)
    titles = {dock.windowTitle(): dock for dock in window.findChildren(QDockWidget)}

    def stale_tab_bars() -> list[list[str]]:
        bars = [bar for bar in window.findChildren(QTabBar)
                if bar is not window.workspaces.tabs and bar.isVisible()]  # tab bars are see-through: any shown one shows
        tabs = [[bar.tabText(i) for i in range(bar.count())] for bar in bars]
        return [names for names in tabs if names and not any(titles[name].isVisible() for name in names if name in titles)]

    for name in ("operate", "design", "record", "operate"):
        window.switch_workspace(name)
        _pump(1000)
        assert not stale_tab_bars(), f"in {name}: tab bars of hidden panels on screen: {stale_tab_bars()}"
    arrows = [button for button in window.workspaces.tabs.findChildren(QToolButton) if button.isVisible()]
    assert not arrows, "the workspace tabs are cut off behind scroll arrows"


def test_workspace_tabs_and_shortcuts_switch_and_hotkeys_cannot_take_their_keys(open_window, qtbot):
    window = open_window(persist_layout=False)
    window.workspaces.tabs.setCurrentIndex(2)
    assert window.workspaces.current == "record" and window.recording.dock.isVisible()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    QTest.keyClick(window, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)
    assert window.workspaces.current == "design" and window.panels.persona_dock.isVisible()
    QTest.keyClick(window, Qt.Key.Key_1, Qt.KeyboardModifier.ControlModifier)
    assert window.workspaces.current == "operate" and window.panels.operator_dock.isVisible()
    with pytest.raises(PresetError, match="taken by the window"):
        window.panels.bind_key("warm smile", "Ctrl+3")


def test_reset_layout_shows_takes_in_record(open_window, qtbot):
    window = open_window(persist_layout=False)
    window.switch_workspace("record")
    takes = window.recording.dock
    takes.hide()
    window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, window.latency_dock)
    window.latency_dock.show()
    window.reset_layout()
    qtbot.waitUntil(lambda: not takes.visibleRegion().isEmpty(), timeout=5000)
    assert takes.isVisible() and not takes.isFloating()
    assert window.dockWidgetArea(takes) == Qt.DockWidgetArea.RightDockWidgetArea
    assert not window.latency_dock.isVisible()


def test_switching_workspaces_and_back_restores_what_the_user_changed(open_window, qtbot):
    window = open_window()
    operator, latency, drift = window.panels.operator_dock, window.latency_dock, window.drift.dock
    window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, operator)
    drift.hide()
    window.inspector_dock.show()  # a panel added to this workspace from View → Panels
    window.switch_workspace("design")
    assert not operator.isVisible() and not latency.isVisible()
    window.switch_workspace("record")
    window.switch_workspace("operate")

    def as_left() -> None:
        assert window.dockWidgetArea(operator) == Qt.DockWidgetArea.LeftDockWidgetArea
        assert operator.isVisible() and latency.isVisible() and window.inspector_dock.isVisible()
        assert not drift.isVisible()

    as_left()
    window.close()
    saved = json.loads(default_layout_path().read_text())
    assert saved["workspaces"]["current"] == "operate"
    assert set(saved["workspaces"]["arrangements"]) == {"operate", "design", "record"}
    again = open_window()
    assert again.workspaces.current == "operate" and again.workspaces.tabs.currentIndex() == 0
    operator, latency, drift = again.panels.operator_dock, again.latency_dock, again.drift.dock
    window = again
    as_left()
    again.switch_workspace("design")
    again.switch_workspace("operate")
    as_left()


@pytest.fixture
def window_manager():
    """openbox on the test display for one test: a real window manager puts a frame (a title bar) around the
    window, so its frame and client rectangles differ, as on a desktop. Stopped afterwards."""
    executable = shutil.which("openbox")
    if executable is None:
        pytest.fail("openbox is missing: scripts/setup.sh system dev installs it")
    manager = subprocess.Popen([executable, "--sm-disable"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _attempt in range(200):
            check = subprocess.run(["xprop", "-root", "_NET_SUPPORTING_WM_CHECK"], capture_output=True, text=True)
            if "window id" in check.stdout:
                break
            assert manager.poll() is None, "openbox exited at start"
            subprocess.run(["sleep", "0.05"])
        yield manager
    finally:
        manager.terminate()
        manager.wait(timeout=10)


def test_reopened_window_keeps_its_place_under_a_window_manager(window_manager, open_window, qtbot):
    first = open_window()
    try:
        qtbot.waitUntil(lambda: first.frameGeometry() != first.geometry(), timeout=5000)
    except qtbot.TimeoutError:
        pytest.fail(f"no window frame ({first.frameGeometry()}): the window manager is not managing the window")
    first.move(220, 160)  # as a user drags it: the frame's top-left goes there
    qtbot.waitUntil(lambda: first.frameGeometry().topLeft() == QPoint(220, 160), timeout=5000)
    placed = first.geometry()
    first.close()
    saved = json.loads(default_layout_path().read_text())["window"]
    assert saved == {"x": placed.x(), "y": placed.y(), "width": placed.width(), "height": placed.height(),
                     "maximized": False}
    for _reopen in range(3):
        window = open_window()
        qtbot.waitUntil(lambda w=window: w.frameGeometry() != w.geometry(), timeout=5000)  # framed by the manager
        position = window.geometry().topLeft()
        assert abs(position.x() - placed.x()) <= 2 and abs(position.y() - placed.y()) <= 2, (position, placed)
        assert window.size() == placed.size()
        window.close()


def test_typed_digits_in_the_expression_editor_do_not_fire_hotkeys(open_window, qtbot):
    window = open_window(persist_layout=False)
    window.switch_workspace("design")
    panels = window.panels
    panels.editor_dock.raise_()
    editor = panels.editor_panel
    panels.editor.set_weights({"jawOpen": 0.7, "browInnerUp": 0.4})
    pose = {"jawOpen": panels.editor.weight("jawOpen"), "browInnerUp": panels.editor.weight("browInnerUp")}
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)

    def type_into(widget, keys: str) -> None:
        widget.setFocus()
        qtbot.waitUntil(widget.hasFocus, timeout=5000)
        QTest.keyClicks(widget, keys)

    editor.select("mouthClose")
    type_into(editor.cap, "0")  # "0" is Neutral, "1" a smile: both typed as digits here
    type_into(editor.gain, "1")
    type_into(editor.rows["mouthSmileLeft"].slider, "0 1")
    assert {name: panels.editor.weight(name) for name in pose} == pose, "a typed digit wiped the pose"
    assert panels.mixer.active_names() == [], "a typed digit fired an expression"
    type_into(editor.mirror, "1")  # a button is no editor: the hotkey fires
    assert panels.mixer.active_names() == ["warm smile"]
    type_into(editor.mirror, "0")
    assert panels.editor.weight("jawOpen") == 0.0 and panels.mixer.active_names() == []


def test_panels_opened_from_the_view_menu_at_the_smallest_size_are_tabbed_in_not_squeezed_over_the_viewport(
        open_window, qtbot):
    window = open_window(persist_layout=False)
    window.resize(960, 640)
    qtbot.waitUntil(lambda: _settled(window, (960, 640)), timeout=8000)
    for dock in (window.panels.persona_dock, window.inspector_dock, window.recording.dock, window.panels.preset_dock):
        dock.toggleViewAction().trigger()
        assert dock.isVisible()
    try:
        qtbot.waitUntil(lambda: _settled(window, (960, 640)), timeout=8000)
    except qtbot.TimeoutError:
        pytest.fail(f"{_overlaps(window)} still overlap")
    assert window.viewport.canvas.native.width() >= 320


def test_panels_tabbed_together_to_fit_a_small_window_come_apart_when_it_grows_again(open_window, qtbot):
    window = open_window(persist_layout=False)
    window.switch_workspace("design")
    inspector, persona = window.inspector_dock, window.panels.persona_dock
    assert window.dockWidgetArea(inspector) == Qt.DockWidgetArea.RightDockWidgetArea
    window.resize(960, 640)
    qtbot.waitUntil(lambda: inspector in window.tabifiedDockWidgets(persona) and _settled(window, (960, 640)),
                    timeout=8000)
    window.resize(1440, 900)
    qtbot.waitUntil(lambda: window.dockWidgetArea(inspector) == Qt.DockWidgetArea.RightDockWidgetArea, timeout=8000)
    assert inspector not in window.tabifiedDockWidgets(persona) and not inspector.visibleRegion().isEmpty()
    window.resize(960, 640)  # and a panel the user moves while they are tabbed together stays where it was put
    qtbot.waitUntil(lambda: inspector in window.tabifiedDockWidgets(persona), timeout=8000)
    window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, inspector)
    window.resize(1440, 900)
    qtbot.waitUntil(lambda: window.size().toTuple() == (1440, 900), timeout=5000)
    window.workspaces.fit()
    assert window.dockWidgetArea(inspector) == Qt.DockWidgetArea.BottomDockWidgetArea


def test_a_persona_whose_hotkey_a_workspace_now_uses_still_opens_and_says_which_key_is_unbound(qtbot, studio_home):
    teacher = persona_by_name("teacher")
    persona = Persona.model_validate({**teacher.model_dump(), "hotkeys": {"warm smile": "Ctrl+2", "thinking": "3"}})
    window = MainWindow(make_random_avatar(), engine=EngineController(_no_engine), show_dialogs=False,
                        persist_layout=False, persona=persona)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    assert window.panels.hotkeys.key_for("warm smile") is None and window.panels.hotkeys.key_for("thinking") == "3"
    message = window.statusBar().currentMessage()
    assert "'warm smile': hotkey Ctrl+2 is taken by the window (Design); choose another" in message, message
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    QTest.keyClick(window, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)
    assert window.workspaces.current == "design" and window.panels.mixer.active_names() == []
