"""Pose/expression inspector: the 52 ARKit weights as bars and the main joint angles in degrees.

Bound to an `InspectorModel`. Frames arrive at display rate, but the panel redraws at
~10 Hz (numbers at ~5 Hz, which the eye can still read) and touches only the rows whose
value changed; every widget is built once.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt, QTimer
from PySide6.QtGui import QColor, QFont, QFontDatabase, QPainter
from PySide6.QtWidgets import QFrame, QGridLayout, QLabel, QScrollArea, QSizePolicy, QVBoxLayout, QWidget

from studio.avatar.arkit import ARKIT_INDEX
from widgets.models import ARKIT_GROUPS, INSPECTED_JOINTS, InspectorModel

_BAR_STEPS = 1000
_TRACK = QColor(48, 52, 60)
_FILL = QColor(86, 156, 214)
_FILL_HIGH = QColor(230, 160, 70)


def monospace_font(point_size: int = 9) -> QFont:
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    font.setPointSize(point_size)
    return font


class WeightBar(QWidget):
    """A flat horizontal bar for a 0..1 weight; repaints only when the shown step changes."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._steps = 0
        self.setMinimumWidth(60)
        self.setFixedHeight(10)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def value(self) -> float:
        return self._steps / _BAR_STEPS

    def set_value(self, weight: float) -> bool:
        steps = int(round(min(max(float(weight), 0.0), 1.0) * _BAR_STEPS))
        if steps == self._steps:
            return False
        self._steps = steps
        self.update()
        return True

    def paintEvent(self, _event) -> None:  # noqa: N802 - Qt override
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        rect = QRectF(self.rect()).adjusted(0.5, 1.5, -0.5, -1.5)
        painter.setBrush(_TRACK)
        painter.drawRoundedRect(rect, 3, 3)
        if self._steps:
            filled = QRectF(rect)
            filled.setWidth(rect.width() * self._steps / _BAR_STEPS)
            painter.setBrush(_FILL_HIGH if self._steps > 0.85 * _BAR_STEPS else _FILL)
            painter.drawRoundedRect(filled, 3, 3)
        painter.end()


class InspectorPanel(QWidget):
    """Live ARKit weights (grouped) and joint angles of the frame being presented."""

    def __init__(self, model: InspectorModel, refresh_hz: float = 10.0, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self._dirty = True
        self._tick = 0
        self._bars: dict[str, WeightBar] = {}
        self._value_labels: dict[str, QLabel] = {}
        self._shown_text: dict[str, str] = {}
        self._angle_labels: dict[str, tuple[QLabel, QLabel, QLabel]] = {}
        self._build()
        model.changed.connect(self._mark_dirty)
        self._timer = QTimer(self)
        self._timer.setInterval(int(1000 / refresh_hz))
        self._timer.timeout.connect(self._on_timer)
        self._timer.start()
        self.refresh()

    def _build(self) -> None:
        mono = monospace_font()
        content = QWidget()
        grid = QGridLayout(content)
        grid.setContentsMargins(8, 6, 8, 6)
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(1)
        grid.setColumnStretch(1, 1)
        row = 0
        row = self._add_header(grid, row, "Joint angles (pitch · yaw · roll, °)")
        for label, _joint in INSPECTED_JOINTS:
            name = QLabel(label)
            cells = tuple(self._number_label(mono) for _ in range(3))
            grid.addWidget(name, row, 0)
            angles = QWidget()
            angles_layout = QGridLayout(angles)
            angles_layout.setContentsMargins(0, 0, 0, 0)
            for column, cell in enumerate(cells):
                angles_layout.addWidget(cell, 0, column)
            grid.addWidget(angles, row, 1, 1, 2)
            self._angle_labels[label] = cells
            row += 1
        for group, names in ARKIT_GROUPS:
            row = self._add_header(grid, row, f"{group} ({len(names)})")
            for shape in names:
                name = QLabel(shape)
                name.setObjectName("weightName")
                bar = WeightBar()
                value = self._number_label(mono)
                grid.addWidget(name, row, 0)
                grid.addWidget(bar, row, 1)
                grid.addWidget(value, row, 2)
                self._bars[shape] = bar
                self._value_labels[shape] = value
                row += 1
        grid.setRowStretch(row, 1)
        scroll = QScrollArea()
        scroll.setWidget(content)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # The dock may not squeeze the names and numbers: without this it shrank to ~60 px with the
        # window and stayed there when the window grew back, every label cut off.
        scroll.setMinimumWidth(content.minimumSizeHint().width() + scroll.verticalScrollBar().sizeHint().width())
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(scroll)

    @staticmethod
    def _add_header(grid: QGridLayout, row: int, text: str) -> int:
        header = QLabel(text)
        header.setObjectName("sectionHeader")
        grid.addWidget(header, row, 0, 1, 3)
        return row + 1

    @staticmethod
    def _number_label(font: QFont) -> QLabel:
        label = QLabel("")
        label.setFont(font)
        label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        label.setMinimumWidth(44)
        return label

    def _mark_dirty(self, _state) -> None:
        self._dirty = True

    def _on_timer(self) -> None:
        if self._dirty and self.isVisible():
            self._tick += 1
            self.refresh(update_text=self._tick % 2 == 0)

    def refresh(self, update_text: bool = True) -> None:
        """Show the model's latest frame; only changed bars repaint and changed labels re-set."""
        self._dirty = False
        weights = self.model.weights()
        for shape, bar in self._bars.items():
            bar.set_value(weights[ARKIT_INDEX[shape]])
        if not update_text:
            self._dirty = True
            return
        for shape, label in self._value_labels.items():
            self._set_text(shape, label, f"{weights[ARKIT_INDEX[shape]]:.2f}")
        for label, angles in self.model.joint_angles_deg().items():
            for axis, (cell, degrees) in enumerate(zip(self._angle_labels[label], angles)):
                self._set_text(f"{label}/{axis}", cell, f"{degrees:+6.1f}")

    def _set_text(self, key: str, label: QLabel, text: str) -> None:
        if self._shown_text.get(key) != text:
            self._shown_text[key] = text
            label.setText(text)

    def name_labels(self) -> list[QLabel]:
        """The blendshape name labels, top to bottom (to check that none is cut off)."""
        return [label for label in self.findChildren(QLabel) if label.objectName() == "weightName"]

    def row_count(self) -> int:
        """Number of blendshape rows (52)."""
        return len(self._bars)

    def weight_text(self, shape: str) -> str:
        return self._value_labels[shape].text()

    def bar_value(self, shape: str) -> float:
        return self._bars[shape].value()

    def angle_texts(self, label: str) -> tuple[str, str, str]:
        cells = self._angle_labels[label]
        return cells[0].text(), cells[1].text(), cells[2].text()

