"""Window layout persistence: geometry, dock state and workspaces as JSON under the user's config folder.

Not QSettings: one plain file the user can delete, written atomically, and a file that
fails to load is left as it is (and kept aside as `.bad` on the next save) instead of being
silently replaced.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from pathlib import Path

from studio.fileio import atomic_write
from studio.paths import user_config_dir

LAYOUT_SCHEMA_VERSION = 1
LAYOUT_FILE_NAME = "window-layout.json"
WINDOW_FIELDS = ("x", "y", "width", "height")


class LayoutError(ValueError):
    """A layout file that cannot be used; the message names the file and the problem."""


@dataclass
class WindowLayout:
    """`window` is the client rectangle (x, y, width, height: the window without its frame) and whether it was
    maximized; `workspaces` is `studio.workspaces.Workspaces.to_json()`. Files from before either lack them."""

    geometry: bytes
    dock_state: bytes
    options: dict = field(default_factory=dict)
    window: dict | None = None
    workspaces: dict | None = None


def default_layout_path() -> Path:
    return user_config_dir() / LAYOUT_FILE_NAME


def _decode(path: Path, payload: dict, key: str) -> bytes:
    value = payload.get(key)
    if not isinstance(value, str):
        raise LayoutError(f"{path}: field {key!r} is {type(value).__name__}, expected a base64 string")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as error:
        raise LayoutError(f"{path}: field {key!r} is not valid base64 ({error})") from None


def load_layout(path: Path | None = None) -> WindowLayout | None:
    """The saved layout, None when there is none yet; LayoutError when the file is unusable."""
    path = path or default_layout_path()
    if not path.exists():
        return None
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise LayoutError(f"{path}: cannot be read as a layout file ({type(error).__name__}: {error})") from None
    if not isinstance(payload, dict):
        raise LayoutError(f"{path}: holds a JSON {type(payload).__name__}, expected an object")
    version = payload.get("schema_version")
    if version != LAYOUT_SCHEMA_VERSION:
        raise LayoutError(f"{path}: schema_version is {version!r}; allowed: {LAYOUT_SCHEMA_VERSION}")
    options = payload.get("options", {})
    if not isinstance(options, dict):
        raise LayoutError(f"{path}: field 'options' is {type(options).__name__}, expected an object")
    workspaces = payload.get("workspaces")
    if workspaces is not None and not isinstance(workspaces, dict):
        raise LayoutError(f"{path}: field 'workspaces' is {type(workspaces).__name__}, expected an object")
    return WindowLayout(_decode(path, payload, "geometry"), _decode(path, payload, "dock_state"), options,
                        _window_rect(path, payload.get("window")), workspaces)


def _window_rect(path: Path, value: object) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise LayoutError(f"{path}: field 'window' is {type(value).__name__}, expected an object")
    for key in WINDOW_FIELDS:
        number = value.get(key)
        if not isinstance(number, int) or isinstance(number, bool) or (key in ("width", "height") and number <= 0):
            allowed = "a whole number above 0" if key in ("width", "height") else "a whole number"
            raise LayoutError(f"{path}: window.{key} is {number!r}; allowed: {allowed}")
    maximized = value.get("maximized", False)
    if not isinstance(maximized, bool):
        raise LayoutError(f"{path}: window.maximized is {maximized!r}; allowed: true or false")
    return {**{key: value[key] for key in WINDOW_FIELDS}, "maximized": maximized}


def save_layout(layout: WindowLayout, path: Path | None = None, keep_bad_copy: bool = False) -> Path:
    """Write the layout atomically (temp file, fsync, rename); a failed write leaves the old file.

    With `keep_bad_copy`, the file being replaced (one that failed to load) is first kept as
    `<name>.bad` so the user can still look at it.
    """
    path = path or default_layout_path()
    payload = {
        "schema_version": LAYOUT_SCHEMA_VERSION,
        "geometry": base64.b64encode(layout.geometry).decode("ascii"),
        "dock_state": base64.b64encode(layout.dock_state).decode("ascii"),
        "options": layout.options,
    }
    if layout.window is not None:
        payload["window"] = layout.window
    if layout.workspaces is not None:
        payload["workspaces"] = layout.workspaces
    text = json.dumps(payload, indent=1, sort_keys=True)
    return atomic_write(path, text, keep_previous_as=path.name + ".bad" if keep_bad_copy else None)
