"""A/V sync row of the Latency dock: the delayed voice monitor on/off, its offset, and the delay in use.

Like OBS's per-source sync offset: the measured engine-plus-render latency sets the delay, and the
operator can add or take away milliseconds for what the studio cannot measure (a capture tool's own
delay, the display's scan-out).
"""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QSpinBox, QWidget

from widgets.models import EngineController

OFFSET_RANGE_MS = 500


class AvSyncBar(QWidget):
    """Checkbox, offset spin box and the live delay, bound to an EngineController."""

    def __init__(self, controller: EngineController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.enabled = QCheckBox("Delayed voice monitor (A/V sync)")
        self.enabled.setToolTip("Play the microphone's voice delayed by the measured latency, so a viewer of the "
                                "window (capture plus this audio) sees the lips in sync with what they hear")
        self.offset = QSpinBox()
        self.offset.setRange(-OFFSET_RANGE_MS, OFFSET_RANGE_MS)
        self.offset.setSuffix(" ms")
        self.offset.setPrefix("offset ")
        self.offset.setToolTip("Added to the measured delay (negative: the voice earlier)")
        self.delay_label = QLabel("delay —")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 2)
        layout.addWidget(self.enabled)
        layout.addWidget(self.offset)
        layout.addWidget(self.delay_label, 1)
        self.enabled.toggled.connect(self._apply)
        self.offset.valueChanged.connect(self._apply)
        self._timer = QTimer(self)
        self._timer.setInterval(200)
        self._timer.timeout.connect(self.refresh)
        self._timer.start()

    def _apply(self, *_args) -> None:
        self.controller.set_voice_monitor(self.enabled.isChecked(), float(self.offset.value()))
        self.refresh()

    def refresh(self) -> None:
        status = self.controller.voice_monitor_status()
        if not status["enabled"]:
            text = "delay — (off)"
        elif not status["playing"]:
            text = "delay — (starts with the microphone)"
        else:
            text = f"delay {status['delay_ms']:.0f} ms (measured {status['measured_ms']:.0f} ms)"
        if self.delay_label.text() != text:
            self.delay_label.setText(text)
