"""`avatar-studio record`, `export` and `takes`: takes made, exported and listed without the window.

Exit codes as every command: 0 success, 1 the job failed (a full disk, an encoder error), 2 bad input.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from studio.avatar.model import AvatarFormatError


def _fail(message: str, code: int = 2) -> int:
    print(f"avatar-studio: error: {message}", file=sys.stderr)
    return code


def resolve_persona(value: str | None):
    """A persona by NAME (built-in or the user's) or from a FILE path; PresetError says why not."""
    from studio.presets import resolve_persona as resolve

    return resolve(value or "default")


def resolve_preset(value: str | None, persona=None):
    from studio.presets import resolve_preset as resolve

    return resolve(value or (persona.default_preset if persona is not None else "default"))


def take_path(value: str) -> Path:
    """A take folder given as a path, or by name in the recordings folder."""
    from studio.paths import recordings_dir

    path = Path(value)
    if path.exists() or os.sep in value:
        return path
    return recordings_dir() / value


def record_command(args: argparse.Namespace) -> int:
    from studio.avatar.io import default_avatar_path, load_avatar
    from studio.engine.sources import AudioInputError
    from studio.recording.session import record_offline
    from studio.speech.espeak import SpeechError

    folder = Path(args.take)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        return _fail(f"--take {folder}: already exists and is not an empty folder (a take is never written over)")
    if not folder.parent.resolve().is_dir():
        return _fail(f"--take {folder}: folder {folder.parent.resolve()} does not exist")
    try:
        persona = resolve_persona(args.persona)
        preset = resolve_preset(args.preset, persona)
        avatar = load_avatar(args.avatar or default_avatar_path())
        take = record_offline(folder, avatar, persona, preset, audio_path=args.audio, text=args.text, fps=args.fps,
                              on_notice=lambda text: print(f"record: note: {text}", file=sys.stderr))
    except (AudioInputError, SpeechError, AvatarFormatError, ValueError) as error:  # a PresetError is a ValueError
        _remove_if_empty(folder)
        return _fail(str(error))
    except OSError as error:  # DiskSpaceError before the start; a write error keeps what was written, repairable
        _remove_if_empty(folder)
        return _fail(str(error), 1)
    print(f"recorded take {folder}: {len(take.frames)} frames at {take.manifest['frame_rate']:g} fps, "
          f"{take.duration_s:.2f} s, persona {persona.name}, preset {preset.name}")
    return 0


def _remove_if_empty(folder: Path) -> None:
    """A take that failed before it started leaves no empty folder behind."""
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()


def export_command(args: argparse.Namespace) -> int:
    os.environ.setdefault("EGL_PLATFORM", "surfaceless")
    from render.take_export import ExportCancelled, export_take
    from studio.recording.take import TakeError, open_take

    kind = next(k for k in ("mp4", "mov", "webm", "csv", "bvh") if getattr(args, k))
    try:
        take = open_take(take_path(args.take))
        persona = resolve_persona(args.persona) if args.persona else None
        preset = resolve_preset(args.preset) if args.preset else None
    except (TakeError, ValueError) as error:
        return _fail(str(error))
    size = args.size or ((preset.render.width, preset.render.height) if preset is not None else (1280, 720))
    fps = args.fps or (preset.render.fps if preset is not None else None)
    reported = [-1]

    def progress(fraction: float) -> None:
        percent = int(fraction * 100)
        if percent >= reported[0] + 5 or percent == 100:
            reported[0] = percent
            print(f"progress {percent}%", flush=True)

    def cancelled(_signum, _frame) -> None:
        raise ExportCancelled("export cancelled")

    previous = signal.signal(signal.SIGTERM, cancelled)
    started = time.perf_counter()
    try:
        result = export_take(take, kind, args.out, persona=persona, size=size, fps=fps,
                             background=args.background, camera=args.camera, progress=progress)
    except ExportCancelled:
        return _fail(f"export to {args.out} cancelled; nothing was written", 1)
    except (ValueError, PermissionError) as error:
        return _fail(str(error))
    except OSError as error:  # a full disk mid-write: the temp file is gone, the target untouched
        return _fail(f"export to {args.out} failed: {error.strerror or error}; nothing was written", 1)
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(f"exported {take.name} as {kind} to {result['path']}: {result['frames']} frames, "
          f"{result['duration_s']:.2f} s, in {time.perf_counter() - started:.1f} s")
    return 0


def takes_command(args: argparse.Namespace) -> int:
    """List the takes; an unfinished one (its recorder was killed) is repaired first, saying what was done."""
    from studio.paths import recordings_dir
    from studio.recording.take import TakeError, find_unfinished, list_takes, repair_take, size_text

    root = Path(args.dir) if args.dir else recordings_dir()
    for folder in find_unfinished(root):
        try:
            done = repair_take(folder)
            print(f"recovered unfinished take {folder.name}: " + "; ".join(done))
        except TakeError as error:
            print(f"cannot recover {folder.name}: {error}", file=sys.stderr)
    rows = list_takes(root)
    if not rows:
        print(f"no takes in {root}")
        return 0
    print(f"{'name':32} {'date':25} {'length':>8} {'persona':12} {'size':>9}  status")
    for row in rows:
        print(f"{row.name[:32]:32} {row.started_at[:25]:25} {row.duration_s:7.1f}s {row.persona[:12]:12} "
              f"{size_text(row.size_bytes):>9}  {row.status}" + (f" ({row.problem})" if row.problem else ""))
    return 0


def add_parsers(commands, size_type, existing_file, output_file, backgrounds) -> None:
    """The three commands' arguments (called by widgets.app.build_parser)."""
    record = commands.add_parser("record", help="make a take from an audio file or a line of text, headless")
    source = record.add_mutually_exclusive_group(required=True)
    source.add_argument("--audio", type=existing_file, help="speech audio the avatar says")
    source.add_argument("--text", help="a line the avatar speaks through on-device TTS")
    record.add_argument("--take", required=True, metavar="DIR", help="new take folder (must not exist or be empty)")
    record.add_argument("--persona", help="persona NAME or FILE (default: default)")
    record.add_argument("--preset", help="preset NAME or FILE (default: the persona's)")
    record.add_argument("--fps", type=float, help="frame rate (default: the preset's)")
    record.add_argument("--avatar", type=existing_file)

    export = commands.add_parser("export", help="export a take as video, Live Link Face CSV or BVH")
    export.add_argument("take", metavar="TAKE", help="take folder, or a take's name in the recordings folder")
    kinds = export.add_mutually_exclusive_group(required=True)
    for kind, what in (("mp4", "H.264 + AAC video"), ("mov", "ProRes 4444 video (alpha with a transparent background)"),
                       ("webm", "VP9 video (alpha with a transparent background)"), ("csv", "Live Link Face CSV"),
                       ("bvh", "BVH skeleton motion")):
        kinds.add_argument(f"--{kind}", action="store_true", help=what)
    export.add_argument("out", metavar="OUT", type=output_file, help="output file")
    export.add_argument("--persona", help="re-target to this persona NAME or FILE")
    export.add_argument("--preset", help="preset NAME or FILE (its size and fps unless given)")
    export.add_argument("--size", type=size_type, help="WIDTHxHEIGHT (default 1280x720 or the preset's)")
    export.add_argument("--fps", type=float, help="frame rate (default: the take's or the preset's)")
    export.add_argument("--background", choices=backgrounds, default="studio")
    export.add_argument("--camera", choices=("body", "head"), default="body")

    takes = commands.add_parser("takes", help="list the recorded takes (recovering unfinished ones)")
    takes.add_argument("--dir", help="recordings folder (default: the user data folder's recordings/)")
