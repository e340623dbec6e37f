"""Applies a preset to the running studio: one call switches every module level without stopping anything.

The engine takes its new face model, rates, body and hand levels between two hops (the sound
keeps playing); the viewport switches cloth springs at once and the mesh LOD as soon as it is
loaded (`preload` loads the built-in presets' meshes in the background so that is immediate);
the presentation timer runs at the preset's fps, never faster; the latency dock gets its target.
"""

from __future__ import annotations

import threading

from psygnal import Signal

from studio.animation import IdleAnimator
from studio.presets import Preset, PresetError, preset_by_name

BUILT_IN_PRESETS = ("default", "medical", "education", "performance")


class PresetController:
    """The window's current preset; `apply` switches it live and `changed` fires with the new preset."""

    changed = Signal(object)  # (Preset)

    def __init__(self, window) -> None:
        self.window = window
        self.preset: Preset | None = None
        self._preloader: threading.Thread | None = None

    def apply(self, preset: Preset) -> None:
        window = self.window
        plan = preset.plan
        window.engine.configure(plan=plan)
        window.viewport.apply_plan(plan)
        window.idle = IdleAnimator(style=window.idle.style, hands_mode=plan.hands_mode)
        window.latency_model.set_target(preset.render.latency_target_ms)
        window.set_present_fps(preset.render.fps)
        self.preset = preset
        self.changed.emit(preset)

    def preload(self, names: tuple[str, ...] = BUILT_IN_PRESETS) -> threading.Thread:
        """Load these presets' mesh LODs one after another on a background thread (returned, started)."""
        lods = self.window.viewport.lods
        plans = []
        for name in names:
            try:
                plans.append(preset_by_name(name).plan)
            except PresetError:
                continue

        def load() -> None:
            for plan in plans:
                lods.wait(lods.request(plan.lod, plan.keep_face_detail))

        self._preloader = threading.Thread(target=load, name="lod-preload", daemon=True)
        self._preloader.start()
        return self._preloader
