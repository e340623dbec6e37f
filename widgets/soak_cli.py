"""`avatar-studio soak`: a long session through the real engine faster than real time, with a report.

Writes DIR/report.json (every figure with its unit in the key, pass/fail against the preset's
thresholds) and DIR/report.png (the drift curves; with `--compare`, another run's beside them).
Exit code 0 when every check passed, 1 when one failed or the session did not run to the end, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _number(text: str, low: float, high: float, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} {text!r} is not a number") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{what} {text!r} is out of range; allowed {low:g}..{high:g}")
    return value


def _duration(text: str) -> float:
    return _number(text, 1.0, 1_000_000.0, "duration (s)")


def _speed(text: str) -> float | None:
    return None if text == "max" else _number(text, 0.1, 10_000.0, "speed (x real time, or 'max')")


def _skew(text: str) -> float:
    return _number(text, -10_000.0, 10_000.0, "skew (ppm)")


def _jitter(text: str) -> float:
    return _number(text, 0.0, 100.0, "jitter (ms)")


def _drop_rate(text: str) -> float:
    return _number(text, 0.0, 0.5, "drop rate")


def _pose_bias(text: str) -> tuple[float, float]:
    parts = text.split(",")
    if len(parts) not in (1, 2):
        raise argparse.ArgumentTypeError(f"pose bias {text!r} is not MM_PER_MIN[,DEG_PER_MIN]")
    mm = _number(parts[0], 0.0, 1000.0, "pose bias (mm/min)")
    deg = _number(parts[1], 0.0, 100.0, "pose bias (deg/min)") if len(parts) == 2 else 0.0
    return mm, deg


def _report_dir(text: str) -> Path:
    folder = Path(text)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot create the report folder {text}: {error.strerror}") from None
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"the report folder {text} is not writable")
    return folder


def _report_file(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such report: {text}")
    return path


def add_parser(commands) -> None:
    """Register `soak` on the `avatar-studio` subcommands."""
    soak = commands.add_parser("soak", help="run a long session faster than real time and report every drift figure")
    soak.add_argument("--duration", type=_duration, required=True, help="simulated seconds (e.g. 10000)")
    soak.add_argument("--speed", type=_speed, default=None, help="'max' (default) or N times real time")
    soak.add_argument("--skew-ppm", type=_skew, default=0.0, help="audio clock skew against the system clock")
    soak.add_argument("--jitter-ms", type=_jitter, default=0.0, help="audio callbacks up to this late (std)")
    soak.add_argument("--drop-rate", type=_drop_rate, default=0.0, help="fraction of 10 ms audio blocks lost")
    soak.add_argument("--pose-bias", type=_pose_bias, default=(0.0, 0.0), metavar="MM_PER_MIN[,DEG_PER_MIN]",
                      help="bias of the simulated pose tracker (it always random-walks a little)")
    soak.add_argument("--no-anchor", action="store_true", help="switch SCA anchoring off")
    from widgets.app import add_persona_and_preset

    add_persona_and_preset(soak)  # the persona picks the preset when --preset is not given
    soak.add_argument("--avatar", help="avatar file for the identity renders")
    soak.add_argument("--compare", type=_report_file, metavar="REPORT.json", help="another soak's report to plot beside")
    soak.add_argument("--seed", type=int, default=0)
    soak.add_argument("--report", type=_report_dir, required=True, metavar="DIR", help="where report.json/png go")
    soak.add_argument("--gui", action="store_true",
                      help="instead: a scripted operator session in the studio window (under the current DISPLAY) "
                           "for --duration wall-clock seconds; reports memory growth, presented fps and underruns")
    soak.add_argument("--trace-memory", action="store_true",
                      help="with --gui: also name what grew after the warm-up (tracemalloc; slows the session)")


def _fail(message: str) -> int:
    print(f"avatar-studio soak: error: {message}", file=sys.stderr)
    return 2


def soak_command(args: argparse.Namespace) -> int:
    if args.gui:
        return gui_soak_command(args)
    os.environ.setdefault("EGL_PLATFORM", "surfaceless")
    from studio.avatar.io import default_avatar_path, load_avatar
    from studio.avatar.model import AvatarFormatError
    from studio.fileio import atomic_write
    from studio.presets import PresetError
    from studio.soak import SoakOptions, speech_playlist
    from widgets.commands import persona_and_preset

    try:
        _persona, preset = persona_and_preset(args)
        avatar = load_avatar(args.avatar or default_avatar_path())
        compare = json.loads(args.compare.read_text(encoding="utf-8")) if args.compare else None
    except (PresetError, AvatarFormatError) as error:
        return _fail(str(error))
    except (OSError, ValueError) as error:
        return _fail(f"{args.compare}: not a readable soak report ({error})")
    from render.identity import IdentityCheck

    identity = IdentityCheck(avatar)
    options = SoakOptions(duration_s=args.duration, preset=preset, skew_ppm=args.skew_ppm, jitter_ms=args.jitter_ms,
                          drop_rate=args.drop_rate, pose_bias=args.pose_bias, anchor=not args.no_anchor,
                          seed=args.seed, speed=args.speed, audio=speech_playlist(args.seed), identity=identity)
    report = _run_with_progress(options)
    identity.close()
    report["summary"]["identity_renders"] = identity.renders
    atomic_write(args.report / "report.json", json.dumps(report, indent=1) + "\n")
    png = args.report / "report.png"
    try:
        from widgets.soak_plot import write_report_png

        write_report_png(report, png, compare)
    except Exception as error:  # noqa: BLE001 - the JSON is the record; a plot failure must not lose it
        print(f"avatar-studio soak: could not draw {png}: {error}", file=sys.stderr)
    summary = report["summary"]
    print(json.dumps(summary, indent=1))
    if not summary["complete"]:
        print(f"soak INCOMPLETE: {summary['simulated_s']:.0f} of {summary['duration_s']:.0f} s simulated", file=sys.stderr)
    elif not summary["kept_up"]:
        print("soak could not keep up with the requested speed", file=sys.stderr)
    failed = [name for name, ok in report["pass"].items() if ok is False]
    print(f"soak {'PASS' if report['passed'] else 'FAIL: ' + ', '.join(failed)}; report in {args.report}")
    return 0 if report["passed"] else 1


def _run_with_progress(options) -> dict:
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from studio.soak import run_soak

    columns = (TextColumn("soak"), BarColumn(), TaskProgressColumn(),
               TextColumn("{task.completed:,.0f}/{task.total:,.0f} s simulated"), TimeElapsedColumn(),
               TextColumn("ETA"), TimeRemainingColumn())
    with Progress(*columns, transient=False) as progress:
        task = progress.add_task("soak", total=options.duration_s)
        options.progress = lambda done: progress.update(task, completed=done)
        return run_soak(options)


def gui_soak_command(args: argparse.Namespace) -> int:
    """`soak --gui`: the operator session in the real window; exit 0 when every action ran, nothing failed and
    (for runs of 10 minutes or more) memory stayed within its growth limit."""
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        return _fail("--gui needs a display (DISPLAY is not set); run it under Xvfb, e.g. scripts/with-services.sh")
    from studio.avatar.io import default_avatar_path, load_avatar
    from studio.avatar.model import AvatarFormatError
    from studio.fileio import atomic_write
    from studio.presets import PresetError
    from widgets.commands import persona_and_preset

    try:
        persona, preset = persona_and_preset(args)
        avatar = load_avatar(args.avatar or default_avatar_path())
    except (PresetError, AvatarFormatError) as error:
        return _fail(str(error))
    import shutil

    from widgets.soak_gui import GuiSoakOptions, default_work_dir, run_gui_soak

    work = default_work_dir()
    try:
        report = run_gui_soak(avatar, preset, persona, GuiSoakOptions(args.duration, work, trace_memory=args.trace_memory))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    atomic_write(args.report / "report.json", json.dumps(report, indent=1) + "\n")
    png = args.report / "report.png"
    try:
        from widgets.soak_plot import write_gui_report_png

        write_gui_report_png(report, png)
    except Exception as error:  # noqa: BLE001 - the JSON is the record; a plot failure must not lose it
        print(f"avatar-studio soak: could not draw {png}: {error}", file=sys.stderr)
    print(json.dumps(report["summary"], indent=1))
    for problem in report["problems"]:
        print(f"soak --gui: {problem}", file=sys.stderr)
    failed = [name for name, ok in report["pass"].items() if ok is False]
    print(f"soak --gui {'PASS' if report['passed'] else 'FAIL: ' + ', '.join(failed)}; report in {args.report}")
    return 0 if report["passed"] else 1
