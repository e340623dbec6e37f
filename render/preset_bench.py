"""What each module level and each built-in preset costs here: the `levels` and `presets` sections of the bench.

Engine side (face, body, hands): CPU ms per 10 ms hop from `studio.costs` (the table the preset panel
shows) plus the work each level does, counted over the same speech: inference calls, FrameStates,
motion steps and finger joints per second. Render side (mesh LOD, cloth): offscreen render+readback
time of a talking, nodding avatar at 1280x720 (wall and process CPU: llvmpipe's threads count in the
process, and on a shared machine CPU time is the steadier figure), with vertices drawn and springs
stepped per frame.

Per preset: the engine's ms per hop and its latency (the face model's lookahead plus the wait for a
batch of hops, both on the 10 ms grid, plus the p95 compute time of one engine pass), and render fps at
the preset's own resolution, mesh LOD and cloth. Its latency target is judged on sound→screen
(`studio.telemetry.SoundToScreen`, the figure the Latency dock and the Preset panel show): that engine
latency plus the median offscreen render and a frame interval at the preset's fps waiting to be presented;
no input device here (device 0 ms, as for a played file or TTS).
"""

from __future__ import annotations

import time

import numpy as np

from render.bench import animated_states
from studio.avatar.io import default_avatar_path, load_avatar
from studio.avatar.lod import lod_path
from studio.avatar.skeleton import JOINT_INDEX
from studio.precision import CLOTH_LEVELS, LEVELS, ModulePlan, plan_for
from studio.presets import Preset, preset_by_name
from studio.telemetry import SoundToScreen, pipeline_lookahead_ms

BUILT_IN_PRESETS = ("default", "medical", "education", "performance")
HOP_MS = 10.0


def nodding_states(count: int):
    """The render bench's talking avatar, with a head that nods and turns (so cloth springs have work)."""
    states = animated_states(count)
    for i, state in enumerate(states):
        pose = np.array(state.pose)
        pose[JOINT_INDEX["head"]] += (0.0, 0.25 * np.sin(2 * np.pi * 0.9 * i / 30.0), 0.0)
        pose[JOINT_INDEX["spine3"]] = (0.0, 0.15 * np.sin(2 * np.pi * 0.6 * i / 30.0), 0.0)
        states[i] = state.replace(pose=pose)
    return states


def _render(model, size: tuple[int, int], cloth: tuple[str, ...], frames: int) -> dict:
    from render.offscreen import OffscreenRenderer

    states = nodding_states(frames + 5)
    with OffscreenRenderer(model, size=size) as renderer:
        visual = renderer.view.avatar
        renderer.view.set_cloth(cloth)
        for state in states[:5]:
            renderer.render(state)
        drawn, stepped = visual.vertices_drawn, visual.cloth.springs_stepped
        times = []
        cpu_began = time.process_time()
        for state in states[5:]:
            began = time.perf_counter()
            renderer.render(state)
            times.append((time.perf_counter() - began) * 1000.0)
        cpu_ms = (time.process_time() - cpu_began) * 1000.0 / frames
        return {"render_frame_ms": round(float(np.median(times)), 2),
                "render_fps": round(1000.0 / float(np.mean(times)), 2),
                "render_cpu_ms_per_frame": round(cpu_ms, 2),
                "frame_vertices": int((visual.vertices_drawn - drawn) / frames),
                "frame_spring_steps_count": round((visual.cloth.springs_stepped - stepped) / frames, 2)}


def _lod_model(plan: ModulePlan, cache: dict):
    key = (plan.lod, plan.keep_face_detail)
    if key not in cache:
        path = lod_path("default", *key)
        cache[key] = load_avatar(path if path is not None else default_avatar_path())
    return cache[key]


def _engine_work(plan: ModulePlan, seconds: float) -> dict:
    """Work per second of speech and the p95 compute time of one engine pass (one hop arriving)."""
    from studio.engine.bench import HopFeeder, speech_like
    from studio.engine.pipeline import Engine

    engine = Engine(plan=plan)
    feeder = HopFeeder(speech_like(seconds))
    engine.set_source(feeder)
    passes = []
    while not feeder.finished:
        began = time.thread_time()
        engine.run_once()
        passes.append((time.thread_time() - began) * 1000.0)
    work = engine.work
    return {"inference_calls_per_s": round(work.inference_calls / seconds, 1),
            "frames_per_s": round(work.frames_emitted / seconds, 1),
            "motion_steps_per_s": round(work.motion_steps / seconds, 1),
            "finger_joint_updates_per_s": round(work.finger_joint_updates / seconds, 1),
            "pass_p95_ms": round(float(np.percentile(passes[20:], 95)), 3),
            "lookahead_hops": engine.model.lookahead_frames}


