"""Single-key shortcuts (operator hotkeys such as "0" for Neutral, H/B for framing) wait while the user edits.

Before a shortcut fires, Qt asks the focused widget whether it wants the key (a ShortcutOverride event).
Line edits and spin boxes claim text keys themselves; sliders, dials and item views do not, so a "0" typed
with a slider focused fired Neutral and wiped the designer's pose. The guard claims every key without
Ctrl/Alt/Meta (except Escape and the function keys) for whichever editable widget has the focus.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QAbstractSlider,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QKeySequenceEdit,
    QLineEdit,
    QPlainTextEdit,
    QTextEdit,
    QWidget,
)

_EDITORS = (QLineEdit, QAbstractSpinBox, QAbstractSlider, QTextEdit, QPlainTextEdit, QKeySequenceEdit)
_COMMAND_MODIFIERS = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier | Qt.KeyboardModifier.MetaModifier
_STILL_SHORTCUTS = {Qt.Key.Key_Escape, *(getattr(Qt.Key, f"Key_F{n}") for n in range(1, 36))}


def is_editable(widget: QWidget | None) -> bool:
    """Whether typing into this widget changes a value: text fields, spin boxes, sliders, an editable combo
    box, a table cell being edited."""
    if widget is None:
        return False
    if isinstance(widget, _EDITORS):
        return not (isinstance(widget, (QLineEdit, QTextEdit, QPlainTextEdit)) and widget.isReadOnly())
    if isinstance(widget, QComboBox):
        return widget.isEditable()
    if isinstance(widget, QAbstractItemView):
        return widget.state() == QAbstractItemView.State.EditingState
    return False


def is_typing_key(event: QKeyEvent) -> bool:
    """A key an editor may use (text, Space, arrows, Return…) rather than a command (Ctrl+…, Escape, F5)."""
    return not (event.modifiers() & _COMMAND_MODIFIERS) and Qt.Key(event.key()) not in _STILL_SHORTCUTS


class ShortcutGuard(QObject):
    """Watches the focused widget only (re-attached on every focus change), never the whole application."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        app = QApplication.instance()
        self._watched: QWidget | None = None
        app.focusChanged.connect(self._focus_changed)
        self._focus_changed(None, app.focusWidget())

    def _focus_changed(self, _old: QWidget | None, new: QWidget | None) -> None:
        if self._watched is not None:
            try:
                self._watched.removeEventFilter(self)
            except RuntimeError:  # the widget was deleted while it had the focus
                pass
            self._watched = None
        if new is not None:
            new.installEventFilter(self)
            self._watched = new

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if (event.type() == QEvent.Type.ShortcutOverride and isinstance(watched, QWidget) and is_editable(watched)
                and is_typing_key(event)):
            event.accept()
            return True
        return False
