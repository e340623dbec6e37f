"""What each module level costs on this machine, and which module to lower when a preset misses its target.

The table is measured here, on the engine itself: for each module and level, the default preset's plan
with only that module changed runs `seconds` of speech-like audio through `Engine.run_once`, one 10 ms
hop per pass as live audio arrives, and the CPU milliseconds per hop are kept. Render-side levels
(mesh LOD, cloth springs) cost GPU/raster time that the engine loop does not see; for those the table
holds what the engine loop measured and the latency dock's render stage shows the rest.

Measured once and cached as JSON in the user folder (`module_costs.json`, keyed by host), since a
full table takes a few seconds of CPU.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from studio.fileio import atomic_write
from studio.paths import user_data_dir
from studio.precision import LEVELS, plan_for
from studio.presets import Modules, Preset
from studio.telemetry import SOUND_TO_SCREEN, SOUND_TO_SCREEN_PERCENTILE

MODULES: tuple[str, ...] = ("face", "hands", "body", "cloth")
CostTable = dict[str, dict[str, float]]  # module -> level -> ms per 10 ms hop


def cost_table_path() -> Path:
    return user_data_dir() / "module_costs.json"


class Cancelled(Exception):
    """The caller no longer wants the table (the studio is closing)."""


def measure_module_costs(seconds: float = 3.0, base: Preset | None = None, rounds: int = 3,
                         cancelled: Callable[[], bool] = lambda: False) -> CostTable:
    """Engine-loop CPU ms per hop for every module level, the other modules at `base`'s levels.

    CPU time of the calling thread (`time.thread_time`; the face model runs single-threaded on it),
    because on a shared machine wall time mostly measures the other processes. Each level is measured
    in `rounds` passes interleaved with the other levels, each pass a mean with the slowest 10 % of hops
    dropped (cache-cold outliers), and the lowest pass is kept.
    `cancelled()` is asked between passes; when it says yes, Cancelled is raised.
    """
    from studio.engine.bench import HopFeeder, speech_like
    from studio.engine.pipeline import Engine

    base = base or Preset(name="cost probe")
    audio = speech_like(seconds)
    engines = {(module, level): Engine(plan=plan_for(base.model_copy(
        update={"modules": replace_level(base.modules, module, level)}))) for module in MODULES for level in LEVELS}
    passes: dict[tuple[str, str], list[float]] = {key: [] for key in engines}
    try:
        for _ in range(rounds):
            for key, engine in engines.items():
                if cancelled():
                    raise Cancelled
                passes[key].append(_pass_ms(engine, HopFeeder(audio)))
    finally:
        for engine in engines.values():
            engine.stop()
    return {module: {level: round(min(passes[module, level]), 4) for level in LEVELS} for module in MODULES}


def _pass_ms(engine, feeder, warm_up: int = 20) -> float:
    engine.set_source(feeder)
    costs, index = [], 0
    while not feeder.finished:
        began = time.thread_time()
        engine.run_once()
        if index >= warm_up:
            costs.append((time.thread_time() - began) * 1000.0)
        index += 1
    costs.sort()
    kept = costs[: max(1, int(len(costs) * 0.9))]
    return sum(kept) / len(kept)


def replace_level(modules: Modules, module: str, level: str) -> Modules:
    return Modules(**{**modules.model_dump(), module: level})


def load_cost_table(path: Path | None = None) -> CostTable | None:
    """The cached table for this host, or None (missing, unreadable, another machine's)."""
    path = path or cost_table_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("host") != platform.node() or not isinstance(data.get("modules"), dict):
        return None
    table = data["modules"]
    ok = all(isinstance(table.get(m), dict) and all(isinstance(table[m].get(lv), (int, float)) for lv in LEVELS)
             for m in MODULES)
    return {m: {lv: float(table[m][lv]) for lv in LEVELS} for m in MODULES} if ok else None


def save_cost_table(table: Mapping, path: Path | None = None) -> Path:
    payload = {"host": platform.node(), "unit": "engine CPU ms per 10 ms hop", "modules": table}
    return atomic_write(path or cost_table_path(), json.dumps(payload, indent=2))


def preset_cost_ms(table: CostTable, modules: Modules) -> float:
    """Estimated engine ms per hop of a preset: the face level's cost plus what each other level adds
    over its cheapest level (each row was measured with the other modules at the base levels)."""
    levels = modules.model_dump()
    total = table["face"][levels["face"]]
    for module in MODULES[1:]:
        row = table[module]
        total += row[levels[module]] - min(row.values())
    return total


def module_to_lower(table: CostTable, modules: Modules) -> tuple[str, str, float] | None:
    """(module, lower level, ms saved per hop) of the single step down that saves the most; None at all-low."""
    best = None
    levels = modules.model_dump()
    for module in MODULES:
        index = LEVELS.index(levels[module])
        if index + 1 >= len(LEVELS):
            continue
        lower = LEVELS[index + 1]
        saving = table[module][levels[module]] - table[module][lower]
        if best is None or saving > best[2]:
            best = (module, lower, saving)
    return best


def verdict(table: CostTable | None, preset: Preset, latency_ms: float | None,
            render_ms: float = 0.0, present_ms: float = 0.0) -> tuple[bool, str]:
    """(meets the target, one line for the operator): the measured sound→screen latency
    (`studio.telemetry.SoundToScreen`; `render_ms` of it for the render, `present_ms` waiting for the next
    presented frame) against the preset's target, and when it misses, what to lower: the render settings when
    the render and that wait are most of it, else the module whose step down saves most."""
    target = preset.render.latency_target_ms
    if latency_ms is None:
        return True, f"target {target:.0f} ms — no latency measured yet (start speech to measure)"
    if latency_ms <= target:
        return True, f"meets the target: {SOUND_TO_SCREEN} p{SOUND_TO_SCREEN_PERCENTILE} {latency_ms:.1f} ms ≤ {target:.0f} ms"
    presenting = render_ms + present_ms
    if presenting > latency_ms - presenting:
        wait = f" and the wait for the next frame {present_ms:.0f} ms" if present_ms else ""
        advice = (f"the render takes {render_ms:.0f} ms of it{wait}: lower the resolution or the fps, "
                  "or body (its mesh detail)")
    elif table is None:
        advice = "module costs not measured yet; lower the resolution or the fps"
    else:
        advice = "every module is already at low; lower the resolution or the fps"
        step = module_to_lower(table, preset.modules)
        if step is not None:
            module, lower, saving = step
            advice = f"lower {module} to {lower} (saves {saving:.2f} ms per hop here)"
    return False, (f"misses the target: {SOUND_TO_SCREEN} p{SOUND_TO_SCREEN_PERCENTILE} {latency_ms:.1f} ms > "
                   f"{target:.0f} ms — {advice}")