def bench_module_presets(quick: bool = False) -> dict:
    """The bench's `levels` and `presets` sections, from one measured engine cost table."""
    from studio.costs import measure_module_costs

    seconds = 2.0 if quick else 4.0
    table = measure_module_costs(seconds=seconds, base=preset_by_name("default"), rounds=2 if quick else 3)
    return {"levels": bench_levels(table, quick), "presets": bench_presets(table, quick)}


def bench_levels(table: dict, quick: bool = False) -> dict:
    """Each module level's cost and counted work, the other modules at the default preset's levels."""
    from studio.costs import replace_level

    seconds = 2.0 if quick else 4.0
    base = preset_by_name("default")
    out: dict = {}
    for module in ("face", "body", "hands"):
        out[module] = {}
        for level in LEVELS:
            plan = plan_for(base.model_copy(update={"modules": replace_level(base.modules, module, level)}))
            work = _engine_work(plan, seconds)
            out[module][level] = {"engine_ms_per_hop": table[module][level],
                                  **{k: v for k, v in work.items() if k not in ("pass_p95_ms", "lookahead_hops")}}
    frames = 10 if quick else 30
    full = load_avatar(default_avatar_path())
    out["cloth"] = {level: _render(full, (1280, 720), CLOTH_LEVELS[level], frames) for level in LEVELS}
    out["lod"] = {}
    for level in LEVELS:
        path = lod_path("default", level, True)
        out["lod"][level] = _render(load_avatar(path) if path else full, (1280, 720), (), frames)
    return out


def bench_presets(table: dict, quick: bool = False, names: tuple[str, ...] = BUILT_IN_PRESETS) -> dict:
    """Per built-in preset: engine ms per hop and latency against its target, render fps at its resolution."""
    from studio.costs import preset_cost_ms

    seconds = 2.0 if quick else 4.0
    models: dict = {}
    out: dict = {}
    for name in names:
        preset: Preset = preset_by_name(name)
        plan = preset.plan
        work = _engine_work(plan, seconds)
        lag_hops = work["lookahead_hops"] + plan.face_batch_hops - 1
        latency_ms = lag_hops * HOP_MS + work["pass_p95_ms"]
        size = (preset.render.width, preset.render.height)
        render = _render(_lod_model(plan, models), size, plan.cloth_regions, 10 if quick else 30)
        sound_to_screen = SoundToScreen(
            device_ms=0.0, lookahead_ms=pipeline_lookahead_ms(work["lookahead_hops"], plan.face_batch_hops),
            engine_ms=work["pass_p95_ms"], render_ms=render["render_frame_ms"], present_ms=1000.0 / preset.render.fps)
        out[name] = {
            "size": f"{size[0]}x{size[1]}", "target_fps": preset.render.fps,
            "face_model": plan.face_variant, "face_rate_hz": plan.face_rate_hz, "body": plan.body_mode,
            "body_rate_hz": plan.body_rate_hz, "hands": plan.hands_mode, "cloth_springs_count": len(plan.cloth_regions),
            "mesh_lod": plan.lod, "face_kept_whole": plan.keep_face_detail,
            "engine_ms_per_hop": round(preset_cost_ms(table, preset.modules), 4),
            "engine_latency_ms": round(latency_ms, 2),
            "engine_latency_lag_hops_count": lag_hops,
            "latency_target_ms": preset.render.latency_target_ms,
            "sound_to_screen_ms": round(sound_to_screen.total_ms, 2),
            "sound_to_screen_parts": {f"{name}_ms": round(ms, 2) for name, ms in sound_to_screen.parts().items()},
            "meets_latency_target": sound_to_screen.meets(preset.render.latency_target_ms),
            "render_fps": render["render_fps"], "render_frame_ms": render["render_frame_ms"],
            "render_cpu_ms_per_frame": render["render_cpu_ms_per_frame"],
            "frame_vertices": render["frame_vertices"],
            "holds_target_fps": render["render_fps"] >= preset.render.fps,
        }
    if "default" in out and "performance" in out:
        for key in ("render_frame_ms", "render_cpu_ms_per_frame"):
            out[f"performance_{key}_pct_of_default"] = round(100.0 * out["performance"][key] / out["default"][key], 1)
    return out
