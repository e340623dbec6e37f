"""A small horizontal input level meter for the status bar (peak level in dBFS, -60 to 0)."""

from __future__ import annotations

import math

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QSizePolicy, QWidget

FLOOR_DB = -60.0
_TRACK = QColor(48, 52, 60)
_GREEN = QColor(110, 190, 110)
_AMBER = QColor(230, 190, 80)
_RED = QColor(235, 90, 80)


class LevelMeter(QWidget):
    """Peak level as a bar: green up to -12 dBFS, amber to -3, red above (clipping near); repaints on change only."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._db = FLOOR_DB
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.setToolTip("Input level (peak, dBFS)")

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(90, 12)

    @property
    def level_db(self) -> float:
        return self._db

    def fraction(self) -> float:
        """How full the bar is, 0..1."""
        return (self._db - FLOOR_DB) / -FLOOR_DB

    def set_level(self, peak: float | None) -> None:
        """Show a peak sample value (0..1, linear); None or 0 empties the meter."""
        db = FLOOR_DB if not peak or peak <= 0 else max(FLOOR_DB, min(0.0, 20.0 * math.log10(peak)))
        if round(db, 1) != round(self._db, 1):
            self._db = db
            self.update()

    def paintEvent(self, _event) -> None:  # noqa: N802 - Qt override
        painter = QPainter(self)
        painter.setPen(Qt.PenStyle.NoPen)
        rect = QRectF(self.rect()).adjusted(0.5, 2.5, -0.5, -2.5)
        painter.setBrush(_TRACK)
        painter.drawRect(rect)
        if self._db > FLOOR_DB:
            filled = QRectF(rect)
            filled.setWidth(rect.width() * self.fraction())
            painter.setBrush(_RED if self._db > -3 else _AMBER if self._db > -12 else _GREEN)
            painter.drawRect(filled)
        painter.end()
