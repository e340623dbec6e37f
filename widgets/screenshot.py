"""Save a PNG of the whole studio window (for the README): `python -m widgets.screenshot [out.png]`.

Opens the window on the current DISPLAY, lets the idle animation run a moment, grabs the
window and pastes the canvas's own GL read-back over the viewport, since a widget grab
does not capture GL content reliably on every platform.

`--layouts FOLDER` instead saves the window at 960×640 and 1280×720 in every workspace, as the
X server shows it (a grab of the screen, where the viewport's native window would cover any
panel squeezed under it): window-960x640.png and window-1280x720.png (Operate),
window-960x640-design.png and so on. Run it under scripts/with-services.sh for the docs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from PySide6.QtCore import QPoint
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtWidgets import QApplication

from studio.avatar.io import load_avatar_or_default
from studio.avatar.model import AvatarModel
from studio.workspaces import WORKSPACES
from widgets.main_window import MainWindow, create_application

DEFAULT_OUTPUT = Path(__file__).resolve().parents[1] / "docs" / "screenshot.png"
LAYOUT_SIZES = ((960, 640), (1280, 720))


def _pump(app: QApplication, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.005)


def grab_window(window: MainWindow) -> QImage:
    """The window's pixels with the viewport filled from the canvas's GL read-back."""
    image = window.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    rgba = np.ascontiguousarray(window.viewport.render_image()[:, :, :3])
    rgba = np.ascontiguousarray(np.dstack([rgba, np.full(rgba.shape[:2], 255, np.uint8)]))
    canvas_image = QImage(rgba.data, rgba.shape[1], rgba.shape[0], rgba.strides[0], QImage.Format.Format_RGBA8888).copy()
    native = window.viewport.canvas.native
    top_left = native.mapTo(window, QPoint(0, 0))
    ratio = image.devicePixelRatio() or 1.0
    canvas_image = canvas_image.scaled(round(native.width() * ratio), round(native.height() * ratio))
    painter = QPainter(image)
    painter.drawImage(QPoint(round(top_left.x() * ratio), round(top_left.y() * ratio)), canvas_image)
    painter.end()
    return image


def save_screenshot(output: Path = DEFAULT_OUTPUT, avatar: AvatarModel | None = None, settle_s: float = 2.0,
                    background: str = "studio", framing: str = "body", speak: str | None = None) -> Path:
    """Open the window (without touching the user's saved layout), animate, save a PNG.

    With `speak`, the line is spoken through the engine first, so the latency graph shows every
    stage and the mouth is caught moving.
    """
    app = create_application()
    if avatar is None:
        avatar, _problem = load_avatar_or_default(None)
    window = MainWindow(avatar, show_dialogs=False, persist_layout=False)
    window.set_background(background)
    window.show()
    _pump(app, 0.3)
    window.viewport.frame_head() if framing == "head" else window.viewport.frame_body()
    _pump(app, 0.7)
    window.latency_model.clear()
    if speak and not window.speak_text(speak):
        print(f"screenshot: not speaking: {window.engine.state}", file=sys.stderr)
    _pump(app, settle_s)
    window.latency.refresh()
    window.inspector.refresh()
    output.parent.mkdir(parents=True, exist_ok=True)
    if not grab_window(window).save(str(output), "PNG"):
        raise OSError(f"could not write the screenshot to {output}")
    window.close()
    return output


def grab_screen_area(window: MainWindow) -> QImage:
    """The window's client area as the screen shows it: native child windows included, on top where they are."""
    origin = window.mapToGlobal(QPoint(0, 0))
    screen = window.screen() or QGuiApplication.primaryScreen()
    return screen.grabWindow(0, origin.x(), origin.y(), window.width(), window.height()).toImage()


def save_layout_screenshots(folder: Path, avatar: AvatarModel | None = None, persona: str = "teacher",
                            settle_s: float = 1.0) -> list[Path]:
    """The window at each of LAYOUT_SIZES in each workspace, its panels laid out as shipped (the user's
    saved layout is neither read nor written)."""
    from studio.presets import persona_by_name

    app = create_application()
    if avatar is None:
        avatar, _problem = load_avatar_or_default(None)
    window = MainWindow(avatar, show_dialogs=False, persist_layout=False, persona=persona_by_name(persona))
    window.move(0, 0)
    window.show()
    _pump(app, 0.5)
    window.panels.select_persona(persona)
    folder.mkdir(parents=True, exist_ok=True)
    saved = []
    for width, height in LAYOUT_SIZES:
        for workspace in WORKSPACES:
            window.resize(1440, 900)
            window.switch_workspace(workspace.name)
            window.reset_layout()
            window.resize(width, height)
            _pump(app, settle_s)
            window.latency.refresh()
            window.inspector.refresh()
            suffix = "" if workspace is WORKSPACES[0] else f"-{workspace.name}"
            path = folder / f"window-{width}x{height}{suffix}.png"
            if not grab_screen_area(window).save(str(path), "PNG"):
                raise OSError(f"could not write the screenshot to {path}")
            saved.append(path)
    window.close()
    return saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", nargs="?", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--avatar", help="avatar file (default: the shipped default avatar)")
    parser.add_argument("--framing", choices=("body", "head"), default="body")
    parser.add_argument("--speak", metavar="TEXT", help="speak this line through the engine before the capture")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds of animation before the capture")
    parser.add_argument("--background", choices=("studio", "chroma", "transparent"), default="studio")
    parser.add_argument("--layouts", metavar="FOLDER", type=Path,
                        help="instead: the window at 960x640 and 1280x720 in every workspace, into this folder")
    args = parser.parse_args(argv)
    avatar, problem = load_avatar_or_default(args.avatar)
    if problem:
        print(f"screenshot: {problem}", file=sys.stderr)
    if args.layouts is not None:
        for path in save_layout_screenshots(args.layouts, avatar, settle_s=args.settle):
            print(path)
        return 0
    path = save_screenshot(args.output, avatar, args.settle, args.background, args.framing, args.speak)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
