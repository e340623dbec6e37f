"""Expression editor: 52 ARKit sliders by region, mirror, solo/mute, reset, named expressions, gain/cap
with a curve view, undo/redo (QUndoStack) and a before/after toggle.

Everything goes through `studio.expressions.ExpressionEditor`, which drives the engine's expression
stage, so the designer sees the pose blended over whatever speech is driving the face right now.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPen, QUndoCommand, QUndoStack
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QPushButton,
    QScrollArea,
    QSlider,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from studio.avatar.arkit import ARKIT_NAMES
from studio.expressions import REGIONS, ExpressionEditor
from studio.presets import PresetError
from widgets.panels.common import MessageLine, ToggleButton, blocked, section

SLIDER_STEPS = 100


class WeightsCommand(QUndoCommand):
    """Slider weights from `before` to `after` (exact shapes, mirror already resolved); drags merge."""

    ID = 1

    def __init__(self, editor: ExpressionEditor, before: dict[str, float], after: dict[str, float], text: str,
                 merge_key: str | None = None) -> None:
        super().__init__(text)
        self.editor, self.before, self.after, self.merge_key = editor, before, after, merge_key

    def id(self) -> int:  # noqa: A003 - Qt's name
        return self.ID if self.merge_key else -1

    def mergeWith(self, other) -> bool:  # noqa: N802 - Qt override
        if not isinstance(other, WeightsCommand) or other.merge_key != self.merge_key:
            return False
        self.after = other.after
        return True

    def redo(self) -> None:
        self.editor.set_weights(self.after, mirror=False)

    def undo(self) -> None:
        self.editor.set_weights(self.before, mirror=False)


class GainCapCommand(QUndoCommand):
    def __init__(self, editor: ExpressionEditor, name: str, before: tuple[float, float], after: tuple[float, float]):
        super().__init__(f"gain/cap {name}")
        self.editor, self.name, self.before, self.after = editor, name, before, after

    def redo(self) -> None:
        self.editor.set_gain_cap(self.name, *self.after)

    def undo(self) -> None:
        self.editor.set_gain_cap(self.name, *self.before)


class CurveView(QWidget):
    """output = min(gain × input, cap) over input 0..1, for the selected shape."""

    def __init__(self) -> None:
        super().__init__()
        self.gain, self.cap = 1.0, 1.0
        self.setMinimumSize(120, 90)

    def set_curve(self, gain: float, cap: float) -> None:
        self.gain, self.cap = gain, cap
        self.update()

    def output(self, value: float) -> float:
        return min(self.gain * value, self.cap, 1.0)

    def paintEvent(self, _event) -> None:  # noqa: N802 - Qt override
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        box = QRectF(self.rect()).adjusted(6, 6, -6, -6)
        painter.fillRect(box, QColor("#1b1c1f"))
        painter.setPen(QPen(QColor("#3a3d42"), 1))
        painter.drawRect(box)
        painter.drawLine(box.bottomLeft(), box.topRight())
        path = QPainterPath()
        for i in range(41):
            x = i / 40
            point = QPointF(box.left() + x * box.width(), box.bottom() - self.output(x) * box.height())
            path.lineTo(point) if i else path.moveTo(point)
        painter.setPen(QPen(QColor("#8fb3ff"), 2))
        painter.drawPath(path)
        painter.end()


class ShapeRow:
    """One shape: name, slider, value, solo and mute."""

    def __init__(self, panel: ExpressionEditorPanel, name: str, grid: QGridLayout, row: int) -> None:
        self.name = name
        self.label = QPushButton(name)
        self.label.setFlat(True)
        self.label.setStyleSheet("text-align: left; padding: 0 2px;")
        self.label.clicked.connect(lambda: panel.select(name))
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, SLIDER_STEPS)
        self.slider.valueChanged.connect(lambda v: panel.slider_moved(name, v / SLIDER_STEPS))
        self.value = QLabel("0.00")
        self.value.setMinimumWidth(32)
        self.solo, self.mute = QToolButton(), QToolButton()
        for button, text, which, color in ((self.solo, "S", "solo", "#b8a000"), (self.mute, "M", "mute", "#c62828")):
            button.setText(text)
            button.setCheckable(True)
            button.setStyleSheet(f"QToolButton:checked {{ background: {color}; color: white; font-weight: 700; }}")
            button.setToolTip(f"{which} {name}")
            button.toggled.connect(lambda on, w=which: panel.editor.set_flag(w, name, on))
        for column, widget in enumerate((self.label, self.slider, self.value, self.solo, self.mute)):
            grid.addWidget(widget, row, column)


class ExpressionEditorPanel(QWidget):
    def __init__(self, controls) -> None:
        super().__init__()
        self.controls = controls
        self.editor: ExpressionEditor = controls.editor
        self.undo_stack = QUndoStack(self)
        self.message = MessageLine()
        self.selected = "jawOpen"

        self.mirror = ToggleButton("Mirror L/R", "Mirror L/R ✓")
        self.mirror.toggled.connect(self.editor.set_mirror)
        self.before = ToggleButton("Before", "Before ✓", on_color="#b26a00")
        self.before.setToolTip("Show the face without this editor's pose, gains and caps")
        self.before.toggled.connect(self.editor.set_before)
        self.undo_button = QPushButton("Undo")
        self.undo_button.clicked.connect(self.undo_stack.undo)
        self.redo_button = QPushButton("Redo")
        self.redo_button.clicked.connect(self.undo_stack.redo)
        self.undo_stack.canUndoChanged.connect(self.undo_button.setEnabled)
        self.undo_stack.canRedoChanged.connect(self.redo_button.setEnabled)
        self.undo_button.setEnabled(False)
        self.redo_button.setEnabled(False)
        self.reset_button = QPushButton("Reset")
        self.reset_button.clicked.connect(self.reset_all)
        tools = QHBoxLayout()
        for widget in (self.mirror, self.before, self.undo_button, self.redo_button, self.reset_button):
            tools.addWidget(widget)

        self.expressions = QComboBox()
        load = QPushButton("Load")
        load.clicked.connect(lambda: self.load_expression(self.expressions.currentText()))
        save = QPushButton("Save as…")
        save.clicked.connect(self._ask_save)
        delete = QPushButton("Delete")
        delete.clicked.connect(lambda: self.delete_expression(self.expressions.currentText()))
        named = QHBoxLayout()
        named.addWidget(self.expressions, 1)
        for button in (load, save, delete):
            named.addWidget(button)

        self.shape_label = QLabel()
        self.gain = QDoubleSpinBox()
        self.gain.setRange(0.0, 4.0)
        self.gain.setSingleStep(0.1)
        self.cap = QDoubleSpinBox()
        self.cap.setRange(0.0, 1.0)
        self.cap.setSingleStep(0.05)
        for box in (self.gain, self.cap):  # "0.6" typed is one value, not 0 committed at the first key
            box.setKeyboardTracking(False)
        self.gain.valueChanged.connect(lambda v: self.set_gain_cap(self.selected, gain=v))
        self.cap.valueChanged.connect(lambda v: self.set_gain_cap(self.selected, cap=v))
        self.curve = CurveView()
        detail_form = QFormLayout()
        detail_form.addRow("Gain", self.gain)
        detail_form.addRow("Cap", self.cap)
        detail = QHBoxLayout()
        detail.addLayout(detail_form)
        detail.addWidget(self.curve, 1)

        self.rows: dict[str, ShapeRow] = {}
        sliders = QWidget()
        grid = QGridLayout(sliders)
        grid.setVerticalSpacing(1)
        grid.setColumnStretch(1, 1)
        row = 0
        for region, names in REGIONS:
            grid.addWidget(section(region), row, 0, 1, 5)
            row += 1
            for name in names:
                self.rows[name] = ShapeRow(self, name, grid, row)
                row += 1
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(sliders)

        layout = QVBoxLayout(self)
        layout.addLayout(tools)
        layout.addLayout(named)
        layout.addWidget(self.message)
        layout.addWidget(self.shape_label)
        layout.addLayout(detail)
        layout.addWidget(scroll, 1)

        self.editor.changed.connect(self._on_changed)
        self.editor.flags_changed.connect(self._on_flags)
        self.refresh()

    # ---- model → widgets
    def refresh(self) -> None:
        self._on_changed(list(ARKIT_NAMES))
        self._on_flags()

    def _on_changed(self, names) -> None:
        for name in names:
            row = self.rows[name]
            value = self.editor.weight(name)
            with blocked(row.slider):
                row.slider.setValue(round(value * SLIDER_STEPS))
            row.value.setText(f"{value:.2f}")
        with blocked(self.expressions):
            current = self.expressions.currentText()
            self.expressions.clear()
            self.expressions.addItems(list(self.editor.document.item.expressions))
            self.expressions.setCurrentText(current)
        self._show_detail()

    def _on_flags(self) -> None:
        for name, row in self.rows.items():
            with blocked(row.solo, row.mute):
                row.solo.setChecked(name in self.editor.solo)
                row.mute.setChecked(name in self.editor.mute)
        with blocked(self.mirror, self.before):
            self.mirror.setChecked(self.editor.mirror)
            self.before.setChecked(self.editor.before)

    def _show_detail(self) -> None:
        name = self.selected
        gain, cap = self.editor.gain(name), min(self.editor.cap(name), 1.0)
        self.shape_label.setText(f"<b>{name}</b>: output = min(gain × input, cap)")
        with blocked(self.gain, self.cap):
            self.gain.setValue(gain)
            self.cap.setValue(cap)
        self.curve.set_curve(gain, cap)

    # ---- widgets → model (through the undo stack)
    def select(self, name: str) -> None:
        self.selected = name
        self._show_detail()

    def _current(self, names) -> dict[str, float]:
        return {n: self.editor.weight(n) for n in names}

    def slider_moved(self, name: str, value: float) -> None:
        targets = self.editor.partners(name)
        before = self._current(targets)
        after = dict.fromkeys(targets, value)
        self.undo_stack.push(WeightsCommand(self.editor, before, after, f"{name} {value:.2f}", merge_key=name))

    def set_weight(self, name: str, value: float) -> None:
        """As if the designer dragged that slider (tests, scripting)."""
        self.rows[name].slider.setValue(round(value * SLIDER_STEPS))

    def set_gain_cap(self, name: str, gain: float | None = None, cap: float | None = None) -> None:
        before = (self.editor.gain(name), self.editor.cap(name))
        after = (before[0] if gain is None else float(gain), before[1] if cap is None else float(cap))
        if after == before:
            return
        try:
            self.undo_stack.push(GainCapCommand(self.editor, name, before, after))
        except PresetError as error:
            self.message.error(str(error))
            return
        self.select(name)

    def reset_all(self) -> None:
        before = self._current(ARKIT_NAMES)
        self.undo_stack.push(WeightsCommand(self.editor, before, dict.fromkeys(ARKIT_NAMES, 0.0), "reset"))

    def load_expression(self, name: str) -> None:
        expression = self.editor.document.item.expressions.get(name)
        if expression is None:
            self.message.error(f"no expression named {name!r} in this persona")
            return
        after = {n: float(w) for n, w in zip(ARKIT_NAMES, expression.weight_array())}
        self.undo_stack.push(WeightsCommand(self.editor, self._current(ARKIT_NAMES), after, f"load {name}"))

    def save_expression(self, name: str) -> bool:
        try:
            self.editor.save_expression(name)
        except PresetError as error:
            self.message.error(str(error))
            return False
        self.message.info(f"saved {name.strip()!r} into persona {self.editor.document.item.name!r} (save the persona to keep it)")
        self.expressions.setCurrentText(name.strip())
        return True

    def delete_expression(self, name: str) -> None:
        try:
            self.editor.delete_expression(name)
        except PresetError as error:
            self.message.error(str(error))

    def _ask_save(self) -> None:
        name, ok = QInputDialog.getText(self, "Save expression", "Name", text=self.expressions.currentText())
        if ok:
            self.save_expression(name)
