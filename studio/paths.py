"""Where shipped assets and the user's own files live, in a checkout and in a bundle."""

from __future__ import annotations

import os
import sys
from pathlib import Path

APP_NAME = "avatar-studio"


def _asset_root() -> Path:
    bundled = getattr(sys, "_MEIPASS", None)
    if bundled:
        return Path(bundled) / "assets"
    return Path(__file__).resolve().parents[1] / "assets"


def asset_path(*parts: str) -> Path:
    """Path of a shipped asset (default avatar, models, demo audio)."""
    return _asset_root().joinpath(*parts)


def presets_dir() -> Path:
    """Built-in presets and personas shipped with the studio."""
    bundled = getattr(sys, "_MEIPASS", None)
    return (Path(bundled) if bundled else Path(__file__).resolve().parents[1]) / "presets"


def user_data_dir() -> Path:
    """The user's presets, personas and recordings (AVATAR_STUDIO_HOME overrides)."""
    override = os.environ.get("AVATAR_STUDIO_HOME")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def user_config_dir() -> Path:
    """Window layout and settings (AVATAR_STUDIO_HOME overrides)."""
    override = os.environ.get("AVATAR_STUDIO_HOME")
    if override:
        return Path(override) / "config"
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def user_cache_dir() -> Path:
    """What the studio can rebuild but keeps to start faster (decimated avatar levels); safe to delete
    (AVATAR_STUDIO_HOME overrides)."""
    override = os.environ.get("AVATAR_STUDIO_HOME")
    if override:
        return Path(override) / "cache"
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def recordings_dir() -> Path:
    return user_data_dir() / "recordings"
