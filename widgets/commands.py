"""The headless commands behind `avatar-studio`: selftest, render, lipsync, bench.

Each returns a process exit code: 0 success, 1 a check or job failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from importlib import metadata
from typing import TYPE_CHECKING

from studio.avatar.arkit import ARKIT_INDEX
from studio.avatar.io import default_avatar_path, load_avatar
from studio.avatar.model import AvatarFormatError, AvatarModel

if TYPE_CHECKING:
    from studio.presets import Persona, Preset


def _fail(message: str, code: int = 2) -> int:
    print(f"avatar-studio: error: {message}", file=sys.stderr)
    return code


def _avatar(path: str | None) -> AvatarModel:
    return load_avatar(path or default_avatar_path())


def persona_and_preset(args: argparse.Namespace) -> tuple[Persona, Preset]:
    """The command line's persona (else `default`) and preset (else the persona's); PresetError says why not.

    Shared by every command that runs the engine or renders (gui, selftest, render, lipsync, bench, record,
    export), so a NAME or a FILE means the same everywhere.
    """
    from studio.presets import PresetError, resolve_persona, resolve_preset

    persona = resolve_persona(getattr(args, "persona", None) or "default")
    chosen = getattr(args, "preset", None)
    try:
        preset = resolve_preset(chosen or persona.default_preset)
    except PresetError as error:
        if chosen:
            raise
        raise PresetError(f"{error} (the default preset of persona {persona.name!r})") from None
    return persona, preset


def check_gui_inputs(args: argparse.Namespace) -> tuple[AvatarModel | None, Persona, Preset] | int:
    """Everything `gui` was given, loaded before a window opens; exit status 2 and one line when a value is bad."""
    try:
        avatar = load_avatar(args.avatar) if getattr(args, "avatar", None) else None
        persona, preset = persona_and_preset(args)
    except ValueError as error:  # AvatarFormatError and PresetError are ValueErrors
        return _fail(str(error))
    return avatar, persona, preset


def _dressed(avatar: AvatarModel, persona: Persona) -> AvatarModel:
    """The avatar in the persona's colours and body shape (as the viewport draws it at full detail)."""
    from studio.avatar.look import Look, drawn_model

    return drawn_model(avatar, Look.of_persona(persona))


def selftest_command(args: argparse.Namespace) -> int:
    os.environ.setdefault("EGL_PLATFORM", "surfaceless")
    try:
        avatar = _avatar(args.avatar)
        persona, _preset = persona_and_preset(args)
    except ValueError as error:  # AvatarFormatError and PresetError are ValueErrors
        return _fail(str(error))
    from render.selftest import run_selftest

    ok = run_selftest(_dressed(avatar, persona))
    print("selftest: PASS" if ok else "selftest: FAIL")
    return 0 if ok else 1


def _speech_frames(args: argparse.Namespace, persona: Persona):
    """Frames and audio for `render`: a file, a typed line, or the idle animation, in the persona's style."""
    from studio.engine import offline

    style = persona.motion_style()
    if args.audio:
        from studio.engine.audio_file import AudioFileStream

        audio = AudioFileStream(args.audio)  # streamed twice, in bounded chunks: analysed and muxed as frames go
        return offline.stream_frames(offline.analysis_stream(args.audio), fps=args.fps, style=style), audio
    if args.text is not None or args.cue is not None:
        text = args.text
        if args.cue is not None:
            if not 1 <= args.cue <= len(persona.cue_lines):
                raise ValueError(f"--cue {args.cue}: persona {persona.name!r} has cue lines 1..{len(persona.cue_lines)}")
            text = persona.cue_lines[args.cue - 1]
        voice = persona.voice
        clip, frames = offline.analyze_text(text, voice.name, voice.rate_wpm, voice.pitch, fps=args.fps, style=style)
        return frames, (clip.audio, clip.sample_rate)
    from studio.animation import IdleAnimator

    animator = IdleAnimator(style=style)
    count = max(1, round(args.duration * args.fps))
    return [animator.frame_at(i / args.fps) for i in range(count)], None


