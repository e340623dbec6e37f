"""Persona panel: choose, create, duplicate, rename and delete personas, and edit every field with a live preview.

Widgets write into the persona `Document` (studio.documents); the document's `changed` event redraws
the widgets with their signals blocked, so a value never echoes back. A refused value (out of range,
unspeakable cue line) shows its message under the panel and the widget returns to the persona's value.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QColorDialog,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSlider,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from studio.avatar.appearance import part_color
from studio.presets import COLOR_PARTS, Persona
from widgets.panels.common import DocumentEditing, MessageLine, blocked, scrolling, section

VOICES = ("en-us", "en-gb", "en-gb-scotland", "en-us+f3", "en-us+m3", "en-us+f4", "de", "fr-fr", "es")
BETA_SLIDERS = 4
BETA_STEPS = 10  # slider steps per unit of beta
TEST_LINE = "Hello, this is how I sound. Bob met Pam by the maple tree."
SHAPELESS_NOTE = ("The body-shape sliders are off: this avatar has no body-shape space (an imported glTF/VRM "
                  "file), so they cannot change it.")


class PersonaPanel(QWidget, DocumentEditing):
    """Binds to `controls.persona_doc`; library actions go through `controls` (StudioPanels)."""

    def __init__(self, controls) -> None:
        super().__init__()
        self.controls = controls
        self.document = controls.persona_doc
        self.message = MessageLine()

        self.chooser = QComboBox()
        self.chooser.activated.connect(lambda _i: self.controls.select_persona(self.chooser.currentText()))
        buttons = QHBoxLayout()
        for text, slot in (("New…", self.ask_create), ("Duplicate…", self.ask_duplicate),
                           ("Rename…", self.ask_rename), ("Delete", self.delete)):
            button = QPushButton(text)
            button.clicked.connect(lambda _c=False, s=slot: s())
            buttons.addWidget(button)
        self.title = QLabel()
        self.save_button = QPushButton("Save")
        self.save_button.clicked.connect(lambda: self.controls.save_persona())
        self.revert_button = QPushButton("Revert")
        self.revert_button.clicked.connect(self.document.revert)
        title_row = QHBoxLayout()
        title_row.addWidget(self.title, 1)
        title_row.addWidget(self.save_button)
        title_row.addWidget(self.revert_button)

        self.avatar = QLineEdit()
        self.avatar.setPlaceholderText("default, or an avatar file (.npz/.pkl/.glb/.gltf/.vrm)")
        self.avatar.editingFinished.connect(lambda: self._edit("avatar", self.avatar.text().strip() or "default"))
        browse = QPushButton("Browse…")
        browse.clicked.connect(self.ask_avatar)
        avatar_row = QHBoxLayout()
        avatar_row.addWidget(self.avatar, 1)
        avatar_row.addWidget(browse)
        self.betas = []
        for _ in range(BETA_SLIDERS):
            slider = QSlider(Qt.Orientation.Horizontal)
            slider.setRange(-3 * BETA_STEPS, 3 * BETA_STEPS)
            slider.valueChanged.connect(self._betas_changed)
            self.betas.append(slider)
        self.shape_note = MessageLine()  # in view, not only in the sliders' tooltip
        self.color_buttons: dict[str, QPushButton] = {}
        colors = QGridLayout()
        for i, part in enumerate(COLOR_PARTS):
            button = QPushButton(part)
            button.setMinimumWidth(70)
            button.clicked.connect(lambda _c=False, p=part: self.ask_color(p))
            self.color_buttons[part] = button
            colors.addWidget(button, i // 4, i % 4)

        self.voice = QComboBox()
        self.voice.setEditable(True)
        self.voice.addItems(VOICES)
        self.voice.currentTextChanged.connect(lambda text: self._edit("voice.name", text.strip() or "en-us"))
        self.rate = QSpinBox()
        self.rate.setRange(80, 450)
        self.rate.setSuffix(" wpm")
        self.rate.valueChanged.connect(lambda v: self._edit("voice.rate_wpm", v))
        self.pitch = QSpinBox()
        self.pitch.setRange(0, 99)
        self.pitch.valueChanged.connect(lambda v: self._edit("voice.pitch", v))
        self.test_voice = QPushButton("Test voice")
        self.test_voice.clicked.connect(self.speak_test_line)
        voice_row = QHBoxLayout()
        for widget in (self.voice, self.rate, self.pitch, self.test_voice):
            voice_row.addWidget(widget)

        self.style_fields: dict[str, QDoubleSpinBox] = {}
        style_form = QFormLayout()
        for field, label, high, step in (("blink_rate_per_min", "Blinks / min", 40, 1.0),
                                         ("head_motion", "Head motion", 3, 0.1),
                                         ("gesture_energy", "Gesture energy", 2, 0.1), ("sway", "Sway", 3, 0.1)):
            spin = QDoubleSpinBox()
            spin.setRange(0.0, high)
            spin.setSingleStep(step)
            spin.setDecimals(1 if step >= 1 else 2)
            spin.valueChanged.connect(lambda v, f=field: self._edit(f"style.{f}", v))
            self.style_fields[field] = spin
            style_form.addRow(label, spin)
        self.default_preset = QComboBox()
        self.default_preset.activated.connect(lambda _i: self._edit("default_preset", self.default_preset.currentText()))
        self.cue_lines = QPlainTextEdit()
        self.cue_lines.setPlaceholderText("One line per cue")
        self.cue_lines.setMaximumHeight(110)
        self._cue_timer = QTimer(self, singleShot=True, interval=300)
        self._cue_timer.timeout.connect(self.commit_cue_lines)
        self.cue_lines.textChanged.connect(self._cue_timer.start)

        form = QFormLayout()
        form.addRow("Avatar", avatar_row)
        for i, slider in enumerate(self.betas):
            form.addRow(f"Body shape β{i + 1}", slider)
        form.addRow(self.shape_note)
        content = QVBoxLayout()
        content.addWidget(self.chooser)
        content.addLayout(buttons)
        content.addLayout(title_row)
        content.addWidget(self.message)
        content.addWidget(section("Look"))
        content.addLayout(form)
        content.addLayout(colors)
        content.addWidget(section("Voice"))
        content.addLayout(voice_row)
        content.addWidget(section("Expression style"))
        content.addLayout(style_form)
        preset_form = QFormLayout()
        preset_form.addRow("Default preset", self.default_preset)
        content.addLayout(preset_form)
        content.addWidget(section("Cue lines"))
        content.addWidget(self.cue_lines)
        content.addStretch(1)
        scrolling(self, content)

        self.document.changed.connect(self.refresh)
        self.document.dirty_changed.connect(lambda _d: self._update_title())
        self.document.saved.connect(lambda _i: self._update_title())
        self.refresh_names()
        self.refresh(self.document.item)

    # ---- model → widgets (signals blocked: no echo)
    def _all_inputs(self) -> list[QWidget]:
        return [self.chooser, self.avatar, *self.betas, self.voice, self.rate, self.pitch,
                *self.style_fields.values(), self.default_preset, self.cue_lines]

    def refresh_names(self) -> None:
        with blocked(self.chooser, self.default_preset):
            self.chooser.clear()
            self.chooser.addItems(self.controls.personas.names())
            self.default_preset.clear()
            self.default_preset.addItems(self.controls.presets.names())
        self.refresh(self.document.item)

    def refresh(self, persona: Persona) -> None:
        with blocked(*self._all_inputs()):
            self.chooser.setCurrentText(persona.name)
            if self.avatar.text() != persona.avatar:
                self.avatar.setText(persona.avatar)
            for i, slider in enumerate(self.betas):
                slider.setValue(round((persona.betas[i] if i < len(persona.betas) else 0.0) * BETA_STEPS))
            self.voice.setCurrentText(persona.voice.name)
            self.rate.setValue(persona.voice.rate_wpm)
            self.pitch.setValue(persona.voice.pitch)
            for field, spin in self.style_fields.items():
                spin.setValue(getattr(persona.style, field))
            self.default_preset.setCurrentText(persona.default_preset)
            if self._cue_text() != persona.cue_lines:
                self.cue_lines.setPlainText("\n".join(persona.cue_lines))
        shapeless = self.controls.base_avatar.num_betas == 0
        for slider in self.betas:
            slider.setEnabled(not shapeless)
            slider.setToolTip("This avatar has no body-shape space (an imported glTF/VRM file): "
                              "the shape sliders cannot change it" if shapeless else "")
        self.shape_note.info(SHAPELESS_NOTE if shapeless else "")
        for part, button in self.color_buttons.items():
            rgb = persona.colors.get(part) or part_color(self.controls.base_avatar, part)
            button.setEnabled(rgb is not None)
            button.setToolTip("" if rgb is not None else f"This avatar has no {part} part to colour")
            if rgb is None:
                button.setStyleSheet("")
                continue
            color = QColor.fromRgbF(*rgb)
            text = "#202124" if color.lightnessF() > 0.55 else "#f0f0f0"
            button.setStyleSheet(f"background: {color.name()}; color: {text};")
        self._update_title()

    def _update_title(self) -> None:
        persona = self.document.item
        builtin = " (built in)" if self.controls.personas.is_builtin(persona.name) and \
            not self.controls.personas.is_user(persona.name) else ""
        self._show_title(persona.name, builtin)

    # ---- widgets → model
    def _betas_changed(self) -> None:
        betas = [s.value() / BETA_STEPS for s in self.betas]
        while betas and betas[-1] == 0.0:
            betas.pop()
        self._edit("betas", betas)

    def _cue_text(self) -> list[str]:
        return [line for line in self.cue_lines.toPlainText().split("\n") if line.strip()]

    def commit_cue_lines(self) -> bool:
        self._cue_timer.stop()
        return self._edit("cue_lines", self._cue_text())

    def set_color(self, part: str, rgb: tuple[float, float, float]) -> bool:
        colors = {**self.document.item.colors, part: tuple(round(float(c), 3) for c in rgb)}
        return self._edit("colors", colors)

    def ask_color(self, part: str) -> None:
        current = self.document.item.colors.get(part) or part_color(self.controls.base_avatar, part) or (0.5, 0.5, 0.5)
        color = QColorDialog.getColor(QColor.fromRgbF(*current), self, f"{part.capitalize()} colour")
        if color.isValid():
            self.set_color(part, (color.redF(), color.greenF(), color.blueF()))

    def ask_avatar(self) -> None:
        from PySide6.QtWidgets import QFileDialog

        from studio.avatar.io import AVATAR_FILE_FILTER

        path, _ = QFileDialog.getOpenFileName(self, "Persona avatar", "", AVATAR_FILE_FILTER)
        if path:
            self._edit("avatar", path)

    def speak_test_line(self) -> bool:
        voice = self.document.item.voice
        return self.controls.window.speak_text(TEST_LINE, voice.name, voice.rate_wpm, voice.pitch)

    # ---- library actions (the dialogs only ask for a name)
    def _ask_name(self, title: str, default: str = "") -> str | None:
        name, ok = QInputDialog.getText(self, title, "Name", text=default)
        return name if ok else None

    def ask_create(self) -> None:
        name = self._ask_name("New persona")
        if name is not None:
            self.controls.create_persona(name)

    def ask_duplicate(self) -> None:
        name = self._ask_name("Duplicate persona", f"{self.document.item.name} copy")
        if name is not None:
            self.controls.duplicate_persona(name)

    def ask_rename(self) -> None:
        name = self._ask_name("Rename persona", self.document.item.name)
        if name is not None:
            self.controls.rename_persona(name)

    def delete(self) -> None:
        self.controls.delete_persona()
