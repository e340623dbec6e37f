"""Operator controls: expression triggers on rebindable hotkeys, the cue list, mute, pause/resume, panic neutral.

The hotkeys are application-wide shortcuts (they work while the output window has the focus); a key
already bound, or one the window's menus use, is refused with a message.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QGridLayout,
    QHBoxLayout,
    QKeySequenceEdit,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from studio.hotkeys import OPERATOR_ACTIONS
from studio.presets import PresetError
from widgets.panels.common import MessageLine, ToggleButton, blocked, scrolling, section


class OperatorPanel(QWidget):
    def __init__(self, controls) -> None:
        super().__init__()
        self.controls = controls
        self.message = MessageLine()
        self.shortcuts: dict[str, QShortcut] = {}
        self.trigger_buttons: dict[str, QPushButton] = {}
        self._shown: tuple | None = None  # (expression names, bindings) the rows and shortcuts were built for

        self.triggers = QGridLayout()
        self.triggers.setColumnStretch(0, 1)
        self.cue_list = QListWidget()
        self.cue_list.setWordWrap(True)
        self.cue_list.itemDoubleClicked.connect(lambda item: self.controls.speak_cue(self.cue_list.row(item)))
        self.cue_status = QLabel("")
        self.cue_status.setWordWrap(True)
        speak_next = QPushButton("Speak next")
        speak_next.clicked.connect(lambda: self.controls.speak_cue())
        speak_selected = QPushButton("Speak selected")
        speak_selected.clicked.connect(lambda: self.controls.speak_cue(max(0, self.cue_list.currentRow())))
        self.wrap_box = QCheckBox("Wrap around")
        self.wrap_box.setToolTip("At the end of the list, the next-cue key starts again at cue 1")
        self.wrap_box.setChecked(controls.cues.wrap)
        self.wrap_box.toggled.connect(controls.cues.set_wrap)
        cue_buttons = QHBoxLayout()
        cue_buttons.addWidget(speak_next)
        cue_buttons.addWidget(speak_selected)
        cue_buttons.addWidget(self.wrap_box)

        self.mute_button = ToggleButton("Mute", "Muted", on_color="#c62828")
        self.mute_button.toggled.connect(self.controls.set_muted)
        self.pause_button = ToggleButton("Pause", "Paused", on_color="#b26a00")
        self.pause_button.clicked.connect(lambda: self.controls.pause_resume())
        self.neutral_button = QPushButton("Neutral (panic)")
        self.neutral_button.setStyleSheet("QPushButton { background: #6b2b2b; color: white; font-weight: 600; }")
        self.neutral_button.clicked.connect(lambda: self.controls.neutral())
        transport = QHBoxLayout()
        for button in (self.mute_button, self.pause_button, self.neutral_button):
            transport.addWidget(button)

        layout = QVBoxLayout()
        layout.addWidget(section("Expressions (press the key again to fade out)"))
        layout.addLayout(self.triggers)
        layout.addWidget(section("Cue list"))
        layout.addWidget(self.cue_list, 1)
        layout.addWidget(self.cue_status)
        layout.addLayout(cue_buttons)
        layout.addWidget(section("Output"))
        layout.addLayout(transport)
        layout.addWidget(self.message)
        scrolling(self, layout)
        self.cue_list.setMinimumHeight(110)

        controls.cues.changed.connect(self.refresh_cues)
        controls.hotkeys.changed.connect(self.rebuild)
        controls.persona_doc.changed.connect(lambda _p: self.rebuild(only_if_changed=True))
        self.rebuild()
        self.refresh_cues()

    # ---- hotkeys and trigger buttons
    def rebuild(self, only_if_changed: bool = False) -> None:
        """Trigger rows and shortcuts from the persona's expressions and the hotkey map.

        A persona edit that keeps the names and keys (a fade time) leaves the rows alone, so the
        spin box being edited is not replaced under the cursor.
        """
        persona = self.controls.persona_doc.item
        shown = (tuple(persona.expressions), tuple(sorted(self.controls.hotkeys.bindings().items())))
        if only_if_changed and shown == self._shown:
            return
        self._shown = shown
        while self.triggers.count():
            widget = self.triggers.takeAt(0).widget()
            if widget is not None:
                widget.hide()
                widget.setParent(None)
                widget.deleteLater()
        self.trigger_buttons.clear()
        for row, (name, expression) in enumerate(persona.expressions.items()):
            key = self.controls.hotkeys.key_for(name)
            button = QPushButton(f"[{key or '—'}]  {name}")
            button.setCheckable(True)
            button.setStyleSheet("QPushButton:checked { background: #3d6fb4; color: white; font-weight: 600; }")
            button.setChecked(self.controls.mixer.is_active(name))
            button.clicked.connect(lambda _c=False, n=name: self.controls.toggle_expression(n))
            fade_in, fade_out = QDoubleSpinBox(), QDoubleSpinBox()
            for spin, value, field, tip in ((fade_in, expression.fade_in_s, "fade_in_s", "fade in (s)"),
                                            (fade_out, expression.fade_out_s, "fade_out_s", "fade out (s)")):
                spin.setRange(0.0, 10.0)
                spin.setSingleStep(0.05)
                spin.setValue(value)
                spin.setSuffix(" s")
                spin.setKeyboardTracking(False)  # a typed "0.25" is one value, committed on Enter or leaving the box
                spin.setMaximumWidth(76)
                spin.setToolTip(tip)
                spin.valueChanged.connect(lambda v, n=name, f=field: self.controls.set_fade(n, f, v))
            bind = QPushButton("Key…")
            bind.setMaximumWidth(52)
            bind.clicked.connect(lambda _c=False, n=name: self.ask_key(n))
            for column, widget in enumerate((button, fade_in, fade_out, bind)):
                self.triggers.addWidget(widget, row, column)
            self.trigger_buttons[name] = button
        for shortcut in self.shortcuts.values():
            shortcut.setEnabled(False)
            shortcut.deleteLater()
        self.shortcuts.clear()
        window = self.controls.window
        for action, key in self.controls.hotkeys.bindings().items():
            if action not in OPERATOR_ACTIONS and action not in persona.expressions:
                continue
            shortcut = QShortcut(QKeySequence(key), window)
            shortcut.setContext(Qt.ShortcutContext.ApplicationShortcut)
            shortcut.activated.connect(lambda a=action: self.controls.hotkey(a))
            self.shortcuts[action] = shortcut
        labels = {"neutral": self.neutral_button, "mute": self.mute_button, "pause/resume": self.pause_button}
        for action, button in labels.items():
            button.setToolTip(f"key {self.controls.hotkeys.key_for(action)}")

    def show_trigger_states(self) -> None:
        for name, button in self.trigger_buttons.items():
            active = self.controls.mixer.is_active(name)
            if button.isChecked() != active:
                button.setChecked(active)

    def bind(self, action: str, key: str) -> bool:
        try:
            self.controls.bind_key(action, key)
        except PresetError as error:
            self.message.error(str(error))
            return False
        self.message.clear_message()
        return True

    def ask_key(self, action: str) -> None:
        dialog = QDialog(self)
        dialog.setWindowTitle(f"Key for {action}")
        edit = QKeySequenceEdit(QKeySequence(self.controls.hotkeys.key_for(action) or ""))
        edit.setMaximumSequenceLength(1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(dialog.accept)
        buttons.rejected.connect(dialog.reject)
        layout = QVBoxLayout(dialog)
        layout.addWidget(QLabel("Press the new key"))
        layout.addWidget(edit)
        layout.addWidget(buttons)
        if dialog.exec() == QDialog.DialogCode.Accepted and not edit.keySequence().isEmpty():
            self.bind(action, edit.keySequence().toString())

    # ---- cue list
    def refresh_cues(self) -> None:
        cues = self.controls.cues
        self.cue_list.clear()
        for index, line in enumerate(cues.lines):
            mark = "▶ " if index == cues.playing else ("→ " if index == cues.next_index else "   ")
            item = QListWidgetItem(f"{mark}{index + 1}. {line}")
            if index == cues.playing:
                item.setForeground(QColor("#8fd18f"))
            elif index == cues.next_index:
                item.setForeground(QColor("#8fb3ff"))
            self.cue_list.addItem(item)
        playing = "—" if cues.playing is None else f"{cues.playing + 1}. {cues.lines[cues.playing]}"
        if not cues.lines:
            following = "nothing: the persona has no cue lines"
        elif not cues.ended:
            following = f"{cues.next_index + 1}. {cues.lines[cues.next_index]}"
        elif cues.wrap:
            following = f"the list has ended; starts again at 1. {cues.lines[0]}"
        else:
            following = "the list has ended (turn on Wrap around, or pick a cue)"
        key = self.controls.hotkeys.key_for("next cue")
        self.cue_status.setText(f"Playing: {playing}\nNext ({key}): {following}")
        with blocked(self.wrap_box):
            self.wrap_box.setChecked(cues.wrap)
