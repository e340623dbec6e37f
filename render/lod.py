"""The meshes the viewport draws: the avatar at each level of detail, in the current look, built off the GUI
thread so a preset switch or a colour change never stalls a frame.

Each one is `studio.avatar.look.drawn_model` (the avatar's LOD file, the persona's colours and body shape)
with its AvatarMesh. A new look rebuilds the levels in use; meshes of an older look are dropped (a build that
finishes after the look changed is thrown away), so only the current look's few meshes are kept. The shipped
default avatar has built LOD files (assets/build_lod.py); an imported glTF/VRM avatar is decimated here, in the
background, the first time a level is asked for, and cached (`studio.avatar.lod.cached_level`); any other avatar
is drawn at full detail whatever the preset says.
"""

from __future__ import annotations

import threading

from render.avatar_visual import AvatarMesh
from studio.avatar.look import BARE, Look, drawn_model, has_levels, level_of_detail
from studio.avatar.model import AvatarModel

Key = tuple[str, bool]  # (lod, keep_face)
Drawn = tuple[AvatarModel, AvatarMesh]
FULL_DETAIL: Key = ("high", True)


def build_drawn(base: AvatarModel, look: Look = BARE, lod: str = "high", keep_face: bool = True,
                level: AvatarModel | None = None) -> Drawn:
    """The drawn model and its mesh, ready for `AvatarView.set_avatar` / `set_lod`."""
    model = drawn_model(base, look, lod, keep_face, level)
    return model, AvatarMesh(model)


class LodLibrary:
    """One avatar's drawn meshes by (lod, keep_face) in the current look: `request` builds one in the
    background, `get` returns it when ready, `set_look` switches every later build to a new look."""

    def __init__(self, base: AvatarModel, look: Look = BARE, full_detail: Drawn | None = None) -> None:
        self.base = base
        self.look = look
        self.has_lods = has_levels(base)
        self._levels: dict[Key, AvatarModel] = {FULL_DETAIL: base}  # undressed, read from disk once
        self._ready: dict[Key, Drawn] = {}
        if full_detail is not None:
            self._ready[FULL_DETAIL] = full_detail
        self._loading: dict[tuple[Look, Key], threading.Thread] = {}
        self._errors: dict[Key, str] = {}
        self._lock = threading.Lock()

    def key(self, lod: str, keep_face: bool) -> Key:
        """The mesh actually used for this request: full detail where the avatar has no levels."""
        if lod == "high" or not self.has_lods:
            return FULL_DETAIL
        return (lod, keep_face)

    def set_look(self, look: Look) -> None:
        """Build from now on in `look`; the meshes of the old look are forgotten (the caller keeps the drawn one)."""
        with self._lock:
            if look == self.look:
                return
            self.look = look
            self._ready.clear()

    def request(self, lod: str, keep_face: bool) -> Key:
        key = self.key(lod, keep_face)
        with self._lock:
            look = self.look
            if key in self._ready or (look, key) in self._loading or key in self._errors:
                return key
            thread = threading.Thread(target=self._build, args=(look, key), name=f"lod-{key[0]}", daemon=True)
            self._loading[(look, key)] = thread
        thread.start()
        return key

    def _build(self, look: Look, key: Key) -> None:
        try:
            with self._lock:
                level = self._levels.get(key)
            if level is None:
                level = level_of_detail(self.base, *key)
                with self._lock:
                    self._levels[key] = level
            with self._lock:
                if look != self.look:  # a slider moved on while this waited: the mesh would be thrown away
                    self._loading.pop((look, key), None)
                    return
            prepared = build_drawn(self.base, look, *key, level=level)
        except Exception as error:  # noqa: BLE001 - a missing LOD file or a failed decimation leaves full detail
            with self._lock:
                self._errors[key] = f"{type(error).__name__}: {error}"
                self._loading.pop((look, key), None)
            return
        with self._lock:
            if look == self.look:
                self._ready[key] = prepared
            self._loading.pop((look, key), None)

    def get(self, key: Key) -> Drawn | None:
        """The drawn model and mesh for this key in the current look, None until built."""
        with self._lock:
            return self._ready.get(key)

    def error(self, key: Key) -> str | None:
        with self._lock:
            return self._errors.get(key)

    def wait(self, key: Key, timeout_s: float | None = None) -> bool:
        """Block until this key is built in the current look (or failed); True when it is ready. For tests and benches."""
        with self._lock:
            thread = self._loading.get((self.look, key))
        if thread is not None:
            thread.join(timeout_s)
        return self.get(key) is not None
