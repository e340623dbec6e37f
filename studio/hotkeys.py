"""Operator hotkeys: which key fires which action, with no key bound twice.

Actions are the persona's named expressions plus the fixed operator actions (neutral, next cue,
mute, pause/resume). Keys are written as Qt spells them ("1", "F5", "Ctrl+1", "Space").
"""

from __future__ import annotations

import re

from psygnal import Signal

from studio.presets import PresetError

OPERATOR_ACTIONS: dict[str, str] = {"neutral": "0", "next cue": "Space", "mute": "M", "pause/resume": "P"}
_MODIFIERS = ("Ctrl", "Alt", "Shift", "Meta")
_KEY = re.compile(r"^([A-Z0-9]|F([1-9]|1[0-2])|Space|Return|Tab)$")


def normalise_key(key: str) -> str:
    """'ctrl+1' → 'Ctrl+1'; PresetError for anything that is not a single key with optional modifiers."""
    parts = [p.strip() for p in str(key).split("+")] if key else []
    if not parts or not all(parts):
        raise PresetError(f"hotkey {key!r} is not a key; use e.g. 1, F5, Ctrl+1 or Space")
    *mods, last = parts
    mods = [m.capitalize() for m in mods]
    last = last.upper() if len(last) == 1 or re.fullmatch(r"[fF]\d+", last) else last.capitalize()
    if any(m not in _MODIFIERS for m in mods) or not _KEY.match(last):
        raise PresetError(f"hotkey {key!r} is not allowed; use a letter, digit, F1..F12, Space, Return or Tab, "
                          f"optionally with {'/'.join(_MODIFIERS)}")
    ordered = [m for m in _MODIFIERS if m in mods]
    return "+".join([*ordered, last])


class HotkeyMap:
    """Action → key; `changed()` after every bind/unbind. `reserved` keys belong to the window's menus.

    Bindings given at construction that cannot be had (a key the window uses, or one bound twice) leave
    the action without a key and say why in `refused`, so a persona saved before the window took a key
    still opens; `bind` and `set_bindings` refuse such keys outright.
    """

    changed = Signal()

    def __init__(self, bindings: dict[str, str] | None = None, reserved: dict[str, str] | None = None) -> None:
        self.reserved = {normalise_key(k): what for k, what in (reserved or {}).items()}
        self._keys: dict[str, str] = {}
        self.refused: dict[str, str] = {}
        for action, key in {**OPERATOR_ACTIONS, **(bindings or {})}.items():
            try:
                self.bind(action, key, notify=False)
            except PresetError as error:
                self.refused[action] = str(error)

    def bindings(self) -> dict[str, str]:
        return dict(self._keys)

    def expression_bindings(self) -> dict[str, str]:
        """What a persona stores: the expression actions only."""
        return {a: k for a, k in self._keys.items() if a not in OPERATOR_ACTIONS}

    def key_for(self, action: str) -> str | None:
        return self._keys.get(action)

    def action_for(self, key: str) -> str | None:
        key = normalise_key(key)
        return next((a for a, k in self._keys.items() if k == key), None)

    def bind(self, action: str, key: str, notify: bool = True) -> str:
        key = normalise_key(key)
        if key in self.reserved:
            raise PresetError(f"hotkey {key} is taken by the window ({self.reserved[key]}); choose another")
        holder = self.action_for(key)
        if holder is not None and holder != action:
            raise PresetError(f"hotkey {key} is already bound to {holder!r}; unbind it first or choose another")
        self._keys[action] = key
        if notify:
            self.changed.emit()
        return key

    def set_bindings(self, bindings: dict[str, str]) -> None:
        """Replace the expression bindings (operator actions keep theirs); all or nothing."""
        candidate = HotkeyMap(bindings, self.reserved)
        if candidate.refused:
            raise PresetError(next(iter(candidate.refused.values())))
        for action, key in self._keys.items():
            if action in OPERATOR_ACTIONS and key != candidate._keys.get(action):
                candidate.bind(action, key, notify=False)
        self._keys = candidate._keys
        self.changed.emit()

    def unbind(self, action: str) -> None:
        if self._keys.pop(action, None) is not None:
            self.changed.emit()
