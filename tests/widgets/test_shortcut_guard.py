"""Single-key shortcuts wait while an editable widget has the focus, and fire otherwise (real X server)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtTest import QTest
from PySide6.QtWidgets import (
    QComboBox,
    QDial,
    QDoubleSpinBox,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSlider,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from widgets.shortcut_guard import ShortcutGuard


@pytest.fixture
def form(qtbot):
    """A window with one widget of each kind and application-wide shortcuts on "0", Space and Escape."""
    window = QWidget()
    qtbot.addWidget(window)
    editable_combo, fixed_combo = QComboBox(), QComboBox()
    editable_combo.setEditable(True)
    fixed_combo.addItems(["a", "b"])
    read_only = QLineEdit("read only")
    read_only.setReadOnly(True)
    table = QTableWidget(1, 1)
    table.setItem(0, 0, QTableWidgetItem("cell"))
    widgets = {"line edit": QLineEdit(), "spin box": QDoubleSpinBox(), "slider": QSlider(Qt.Orientation.Horizontal),
               "dial": QDial(), "text edit": QPlainTextEdit(), "editable combo": editable_combo, "table": table,
               "button": QPushButton("button"), "fixed combo": fixed_combo, "read-only line edit": read_only}
    layout = QVBoxLayout(window)
    for widget in widgets.values():
        layout.addWidget(widget)
    fired: list[str] = []
    for key in ("0", "Space", "Esc"):
        shortcut = QShortcut(QKeySequence(key), window)
        shortcut.setContext(Qt.ShortcutContext.ApplicationShortcut)
        shortcut.activated.connect(lambda k=key: fired.append(k))
    window.guard = ShortcutGuard(window)
    window.show()
    qtbot.waitExposed(window)
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    yield widgets, fired
    window.close()


def _press(qtbot, widget: QWidget, key: Qt.Key) -> None:
    widget.setFocus()
    qtbot.waitUntil(widget.hasFocus, timeout=5000)
    QTest.keyClick(widget, key)


@pytest.mark.parametrize("kind", ["line edit", "spin box", "slider", "dial", "text edit", "editable combo"])
def test_typing_keys_go_to_the_focused_editor_and_escape_still_fires(form, qtbot, kind):
    widgets, fired = form
    _press(qtbot, widgets[kind], Qt.Key.Key_0)
    _press(qtbot, widgets[kind], Qt.Key.Key_Space)
    assert fired == []
    _press(qtbot, widgets[kind], Qt.Key.Key_Escape)
    assert fired == ["Esc"]


def test_a_table_cell_being_edited_keeps_its_digits(form, qtbot):
    widgets, fired = form
    table = widgets["table"]
    table.setFocus()
    table.setCurrentCell(0, 0)
    table.editItem(table.item(0, 0))
    qtbot.waitUntil(lambda: table.state() == table.State.EditingState, timeout=5000)
    editor = table.focusWidget()
    QTest.keyClick(editor, Qt.Key.Key_0)
    assert fired == []


@pytest.mark.parametrize("kind", ["button", "fixed combo", "read-only line edit"])
def test_shortcuts_fire_where_nothing_is_edited(form, qtbot, kind):
    widgets, fired = form
    _press(qtbot, widgets[kind], Qt.Key.Key_0)
    assert fired == ["0"]
