"""The viewport's presented frame rate and the studio's idle CPU, against offscreen rendering at the same size.

`gui_figures` opens the studio window at a preset with its docks open, runs Qt's own event loop
(no speech: the idle animation) and counts the frames the viewport presented and the CPU the whole
process used (llvmpipe's threads included). `offscreen_fps` renders the same avatar, LOD and cloth
at the same size through EGL, in its own process (Qt and EGL cannot share one vispy application).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

_OFFSCREEN = """
import json, sys, time
from render.offscreen import OffscreenRenderer
from render.preset_bench import nodding_states
from studio.avatar.io import default_avatar_path, load_avatar
from studio.avatar.lod import lod_path
from studio.presets import preset_by_name
plan = preset_by_name(sys.argv[1]).plan
path = lod_path("default", plan.lod, plan.keep_face_detail) or default_avatar_path()
width, height, frames = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
states = nodding_states(frames + 5)
with OffscreenRenderer(load_avatar(path), size=(width, height)) as renderer:
    renderer.view.set_cloth(plan.cloth_regions)
    for state in states[:5]:
        renderer.render(state)
    began, cpu = time.perf_counter(), time.process_time()
    for state in states[5:]:
        renderer.render(state)
    wall = time.perf_counter() - began
    print("OFFSCREEN " + json.dumps({"fps": frames / wall, "cpu_pct": 100.0 * (time.process_time() - cpu) / wall}))
"""


def gui_figures(seconds: float = 5.0, preset_name: str = "default", dynamic_resolution: bool = True) -> dict:
    """Presented fps, render scale and process CPU of the studio window idling at this preset, docks open."""
    import psutil

    from studio.avatar.io import load_avatar_or_default
    from studio.presets import preset_by_name
    from widgets.main_window import MainWindow, create_application
    from widgets.models import EngineController

    app = create_application()
    avatar, _problem = load_avatar_or_default(None)
    preset = preset_by_name(preset_name)
    window = MainWindow(avatar, engine=EngineController(), show_dialogs=False, persist_layout=False, preset=preset)
    window.viewport.dynamic_resolution.enabled = dynamic_resolution
    window.show()
    window.viewport.lods.wait(window.viewport.lods.request(preset.plan.lod, preset.plan.keep_face_detail), 120)
    for dock in window.findChildren(type(window.inspector_dock)):
        if not dock.isFloating() and not dock.isVisible():
            dock.show()
    _run_loop(app, 2.0)  # settle: LOD switched, the render scale found
    process = psutil.Process()
    cpu_before, draws_before, began = process.cpu_times(), window.viewport.draw_count, time.monotonic()
    _run_loop(app, seconds)
    elapsed = time.monotonic() - began
    cpu_after = process.cpu_times()
    cpu_s = (cpu_after.user - cpu_before.user) + (cpu_after.system - cpu_before.system)
    width, height = window.viewport.canvas.physical_size
    docks_open = sum(1 for dock in window.findChildren(type(window.inspector_dock)) if dock.isVisible())
    scale = window.viewport.dynamic_resolution.scale
    window.close()
    return {
        "preset": preset_name,
        "gui_presented_fps": round((window.viewport.draw_count - draws_before) / elapsed, 2),
        "gui_target_fps": preset.render.fps,
        "gui_idle_cpu_pct": round(100.0 * cpu_s / elapsed, 1),
        "gui_render_scale_pct": round(100.0 * scale, 1),
        "gui_native_window": window.viewport.native_window,
        "gui_viewport_width_px": int(width),
        "gui_viewport_height_px": int(height),
        "gui_docks_open_count": docks_open,
        "machine_load_1min_pct": round(100.0 * os.getloadavg()[0] / (os.cpu_count() or 1), 1),
    }


def _run_loop(app, seconds: float) -> None:
    """Qt's own event loop for this long (timers, paints and idle as in the running studio)."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    QTimer.singleShot(int(seconds * 1000), loop.quit)
    loop.exec()


def offscreen_fps(preset_name: str, width: int, height: int, frames: int = 30) -> dict:
    """Offscreen (EGL) render+readback rate of the preset's avatar at this size, in a fresh process."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=root, EGL_PLATFORM="surfaceless")
    result = subprocess.run([sys.executable, "-c", _OFFSCREEN, preset_name, str(width), str(height), str(frames)],
                            capture_output=True, text=True, env=env, cwd=root, timeout=600)
    for line in result.stdout.splitlines():
        if line.startswith("OFFSCREEN "):
            return json.loads(line[len("OFFSCREEN "):])
    raise RuntimeError(f"offscreen render failed: {(result.stderr.strip().splitlines() or ['no output'])[-1]}")


def bench_viewport(seconds: float = 5.0, preset_name: str = "default") -> dict:
    """GUI presented fps against offscreen at the same size and scale, and idle CPU (run in its own process)."""
    figures = gui_figures(seconds, preset_name)
    scale = figures["gui_render_scale_pct"] / 100.0
    width, height = figures["gui_viewport_width_px"], figures["gui_viewport_height_px"]
    full = offscreen_fps(preset_name, width, height)
    figures["offscreen_same_size_fps"] = round(full["fps"], 2)
    if scale < 0.999:
        scaled = offscreen_fps(preset_name, max(16, int(width * scale)), max(16, int(height * scale)))
        figures["offscreen_same_render_scale_fps"] = round(scaled["fps"], 2)
    reference = figures.get("offscreen_same_render_scale_fps", figures["offscreen_same_size_fps"])
    # the GUI never presents faster than the preset asks: compare with what offscreen could present at that cap
    figures["gui_vs_offscreen_pct"] = round(
        100.0 * figures["gui_presented_fps"] / min(reference, figures["gui_target_fps"]), 1)
    return figures
