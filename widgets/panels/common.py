"""Small pieces the panels share: section headers, the error line, toggle buttons, document editing, blocked
widget updates."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtWidgets import QFrame, QLabel, QLayout, QPushButton, QScrollArea, QVBoxLayout, QWidget

from studio.presets import PresetError


def section(text: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName("sectionHeader")
    return label


class MessageLine(QLabel):
    """One line under a panel: red for a refused edit, grey for information; `text()` is what tests read."""

    def __init__(self) -> None:
        super().__init__("")
        self.setWordWrap(True)
        self.setVisible(False)

    def error(self, text: str) -> None:
        self.setStyleSheet("color: #ff8a80;")
        self.setText(text)
        self.setVisible(bool(text))

    def info(self, text: str) -> None:
        self.setStyleSheet("color: #8b8f98;")
        self.setText(text)
        self.setVisible(bool(text))

    def clear_message(self) -> None:
        self.setText("")
        self.setVisible(False)


class ToggleButton(QPushButton):
    """A checkable button whose on state cannot be taken for off: another text and a filled colour.

    The text follows the state however it is set (a click, `setChecked` from the model with signals
    blocked), and the button is as wide as its longer text so that toggling never moves its neighbours.
    """

    def __init__(self, off_text: str, on_text: str, on_color: str = "#3d6fb4") -> None:
        super().__init__(off_text)
        self.off_text, self.on_text = off_text, on_text
        self.setCheckable(True)
        self.setStyleSheet(f"QPushButton:checked {{ background: {on_color}; color: white; font-weight: 700;"
                           " border: 1px solid #f0f0f0; border-radius: 3px; padding: 3px 8px; }")
        widths = []
        for text in (on_text, off_text):
            self.setText(text)
            widths.append(self.sizeHint().width())
        self.setMinimumWidth(max(widths) + 12)  # the on text is drawn bold
        self._show_state()

    def _show_state(self) -> None:
        self.setText(self.on_text if self.isChecked() else self.off_text)

    def checkStateSet(self) -> None:  # noqa: N802 - Qt override: setChecked, signals blocked or not
        super().checkStateSet()
        self._show_state()

    def nextCheckState(self) -> None:  # noqa: N802 - Qt override: a click
        super().nextCheckState()
        self._show_state()


class DocumentEditing:
    """What the persona and preset panels share over their `document` (studio.documents.Document): an edit
    the model refuses shows why and puts the widgets back; the title marks unsaved changes.

    The panel provides `document`, `message`, `title`, `save_button`, `revert_button` and `refresh(item)`.
    """

    def _edit(self, path: str, value) -> bool:
        try:
            self.document.update(path, value)
        except PresetError as error:
            self.message.error(str(error))
            self.refresh(self.document.item)
            return False
        self.message.clear_message()
        return True

    def _show_title(self, name: str, note: str = "") -> None:
        marker = "  ● unsaved changes" if self.document.dirty else ""
        self.title.setText(f"<b>{name}</b>{note}{marker}")
        self.save_button.setEnabled(self.document.dirty)
        self.revert_button.setEnabled(self.document.dirty)


@contextmanager
def blocked(*widgets: QWidget) -> Iterator[None]:
    """Update widgets from the model without their signals echoing the value back into it."""
    blockers = [QSignalBlocker(w) for w in widgets]
    try:
        yield
    finally:
        for blocker in blockers:
            blocker.unblock()


def scrolling(owner: QWidget, content: QLayout) -> None:
    """Lay `content` out in `owner` inside a scroll area, so a short dock scrolls (vertically) instead of
    overlapping; the dock is kept at least as wide as the content needs."""
    inner = QWidget()
    inner.setLayout(content)
    scroll = QScrollArea()
    scroll.setWidgetResizable(True)
    scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    owner.setMinimumWidth(inner.minimumSizeHint().width() + scroll.verticalScrollBar().sizeHint().width() + 4)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setWidget(inner)
    outer = QVBoxLayout(owner)
    outer.setContentsMargins(0, 0, 0, 0)
    outer.addWidget(scroll)