def render_command(args: argparse.Namespace) -> int:
    os.environ.setdefault("EGL_PLATFORM", "surfaceless")
    from render.video import video_format

    try:
        video_format(args.out, args.background)  # before any work: an extension that cannot hold what was asked
        avatar = _avatar(args.avatar)
        persona, preset = persona_and_preset(args)
    except ValueError as error:  # AvatarFormatError and PresetError are ValueErrors
        return _fail(str(error))
    avatar = _dressed(avatar, persona)
    args.size = args.size or (preset.render.width, preset.render.height)
    args.fps = args.fps or preset.render.fps
    from studio.engine.sources import AudioInputError
    from studio.speech.espeak import SpeechError

    try:
        frames, audio = _speech_frames(args, persona)
    except (AudioInputError, SpeechError, ValueError) as error:
        return _fail(str(error))
    from render.video import render_video

    started = time.perf_counter()
    try:
        written = render_video(
            frames, args.out, fps=args.fps, size=args.size, audio=audio, avatar=avatar,
            background=args.background, camera=args.camera,
        )
    except AudioInputError as error:  # a file damaged part-way shows only while it is decoded
        return _fail(str(error))
    count = written["frames"]
    print(f"wrote {args.out}: {count} frames, {count / args.fps:.2f} s, in {time.perf_counter() - started:.1f} s")
    if getattr(audio, "cut_short", None):
        print(f"render: note: {audio.cut_short}", file=sys.stderr)
    return 0


