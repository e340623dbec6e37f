"""The Drift monitor dock, next to Latency: every long-session drift figure against its preset threshold,
long-range plots that stay cheap for hours (downsampled series), a plain-language warning, and
"Re-anchor now".

`studio.drift_model.DriftModel` holds the figures (polled at 1 Hz with the engine, the take player and the
process memory); `DriftPanel` mirrors it and says why a figure is missing; `DriftDock` wires both into the
main window. The identity check (an offscreen render compared by SSIM) runs where `DriftModel.identity` is
given a renderer: the soak gives its own offscreen one; the window gives `WindowIdentityCheck`, which draws
with the viewport's canvas (a second GL canvas beside the viewport stalled the viewport on Mesa).
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import pyqtgraph as pg  # noqa: E402
from PySide6.QtCore import Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import (  # noqa: E402
    QBoxLayout,
    QCheckBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from render.identity import IdentityCheck  # noqa: E402
from studio.drift import DriftMonitor  # noqa: E402
from studio.drift_model import DriftModel  # noqa: E402
from widgets.inspector import monospace_font  # noqa: E402

_SHOWN, _RAW, _LIMIT = "#4ec9b0", "#f48771", "#e5c07b"


def _session_text(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def _value(monitor: DriftMonitor, name: str, form: str) -> str:
    value = monitor.current.get(name)
    return "—" if value is None else form.format(value)


class DriftPanel(QWidget):
    """Mirrors a DriftModel: warning line, figures with their limits, long-range drift and A/V plots."""

    ROWS = ("session", "av", "root", "head", "bias", "identity", "memory", "frames")
    NOTED = ("av", "head")  # rows followed by a line saying why the figures are missing (head: body and head)
    SIDE_BY_SIDE = (700, 320)  # a dock at least this wide and lower than this shows its plots side by side

    def __init__(self, model: DriftModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        mono = monospace_font()
        self.status = QLabel("steady")
        self.status.setWordWrap(True)
        self.reanchor_button = QPushButton("Re-anchor now")
        self.reanchor_button.setToolTip("Take where the pose input sits now as the rest anchor")
        self.reanchor_button.clicked.connect(model.re_anchor)
        self.anchoring = QCheckBox("Anchoring")
        self.anchoring.setChecked(True)
        self.anchoring.toggled.connect(model.set_anchoring)
        header = QHBoxLayout()
        header.addWidget(self.status, 1)
        header.addWidget(self.anchoring)
        header.addWidget(self.reanchor_button)

        grid = QGridLayout()
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(1)
        titles = {"session": "session", "av": "A/V offset · skew", "root": "body drift", "head": "head drift",
                  "bias": "neutral bias", "identity": "identity SSIM", "memory": "memory", "frames": "frames"}
        tips = {"av": "The offset of the picture from the sound, and the skew of the clock of what plays (a take's "
                      "own, or the engine's source), ± its standard error",
                "root": "Root translation off the rest anchor: as shown (after anchoring) · as the tracker sends it",
                "head": "Head orientation off the rest anchor: as shown (after anchoring) · as the tracker sends it"}
        self.values: dict[str, QLabel] = {}
        self.limits: dict[str, QLabel] = {}
        self.notes: dict[str, QLabel] = {}  # why a figure above is missing, or what it is measured on
        row = 0
        for key in self.ROWS:
            title = QLabel(titles[key])
            title.setToolTip(tips.get(key, ""))
            grid.addWidget(title, row, 0)
            value, limit = QLabel("—"), QLabel("")
            value.setFont(mono)
            limit.setObjectName("hint")
            grid.addWidget(value, row, 1)
            grid.addWidget(limit, row, 2)
            self.values[key], self.limits[key] = value, limit
            row += 1
            if key in self.NOTED:
                note = QLabel("")
                note.setObjectName("hint")
                note.setWordWrap(True)
                note.hide()  # until there is something to say
                grid.addWidget(note, row, 1, 1, 2)
                self.notes[key] = note
                row += 1
        self.events = QLabel("")
        self.events.setObjectName("hint")
        self.events.setWordWrap(True)
        grid.addWidget(self.events, row, 0, 1, 3)
        grid.setRowStretch(row + 1, 1)

        pg.setConfigOptions(antialias=False)
        self.drift_plot = pg.PlotWidget()
        self.av_plot = pg.PlotWidget()
        for widget, title in ((self.drift_plot, "body drift (mm)"), (self.av_plot, "A/V offset (ms)")):
            plot = widget.getPlotItem()
            plot.setClipToView(True)
            plot.setDownsampling(auto=True, mode="peak")
            plot.showGrid(x=True, y=True, alpha=0.15)
            # a horizontal title fits the plot's width; a vertical axis label was cut to the plot's small height
            plot.setTitle(title, size="8pt")
            plot.getAxis("left").setWidth(36)
            plot.setLabel("bottom", "session (min)")
            for axis in ("left", "bottom"):  # "(x0.001)" after the unit says nothing and was cut in a small dock
                plot.getAxis(axis).enableAutoSIPrefix(False)
            plot.setMouseEnabled(x=False, y=False)
            plot.setMenuEnabled(False)
        limits = model.thresholds
        self.shown_curve = self.drift_plot.plot([], [], pen=pg.mkPen(_SHOWN, width=1.5), name="shown")
        self.raw_curve = self.drift_plot.plot([], [], pen=pg.mkPen(_RAW, width=1), name="input")
        self.av_curve = self.av_plot.plot([], [], pen=pg.mkPen(_SHOWN, width=1.5))
        for widget, limit in ((self.drift_plot, limits.max_root_drift_mm), (self.av_plot, limits.max_av_offset_ms),
                              (self.av_plot, -limits.max_av_offset_ms)):  # lips ahead of or behind the voice
            widget.addItem(pg.InfiniteLine(pos=limit, angle=0, pen=pg.mkPen(_LIMIT, style=Qt.PenStyle.DashLine)))
        plots = self.plots = QBoxLayout(QBoxLayout.Direction.LeftToRight)
        for widget in (self.drift_plot, self.av_plot):
            widget.setMinimumSize(60, 60)
            plots.addWidget(widget, 1)

        body = QHBoxLayout()
        body.addLayout(plots, 1)
        body.addLayout(grid)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(header)
        layout.addLayout(body, 1)
        self._show_limits()
        model.changed.connect(self.refresh)

    def _show_limits(self) -> None:
        limits = self.model.thresholds
        texts = {"av": f"≤ {limits.max_av_offset_ms:g} ms", "root": f"≤ {limits.max_root_drift_mm:g} mm",
                 "head": f"≤ {limits.max_head_drift_deg:g}°", "bias": f"≤ {limits.max_neutral_bias:g}",
                 "identity": f"≥ {limits.min_identity_ssim:g}", "memory": f"≤ +{limits.max_rss_growth_pct:g} %",
                 "frames": f"p99 ≤ {limits.max_frame_p99_ms:g} ms"}
        for key, text in texts.items():
            self.limits[key].setText(text)

    def refresh(self) -> None:
        model = self.model
        monitor = model.monitor
        current = monitor.current
        pose_note = model.pose_note
        values = {
            "session": _session_text(monitor.session_s),
            "av": self._av_text(),
            "root": f"{_value(monitor, 'root_drift_mm', '{:.2f}')} · {_value(monitor, 'raw_root_drift_mm', '{:.2f} mm')}",
            "head": f"{_value(monitor, 'head_drift_deg', '{:.3f}')} · {_value(monitor, 'raw_head_drift_deg', '{:.3f}°')}",
            "bias": _value(monitor, "neutral_bias", "{:.3f}"),
            "identity": _value(monitor, "identity_ssim", "{:.4f}"),
            "memory": (f"{current['rss_mb']:.0f} MB" if "rss_mb" in current else "—")
            + (f", {current['rss_growth_pct']:+.1f} %" if "rss_growth_pct" in current else " (prewarm)"),
            "frames": f"p99 {_value(monitor, 'frame_p99_ms', '{:.1f} ms')}, dropped {monitor.dropped_frames}, "
                      f"underruns {monitor.underruns}",
        }
        notes = {"av": model.av_note, "head": pose_note or ""}
        for labels, texts in ((self.values, values), (self.notes, notes)):
            for key, text in texts.items():
                if labels[key].text() != text:
                    labels[key].setText(text)
                    labels[key].setVisible(bool(text))
        warnings = monitor.warnings()
        status = ("⚠ " + "; ".join(warnings)) if warnings else "steady: every figure within its limit"
        if self.status.text() != status:
            self.status.setText(status)
            self.status.setStyleSheet("color: #e5c07b;" if warnings else "color: #89d185;")
        self.anchoring.blockSignals(True)
        self.anchoring.setChecked(monitor.anchoring)
        self.anchoring.blockSignals(False)
        self.events.setText("\n".join(list(monitor.events)[-3:]))
        if self.isVisible():
            self._plot()

    def _av_text(self) -> str:
        monitor = self.model.monitor
        skew = monitor.current.get("skew_ppm")
        skew_text = "—" if skew is None else f"{skew:+.0f} ± {monitor.skew_error_ppm:.0f} ppm"
        return f"{_value(monitor, 'av_offset_ms', '{:+.1f} ms')} · {skew_text}"

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        """Stacked plots, except in a wide, low dock, where stacked they would be slivers and their titles cut."""
        size, (min_width, max_height) = event.size(), self.SIDE_BY_SIDE
        wanted = (QBoxLayout.Direction.LeftToRight if size.width() >= min_width and size.height() < max_height
                  else QBoxLayout.Direction.TopToBottom)
        if self.plots.direction() != wanted:
            self.plots.setDirection(wanted)
        super().resizeEvent(event)

    def _plot(self) -> None:
        series = self.model.monitor.series
        for curve, name in ((self.shown_curve, "root_drift_mm"), (self.raw_curve, "raw_root_drift_mm"),
                            (self.av_curve, "av_offset_ms")):
            data = series[name].arrays()
            values = data["mean"] if name == "av_offset_ms" else data["max"]
            curve.setData(data["time_s"] / 60.0, values)

    def warning_text(self) -> str:
        return self.status.text()


class WindowIdentityCheck:
    """The identity check in the studio: the viewport's own canvas renders the neutral pose at a fixed camera
    every `identity_interval_s`, compared with the first render by SSIM. A second GL canvas would compete
    with the viewport; this costs one extra small render at that interval. The reference restarts when the
    operator changes what is meant to change (avatar, level of detail, background, viewport size)."""

    def __init__(self, viewport) -> None:
        self.viewport = viewport
        self.check: IdentityCheck | None = None
        self._key = None

    def __call__(self, state) -> float:
        key = self.viewport.identity_key()
        if self.check is None or key != self._key:
            self.check, self._key = IdentityCheck(render=self.viewport.render_identity), key
        return self.check(state)


class DriftDock:
    """Adds the Drift dock to the main window, tabbed with Latency, polled once a second."""

    def __init__(self, window, preset=None) -> None:
        import psutil

        self.window = window
        self.model = DriftModel(preset.drift if preset is not None else None)
        self.model.identity = WindowIdentityCheck(window.viewport)
        self.panel = DriftPanel(self.model)
        self.dock = window.add_dock("Drift", "driftDock", self.panel, Qt.DockWidgetArea.BottomDockWidgetArea)
        window.tabifyDockWidget(window.latency_dock, self.dock)
        window.latency_dock.raise_()
        self._process = psutil.Process()
        self.timer = QTimer(self.panel)
        self.timer.setInterval(1000)
        self.timer.timeout.connect(self.poll)
        self.timer.start()

    def poll(self) -> None:
        controller = self.window.engine
        engine = controller.engine if controller.running else None
        player = self.window.recording.player  # a loaded take is what the viewport shows
        self.model.poll(engine, time.monotonic(), self._process.memory_info().rss / 2**20, player)

    def close(self) -> None:
        self.timer.stop()

