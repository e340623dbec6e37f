"""Writing the user's files so that a failure never truncates or half-writes them."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO


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
def atomic_writer(path: str | os.PathLike, encoding: str = "utf-8") -> Iterator[TextIO]:
    """A text file written piece by piece that appears at `path` only when complete (fsync, rename).

    For output too large to build in memory first (a CSV of hours); on any error the temp file
    is removed and an existing file at `path` is untouched.
    """
    path = Path(path)
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding=encoding, newline="") as temp:
            yield temp
            temp.flush()
            os.fsync(temp.fileno())
        os.chmod(temp_name, 0o644)
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
