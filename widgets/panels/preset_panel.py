"""Preset panel: choose and edit presets, see what each module level costs here, and whether the target holds.

The cost table comes from `studio.costs` (measured on this machine once, in the background, then cached);
the verdict line compares the latency the Latency dock shows now, sound→screen (`studio.telemetry.SoundToScreen`,
the same object), with the preset's target, lists its parts and names the module whose step down saves the most.
"""

from __future__ import annotations

import threading

from PySide6.QtCore import QTimer
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from studio.costs import MODULES, Cancelled, CostTable, load_cost_table, measure_module_costs, save_cost_table, verdict
from studio.precision import LEVELS
from studio.presets import Preset
from widgets.panels.common import DocumentEditing, MessageLine, blocked, scrolling, section

VERDICT_INTERVAL_MS = 500


class PresetPanel(QWidget, DocumentEditing):
    def __init__(self, controls, measure: bool = True) -> None:
        super().__init__()
        self.controls = controls
        self.document = controls.preset_doc
        self.message = MessageLine()
        self.table: CostTable | None = load_cost_table()
        self._measuring: threading.Thread | None = None
        self._cancel = threading.Event()

        self.chooser = QComboBox()
        self.chooser.activated.connect(lambda _i: self.controls.select_preset(self.chooser.currentText()))
        self.title = QLabel()
        self.save_button = QPushButton("Save")
        self.save_button.clicked.connect(lambda: self.controls.save_preset())
        self.revert_button = QPushButton("Revert")
        self.revert_button.clicked.connect(self.document.revert)
        self.duplicate_button = QPushButton("Duplicate…")
        self.duplicate_button.clicked.connect(self._ask_duplicate)
        row = QHBoxLayout()
        row.addWidget(self.title, 1)
        for button in (self.save_button, self.revert_button, self.duplicate_button):
            row.addWidget(button)

        self.levels: dict[str, QComboBox] = {}
        modules_form = QFormLayout()
        for module in MODULES:
            combo = QComboBox()
            combo.addItems(LEVELS)
            combo.activated.connect(lambda _i, m=module, c=combo: self._edit(f"modules.{m}", c.currentText()))
            self.levels[module] = combo
            modules_form.addRow(module.capitalize(), combo)
        self.width_spin, self.height_spin = QSpinBox(), QSpinBox()
        self.width_spin.setRange(160, 7680)
        self.height_spin.setRange(90, 4320)
        self.width_spin.valueChanged.connect(lambda v: self._edit("render.width", v))
        self.height_spin.valueChanged.connect(lambda v: self._edit("render.height", v))
        self.fps_spin = QDoubleSpinBox()
        self.fps_spin.setRange(1, 240)
        self.fps_spin.setDecimals(0)
        self.fps_spin.valueChanged.connect(lambda v: self._edit("render.fps", v))
        self.target_spin = QDoubleSpinBox()
        self.target_spin.setRange(1, 1000)
        self.target_spin.setDecimals(0)
        self.target_spin.setSuffix(" ms")
        self.target_spin.valueChanged.connect(lambda v: self._edit("render.latency_target_ms", v))
        size_row = QHBoxLayout()
        size_row.addWidget(self.width_spin)
        size_row.addWidget(QLabel("×"))
        size_row.addWidget(self.height_spin)
        render_form = QFormLayout()
        render_form.addRow("Resolution", size_row)
        render_form.addRow("Frame rate", self.fps_spin)
        render_form.addRow("Latency target", self.target_spin)

        self.costs = QTableWidget(len(MODULES), len(LEVELS))
        self.costs.setVerticalHeaderLabels([m.capitalize() for m in MODULES])
        self.costs.setHorizontalHeaderLabels(list(LEVELS))
        self.costs.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.costs.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.costs.verticalHeader().setDefaultSectionSize(24)
        self.costs.setFixedHeight(24 * len(MODULES) + self.costs.horizontalHeader().sizeHint().height() + 4)
        self.costs_note = QLabel("")
        self.costs_note.setObjectName("hint")
        self.costs_note.setWordWrap(True)
        self.verdict_label = QLabel("")
        self.verdict_label.setWordWrap(True)
        self.latency_ms: float | None = None
        self.render_ms = 0.0

        layout = QVBoxLayout()
        layout.addWidget(self.chooser)
        layout.addLayout(row)
        layout.addWidget(self.message)
        layout.addWidget(section("Modules"))
        layout.addLayout(modules_form)
        layout.addWidget(section("Render and budget"))
        layout.addLayout(render_form)
        layout.addWidget(section("Measured cost per level (engine CPU ms per 10 ms hop, this machine)"))
        layout.addWidget(self.costs)
        layout.addWidget(self.costs_note)
        layout.addWidget(section("Now"))
        layout.addWidget(self.verdict_label)
        layout.addStretch(1)
        scrolling(self, layout)

        self.document.changed.connect(self.refresh)
        self.document.dirty_changed.connect(lambda _d: self._update_title())
        self.document.saved.connect(lambda _i: self._update_title())
        self.timer = QTimer(self, interval=VERDICT_INTERVAL_MS)
        self.timer.timeout.connect(self.update_verdict)
        self.timer.start()
        self._measure_when_shown = measure and self.table is None
        self.refresh_names()
        self._fill_costs()

    def on_visible(self, visible: bool) -> None:
        """The table is measured the first time the panel is seen (not at every start, not in hidden tabs)."""
        if visible and self._measure_when_shown:
            self._measure_when_shown = False
            self.measure_costs()

    def stop(self) -> None:
        """Closing: stop the verdict timer and a running measurement (joined)."""
        self.timer.stop()
        self._cancel.set()
        if self._measuring is not None:
            self._measuring.join()
            self._measuring = None

    # ---- costs
    def measure_costs(self) -> None:
        """Measure the table on a background thread (a few seconds of CPU), then cache and show it."""
        if self._measuring is not None:
            return
        self.costs_note.setText("Measuring each module level on this machine…")

        def work() -> None:
            try:
                table = measure_module_costs(cancelled=self._cancel.is_set)
                save_cost_table(table)
            except Cancelled:
                return
            except Exception as error:  # noqa: BLE001 - no engine (onnxruntime missing): say so in the panel
                self._measured = f"could not measure: {type(error).__name__}: {error}"
                return
            self._measured = table

        self._measured = None
        self._measuring = threading.Thread(target=work, name="module-costs", daemon=True)
        self._measuring.start()
        self._poll = QTimer(self, interval=200)
        self._poll.timeout.connect(self._collect)
        self._poll.start()

    def _collect(self) -> None:
        if self._measuring is None or self._measuring.is_alive():
            return
        self._poll.stop()
        self._measuring = None
        if isinstance(self._measured, dict):
            self.table = self._measured
        else:
            self.costs_note.setText(str(self._measured))
        self._fill_costs()

    def set_cost_table(self, table: CostTable) -> None:
        self.table = table
        self._measure_when_shown = False
        self._fill_costs()

    def _fill_costs(self) -> None:
        preset = self.document.item
        levels = preset.modules.model_dump()
        for row, module in enumerate(MODULES):
            for column, level in enumerate(LEVELS):
                text = "—" if self.table is None else f"{self.table[module][level]:.2f}"
                item = QTableWidgetItem(text)
                if levels[module] == level:
                    font = QFont()
                    font.setBold(True)
                    item.setFont(font)
                    item.setBackground(QColor("#2f4a6e"))
                self.costs.setItem(row, column, item)
        if self.table is not None:
            self.costs_note.setText("Bold: this preset's level. Engine cost only; the render stage (mesh detail "
                                    "follows body, cloth springs) shows in the Latency dock.")

    # ---- verdict
    def measured_latency_ms(self) -> tuple[float | None, float]:
        """(sound→screen total, its render part) as the Latency dock shows them; None while no engine runs."""
        latency = self.controls.window.latency_model.sound_to_screen
        return (None, 0.0) if latency is None else (latency.total_ms, latency.render_ms)

    def update_verdict(self, latency_ms: float | None = None, render_ms: float = 0.0) -> bool:
        """Refresh the verdict line from the Latency dock (or from the given figures); True when it meets the target."""
        parts, present_ms = "", 0.0
        if latency_ms is None:
            latency_ms, render_ms = self.measured_latency_ms()
            latency = self.controls.window.latency_model.sound_to_screen
            if latency is not None:
                parts, present_ms = f"\n= {latency.parts_text()} ms", latency.present_ms
        self.latency_ms, self.render_ms = latency_ms, render_ms
        ok, line = verdict(self.table, self.document.item, latency_ms, render_ms, present_ms)
        line += parts
        self.verdict_label.setText(line)
        self.verdict_label.setStyleSheet("color: #8fd18f;" if ok else "color: #ff8a80; font-weight: 600;")
        return ok

    # ---- binding
    def refresh_names(self) -> None:
        with blocked(self.chooser):
            self.chooser.clear()
            self.chooser.addItems(self.controls.presets.names())
        self.refresh(self.document.item)

    def refresh(self, preset: Preset) -> None:
        inputs = [self.chooser, *self.levels.values(), self.width_spin, self.height_spin, self.fps_spin, self.target_spin]
        with blocked(*inputs):
            self.chooser.setCurrentText(preset.name)
            for module, combo in self.levels.items():
                combo.setCurrentText(getattr(preset.modules, module))
            self.width_spin.setValue(preset.render.width)
            self.height_spin.setValue(preset.render.height)
            self.fps_spin.setValue(preset.render.fps)
            self.target_spin.setValue(preset.render.latency_target_ms)
        self._fill_costs()
        self._update_title()
        self.update_verdict(self.latency_ms, self.render_ms)

    def _update_title(self) -> None:
        self._show_title(self.document.item.name)

    def _ask_duplicate(self) -> None:
        from PySide6.QtWidgets import QInputDialog

        name, ok = QInputDialog.getText(self, "Duplicate preset", "Name", text=f"{self.document.item.name} copy")
        if ok:
            self.controls.duplicate_preset(name)
