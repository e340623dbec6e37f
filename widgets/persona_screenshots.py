"""PNGs of the viewport with each built-in persona, for the docs:
`python -m widgets.persona_screenshots [folder]` (run it under scripts/with-services.sh).

Each persona is shown under its own default preset, so the picture is the mesh level of detail a user of
that persona sees, and only once the viewport draws the persona's look at that level.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from PySide6.QtGui import QImage

from studio.avatar.io import default_avatar_path, load_avatar
from studio.presets import persona_by_name
from widgets.main_window import MainWindow, create_application
from widgets.models import EngineController

BUILT_IN_PERSONAS = ("default", "teacher", "presenter", "clinician")
DOCS_SCREENSHOTS = Path(__file__).resolve().parents[1] / "docs" / "screenshots"
SETTLE_TIMEOUT_S = 120.0
PORTRAIT_ASPECT = 0.6  # width / height of the saved picture


def _no_engine():
    raise ImportError("the persona screenshots show the idle avatar: no engine")


def save_persona_screenshots(folder: Path = DOCS_SCREENSHOTS, personas: tuple[str, ...] = BUILT_IN_PERSONAS,
                             size: tuple[int, int] = (1280, 960)) -> list[Path]:
    """persona-<name>.png of the viewport (whole body, studio background, cut to a portrait around the avatar)
    for each persona; returns the paths."""
    app = create_application()
    window = MainWindow(load_avatar(default_avatar_path()), engine=EngineController(_no_engine), show_dialogs=False,
                        persist_layout=False, persona=persona_by_name(personas[0]))
    window.resize(*size)
    window.show()
    folder.mkdir(parents=True, exist_ok=True)
    saved = []
    try:
        for name in personas:
            panels = window.panels
            if not panels.select_persona(name):
                raise RuntimeError(f"persona {name!r} did not load: {panels.persona_panel.message.text()}")
            panels.apply_look()
            panels.select_preset(window.persona.default_preset)
            deadline = time.monotonic() + SETTLE_TIMEOUT_S
            while not window.viewport.look_drawn:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the viewport did not draw persona {name!r} within {SETTLE_TIMEOUT_S:.0f} s")
                app.processEvents()
                time.sleep(0.01)
            window.viewport.frame_body()
            app.processEvents()
            rgba = window.viewport.render_image()
            width = min(rgba.shape[1], round(rgba.shape[0] * PORTRAIT_ASPECT))
            left = (rgba.shape[1] - width) // 2  # the body framing centres the avatar
            rgba = np.ascontiguousarray(rgba[:, left:left + width])
            image = QImage(rgba.data, rgba.shape[1], rgba.shape[0], rgba.strides[0], QImage.Format.Format_RGBA8888)
            path = folder / f"persona-{name}.png"
            if not image.save(str(path), "PNG"):
                raise OSError(f"could not write {path}")
            saved.append(path)
    finally:
        window.close()
    return saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DOCS_SCREENSHOTS)
    args = parser.parse_args(argv)
    for path in save_persona_screenshots(args.folder):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
