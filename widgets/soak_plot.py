"""report.png for `avatar-studio soak`: drift curves (shown and raw input, and another run's when given),
A/V offset, memory, identity SSIM and frame time, each with its threshold; drawn with pyqtgraph offscreen."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

_COLORS = {"shown": "#4ec9b0", "raw": "#f48771", "compare": "#c586c0", "limit": "#e5c07b", "other": "#4fc1ff"}


def _label(report: dict) -> str:
    settings = report["settings"]
    bias = f", bias {settings['pose_bias_mm_per_min']:g} mm/{settings['pose_bias_deg_per_min']:g}° per min"
    return ("anchored" if settings["anchor"] else "not anchored") + (bias if settings["pose_bias_mm_per_min"] or
                                                                     settings["pose_bias_deg_per_min"] else "")


def _curve(report: dict, name: str, key: str = "max") -> tuple[np.ndarray, np.ndarray] | None:
    series = report["series"].get(name)
    if not series:
        return None
    return np.asarray(series["time_s"]) / 60.0, np.asarray(series[key])


def write_report_png(report: dict, path: Path, compare: dict | None = None, size: tuple[int, int] = (1400, 1000)) -> None:
    _app, pg, layout = _new_layout(size)
    summary, limits = report["summary"], report["thresholds"]
    title = (f"soak {summary['simulated_s']:.0f} s ({'complete' if summary['complete'] else 'INCOMPLETE'}), "
             f"skew {report['settings']['skew_ppm']:g} ppm, preset {report['settings']['preset']}: "
             f"{'PASS' if report['passed'] else 'FAIL'}")
    layout.addLabel(title, row=0, col=0, colspan=2, size="13pt")

    def plot(row: int, col: int, name: str, units: str, limit: float | None, log: bool = False):
        item = layout.addPlot(row=row, col=col, title=name)
        item.showGrid(x=True, y=True, alpha=0.2)
        item.setLabel("bottom", "session time", units="min")
        item.setLabel("left", units)
        item.getAxis("left").enableAutoSIPrefix(False)
        item.getAxis("bottom").enableAutoSIPrefix(False)
        item.addLegend(offset=(10, 5))
        if limit is not None:
            item.addItem(pg.InfiniteLine(pos=np.log10(limit) if log else limit, angle=0,
                                         pen=pg.mkPen(_COLORS["limit"], style=pg.QtCore.Qt.PenStyle.DashLine),
                                         label=f"limit {limit:g}", labelOpts={"color": _COLORS["limit"], "position": 0.9}))
        if log:
            item.setLogMode(y=True)
        return item

    def add(item, curve, color: str, label: str) -> None:
        if curve is not None:
            times, values = curve
            few = len(times) < 60  # sparse points (identity renders) get markers
            item.plot(times, values, pen=pg.mkPen(color, width=2), name=label, symbol="o" if few else None,
                      symbolSize=5, symbolBrush=color, symbolPen=None)

    runs = [(report, "")] + ([(compare, " (compared run)")] if compare else [])
    for (row, col), (name, raw_name, units, limit) in zip(
            ((1, 0), (1, 1)),
            (("root_drift_mm", "raw_root_drift_mm", "mm", limits["max_root_drift_mm"]),
             ("head_drift_deg", "raw_head_drift_deg", "degrees", limits["max_head_drift_deg"]))):
        item = plot(row, col, {"root_drift_mm": "body (root) drift from the rest anchor (log)",
                               "head_drift_deg": "head drift from the rest anchor (log)"}[name], units, limit, log=True)
        for index, (run, suffix) in enumerate(runs):
            add(item, _curve(run, name), _COLORS["shown"] if index == 0 else _COLORS["compare"],
                f"shown, {_label(run)}{suffix}")
        add(item, _curve(report, raw_name), _COLORS["raw"], "tracker input (raw)")
    offsets = plot(2, 1, "A/V offset (presented frame vs voice)", "ms", limits["max_av_offset_ms"])
    for index, (run, suffix) in enumerate(runs):
        add(offsets, _curve(run, "av_offset_ms", "mean"), _COLORS["shown"] if index == 0 else _COLORS["compare"],
            f"skew estimated {run['summary']['estimated_skew_ppm']:g} ppm{suffix}")
        offsets.addItem(pg.InfiniteLine(pos=-limits["max_av_offset_ms"], angle=0,
                                        pen=pg.mkPen(_COLORS["limit"], style=pg.QtCore.Qt.PenStyle.DashLine)))
    identity = plot(2, 0, "identity: neutral render vs the first (SSIM)", "SSIM", limits["min_identity_ssim"])
    memory = plot(3, 0, "memory growth since prewarm", "%", limits["max_rss_growth_pct"])
    for index, (run, suffix) in enumerate(runs):
        color = _COLORS["other"] if index == 0 else _COLORS["compare"]
        add(memory, _curve(run, "rss_growth_pct"), color, f"RSS{suffix}")
        add(identity, _curve(run, "identity_ssim", "min"), _COLORS["shown"] if index == 0 else _COLORS["compare"],
            f"{_label(run)}{suffix}")
    frames = plot(3, 1, "engine frame time p99 per minute", "ms", limits["max_frame_p99_ms"])
    for index, (run, suffix) in enumerate(runs):
        add(frames, _curve(run, "frame_p99_ms"), _COLORS["other"] if index == 0 else _COLORS["compare"], f"p99{suffix}")
    _export_png(layout, size, path)


def write_gui_report_png(report: dict, path: Path, size: tuple[int, int] = (1400, 900)) -> None:
    """report.png for `soak --gui`: process memory (with the warm-up mark and the growth limit), presented
    fps and the speaker's underruns over the session."""
    _app, pg, layout = _new_layout(size)
    summary, series, settings = report["summary"], report["series"], report["settings"]
    growth = summary["gui_rss_growth_pct"]
    counts = summary["counts"]
    layout.addLabel(
        f"GUI soak {summary['wall_s']:.0f} s: RSS growth after warm-up {growth:+.2f} % (limit "
        f"{report['thresholds']['max_gui_rss_growth_pct']:g} %"
        f"{'' if report['pass']['rss_growth'] is not None else ', not judged under 10 min'}), "
        f"{summary['presented_fps_mean']} fps, "
        f"{summary['audio_underruns']} underruns; {counts.get('takes_recorded', 0)} takes, "
        f"{counts.get('exports_decoded', 0)} exports, {counts.get('persona_switches', 0)} persona switches: "
        f"{'PASS' if report['passed'] else 'FAIL'}", row=0, col=0, size="12pt")
    minutes = np.asarray(series["time_s"]) / 60.0
    warmup_min = settings["warmup_s"] / 60.0
    dashed = pg.mkPen(_COLORS["limit"], style=pg.QtCore.Qt.PenStyle.DashLine)
    rows = (("process memory (RSS)", "MB", "rss_mb", _COLORS["other"]),
            ("presented frames per second", "fps", "presented_fps", _COLORS["shown"]),
            ("speaker underruns (cumulative)", "count", "audio_underruns", _COLORS["raw"]))
    for row, (title, units, key, color) in enumerate(rows, start=1):
        item = layout.addPlot(row=row, col=0, title=title)
        item.showGrid(x=True, y=True, alpha=0.2)
        item.setLabel("bottom", "session time", units="min")
        item.setLabel("left", units)
        item.getAxis("left").enableAutoSIPrefix(False)
        item.getAxis("bottom").enableAutoSIPrefix(False)
        item.plot(minutes, np.asarray(series[key], np.float64), pen=pg.mkPen(color, width=2))
        item.addItem(pg.InfiniteLine(pos=warmup_min, angle=90, pen=dashed, label="end of warm-up",
                                     labelOpts={"color": _COLORS["limit"], "position": 0.9}))
        if key == "rss_mb" and summary["rss_at_warmup_mb"] is not None:
            limit = summary["rss_at_warmup_mb"] * (1 + report["thresholds"]["max_gui_rss_growth_pct"] / 100.0)
            item.addItem(pg.InfiniteLine(pos=limit, angle=0, pen=dashed, label=f"limit {limit:.0f} MB",
                                         labelOpts={"color": _COLORS["limit"], "position": 0.1}))
    _export_png(layout, size, path)


def _new_layout(size: tuple[int, int]):
    """(the QApplication, pyqtgraph, an empty plot layout in the studio's colours): a report is drawn from its JSON,
    so no window is needed (offscreen unless a platform is set)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
    import pyqtgraph as pg
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    pg.setConfigOptions(antialias=True, background="#1e1f22", foreground="#c8ccd4")
    return app, pg, pg.GraphicsLayoutWidget(size=size)


def _export_png(layout, size: tuple[int, int], path) -> None:
    """Lay the plots out at `size`, write them as a PNG and close the layout."""
    import pyqtgraph.exporters
    from PySide6.QtWidgets import QApplication

    layout.resize(*size)
    layout.show()
    QApplication.processEvents()
    exporter = pyqtgraph.exporters.ImageExporter(layout.scene())
    exporter.parameters()["width"] = size[0]
    exporter.export(str(path))
    layout.close()
