"""Latency graph: per-stage traces over a sliding window, p50/p95/p99, the preset's target and CPU load.

The target line applies to one latency, sound→screen (`studio.telemetry.SoundToScreen`): its trace is
drawn with the stages and its total and parts are written under the table, with the speaker's current
output buffer. Bound to a `LatencyModel`; redraws at ~10 Hz when the model changed and only while visible.
"""

from __future__ import annotations

import os

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import numpy as np  # noqa: E402
import pyqtgraph as pg  # noqa: E402
from PySide6.QtCore import Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QLabel, QVBoxLayout, QWidget  # noqa: E402

from studio.telemetry import SOUND_TO_SCREEN  # noqa: E402
from widgets.inspector import monospace_font  # noqa: E402
from widgets.models import ALL_STAGES, ENGINE_STAGES, RENDER_STAGE, LatencyModel  # noqa: E402

STAGE_COLORS: dict[str, str] = {
    "capture": "#4fc1ff",
    "features": "#b5cea8",
    "inference": "#c586c0",
    "motion": "#dcdcaa",
    "anchor": "#4ec9b0",
    RENDER_STAGE: "#f48771",
}
STAGE_LABELS: dict[str, str] = {stage: stage for stage in ENGINE_STAGES} | {RENDER_STAGE: "render/present"}
SOUND_TO_SCREEN_COLOR = "#e8e8e8"
_BACKGROUND = "#1e1f22"
_AXIS = "#8b8f98"


def _cpu_ticks(top: float) -> list[list[tuple[float, str]]]:
    step = 50.0 if top <= 100.0 else 100.0
    return [[(value, f"{value:.0f}") for value in np.arange(0.0, top + 1.0, step)]]


def sound_to_screen_text(model: LatencyModel) -> str:
    """'sound→screen p95 123.4 ms · target 80 ms' (the number the Preset panel judges), '—' while idle."""
    latency = model.sound_to_screen
    if latency is None:
        return f"{SOUND_TO_SCREEN} — · target {model.target_ms:.0f} ms"
    return f"{latency.total_text()} · target {model.target_ms:.0f} ms"


def sound_to_screen_parts_text(model: LatencyModel) -> str:
    """'= device 25.0 + lookahead 20.0 + engine 3.1 + render 40.2 + present 33.3 ms', '' while idle
    ('engine idle: …' says why)."""
    latency = model.sound_to_screen
    return "" if latency is None else f"= {latency.parts_text()} ms"


def speaker_buffer_text(model: LatencyModel) -> str:
    """'Speaker buffer 20 ms', '—' before an engine reports."""
    buffer_ms = model.speaker_buffer_ms
    return "Speaker buffer —" if buffer_ms is None else f"Speaker buffer {buffer_ms:.0f} ms"


def underrun_text(model: LatencyModel) -> str:
    """'Audio underruns N' (and the microphone's lost blocks, if any), '—' before an engine reports."""
    if model.output_underruns is None:
        return "Audio underruns —"
    text = f"Audio underruns {model.output_underruns}"
    if model.input_overflows:
        text += f" · input overflows {model.input_overflows}"
    return text


