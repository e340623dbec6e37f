"""Render benchmarks: offscreen fps (render + readback), frame-time percentiles, cold start, CPU cost split.

The CPU-skinning figures exist to keep the GPU-skinning choice measured rather than assumed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

from studio.avatar.arkit import ARKIT_NAMES
from studio.avatar.model import AvatarModel
from studio.avatar.skeleton import JOINT_INDEX, NUM_JOINTS
from studio.frame import FrameState

_COLD_START_SCRIPT = """
import json, os, sys, time
start = float(sys.argv[1])
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from render.offscreen import OffscreenRenderer
from studio.avatar.io import default_avatar_path, load_avatar
from studio.frame import FrameState
with OffscreenRenderer(load_avatar(default_avatar_path()), size=(1280, 720)) as renderer:
    renderer.render(FrameState())
    print(json.dumps({"first_frame_s": time.time() - start}))
"""


def animated_states(count: int, fps: float = 30.0) -> list[FrameState]:
    """A talking, nodding avatar: every frame changes the face and the pose, like live speech does."""
    jaw, blink, smile = (ARKIT_NAMES.index(n) for n in ("jawOpen", "eyeBlinkLeft", "mouthSmileLeft"))
    states = []
    for i in range(count):
        t = i / fps
        arkit = np.zeros(len(ARKIT_NAMES), np.float32)
        arkit[jaw] = 0.5 + 0.5 * np.sin(2 * np.pi * 3.0 * t)
        arkit[blink] = 1.0 if i % 45 < 4 else 0.0
        arkit[smile] = 0.3 + 0.3 * np.sin(2 * np.pi * 0.5 * t)
        pose = np.zeros((NUM_JOINTS, 3), np.float32)
        pose[JOINT_INDEX["head"]] = (0.1 * np.sin(2 * np.pi * 0.7 * t), 0.2 * np.sin(2 * np.pi * 0.3 * t), 0.0)
        pose[JOINT_INDEX["left_shoulder"]] = (0.0, 0.0, -1.0 + 0.2 * np.sin(2 * np.pi * 0.4 * t))
        states.append(FrameState(media_time_s=t, arkit=arkit, pose=pose, sequence=i))
    return states


def _time_renders(avatar: AvatarModel, size: tuple[int, int], paths: tuple[str, ...], states: list[FrameState]) -> dict:
    """Per-frame render+readback times for each skinning path, interleaved so machine load hits all alike."""
    from render.offscreen import OffscreenRenderer

    renderers = {path: OffscreenRenderer(avatar, size=size, skinning=path) for path in paths}
    try:
        for renderer in renderers.values():
            for state in states[:5]:
                renderer.render(state)
        results = {path: {"times_s": [], "costs": []} for path in paths}
        for state in states:
            for path, renderer in renderers.items():
                start = time.perf_counter()
                renderer.render(state)
                results[path]["times_s"].append(time.perf_counter() - start)
                results[path]["costs"].append(vars(renderer.view.avatar.costs).copy())
        for path, renderer in renderers.items():
            results[path]["times_s"] = np.array(results[path]["times_s"])
            results[path]["gl_renderer"] = renderer.gl_renderer()
        return results
    finally:
        for renderer in renderers.values():
            renderer.close()


def _mean_cost(costs: list[dict], key: str) -> float:
    return round(float(np.mean([c[key] for c in costs])), 3)


def cold_start_to_first_frame_s() -> float:
    """Seconds from spawning a fresh Python to its first rendered 1280x720 frame of the default avatar."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=root)
    start = time.time()
    result = subprocess.run(
        [sys.executable, "-c", _COLD_START_SCRIPT, repr(start)],
        capture_output=True, text=True, env=env, cwd=root, timeout=300,
    )
    if result.returncode != 0:
        raise RuntimeError(f"cold-start render failed (rc {result.returncode}): {result.stderr.strip()[-800:]}")
    return float(json.loads(result.stdout.strip().splitlines()[-1])["first_frame_s"])


