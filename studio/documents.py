"""An edited persona or preset: the working copy, what is on disk, and change events.

Panels bind to a `Document`: they call `update()` with a field path and a value, and redraw on
`changed`. Every edit is validated as a whole before it replaces the working copy, so an invalid
value never becomes the running persona or preset; it raises PresetError with the field and why.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from psygnal import Signal
from pydantic import BaseModel, ValidationError

from studio.presets import PresetError, validation_problem

Item = TypeVar("Item", bound=BaseModel)


def _set_path(data: dict, path: str, value: Any) -> dict:
    """A copy of nested `data` with the dotted `path` set to `value`."""
    head, _, rest = path.partition(".")
    out = dict(data)
    if rest:
        inner = out.get(head)
        if not isinstance(inner, dict):
            raise PresetError(f"field {head!r} has no sub-field {rest!r}")
        out[head] = _set_path(inner, rest, value)
    else:
        out[head] = value
    return out


class Document(Generic[Item]):
    """One persona or preset being edited.

    `changed(item)` fires after every accepted edit, revert or load; `dirty_changed(bool)` when the
    unsaved-changes flag flips; `saved(item)` after a save. `item` is always a valid model.
    """

    changed = Signal(object)
    dirty_changed = Signal(bool)
    saved = Signal(object)

    def __init__(self, item: Item) -> None:
        self.kind = type(item)
        self._saved = item
        self._item = item

    @property
    def item(self) -> Item:
        return self._item

    @property
    def saved_item(self) -> Item:
        return self._saved

    @property
    def dirty(self) -> bool:
        return self._item != self._saved

    def _replace(self, item: Item) -> None:
        was_dirty = self.dirty
        self._item = item
        self.changed.emit(item)
        if self.dirty != was_dirty:
            self.dirty_changed.emit(self.dirty)

    def update(self, path: str, value: Any) -> Item:
        """Set one field (dotted path, e.g. 'voice.rate_wpm'); PresetError leaves the item as it was."""
        data = _set_path(self._item.model_dump(mode="python"), path, value)
        try:
            item = self.kind.model_validate(data)
        except ValidationError as error:
            raise PresetError(f"{self.kind.__name__.lower()} {self._item.name!r}: {validation_problem(error)}") from None
        if item != self._item:
            self._replace(item)
        return self._item

    def load(self, item: Item) -> None:
        """Start editing another (already validated) item; nothing unsaved is kept."""
        was_dirty = self.dirty
        self._saved = self._item = item
        self.changed.emit(item)
        if was_dirty:
            self.dirty_changed.emit(False)

    def revert(self) -> None:
        if self.dirty:
            self._replace(self._saved)

    def mark_saved(self, item: Item | None = None) -> None:
        """The working copy (or `item`) is now what is on disk."""
        was_dirty = self.dirty
        if item is not None and item != self._item:
            self._item = item
            self.changed.emit(item)
        self._saved = self._item
        self.saved.emit(self._item)
        if was_dirty:
            self.dirty_changed.emit(False)
