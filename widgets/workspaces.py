"""The workspace tab bar and menus, and the dock arrangement each workspace gets (studio.workspaces is the model).

The viewport draws into its own native window, which the X server puts above every sibling widget: a dock
that Qt squeezes over the central widget is hidden behind the 3D view, not beside it. So the arrangement
must always fit. Each workspace lays out at most one column on each side (full height) and one row under
the viewport, which fit the smallest window; when a user's arrangement does not fit the window any more
(after a resize, or a panel opened from View → Panels), the panels of one area are tabbed into another
until it fits again, and untabbed when the window is large enough again (unless the user has moved
panels since).
"""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QObject, Qt, QTimer
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMainWindow, QMenu, QTabBar, QToolBar

from studio.workspaces import Workspaces

DOCK_AREAS = {
    "left": Qt.DockWidgetArea.LeftDockWidgetArea,
    "right": Qt.DockWidgetArea.RightDockWidgetArea,
    "bottom": Qt.DockWidgetArea.BottomDockWidgetArea,
}
MAX_FOLDS = 4  # left+right into one column, then the bottom row into it: two are enough; a few more are harmless


class WorkspaceSwitcher(QObject):
    """Tabs in a toolbar, View → Workspace (with shortcuts) and View → Panels; switches and restores arrangements.

    Built in two steps: the actions exist before the panels (so hotkeys cannot take their keys), the docks are
    handed over with `install` once they all exist.
    """

    def __init__(self, window: QMainWindow, view_menu: QMenu, model: Workspaces | None = None) -> None:
        super().__init__(window)
        self.window = window
        self.model = model or Workspaces()
        self.docks: dict[str, QDockWidget] = {}
        self.tabs = QTabBar()
        self.tabs.setObjectName("workspaceTabs")
        self.tabs.setDrawBase(False)
        self.tabs.setExpanding(False)
        self.tabs.setUsesScrollButtons(False)  # three short names: always whole, never behind scroll arrows
        self.toolbar = QToolBar("Workspaces", window)
        self.toolbar.setObjectName("workspaceBar")
        self.toolbar.setMovable(False)
        self.toolbar.setFloatable(False)
        self.toolbar.toggleViewAction().setEnabled(False)  # the only way to see the workspaces at a glance
        self.toolbar.addWidget(self.tabs)
        window.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.toolbar)

        workspace_menu = view_menu.addMenu("&Workspace")
        group = QActionGroup(self)
        group.setExclusive(True)
        self.actions: dict[str, QAction] = {}
        for workspace in self.model.workspaces.values():
            index = self.tabs.addTab(workspace.title)
            self.tabs.setTabToolTip(index, f"{workspace.purpose} ({workspace.shortcut})")
            action = QAction(workspace.title, window, checkable=True)
            action.setShortcut(QKeySequence(workspace.shortcut))
            action.setStatusTip(workspace.purpose)
            action.triggered.connect(lambda _checked=False, name=workspace.name: self.switch(name))
            group.addAction(action)
            workspace_menu.addAction(action)
            self.actions[workspace.name] = action
        self.panels_menu = view_menu.addMenu("&Panels")
        self.tabs.currentChanged.connect(lambda index: self.switch(self.model.names()[index]))
        self._unfolded: tuple[bytes, tuple[int, int], tuple] | None = None  # (arrangement, its minimum size, folded structure)
        self._fit_timer = QTimer(self, singleShot=True, interval=0)
        self._fit_timer.timeout.connect(self.fit)
        self._show_current()

    def install(self, docks: list[QDockWidget]) -> None:
        """Take the window's docks (View → Panels lists them in this order); side columns get the full height."""
        self.docks = {dock.objectName(): dock for dock in docks}
        for dock in docks:
            self.panels_menu.addAction(dock.toggleViewAction())
            dock.visibilityChanged.connect(self.schedule_fit)
            dock.dockLocationChanged.connect(self.schedule_fit)
        for corner, area in ((Qt.Corner.TopLeftCorner, "left"), (Qt.Corner.BottomLeftCorner, "left"),
                             (Qt.Corner.TopRightCorner, "right"), (Qt.Corner.BottomRightCorner, "right")):
            self.window.setCorner(corner, DOCK_AREAS[area])

    @property
    def current(self) -> str:
        return self.model.current

    def switch(self, name: str) -> None:
        """Keep how the current workspace looks now, then show `name` as the user left it (or afresh)."""
        if name == self.model.current:
            self._show_current()
            return
        arrangement = self.model.switch(name, self.arrangement())
        self.show_arrangement(arrangement)

    def arrangement(self) -> bytes:
        """How the user left the current workspace: before any panels were tabbed together to fit the window."""
        if self._unfolded is not None and self._unfolded[2] == self._structure():
            return self._unfolded[0]
        return bytes(self.window.saveState().data())

    def show_arrangement(self, arrangement: bytes | None) -> bool:
        """Apply a kept arrangement of the current workspace; none, or one Qt refuses: lay it out afresh.

        Returns whether the kept arrangement was applied.
        """
        self._unfolded = None
        applied = arrangement is not None and self.window.restoreState(QByteArray(arrangement))
        if not applied:
            self.lay_out()
        self._hide_stale_tab_bars()
        self._show_current()
        self.schedule_fit()
        return applied

    def reset(self) -> None:
        """The current workspace's own layout again: its panels shown, docked and tabbed as shipped."""
        self.model.forget(self.model.current)
        self._unfolded = None
        self.lay_out()
        self.schedule_fit()

    def lay_out(self) -> None:
        workspace = self.model.get(self.model.current)
        for name, dock in self.docks.items():
            if name not in workspace.docks:
                dock.hide()
        for group in workspace.groups:
            present = [self.docks[name] for name in group.docks if name in self.docks]
            if not present:
                continue
            front = present[0]
            front.setFloating(False)
            self.window.addDockWidget(DOCK_AREAS[group.area], front)
            front.show()
            for dock in present[1:]:
                dock.setFloating(False)
                self.window.tabifyDockWidget(front, dock)
                dock.show()
            front.raise_()
            orientation = Qt.Orientation.Vertical if group.area == "bottom" else Qt.Orientation.Horizontal
            self.window.resizeDocks([front], [group.size], orientation)

    def _hide_stale_tab_bars(self) -> None:
        """Hide the tab bars of panel groups that are no longer shown.

        restoreState hides a workspace's panels but leaves their tab bar on screen (Qt 6.11), drawn over the
        new workspace's own: a bar whose every tab names a hidden panel belongs to no group shown now.
        """
        titles = {dock.windowTitle(): dock for dock in self.docks.values()}
        for bar in self.window.findChildren(QTabBar):
            if bar is self.tabs or bar.parent() is not self.window or not bar.isVisible():
                continue
            shown = [titles[text].isVisible() for text in map(bar.tabText, range(bar.count())) if text in titles]
            if shown and not any(shown):
                bar.hide()

    def schedule_fit(self, *_args) -> None:
        self._fit_timer.start()

    def fit(self) -> bool:
        """Tab panels together until the docks and the viewport's minimum fit the window; True if it fits.

        Panels tabbed together here are put back as they were once the window is large enough for that.
        """
        if self._unfolded is not None:
            arrangement, (width, height), folded = self._unfolded
            if folded != self._structure():
                self._unfolded = None  # the user rearranged the panels since: theirs now
            elif width <= self.window.width() and height <= self.window.height():
                self._unfolded = None
                self.window.restoreState(QByteArray(arrangement))
        for _ in range(MAX_FOLDS):
            need = self.window.layout().minimumSize()
            too_wide, too_high = need.width() > self.window.width(), need.height() > self.window.height()
            if not (too_wide or too_high):
                return True
            unfolded = self._unfolded or (bytes(self.window.saveState().data()), need.toTuple(), ())
            if not self._fold(too_wide):
                return False
            self._unfolded = (*unfolded[:2], self._structure())
        return False

    def _structure(self) -> tuple:
        """Where each panel is (area, hidden, floating, tabbed with): what the user sees, without the sizes."""
        return tuple(sorted(
            (name, self.window.dockWidgetArea(dock).value, dock.isHidden(), dock.isFloating(),
             tuple(sorted(other.objectName() for other in self.window.tabifiedDockWidgets(dock))))
            for name, dock in self.docks.items()))

    def _docked(self) -> dict[str, list[QDockWidget]]:
        docked: dict[str, list[QDockWidget]] = {area: [] for area in DOCK_AREAS}
        for dock in self.docks.values():
            if dock.isVisible() and not dock.isFloating():
                for area, qt_area in DOCK_AREAS.items():
                    if self.window.dockWidgetArea(dock) == qt_area:
                        docked[area].append(dock)
        return docked

    def _fold(self, too_wide: bool) -> bool:
        """One step: the two side columns into the wider one, else the bottom row into a side column."""
        docked = self._docked()
        left, right, bottom = docked["left"], docked["right"], docked["bottom"]
        if too_wide and left and right:
            keep, move = (left, right) if _column_width(left) >= _column_width(right) else (right, left)
            self._tab_into(keep, move)
            return True
        if bottom and (left or right):
            self._tab_into(right or left, bottom)
            return True
        if bottom and not too_wide:  # no side column: the row becomes one
            for dock in bottom:
                self.window.addDockWidget(DOCK_AREAS["right"], dock)
            self._tab_into(bottom[:1], bottom[1:])
            return True
        return False

    def _tab_into(self, keep: list[QDockWidget], move: list[QDockWidget]) -> None:
        front = next((dock for dock in keep if not dock.visibleRegion().isEmpty()), keep[0])
        for dock in move:
            self.window.tabifyDockWidget(front, dock)
        front.raise_()

    def _show_current(self) -> None:
        index = self.model.names().index(self.model.current)
        if self.tabs.currentIndex() != index:
            self.tabs.blockSignals(True)
            self.tabs.setCurrentIndex(index)
            self.tabs.blockSignals(False)
        self.actions[self.model.current].setChecked(True)


def _column_width(docks: list[QDockWidget]) -> int:
    return max(dock.minimumSizeHint().width() for dock in docks)
