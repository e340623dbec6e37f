"""Mesh levels of detail for the viewport, prepared off the GUI thread so a preset switch is quick.

Only the shipped default avatar has built LOD files (assets/build_lod.py); any other avatar is
drawn at full detail whatever the preset says, and `describe()` says so.
"""

from __future__ import annotations

import threading
from pathlib import Path

from render.avatar_visual import AvatarMesh
from studio.avatar.io import default_avatar_path, load_avatar
from studio.avatar.lod import lod_path
from studio.avatar.model import AvatarModel

Key = tuple[str, bool]  # (lod, keep_face)


class LodLibrary:
    """The avatar's LOD meshes by (lod, keep_face): `request` loads one in the background, `get` returns it when ready."""

    def __init__(self, base: AvatarModel, base_mesh: AvatarMesh | None = None) -> None:
        self.base = base
        self.has_lods = Path(base.source).resolve() == default_avatar_path().resolve()
        self._ready: dict[Key, tuple[AvatarModel, AvatarMesh]] = {}
        if base_mesh is not None:
            self._ready[("high", True)] = (base, base_mesh)
        self._loading: dict[Key, threading.Thread] = {}
        self._errors: dict[Key, str] = {}
        self._lock = threading.Lock()

    def key(self, lod: str, keep_face: bool) -> Key:
        """The mesh actually used for this request: full detail where there is no LOD file."""
        if lod == "high" or not self.has_lods:
            return ("high", True)
        return (lod, keep_face)

    def request(self, lod: str, keep_face: bool) -> Key:
        key = self.key(lod, keep_face)
        with self._lock:
            if key in self._ready or key in self._loading or key in self._errors:
                return key
            thread = threading.Thread(target=self._load, args=(key,), name=f"lod-{key[0]}", daemon=True)
            self._loading[key] = thread
        thread.start()
        return key

    def _load(self, key: Key) -> None:
        try:
            path = lod_path("default", *key)
            model = self.base if path is None else load_avatar(path)
            prepared = (model, AvatarMesh(model))
        except Exception as error:  # noqa: BLE001 - a missing or broken LOD file leaves full detail in use
            with self._lock:
                self._errors[key] = f"{type(error).__name__}: {error}"
                self._loading.pop(key, None)
            return
        with self._lock:
            self._ready[key] = prepared
            self._loading.pop(key, None)

    def get(self, key: Key) -> tuple[AvatarModel, AvatarMesh] | None:
        with self._lock:
            return self._ready.get(key)

    def error(self, key: Key) -> str | None:
        with self._lock:
            return self._errors.get(key)

    def wait(self, key: Key, timeout_s: float | None = None) -> bool:
        """Block until this key is loaded (or failed); True when it is ready. For tests and benches."""
        with self._lock:
            thread = self._loading.get(key)
        if thread is not None:
            thread.join(timeout_s)
        return self.get(key) is not None