def bench_render(avatar: AvatarModel | None = None, frames: int = 60, cold_start: bool = True) -> dict:
    """Offscreen render speed of the avatar on this machine's GL, with the CPU cost split per frame."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if avatar is None:
        from studio.avatar.io import default_avatar_path, load_avatar

        avatar = load_avatar(default_avatar_path())
    states = animated_states(frames)
    both = _time_renders(avatar, (1280, 720), ("gpu", "cpu"), states)
    large, cpu_skinned = both["gpu"], both["cpu"]
    small = _time_renders(avatar, (640, 360), ("gpu",), states)["gpu"]
    large_ms = large["times_s"] * 1e3
    result = {
        "gl_renderer": large["gl_renderer"],
        "skinning_path": "gpu",
        "avatar_vertices": avatar.num_vertices,
        "avatar_triangles": int(len(avatar.faces)),
        "render_1280x720_fps": round(1.0 / float(np.mean(large["times_s"])), 2),
        "render_640x360_fps": round(1.0 / float(np.mean(small["times_s"])), 2),
        "render_1280x720_cpu_skinning_fps": round(1.0 / float(np.mean(cpu_skinned["times_s"])), 2),
        "cpu_skinning_frame_time_p50_ms": round(float(np.percentile(cpu_skinned["times_s"] * 1e3, 50)), 2),
        "frame_time_p50_ms": round(float(np.percentile(large_ms, 50)), 2),
        "frame_time_p99_ms": round(float(np.percentile(large_ms, 99)), 2),
        "cpu_morph_ms": _mean_cost(large["costs"], "morph_ms"),
        "cpu_face_normals_ms": _mean_cost(large["costs"], "normals_ms"),
        "cpu_joint_matrices_ms": _mean_cost(large["costs"], "joints_ms"),
        "cpu_upload_queue_ms": _mean_cost(large["costs"], "upload_ms"),
        "cpu_skinning_path_skin_ms": _mean_cost(cpu_skinned["costs"], "cpu_skin_ms"),
        "cpu_skinning_path_upload_queue_ms": _mean_cost(cpu_skinned["costs"], "upload_ms"),
    }
    if cold_start:
        result["cold_start_to_first_frame_s"] = round(cold_start_to_first_frame_s(), 3)
    return result


def bench_imported_avatar(path: str | os.PathLike, frames: int = 60) -> dict:
    """Load time and 1280x720 render speed of an avatar file (glTF/GLB/VRM or .npz) beside the default avatar's.

    The two render in turns, frame by frame, so that load from elsewhere on the machine hits both alike; the ratio
    of their mean frame rates is `render_fps_vs_default_avatar_pct`.
    """
    from render.offscreen import OffscreenRenderer
    from studio.avatar.io import default_avatar_path, load_avatar

    start = time.perf_counter()
    avatar = load_avatar(path)
    load_s = time.perf_counter() - start
    states = animated_states(frames)
    renderers = {"imported": OffscreenRenderer(avatar, size=(1280, 720)),
                 "default": OffscreenRenderer(load_avatar(default_avatar_path()), size=(1280, 720))}
    times: dict[str, list[float]] = {name: [] for name in renderers}
    costs: list[dict] = []
    try:
        for renderer in renderers.values():
            for state in states[:5]:
                renderer.render(state)
        for state in states:
            for name, renderer in renderers.items():
                begin = time.perf_counter()
                renderer.render(state)
                times[name].append(time.perf_counter() - begin)
            costs.append(vars(renderers["imported"].view.avatar.costs).copy())
        drawn = renderers["imported"].view.avatar
        gl_renderer = renderers["imported"].gl_renderer()
    finally:
        for renderer in renderers.values():
            renderer.close()
    fps, default_fps = (1.0 / float(np.mean(times[name])) for name in ("imported", "default"))
    info = dict(avatar.info)
    mesh = drawn.mesh
    return {
        "file": str(path),
        "format": info.get("format", "npz"),
        "load_time_s": round(load_s, 3),
        "avatar_vertices": avatar.num_vertices,
        "avatar_triangles": int(len(avatar.faces)),
        "texture_atlas_px": list(avatar.texture.shape[1::-1]) if avatar.texture is not None else None,
        "face_mapping": info.get("mapping"),
        "arkit_shapes_mapped_count": 52 - len(info.get("arkit_missing", [])) if info else 52,
        "outline_triangles": int(mesh.outline_faces.sum()),
        "blended_primitives": len(mesh.blend_pieces),
        "culled_triangles_pct": round(100.0 * float((~mesh.two_sided & mesh.opaque_faces).mean()), 1),
        "render_1280x720_fps": round(fps, 2),
        "default_avatar_render_1280x720_fps": round(default_fps, 2),
        "render_fps_vs_default_avatar_pct": round(100.0 * fps / default_fps, 1),
        "frame_time_p50_ms": round(float(np.percentile(times["imported"], 50)) * 1e3, 2),
        "default_avatar_frame_time_p50_ms": round(float(np.percentile(times["default"], 50)) * 1e3, 2),
        "cpu_morph_ms": _mean_cost(costs, "morph_ms"),
        "cpu_face_normals_ms": _mean_cost(costs, "normals_ms"),
        "cpu_joint_matrices_ms": _mean_cost(costs, "joints_ms"),
        "gl_renderer": gl_renderer,
    }


if __name__ == "__main__":
    print(json.dumps(bench_render(), indent=2))
