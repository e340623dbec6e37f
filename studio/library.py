"""The user's personas and presets as named files: list, create, duplicate, rename, delete, save.

Built-ins (shipped in presets/) are read-only: saving one writes the user's own copy, which then
takes precedence; renaming or deleting one is refused. Names become file names, so path
separators, characters Windows reserves, device names and duplicates are refused up front.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel

from studio.paths import presets_dir, user_data_dir
from studio.presets import Persona, Preset, PresetError, load_persona, load_preset, save_yaml

MAX_NAME_CHARS = 64
_RESERVED_CHARS = set('/\\:*?"<>|')
_WINDOWS_DEVICES = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(1, 10)), *(f"lpt{i}" for i in range(1, 10))}
_ALLOWED = re.compile(r"^[\w][\w .()+-]*$")

Item = TypeVar("Item", Persona, Preset)


def check_name(name: str, kind: str = "persona") -> str:
    """The name stripped, or PresetError saying what is wrong with it as a file name."""
    if not isinstance(name, str) or not name.strip():
        raise PresetError(f"{kind} name is empty; give it a name")
    name = name.strip()
    bad = sorted(_RESERVED_CHARS.intersection(name))
    if bad:
        raise PresetError(f"{kind} name {name!r} contains {' '.join(bad)}; path separators and "
                          f"the characters {''.join(sorted(_RESERVED_CHARS))} are not allowed")
    if len(name) > MAX_NAME_CHARS:
        raise PresetError(f"{kind} name {name[:20]!r}… is {len(name)} characters; allowed 1..{MAX_NAME_CHARS}")
    if name.split(".")[0].lower() in _WINDOWS_DEVICES:
        raise PresetError(f"{kind} name {name!r} is a reserved device name on Windows; choose another")
    if not _ALLOWED.match(name) or name.endswith((".", " ")):
        raise PresetError(f"{kind} name {name!r} is not allowed; use letters, digits, spaces and . _ - ( ) +, "
                          "starting with a letter or digit")
    return name


class Library(Generic[Item]):
    """Named files of one kind in the user folder, over the built-ins of the same kind."""

    def __init__(self, kind: type[Item], user_folder: Path | None = None, builtin_folder: Path | None = None) -> None:
        self.kind = kind
        self.label = kind.__name__.lower()
        sub = "personas" if kind is Persona else "presets"
        self.user_folder = Path(user_folder) if user_folder is not None else user_data_dir() / sub
        self.builtin_folder = Path(builtin_folder) if builtin_folder is not None else (
            presets_dir() / "personas" if kind is Persona else presets_dir())
        self._load = load_persona if kind is Persona else load_preset

    def names(self) -> list[str]:
        """Every name, user and built-in, sorted case-insensitively."""
        found = {p.stem for folder in (self.user_folder, self.builtin_folder) if folder.is_dir()
                 for p in folder.glob("*.yaml")}
        return sorted(found, key=str.lower)

    def is_builtin(self, name: str) -> bool:
        return (self.builtin_folder / f"{name}.yaml").is_file()

    def is_user(self, name: str) -> bool:
        return (self.user_folder / f"{name}.yaml").is_file()

    def path_of(self, name: str) -> Path:
        """The file that `load(name)` reads: the user's own, else the built-in."""
        user = self.user_folder / f"{name}.yaml"
        return user if user.is_file() else self.builtin_folder / f"{name}.yaml"

    def load(self, name: str) -> Item:
        path = self.path_of(check_name(name, self.label))
        if not path.is_file():
            raise PresetError(f"no {self.label} named {name!r}; available: {', '.join(self.names()) or '(none)'}")
        return self._load(path)

    def _check_new(self, name: str) -> str:
        name = check_name(name, self.label)
        taken = {n.lower() for n in self.names()}
        if name.lower() in taken:
            raise PresetError(f"a {self.label} named {name!r} already exists; choose another name")
        return name

    def save(self, item: Item) -> Path:
        """Write the user's copy atomically (a failed write leaves the previous file as it was)."""
        name = check_name(item.name, self.label)
        validated = self.kind.model_validate(item.model_dump())
        return _save(validated, self.user_folder / f"{name}.yaml")

    def create(self, name: str, template: Item | None = None) -> Item:
        """A new item of that name (from `template`, else the defaults), saved in the user folder."""
        name = self._check_new(name)
        item = self.kind(name=name) if template is None else template.model_copy(update={"name": name})
        self.save(item)
        return item

    def duplicate(self, source: str, new_name: str) -> Item:
        return self.create(new_name, self.load(source))

    def rename(self, old: str, new: str) -> Item:
        if not self.is_user(old):
            raise PresetError(f"{self.label} {old!r} is built in and cannot be renamed; duplicate it instead")
        if new.strip().lower() == old.lower() and new.strip() != old:
            new_name = check_name(new, self.label)
        else:
            new_name = self._check_new(new)
        item = self.load(old).model_copy(update={"name": new_name})
        self.save(item)
        if new_name != old:
            (self.user_folder / f"{old}.yaml").unlink()
        return item

    def delete(self, name: str) -> None:
        if not self.is_user(name):
            if self.is_builtin(name):
                raise PresetError(f"{self.label} {name!r} is built in and cannot be deleted")
            raise PresetError(f"no {self.label} named {name!r}")
        (self.user_folder / f"{name}.yaml").unlink()


def _save(item: BaseModel, path: Path) -> Path:
    save_yaml(item, path)
    return path
