"""File → Open Recent Avatar: the avatars of `studio.recent.RecentAvatars`, listed afresh each time the menu opens
(files come and go while the studio runs); a file that is gone is shown disabled, marked missing."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QMenu

from studio.recent import RecentAvatars


class RecentAvatarsMenu:
    """The submenu; `open_avatar(path)` is the window's own File → Open Avatar path (it adds to the list)."""

    def __init__(self, parent: QMenu, recent: RecentAvatars, open_avatar: Callable[[str], bool]) -> None:
        self.recent = recent
        self._open_avatar = open_avatar
        self.menu = parent.addMenu("Open &Recent Avatar")
        self.menu.setToolTipsVisible(True)
        self.menu.aboutToShow.connect(self.fill)

    def fill(self) -> None:
        self.menu.clear()
        entries = self.recent.entries()
        if self.recent.problem:
            self.menu.addAction(self.recent.problem).setEnabled(False)
        if not entries:
            self.menu.addAction("No recent avatars").setEnabled(False)
        for number, entry in enumerate(entries, start=1):
            label = f"&{number}  {entry.name}" if number < 10 else f"1&0  {entry.name}"
            action = self.menu.addAction(label if entry.exists else f"{label}  (missing)")
            action.setEnabled(entry.exists)
            action.setToolTip(str(entry.path) if entry.exists else f"{entry.path} no longer exists")
            action.setStatusTip(action.toolTip())
            action.triggered.connect(lambda _checked=False, path=str(entry.path): self._open_avatar(path))
        if entries:
            self.menu.addSeparator()
            missing = sum(not entry.exists for entry in entries)
            remove = self.menu.addAction("Remove &Missing", self.recent.remove_missing)
            remove.setEnabled(missing > 0)
            self.menu.addAction("&Clear List", self.recent.clear)
