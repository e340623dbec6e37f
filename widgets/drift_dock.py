"""The Drift monitor dock, next to Latency: every long-session drift figure against its preset threshold,
long-range plots that stay cheap for hours (downsampled series), a plain-language warning, and
"Re-anchor now".

`DriftModel` is Qt-free (polled at 1 Hz with the engine, the presented frame and the process memory);
`DriftPanel` mirrors it; `DriftDock` wires both into the main window. The identity check (an offscreen
render compared by SSIM) runs where `DriftModel.identity` is given a renderer: the soak gives its own
offscreen one; the window gives `WindowIdentityCheck`, which draws with the viewport's canvas (a second GL
canvas beside the viewport stalled the viewport on Mesa).
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import pyqtgraph as pg  # noqa: E402
from PySide6.QtCore import Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import (  # noqa: E402
    QCheckBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from render.identity import IdentityCheck  # noqa: E402
from studio.drift import DriftMonitor, DriftThresholds  # noqa: E402
from studio.engine.anchor import SpatialAnchor  # noqa: E402
from studio.frame import FrameState  # noqa: E402
from widgets.inspector import monospace_font  # noqa: E402
from widgets.models import Event  # noqa: E402

WARMUP_S = 60.0  # memory growth counts from the end of the first minute (models, shaders, voice loaded)
_SHOWN, _RAW, _LIMIT = "#4ec9b0", "#f48771", "#e5c07b"


class DriftModel:
    """Feeds a DriftMonitor from the running engine once a second; `changed` fires after each poll."""

    def __init__(self, thresholds: DriftThresholds | None = None) -> None:
        self.monitor = DriftMonitor(thresholds)
        self.changed = Event()
        self.engine = None
        self._queue = None
        self._started: float | None = None
        self._notes_seen = 0
        self._next_identity: float | None = None
        self.identity = None  # callable FrameState -> SSIM (the window supplies an offscreen renderer)

    @property
    def thresholds(self) -> DriftThresholds:
        return self.monitor.thresholds

    @property
    def anchor(self) -> SpatialAnchor | None:
        anchor = getattr(self.engine, "anchor", None)
        return anchor if isinstance(anchor, SpatialAnchor) else None

    def poll(self, engine, presented: FrameState | None, now_s: float, rss_mb: float) -> None:
        monitor = self.monitor
        if engine is not self.engine:
            if self._queue is not None and self.engine is not None:
                self.engine.unsubscribe(self._queue)
            self.engine, self._queue = engine, None if engine is None else engine.subscribe(maxlen=512)
        if self._started is None:
            self._started = now_s
        session = now_s - self._started
        monitor.session_s = session
        if engine is not None:
            anchor = self.anchor
            if anchor is not None:
                monitor.anchoring = anchor.settings.enabled
                monitor.nonfinite_frames = anchor.nonfinite_frames
                monitor.update_anchor(session, anchor.take_sums(), anchor.rest)
            monitor.update_frames(self._queue.drain())
            monitor.dropped_frames = self._queue.dropped
            source = engine.source
            if source is not None and source.clock.ready and presented is not None:
                offset_ms = (presented.media_time_s - engine.media_time_now()) * 1000.0
                monitor.update_clock(session, offset_ms, source.clock.skew_ppm)
            counters = engine.audio_counters() if hasattr(engine, "audio_counters") else {}
            monitor.underruns = int(counters.get("output_underruns") or 0)
            events = list(getattr(engine.housekeeper, "events", ()))
            for event in events[self._notes_seen:]:
                monitor.note(event)
            self._notes_seen = len(events)
        if monitor.baseline_rss_mb is None and session >= WARMUP_S:
            monitor.mark_prewarmed(rss_mb)
        monitor.update_memory(session, rss_mb)
        if self.identity is not None:
            if self._next_identity is None:
                self._next_identity = session
            if session >= self._next_identity:
                self._next_identity = session + self.thresholds.identity_interval_s
                try:
                    monitor.update_identity(session, self.identity(monitor.identity_frame()))
                except Exception as error:  # noqa: BLE001 - a failed render must not stop the monitor
                    monitor.note(f"identity render failed: {error}")
                    self.identity = None
        self.changed.emit()

    def re_anchor(self) -> None:
        anchor = self.anchor
        if anchor is not None:
            anchor.re_anchor()
            self.monitor.note(f"re-anchored by the operator at {self.monitor.session_s:.0f} s")

    def set_anchoring(self, enabled: bool) -> None:
        anchor = self.anchor
        if anchor is not None:
            anchor.settings = anchor.settings.model_copy(update={"enabled": bool(enabled)})
            self.monitor.anchoring = bool(enabled)


def _session_text(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def _value(monitor: DriftMonitor, name: str, form: str) -> str:
    value = monitor.current.get(name)
    return "—" if value is None else form.format(value)


class DriftPanel(QWidget):
    """Mirrors a DriftModel: warning line, figures with their limits, long-range drift and A/V plots."""

    ROWS = ("session", "av", "root", "head", "bias", "identity", "memory", "frames")

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
        titles = {"session": "session", "av": "A/V offset · skew", "root": "body drift (shown · input)",
                  "head": "head drift (shown · input)", "bias": "neutral bias", "identity": "identity SSIM",
                  "memory": "memory", "frames": "frames"}
        self.values: dict[str, QLabel] = {}
        self.limits: dict[str, QLabel] = {}
        for row, key in enumerate(self.ROWS):
            grid.addWidget(QLabel(titles[key]), row, 0)
            value, limit = QLabel("—"), QLabel("")
            value.setFont(mono)
            limit.setObjectName("hint")
            grid.addWidget(value, row, 1)
            grid.addWidget(limit, row, 2)
            self.values[key], self.limits[key] = value, limit
        self.events = QLabel("")
        self.events.setObjectName("hint")
        self.events.setWordWrap(True)
        grid.addWidget(self.events, len(self.ROWS), 0, 1, 3)
        grid.setRowStretch(len(self.ROWS) + 1, 1)

        pg.setConfigOptions(antialias=False)
        self.drift_plot = pg.PlotWidget()
        self.av_plot = pg.PlotWidget()
        for widget, label, unit in ((self.drift_plot, "body drift", "mm"), (self.av_plot, "A/V offset", "ms")):
            plot = widget.getPlotItem()
            plot.setClipToView(True)
            plot.setDownsampling(auto=True, mode="peak")
            plot.showGrid(x=True, y=True, alpha=0.15)
            plot.setLabel("left", f"{label} ({unit})")
            plot.setLabel("bottom", "session (min)")
            plot.setMouseEnabled(x=False, y=False)
            plot.setMenuEnabled(False)
        limits = model.thresholds
        self.shown_curve = self.drift_plot.plot([], [], pen=pg.mkPen(_SHOWN, width=1.5), name="shown")
        self.raw_curve = self.drift_plot.plot([], [], pen=pg.mkPen(_RAW, width=1), name="input")
        self.av_curve = self.av_plot.plot([], [], pen=pg.mkPen(_SHOWN, width=1.5))
        for widget, limit in ((self.drift_plot, limits.max_root_drift_mm), (self.av_plot, limits.max_av_offset_ms)):
            widget.addItem(pg.InfiniteLine(pos=limit, angle=0, pen=pg.mkPen(_LIMIT, style=Qt.PenStyle.DashLine)))
        plots = QVBoxLayout()
        plots.addWidget(self.drift_plot, 1)
        plots.addWidget(self.av_plot, 1)

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
        monitor = self.model.monitor
        current = monitor.current
        values = {
            "session": _session_text(monitor.session_s),
            "av": f"{_value(monitor, 'av_offset_ms', '{:+.1f} ms')} · {_value(monitor, 'skew_ppm', '{:+.0f} ppm')}",
            "root": f"{_value(monitor, 'root_drift_mm', '{:.2f}')} · {_value(monitor, 'raw_root_drift_mm', '{:.2f} mm')}",
            "head": f"{_value(monitor, 'head_drift_deg', '{:.3f}')} · {_value(monitor, 'raw_head_drift_deg', '{:.3f}°')}",
            "bias": _value(monitor, "neutral_bias", "{:.3f}"),
            "identity": _value(monitor, "identity_ssim", "{:.4f}"),
            "memory": (f"{current['rss_mb']:.0f} MB" if "rss_mb" in current else "—")
            + (f", {current['rss_growth_pct']:+.1f} %" if "rss_growth_pct" in current else " (prewarm)"),
            "frames": f"p99 {_value(monitor, 'frame_p99_ms', '{:.1f} ms')}, dropped {monitor.dropped_frames}, "
                      f"underruns {monitor.underruns}",
        }
        for key, text in values.items():
            if self.values[key].text() != text:
                self.values[key].setText(text)
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
        self.dock = window._add_dock("Drift", "driftDock", self.panel, Qt.DockWidgetArea.BottomDockWidgetArea)
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
        self.model.poll(engine, self.window.current_frame, time.monotonic(), self._process.memory_info().rss / 2**20)

    def close(self) -> None:
        self.timer.stop()