def lipsync_command(args: argparse.Namespace) -> int:
    """The persona's style moves what is not speech (blinks, gaze); the offline model reads the speech whatever
    the preset's face level, which costs only live."""
    try:
        persona, _preset = persona_and_preset(args)
    except ValueError as error:
        return _fail(str(error))
    from studio.engine.offline import lipsync_command as lipsync

    return lipsync(args.audio, args.out, args.fps, style=persona.motion_style(), csv_format=args.format)


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "avatar_studio": metadata.version("avatar-studio")}
    for dist in ("numpy", "vispy", "PySide6-Essentials", "pyqtgraph", "onnxruntime", "onnxruntime-gpu", "av",
                 "sounddevice", "espeakng-loader"):
        try:
            out[dist.replace("-", "_").lower()] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def _machine() -> dict[str, object]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import psutil

    return {
        "platform": platform.platform(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "memory_mb": round(psutil.virtual_memory().total / 2**20),
    }


def _bench_engine(avatar: AvatarModel, quick: bool) -> dict:
    """Engine cost per hop, text→first lip frame, and speech→photon: a burst played into the
    audio device, captured back, through the engine, rendered and read back from the GPU."""
    from render.offscreen import OffscreenRenderer
    from studio.engine import bench
    from studio.speech.espeak import benchmark_tts

    figures = bench.bench_engine(seconds=3.0 if quick else 10.0)
    figures.update(benchmark_tts(repeats=5 if quick else 20))
    figures.update(bench.text_to_first_lip_frame_ms(trials=2 if quick else 5))
    from studio.engine.sources import AudioDeviceError

    try:
        # the studio's own share (capture callback -> mouth-open frame), then the same with a render per frame
        figures.update(bench.speech_to_frame(trials=3 if quick else 20))
        with OffscreenRenderer(avatar, size=(640, 360)) as renderer:
            photon = bench.speech_to_frame(present=renderer.render, trials=3 if quick else 10)
    except AudioDeviceError as error:
        figures["speech_to_photon_note"] = f"not measured: {error} (make bench provides a virtual device)"
        return figures
    figures.update({key.replace("speech_to_frame", "speech_to_photon"): value for key, value in photon.items()})
    return figures


def _model_quality() -> dict:
    """The shipped face models' quality as `docs/model_report.json` states it (synthetic and validation sets).

    The bench does not re-measure it: that needs the training scripts, the `train` extra and the Debian speech
    packages, and the runtime never imports the training code (`python -m assets.model.evaluate` re-measures
    it in a checkout; `tests/assets/test_model_figures.py` checks the shipped models still reach it)."""
    from studio.paths import asset_path

    report = asset_path().parent / "docs" / "model_report.json"
    if not report.is_file():
        return {"source": "unavailable: no committed docs/model_report.json"}
    stated = json.loads(report.read_text(encoding="utf-8"))
    figures = {key: value for key, value in stated.items() if not isinstance(value, (dict, list))}  # the headline
    figures["source"] = "docs/model_report.json (python -m assets.model.evaluate; not measured by this bench)"
    return figures


def _gpu() -> dict:
    """The face model on onnxruntime's CUDA provider, where an NVIDIA GPU makes it usable."""
    import numpy as np

    from studio.engine.face_model import FaceModel

    model = FaceModel("fp32")  # CUDA first when onnxruntime offers it, as the engine and lipsync ask
    figures: dict[str, object] = {"requested_providers": model.requested_providers, "providers": model.providers}
    if model.provider != "CUDAExecutionProvider":
        figures["note"] = "no usable NVIDIA GPU / CUDA provider here: GPU figures not measured"
        return figures
    features = np.zeros((1, 80), np.float32)
    for _ in range(50):
        model.step(features)
    costs = []
    for _ in range(1000):
        started = time.perf_counter()
        model.step(features)
        costs.append((time.perf_counter() - started) * 1000.0)
    figures.update({"cuda_hop_median_ms": float(np.median(costs)), "cuda_hop_p99_ms": float(np.percentile(costs, 99))})
    return figures


def _gui(quick: bool) -> dict:
    """The studio window's presentation rate and GUI-thread costs, in its own process (Qt and EGL
    cannot share one vispy application)."""
    if not os.environ.get("DISPLAY"):
        return {"note": "no DISPLAY: GUI figures not measured (make bench provides a virtual one)"}
    import subprocess

    code = (
        "import json\n"
        "from widgets.main_window import benchmark_gui\n"
        "from widgets.viewport_bench import bench_viewport\n"
        f"figures = benchmark_gui(seconds={1.5 if quick else 5.0})\n"
        f"figures.update(bench_viewport(seconds={2.0 if quick else 8.0}))\n"
        "print('GUI-BENCH ' + json.dumps(figures))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    for line in result.stdout.splitlines():
        if line.startswith("GUI-BENCH "):
            return json.loads(line[len("GUI-BENCH "):])
    return {"error": (result.stderr.strip().splitlines() or ["no output"])[-1]}


def _bench_recording(avatar: AvatarModel, quick: bool) -> dict:
    """Recording overhead on the engine and MP4 export speed of a take at 1280x720."""
    from render.take_export import bench_mp4_export
    from studio.recording.bench import bench_recording_overhead

    figures = bench_recording_overhead(seconds=3.0 if quick else 10.0, rounds=2 if quick else 3)
    figures.update(bench_mp4_export(avatar, seconds=2.0 if quick else 4.0))
    return figures


def bench_command(args: argparse.Namespace) -> int:
    """Every figure in one JSON object, grouped by area, the unit in each key."""
    os.environ.setdefault("EGL_PLATFORM", "surfaceless")
    try:
        persona, preset = persona_and_preset(args)
    except ValueError as error:
        return _fail(str(error))
    report: dict[str, object] = {"machine": _machine(), "versions": _versions(),
                                 "inputs": {"persona": persona.name, "preset": preset.name}}
    avatar = _dressed(_avatar(None), persona)

    from render.bench import bench_render

    report["render"] = bench_render(avatar, frames=20 if args.quick else 120)
    if getattr(args, "avatar", None):
        from render.bench import bench_imported_avatar

        try:
            report["imported_avatar"] = bench_imported_avatar(args.avatar, frames=20 if args.quick else 120)
        except AvatarFormatError as error:
            return _fail(str(error))
    report["engine"] = _bench_engine(avatar, quick=args.quick)
    from studio.engine.bench import tts_heard_latency

    report["audio"] = tts_heard_latency(trials=3 if args.quick else 10)  # text to the first lip frame heard
    from render.preset_bench import bench_module_presets

    report.update(bench_module_presets(quick=args.quick))  # sections "levels" and "presets"
    from studio.engine.lipsync_bench import bench_lipsync

    report["lipsync"] = bench_lipsync(minutes=(4.0,) if args.quick else (4.0, 20.0))
    report["face_model"] = _model_quality()
    report["gui"] = _gui(args.quick)
    report["gpu"] = _gpu()
    report["recording"] = _bench_recording(avatar, args.quick)
    from studio.api.bench import bench_api

    report["api"] = bench_api(seconds=3.0 if args.quick else 10.0)  # engine ms per hop with 0, 1, 8 API clients
    from studio.interop.bench import bench_interop

    report["interop"] = bench_interop(seconds=2.0 if args.quick else 5.0)  # VMC/Live Link send cost, tracker to frame
    text = json.dumps(report, indent=2, sort_keys=False)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(text + "\n")
    return 0


def avatar_mapping_command(args: argparse.Namespace) -> int:
    """`avatar-studio avatar-mapping FILE [--write]`: the ARKit channels and bones of an imported avatar, as YAML."""
    from studio.avatar.imported import current_mapping_text, is_gltf_path
    from studio.avatar.mapping_file import mapping_path
    from studio.fileio import atomic_write

    if not is_gltf_path(args.avatar):
        return _fail(f"{args.avatar}: a mapping is for .glb, .gltf and .vrm avatars")
    try:
        text = current_mapping_text(args.avatar)
    except AvatarFormatError as error:
        return _fail(str(error))
    if not args.write:
        print(text, end="")
        return 0
    target = mapping_path(args.avatar)
    if target.exists():
        return _fail(f"{target} exists; edit it, or remove it to write the automatic mapping again")
    atomic_write(target, text)
    print(f"wrote {target}")
    return 0


def export_avatar_command(args: argparse.Namespace) -> int:
    """`avatar-studio export-avatar OUT.glb|OUT.vrm`: the avatar in the persona's look, for other programs."""
    from studio.avatar.export import export_avatar
    from studio.avatar.look import persona_model

    try:
        persona, _preset = persona_and_preset(args)
        avatar = _dressed(load_avatar(args.avatar), persona) if args.avatar else persona_model(persona)
        morphs = export_avatar(avatar, args.out)
    except (ValueError, OSError) as error:  # AvatarFormatError, PresetError and a bad suffix are ValueErrors
        return _fail(str(error))
    kind = "VRM 1.0" if str(args.out).lower().endswith(".vrm") else "GLB"
    emotions = [name for name in morphs if name not in ARKIT_INDEX]
    print(f"wrote {args.out} ({kind}): {int(avatar.faces.max()) + 1} vertices, 55 joints, "
          f"{len(morphs) - len(emotions)} of 52 ARKit morph targets" + (f", emotions {', '.join(emotions)}" if emotions else ""))
    return 0


def soak_command(args: argparse.Namespace) -> int:
    from widgets.soak_cli import soak_command as soak

    return soak(args)


def serve_command(args: argparse.Namespace) -> int:
    """`avatar-studio serve`: the control API on a headless engine until Ctrl+C (docs/api.md)."""
    from studio.api import security
    from studio.api.messages import schema_text

    if args.schema:
        print(schema_text(), end="")
        return 0
    try:
        if args.new_token or args.show_token:
            token = security.new_token() if args.new_token else security.load_or_create_token()
            print(token)
            print(f"(stored in {security.token_path()}, readable by you only)", file=sys.stderr)
            return 0
        names = security.ClientNames(require_approval=True if args.require_approval else None)
        if args.approve or args.deny:
            names.approve(args.approve) if args.approve else names.deny(args.deny)
            print(f"client {args.approve or args.deny!r} {'approved' if args.approve else 'denied'} ({names.path})")
            return 0
        if not 0 <= args.port <= 65535:
            return _fail(f"--port {args.port} is out of range; allowed 0..65535")
        if not security.is_loopback(args.host):
            if not args.allow_remote:
                return _fail(f"--host {args.host} lets other machines connect; add --allow-remote to mean it")
            print(f"avatar-studio serve: WARNING: listening on {args.host}: anyone who reaches this address and has "
                  "the token can drive the avatar and read its audio", file=sys.stderr)
        token = security.load_or_create_token()
        persona, preset = persona_and_preset(args)
        security.media_dir().mkdir(parents=True, exist_ok=True)
        folders = security.AllowedFolders(args.allow_folder)
    except ValueError as error:  # PresetError, a bad token or client file, a folder
        return _fail(str(error))
    import asyncio

    from studio.api.server import ApiServer, serve_until_stopped
    from studio.api.service import StudioService

    try:
        service = StudioService(persona, preset, folders, play_audio=args.play_audio)
        service.start()
    except Exception as error:  # noqa: BLE001 - a missing model or runtime: one line, not a traceback
        return _fail(f"cannot start the engine: {type(error).__name__}: {error}", 1)

    def ready(port: int) -> None:
        print(f"avatar-studio serve: ready on ws://{args.host}:{port}/api and http://{args.host}:{port}/health "
              f"(token: avatar-studio serve --show-token)", flush=True)

    try:
        asyncio.run(serve_until_stopped(ApiServer(service, token, names), args.host, args.port, ready))
    except OSError as error:
        if error.errno == 98 or "in use" in str(error):
            return _fail(f"port {args.port} is in use by another program; choose another with --port")
        return _fail(f"cannot serve on {args.host}:{args.port}: {error}")
    except KeyboardInterrupt:
        pass
    finally:
        service.close()
    return 0
