"""The `avatar-studio` command line: version, help, and one-line refusals with exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from studio import __version__

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "widgets.app", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def test_version():
    result = run_cli("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"avatar-studio {__version__}"


def test_help_lists_the_commands():
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("gui", "selftest", "render", "lipsync", "bench", "export-avatar", "avatar-mapping"):
        assert command in result.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--frobnicate",), "unrecognized arguments: --frobnicate"),
        (("render", "--out", "/no/such/folder/x.mp4"), "folder /no/such/folder does not exist"),
        (("render", "--out", "/tmp"), "cannot write /tmp: it is a folder; name a file inside it"),
        (("bench", "--quick", "--out", "/tmp"), "cannot write /tmp: it is a folder"),
        (("lipsync", "/no/such/file.wav", "--out", "x.csv"), "no such file: /no/such/file.wav"),
        (("gui", "--avatar", "/no/such/avatar.npz"), "no such file: /no/such/avatar.npz"),
        (("render", "--out", "x.mp4", "--size", "big"), "is not WIDTHxHEIGHT"),
        (("render", "--out", "x.mp4", "--background", "pink"), "invalid choice: 'pink'"),
        (("teleport",), "invalid choice: 'teleport'"),
        (("export-avatar", "/no/such/folder/me.vrm"), "folder /no/such/folder does not exist"),
        (("avatar-mapping", "/no/such/avatar.vrm"), "no such file: /no/such/avatar.vrm"),
        (("bench", "--avatar", "/no/such/avatar.vrm"), "no such file: /no/such/avatar.vrm"),
    ],
)
def test_bad_options_and_paths_give_one_clear_line_and_exit_2(args, expected):
    result = run_cli(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], result.stderr