class LatencyPanel(QWidget):
    """Live latency traces and percentile table; cheap: reuses its plot items every refresh."""

    def __init__(self, model: LatencyModel, refresh_hz: float = 10.0, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self._dirty = True
        self._shown_text: dict[QLabel, str] = {}
        self._build()
        model.changed.connect(self._mark_dirty)
        self._timer = QTimer(self)
        self._timer.setInterval(int(1000 / refresh_hz))
        self._timer.timeout.connect(self._on_timer)
        self._timer.start()

    def _build(self) -> None:
        pg.setConfigOptions(antialias=False, background=_BACKGROUND, foreground=_AXIS)
        self.plot_widget = pg.PlotWidget()
        plot = self.plot_widget.getPlotItem()
        plot.setClipToView(True)
        plot.setDownsampling(auto=True, mode="peak")
        plot.showGrid(x=True, y=True, alpha=0.15)
        plot.setLabel("left", "ms")  # the dock says latency; a longer title is cut in a short dock
        plot.setLabel("bottom", "time", units="s")
        plot.setMouseEnabled(x=False, y=False)
        plot.setXRange(-self.model.window_s, 0.0, padding=0)
        plot.setYRange(0.0, self.model.target_ms * 1.4, padding=0)
        self._y_top = self.model.target_ms * 1.4
        plot.setMenuEnabled(False)
        self.curves = {
            stage: plot.plot([], [], pen=pg.mkPen(STAGE_COLORS[stage], width=1.5), name=STAGE_LABELS[stage])
            for stage in ALL_STAGES
        }
        self.target_line = pg.InfiniteLine(
            pos=self.model.target_ms, angle=0, movable=False,
            pen=pg.mkPen("#e5c07b", width=1, style=Qt.PenStyle.DashLine),
            label="target {value:.0f} ms",
            labelOpts={"position": 0.01, "anchors": [(0, 0), (0, 0)], "color": "#e5c07b"},  # under the line, left: never cut
        )
        plot.addItem(self.target_line)
        self.sound_to_screen_curve = plot.plot([], [], pen=pg.mkPen(SOUND_TO_SCREEN_COLOR, width=2), name=SOUND_TO_SCREEN)
        self.over_budget = pg.ScatterPlotItem(size=8, symbol="x", pen=pg.mkPen("#ff5555", width=2), brush=None)
        plot.addItem(self.over_budget)

        self.cpu_widget = pg.PlotWidget()
        self.cpu_widget.setFixedHeight(64)
        cpu_plot = self.cpu_widget.getPlotItem()
        cpu_plot.setClipToView(True)
        cpu_plot.setDownsampling(auto=True, mode="peak")
        cpu_plot.setXRange(-self.model.window_s, 0.0, padding=0)
        cpu_plot.setYRange(0, 100, padding=0)
        self._cpu_top = 100.0
        cpu_plot.setMouseEnabled(x=False, y=False)
        cpu_plot.setMenuEnabled(False)
        cpu_plot.hideAxis("bottom")
        cpu_plot.setLabel("left", "CPU")
        cpu_plot.getAxis("left").setTicks(_cpu_ticks(100.0))
        cpu_plot.getAxis("left").setWidth(plot.getAxis("left").width())
        self.cpu_curve = cpu_plot.plot([], [], pen=pg.mkPen("#9cdcfe", width=1), fillLevel=0, brush=(156, 220, 254, 40))

        mono = monospace_font()
        table = QGridLayout()
        table.setHorizontalSpacing(10)
        table.setVerticalSpacing(1)
        for column, title in enumerate(("stage", "p50", "p95", "p99")):
            header = QLabel(title)
            header.setObjectName("sectionHeader")
            header.setAlignment(Qt.AlignmentFlag.AlignRight if column else Qt.AlignmentFlag.AlignLeft)
            table.addWidget(header, 0, column)
        self.stat_labels: dict[str, tuple[QLabel, QLabel, QLabel]] = {}
        for row, stage in enumerate(ALL_STAGES, start=1):
            name = QLabel(f"<span style='color:{STAGE_COLORS[stage]}'>■</span> {STAGE_LABELS[stage]}")
            table.addWidget(name, row, 0)
            cells = []
            for column in range(1, 4):
                cell = QLabel("—")
                cell.setFont(mono)
                cell.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                cell.setMinimumWidth(52)
                table.addWidget(cell, row, column)
                cells.append(cell)
            self.stat_labels[stage] = tuple(cells)
        self.cpu_label = QLabel("CPU —")
        self.cpu_label.setFont(mono)
        self.underrun_label = QLabel("Audio underruns —")
        self.underrun_label.setFont(mono)
        self.underrun_label.setToolTip("Speaker blocks that found the device buffer empty (heard as a dropout), "
                                       "and microphone blocks lost, since the engine started")
        self.engine_label = QLabel("")
        self.engine_label.setObjectName("hint")
        self.engine_label.setWordWrap(True)
        self.sound_to_screen_label = QLabel(sound_to_screen_text(self.model))
        self.sound_to_screen_label.setFont(mono)
        self.sound_to_screen_label.setToolTip(
            "The latency the preset's target applies to: from a sound at the audio device to the frame showing it "
            "on screen, the sum of its parts' p95 (input device, the model's lookahead, engine, render, wait for "
            "the next presented frame)")
        self.sound_to_screen_parts = QLabel("")
        self.sound_to_screen_parts.setFont(mono)
        self.sound_to_screen_parts.setWordWrap(True)
        self.sound_to_screen_parts.setToolTip(self.sound_to_screen_label.toolTip())
        self.buffer_label = QLabel(speaker_buffer_text(self.model))
        self.buffer_label.setFont(mono)
        self.buffer_label.setToolTip("Sound queued at the speaker: grows when the device runs dry on a busy machine, "
                                     "shrinks again after a quiet stretch; a played line is heard this much later")
        rows = (self.cpu_label, self.buffer_label, self.underrun_label, self.engine_label)
        for offset, label in enumerate(rows, start=1):
            table.addWidget(label, len(ALL_STAGES) + offset, 0, 1, 4)
        table.setRowStretch(len(ALL_STAGES) + len(rows) + 1, 1)

        total = QHBoxLayout()  # under the plot, where the whole line fits: the figure the target applies to
        total.setSpacing(12)
        total.addWidget(self.sound_to_screen_label)
        total.addWidget(self.sound_to_screen_parts, 1)
        graphs = QVBoxLayout()
        graphs.setSpacing(2)
        graphs.addWidget(self.plot_widget, 1)
        graphs.addLayout(total)
        graphs.addWidget(self.cpu_widget)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(graphs, 1)
        layout.addLayout(table)

    def _mark_dirty(self, *_args) -> None:
        self._dirty = True

    def _on_timer(self) -> None:
        if self._dirty and self.isVisible():
            self.refresh()

    def refresh(self) -> None:
        """Redraw traces and numbers from the model (relative time: 0 is the newest tick)."""
        self._dirty = False
        model = self.model
        newest = max((series[-1][0] for series in model.traces.values() if series), default=0.0)
        for stage, curve in self.curves.items():
            times, values = model.trace(stage)
            curve.setData(times - newest, values)
        if model.sound_to_screen_trace:
            trace = np.asarray(model.sound_to_screen_trace, np.float64)
            self.sound_to_screen_curve.setData(trace[:, 0] - newest, trace[:, 1])
        else:
            self.sound_to_screen_curve.setData([], [])
        if model.over_budget:
            marks = np.asarray(model.over_budget, np.float64)
            self.over_budget.setData(marks[:, 0] - newest, marks[:, 1])
        else:
            self.over_budget.setData([], [])
        if self.target_line.value() != model.target_ms:
            self.target_line.setValue(model.target_ms)
        self._fit_y(model)
        if model.cpu:
            cpu = np.asarray(model.cpu, np.float64)
            self.cpu_curve.setData(cpu[:, 0] - newest, cpu[:, 1])
        else:
            self.cpu_curve.setData([], [])
        self._fit_cpu(model)
        for stage, cells in self.stat_labels.items():
            stats = model.stats.get(stage)
            values = ("—", "—", "—") if stats is None else (
                f"{stats.p50_ms:6.1f}", f"{stats.p95_ms:6.1f}", f"{stats.p99_ms:6.1f}"
            )
            for cell, text in zip(cells, values):
                self._set_text(cell, text)
        cpu = model.latest_cpu_pct()
        self._set_text(self.cpu_label, "CPU —" if cpu is None else f"CPU {cpu:5.1f} %")
        self._set_text(self.underrun_label, underrun_text(model))
        self._set_text(self.sound_to_screen_label, sound_to_screen_text(model))
        self._set_text(self.sound_to_screen_parts, sound_to_screen_parts_text(model))
        self._set_text(self.buffer_label, speaker_buffer_text(model))
        self._set_text(self.engine_label, "" if model.engine_active else "engine idle: render/present only")

    def _fit_y(self, model: LatencyModel) -> None:
        """Keep 0 at the bottom and the target plus the highest visible point in view."""
        highest = max((value for series in (*model.traces.values(), model.sound_to_screen_trace)
                       for _, value in series), default=0.0)
        top = max(model.target_ms, highest) * 1.15
        if abs(top - self._y_top) > 0.05 * self._y_top:
            self._y_top = top
            self.plot_widget.getPlotItem().setYRange(0.0, top, padding=0)

    def _fit_cpu(self, model: LatencyModel) -> None:
        """0-100 % for one core; above that (several busy cores) the range grows in 100 % steps with the load."""
        highest = max((value for _, value in model.cpu), default=0.0)
        top = max(100.0, float(np.ceil(highest / 100.0)) * 100.0)
        if top != self._cpu_top:
            self._cpu_top = top
            plot = self.cpu_widget.getPlotItem()
            plot.setYRange(0, top, padding=0)
            plot.getAxis("left").setTicks(_cpu_ticks(top))

    def cpu_range(self) -> tuple[float, float]:
        """The CPU plot's visible value range (%)."""
        low, high = self.cpu_widget.getPlotItem().viewRange()[1]
        return float(low), float(high)

    def _set_text(self, label: QLabel, text: str) -> None:
        if self._shown_text.get(label) != text:
            self._shown_text[label] = text
            label.setText(text)

    def stat_texts(self, stage: str) -> tuple[str, str, str]:
        cells = self.stat_labels[stage]
        return cells[0].text(), cells[1].text(), cells[2].text()
