"""Writing the user's files so that a failure never truncates or half-writes them."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from studio.paths import user_config_dir


def output_file_problem(path: str | os.PathLike) -> str | None:
    """Why a file cannot be written at `path` (None when it can): asked before the work, so that an hour's
    render or a 4-minute bench is not lost at the last step."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        return f"cannot write {path}: it is a folder; name a file inside it"
    if not folder.is_dir():
        return f"cannot write {path}: folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"cannot write {path}: folder {folder} is not writable"
    return None


def check_output_file(path: str | os.PathLike) -> None:
    """ValueError naming the file and why, when `output_file_problem` finds one."""
    problem = output_file_problem(path)
    if problem:
        raise ValueError(problem)


def atomic_write(path: str | os.PathLike, data: bytes | str, keep_previous_as: str | None = None) -> Path:
    """Write `data` to `path` via a temp file in the same folder, fsync, then rename over it.

    Readers see the old file or the new one, never a partial one. With `keep_previous_as`,
    an existing file is first renamed to that sibling name (e.g. a corrupt layout kept for
    inspection).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as temp:
            temp.write(payload)
            temp.flush()
            os.fsync(temp.fileno())
        os.chmod(temp_name, 0o644)
        if keep_previous_as and path.exists():
            os.replace(path, path.with_name(keep_previous_as))
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    return path


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike, encoding: str | None = "utf-8") -> Iterator[IO]:
    """A file written piece by piece that appears at `path` only when complete (fsync, rename).

    For output too large to build in memory first (a CSV of hours, a take's frames); on any error the
    temp file is removed and an existing file at `path` is untouched. `encoding=None` writes bytes.
    """
    path = Path(path)
    try:
        handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as error:  # name the user's file, not our temp file
        raise OSError(f"cannot write {path}: {error.strerror or error}") from error
    try:
        with (os.fdopen(handle, "wb") if encoding is None else os.fdopen(handle, "w", encoding=encoding, newline="")) as temp:
            yield temp
            temp.flush()
            os.fsync(temp.fileno())
        os.chmod(temp_name, 0o644)
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


RECENT_FOLDERS_FILE = "recent-folders.json"


def _recent_folders_path() -> Path:
    return user_config_dir() / RECENT_FOLDERS_FILE


def _recent_folders() -> dict[str, str] | None:
    """The remembered folders by purpose; None when the file is unreadable (it is then kept aside, not lost)."""
    path = _recent_folders_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else None


def remembered_folder(purpose: str, default: Path) -> Path:
    """The folder last used for `purpose` (e.g. "export") while it still exists, else `default` (created)."""
    folder = (_recent_folders() or {}).get(purpose)
    if folder and Path(folder).is_dir():
        return Path(folder)
    default.mkdir(parents=True, exist_ok=True)
    return default


def remember_folder(purpose: str, folder: str | os.PathLike) -> None:
    """Keep `folder` as the one to start in next time for `purpose` (a small JSON file in the config folder)."""
    known = _recent_folders()
    data = dict(known or {})
    data[purpose] = str(Path(folder).resolve())
    atomic_write(_recent_folders_path(), json.dumps(data, indent=1) + "\n",
                 keep_previous_as=None if known is not None else f"{RECENT_FOLDERS_FILE}.bad")
