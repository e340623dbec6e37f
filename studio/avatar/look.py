"""What is drawn: an avatar at a mesh level of detail, in a persona's colours and body shape.

`drawn_model` is the one place that builds it. The viewport (at the preset's LOD, through
`render.lod.LodLibrary`), the clean output window, video exports and the identity check all draw
what it returns, so no view can show the persona's look on one mesh and the bare avatar on another.
The body shape is baked into the returned model's rest mesh (`v_template`), so its joints, framing,
part-ID renders and exported skeleton follow the shape without anyone passing betas along.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from studio.avatar.appearance import with_colors
from studio.avatar.model import AvatarModel

Rgb = tuple[float, float, float]


@dataclasses.dataclass(frozen=True)
class Look:
    """A persona's look on an avatar: colours by part (skin, shirt, ...) and body-shape coefficients."""

    colors: tuple[tuple[str, Rgb], ...] = ()
    betas: tuple[float, ...] = ()

    @classmethod
    def of(cls, colors: Mapping[str, Sequence[float]] | None = None, betas: Sequence[float] | None = None) -> Look:
        """A look from a persona's `colors` mapping and `betas` list (trailing zero betas change nothing)."""
        shape = [float(b) for b in (betas or ())]
        while shape and shape[-1] == 0.0:
            shape.pop()
        tints = tuple(sorted((part, tuple(float(c) for c in rgb)) for part, rgb in (colors or {}).items()))
        return cls(colors=tints, betas=tuple(shape))

    @classmethod
    def of_persona(cls, persona) -> Look:
        """The look of a Persona (or anything with `colors` and `betas`)."""
        return cls.of(getattr(persona, "colors", None), getattr(persona, "betas", None))


BARE = Look()  # the avatar's own colours and shape


def with_betas(model: AvatarModel, betas: Sequence[float] | np.ndarray | None) -> AvatarModel:
    """A copy of the avatar whose rest mesh has this body shape (SMPL-X: template + shapedirs @ betas)."""
    if betas is None or not model.num_betas:
        return model
    given = np.asarray(betas, np.float64).ravel()[: model.num_betas]
    if not given.any():
        return model
    b = np.zeros(model.num_betas)
    b[: given.size] = given
    rest = np.asarray(model.v_template, np.float64) + np.asarray(model.shape_dirs, np.float64) @ b
    return dataclasses.replace(model, v_template=rest.astype(np.float32))


def dress(model: AvatarModel, look: Look) -> AvatarModel:
    """The avatar (at whatever level of detail) in the look's colours and body shape."""
    return with_betas(with_colors(model, dict(look.colors)), look.betas)


def has_levels(base: AvatarModel) -> bool:
    """Whether this avatar has levels of detail: the shipped default avatar (built files) and imported glTF/VRM
    avatars (decimated on first use and cached, `studio.avatar.lod.cached_level`)."""
    from studio.avatar.imported import is_gltf_path
    from studio.avatar.io import default_avatar_path

    return is_gltf_path(base.source) or Path(base.source).resolve() == default_avatar_path().resolve()


def level_of_detail(base: AvatarModel, lod: str, keep_face: bool) -> AvatarModel:
    """The avatar's mesh at this level (the default avatar's built LOD file, an imported avatar's cached
    decimation), or the avatar itself at `high` or where it has no levels."""
    from studio.avatar.imported import is_gltf_path
    from studio.avatar.io import load_avatar
    from studio.avatar.lod import cached_level, lod_path

    path = lod_path("default", lod, keep_face)
    if path is None or not has_levels(base):
        return base
    if is_gltf_path(base.source):
        return cached_level(base, lod, keep_face)
    return load_avatar(path)


def drawn_model(base: AvatarModel, look: Look = BARE, lod: str = "high", keep_face: bool = True,
                level: AvatarModel | None = None) -> AvatarModel:
    """THE model drawn for (avatar, look, LOD): the level of detail of `base`, dressed in `look`.

    `level` passes an already loaded undressed level (a cache of `level_of_detail(base, lod, keep_face)`).
    """
    return dress(level if level is not None else level_of_detail(base, lod, keep_face), look)


def persona_model(persona, base: AvatarModel | None = None) -> AvatarModel:
    """The full-detail avatar a persona names (`default` or a file), dressed in its look.

    `base` stands in for the default avatar when given (the studio's already loaded one).
    """
    from studio.avatar.io import default_avatar_path, load_avatar

    name = getattr(persona, "avatar", "default") or "default"
    if name == "default":
        avatar = base if base is not None else load_avatar(default_avatar_path())
    else:
        avatar = load_avatar(name)
    return drawn_model(avatar, Look.of_persona(persona))
