"""PNGs of each operator/designer panel for the docs: `python -m widgets.panels.screenshots [folder]`.

Opens the studio with the teacher persona on the current DISPLAY (the user's layout untouched), puts
each panel in front in its workspace (Design, then Operate) with something to show (a cue playing, an
expression fired, the editor's caps), and grabs the window with the viewport's GL read-back pasted in;
the output window is saved as the picture it sends (chroma and transparent).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication

from studio.avatar.io import load_avatar_or_default
from studio.costs import load_cost_table, measure_module_costs, save_cost_table
from studio.presets import persona_by_name
from widgets.main_window import MainWindow, create_application
from widgets.screenshot import grab_window

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _pump(app: QApplication, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.005)


def _save_rgba(rgba: np.ndarray, path: Path, checker: bool = False) -> None:
    """An RGBA array as PNG; with `checker`, transparent parts over a grey checkerboard (as editors show it)."""
    if checker:
        y, x = np.indices(rgba.shape[:2])
        board = np.where(((x // 16 + y // 16) % 2)[..., None] == 0, 200, 150).astype(np.float32)
        alpha = rgba[..., 3:4].astype(np.float32) / 255.0
        rgb = rgba[..., :3] * alpha + board * (1 - alpha)
        rgba = np.dstack([rgb.astype(np.uint8), np.full(rgba.shape[:2], 255, np.uint8)])
    rgba = np.ascontiguousarray(rgba)
    image = QImage(rgba.data, rgba.shape[1], rgba.shape[0], rgba.strides[0], QImage.Format.Format_RGBA8888)
    if not image.save(str(path), "PNG"):
        raise OSError(f"could not write {path}")


def save_panel_screenshots(folder: Path = DOCS, persona: str = "teacher") -> list[Path]:
    app = create_application()
    avatar, _problem = load_avatar_or_default(None)
    window = MainWindow(avatar, show_dialogs=False, persist_layout=False, persona=persona_by_name(persona))
    panels = window.panels
    panels.select_persona(persona)
    table = load_cost_table() or measure_module_costs()
    save_cost_table(table)
    panels.preset_panel.set_cost_table(table)
    window.switch_workspace("design")
    window.show()
    _pump(app, 1.0)
    window.viewport.frame_head()
    folder.mkdir(parents=True, exist_ok=True)
    saved = []

    def shot(name: str, dock, settle: float = 1.0) -> None:
        dock.raise_()
        _pump(app, settle)
        path = folder / f"panel_{name}.png"
        grab_window(window).save(str(path), "PNG")
        saved.append(path)

    shot("persona", panels.persona_dock)
    panels.speak_cue(0)
    _pump(app, 1.5)
    panels.preset_panel.update_verdict()
    shot("preset", panels.preset_dock, 0.5)
    panels.neutral()
    editor = panels.editor_panel
    editor.load_expression("encouraging")
    editor.select("jawOpen")
    editor.set_gain_cap("jawOpen", cap=0.5)
    shot("expression_editor", panels.editor_dock)
    editor.reset_all()
    window.switch_workspace("operate")
    panels.toggle_expression("warm smile")
    panels.speak_cue(1)
    _pump(app, 1.2)
    shot("operator", panels.operator_dock, 0.3)
    output = panels.show_output(True)
    _pump(app, 1.0)
    output.frame_head()
    _pump(app, 0.3)
    _save_rgba(output.render_image(), folder / "output_chroma.png")
    panels.set_output_background("transparent")
    _save_rgba(output.render_image(), folder / "output_transparent.png", checker=True)
    saved += [folder / "output_chroma.png", folder / "output_transparent.png"]
    window.close()
    return saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DOCS)
    parser.add_argument("--persona", default="teacher")
    args = parser.parse_args(argv)
    for path in save_panel_screenshots(args.folder, args.persona):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
