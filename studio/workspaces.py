"""Workspaces: one arrangement of the studio's panels per task, as Blender and DaVinci Resolve have them.

*Operate* drives a live avatar, *Design* tunes a persona, *Record* records and plays takes; each shows
the panels its task needs around the viewport, and each remembers how the user left it. The window
makes and applies an arrangement (an opaque blob: Qt's saved dock state); this model only keeps one per
workspace, knows which workspace is current, and turns both into JSON for the layout file.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from psygnal import Signal

AREAS = ("left", "right", "bottom")


class WorkspaceError(ValueError):
    """A workspace name or saved workspace data that cannot be used; the message says what is allowed."""


@dataclass(frozen=True)
class DockGroup:
    """Panels tabbed together in one dock area (the first in front), `size` pixels wide (left/right) or high (bottom)."""

    area: str
    docks: tuple[str, ...]
    size: int

    def __post_init__(self) -> None:
        if self.area not in AREAS:
            raise WorkspaceError(f"dock area {self.area!r}; allowed: {', '.join(AREAS)}")


@dataclass(frozen=True)
class Workspace:
    name: str
    title: str
    shortcut: str
    purpose: str
    groups: tuple[DockGroup, ...]

    @property
    def docks(self) -> tuple[str, ...]:
        """Object names of the panels shown when the workspace is laid out afresh."""
        return tuple(name for group in self.groups for name in group.docks)


WORKSPACES: tuple[Workspace, ...] = (
    Workspace("operate", "Operate", "Ctrl+1", "Drive the avatar live: operator controls, latency and drift",
              (DockGroup("right", ("operatorDock", "outputsDock"), 380), DockGroup("bottom", ("latencyDock", "driftDock"), 240))),
    Workspace("design", "Design", "Ctrl+2", "Tune a persona: look, expressions, preset, and the weights they give",
              (DockGroup("left", ("personaDock", "expressionEditorDock", "presetDock"), 540),
               DockGroup("right", ("inspectorDock",), 340))),
    Workspace("record", "Record", "Ctrl+3", "Record takes, play them back on the timeline, export them",
              (DockGroup("right", ("takesDock",), 460),)),
)


class Workspaces:
    """The current workspace and the arrangement each one was left in; `switched(name)` after a change."""

    switched = Signal(str)

    def __init__(self, workspaces: tuple[Workspace, ...] = WORKSPACES) -> None:
        self.workspaces = {workspace.name: workspace for workspace in workspaces}
        self.current = workspaces[0].name
        self._arrangements: dict[str, bytes] = {}

    def names(self) -> tuple[str, ...]:
        return tuple(self.workspaces)

    def get(self, name: str) -> Workspace:
        try:
            return self.workspaces[name]
        except KeyError:
            raise WorkspaceError(f"no workspace {name!r}; allowed: {', '.join(self.workspaces)}") from None

    def arrangement(self, name: str) -> bytes | None:
        """How the user left that workspace; None: lay it out afresh."""
        return self._arrangements.get(self.get(name).name)

    def keep(self, name: str, arrangement: bytes) -> None:
        self._arrangements[self.get(name).name] = bytes(arrangement)

    def switch(self, name: str, current_arrangement: bytes) -> bytes | None:
        """Keep the current workspace's arrangement, make `name` current; returns how it was left (or None)."""
        target = self.get(name).name
        self.keep(self.current, current_arrangement)
        self.current = target
        self.switched.emit(target)
        return self._arrangements.get(target)

    def forget(self, name: str) -> None:
        """Back to the workspace's own layout the next time it is laid out."""
        self._arrangements.pop(self.get(name).name, None)

    def to_json(self) -> dict:
        return {"current": self.current,
                "arrangements": {n: base64.b64encode(a).decode("ascii") for n, a in sorted(self._arrangements.items())}}

    def load_json(self, payload: object, where: str) -> None:
        """Take the current workspace and arrangements from `to_json()` output; all or nothing.

        `where` names the file for the message; arrangements of workspaces this version does not
        know are dropped (a newer version may have more).
        """
        if not isinstance(payload, dict):
            raise WorkspaceError(f"{where}: field 'workspaces' is {type(payload).__name__}, expected an object")
        current = payload.get("current", self.current)
        if current not in self.workspaces:
            raise WorkspaceError(f"{where}: workspaces.current is {current!r}; allowed: {', '.join(self.workspaces)}")
        saved = payload.get("arrangements", {})
        if not isinstance(saved, dict):
            raise WorkspaceError(f"{where}: workspaces.arrangements is {type(saved).__name__}, expected an object")
        arrangements = {}
        for name, text in saved.items():
            if name not in self.workspaces:
                continue
            try:
                arrangements[name] = base64.b64decode(str(text).encode("ascii"), validate=True)
            except (binascii.Error, UnicodeEncodeError) as error:
                raise WorkspaceError(f"{where}: workspaces.arrangements.{name} is not valid base64 ({error})") from None
        self.current = current
        self._arrangements = arrangements
