"""The `avatar-studio` command: the GUI by default, plus headless commands.

It sits on top of all three layers, so it may reach studio/, render/ and widgets/;
each command imports what it needs only when it runs, so `--help` stays instant and
headless commands never load Qt.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from studio import __version__
from studio.fileio import output_file_problem

BACKGROUNDS = ("studio", "chroma", "transparent")
TAKE_COMMANDS = ("record", "export", "takes")


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one clear line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size {text!r} is not WIDTHxHEIGHT, e.g. 1280x720") from None
    if not (16 <= width <= 7680 and 16 <= height <= 4320):
        raise argparse.ArgumentTypeError(f"size {text!r} is out of range: 16x16 .. 7680x4320")
    return width, height


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 100000:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def _existing_file(text: str) -> str:
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"not a file: {text}")
    return text


def _output_file(text: str) -> str:
    problem = output_file_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def add_persona_and_preset(parser: argparse.ArgumentParser) -> None:
    """--persona and --preset, each a NAME or a FILE, for every command that runs the engine or renders;
    widgets.commands.persona_and_preset resolves them."""
    parser.add_argument("--persona", metavar="NAME|FILE", help="persona NAME (yours or built-in) or FILE.yaml")
    parser.add_argument("--preset", metavar="NAME|FILE",
                        help="preset NAME (yours or built-in) or FILE.yaml (default: the persona's)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="avatar-studio", description="Live, speech-driven 3D avatars.")
    parser.add_argument("--version", action="version", version=f"avatar-studio {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    gui = commands.add_parser("gui", help="open the studio window (the default)")
    gui.add_argument("--avatar", type=_existing_file, help="avatar file (.npz, SMPL-X .pkl, .glb, .gltf or .vrm)")
    gui.add_argument("--no-anchor", action="store_true", help="switch SCA anchoring off (the preset's anchor.enabled)")
    add_persona_and_preset(gui)

    selftest = commands.add_parser("selftest", help="render offscreen and check the avatar is drawn and moves")
    selftest.add_argument("--avatar", type=_existing_file, help="avatar file to check instead of the default")
    add_persona_and_preset(selftest)

    render = commands.add_parser("render", help="render the avatar to a video file, headless")
    render.add_argument("--out", required=True, type=_output_file,
                        help="output .mp4 (H.264), .mov (ProRes 4444) or .webm (VP9); "
                             "a transparent background needs .mov or .webm")
    render.add_argument("--audio", type=_existing_file, help="speech audio the avatar says (muxed into the video)")
    render.add_argument("--text", help="a line the avatar speaks through on-device TTS")
    render.add_argument("--cue", type=int, metavar="N", help="speak the persona's cue line N (from 1)")
    render.add_argument("--duration", type=_positive, default=6.0, help="seconds of idle animation (no audio/text)")
    render.add_argument("--fps", type=_positive, help="frames per second (default: the preset's)")
    render.add_argument("--size", type=_size, help="WIDTHxHEIGHT (default: the preset's, e.g. 1280x720)")
    render.add_argument("--background", choices=BACKGROUNDS, default="studio")
    render.add_argument("--camera", choices=("body", "head"), default="body")
    render.add_argument("--avatar", type=_existing_file)
    add_persona_and_preset(render)

    lipsync = commands.add_parser("lipsync", help="write per-frame ARKit weights for an audio file as CSV")
    lipsync.add_argument("audio", type=_existing_file)
    lipsync.add_argument("--out", required=True, type=_output_file, help="output .csv file")
    lipsync.add_argument("--fps", type=_positive, default=60.0)
    lipsync.add_argument("--format", choices=("arkit", "livelink"), default="arkit",
                         help="arkit: Timecode, media_time_s and the 52 weights; livelink: Live Link Face's own layout")
    add_persona_and_preset(lipsync)

    bench = commands.add_parser("bench", help="measure speed and quality, print JSON")
    bench.add_argument("--out", type=_output_file, help="also write the JSON to this file")
    bench.add_argument("--quick", action="store_true", help="fewer repetitions (for a smoke run)")
    bench.add_argument("--avatar", type=_existing_file,
                       help="also measure this avatar file (.glb/.gltf/.vrm/.npz): load time and render fps")
    add_persona_and_preset(bench)

    avatar_mapping = commands.add_parser("avatar-mapping", help="print how the engine drives a glTF/VRM avatar, as YAML")
    avatar_mapping.add_argument("avatar", type=_existing_file, help=".glb/.gltf/.vrm file")
    avatar_mapping.add_argument("--write", action="store_true",
                                help="save it beside the avatar (NAME.mapping.yaml) to edit; never overwrites one")

    export_avatar = commands.add_parser("export-avatar", help="write the avatar (in the persona's look) as GLB or VRM 1.0")
    export_avatar.add_argument("out", type=_output_file, help="output .glb or .vrm file")
    export_avatar.add_argument("--avatar", type=_existing_file, help="avatar file (default: the persona's avatar)")
    add_persona_and_preset(export_avatar)

    serve = commands.add_parser("serve", help="the local control API (WebSocket + HTTP) with no window")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=8765, help="TCP port (default 8765; 0 picks a free one)")
    serve.add_argument("--allow-remote", action="store_true", help="allow binding an address other machines reach")
    serve.add_argument("--allow-folder", action="append", metavar="DIR",
                       help="a folder clients may play files from (repeatable; default: media and recordings)")
    serve.add_argument("--play-audio", action="store_true", help="also play the speech on this machine's sound output")
    serve.add_argument("--require-approval", action="store_true", help="admit only client names approved before")
    serve.add_argument("--approve", metavar="NAME", help="approve a client name, then exit")
    serve.add_argument("--deny", metavar="NAME", help="deny a client name, then exit")
    serve.add_argument("--show-token", action="store_true", help="print the API token (made on first use), then exit")
    serve.add_argument("--new-token", action="store_true", help="replace the API token, print it, then exit")
    serve.add_argument("--schema", action="store_true", help="print the API's JSON schema, then exit")
    add_persona_and_preset(serve)

    from widgets.soak_cli import add_parser as add_soak_parser
    from widgets.take_commands import add_parsers

    add_soak_parser(commands)

    add_parsers(commands, _size, _existing_file, _output_file, BACKGROUNDS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from studio.heap import limit_heap_retention

    limit_heap_retention()  # before the first large array, so freed memory goes back to the system
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
    args = build_parser().parse_args(argv)
    command = args.command or "gui"
    if command == "gui":
        from widgets.commands import check_gui_inputs

        checked = check_gui_inputs(args)  # a bad value exits 2 before any window opens
        if isinstance(checked, int):
            return checked
        from widgets.main_window import run_gui

        avatar, persona, preset = checked
        if getattr(args, "no_anchor", False):
            preset = preset.model_copy(update={"anchor": preset.anchor.model_copy(update={"enabled": False})})
        return run_gui(avatar, preset, persona)
    if command in TAKE_COMMANDS:
        from widgets import take_commands as implementations
    else:
        from widgets import commands as implementations

    return getattr(implementations, f"{command.replace('-', '_')}_command")(args)


if __name__ == "__main__":
    sys.exit(main())
