"""The avatars the user opened lately (File → Open Recent Avatar), most recent first, kept in the user's config.

A small JSON file (`recent-avatars.json`): `{"schema_version": 1, "avatars": [absolute paths]}`. A file that
cannot be read is never overwritten in place: the next change keeps it beside the new one as
`recent-avatars.json.bad`, so nothing the user had is lost silently.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from studio.fileio import atomic_write
from studio.paths import user_config_dir

RECENT_AVATARS_FILE = "recent-avatars.json"
MAX_RECENT_AVATARS = 10
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RecentAvatar:
    """One remembered avatar file and whether it is still there."""

    path: Path
    exists: bool

    @property
    def name(self) -> str:
        return self.path.name


class RecentAvatars:
    """The recent-avatars list: `add` after an avatar opened, `entries` for the menu, `remove_missing` to tidy it."""

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path) if path is not None else user_config_dir() / RECENT_AVATARS_FILE
        self.problem: str | None = None  # why the stored list could not be read (shown to the user), else None

    def _read(self) -> list[str] | None:
        """The stored paths; None (and `problem` set) when the file is unreadable or not a list of paths."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as error:
            self.problem = f"{self.path}: cannot be read ({error}); it will be kept as {self.path.name}.bad"
            return None
        avatars = data.get("avatars") if isinstance(data, dict) else None
        if not isinstance(avatars, list) or not all(isinstance(p, str) for p in avatars):
            self.problem = (f"{self.path}: field 'avatars' must be a list of file paths; "
                            f"it will be kept as {self.path.name}.bad")
            return None
        self.problem = None
        return avatars[:MAX_RECENT_AVATARS]

    def _write(self, paths: list[str], readable: bool) -> None:
        text = json.dumps({"schema_version": SCHEMA_VERSION, "avatars": paths[:MAX_RECENT_AVATARS]}, indent=1) + "\n"
        atomic_write(self.path, text, keep_previous_as=None if readable else f"{self.path.name}.bad")
        self.problem = None

    def entries(self) -> list[RecentAvatar]:
        """The remembered avatars, most recent first, each marked whether its file still exists."""
        return [RecentAvatar(Path(p), Path(p).is_file()) for p in self._read() or []]

    def add(self, avatar: str | os.PathLike) -> None:
        """Put this avatar file first (once; the oldest beyond ten drop off)."""
        path = str(Path(avatar).expanduser().resolve())
        stored = self._read()
        paths = [path, *(p for p in stored or [] if p != path)]
        self._write(paths, stored is not None)

    def remove_missing(self) -> int:
        """Forget the avatars whose files are gone; returns how many."""
        stored = self._read()
        if stored is None:
            return 0
        kept = [p for p in stored if Path(p).is_file()]
        if len(kept) != len(stored):
            self._write(kept, True)
        return len(stored) - len(kept)

    def clear(self) -> None:
        stored = self._read()
        self._write([], stored is not None)
