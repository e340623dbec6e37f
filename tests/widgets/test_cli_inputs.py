"""Bad values on the command line: one clear line, exit 2, before any work or window; names and paths alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.widgets.test_commands import run_headless


@pytest.mark.parametrize("out, background, expected", [
    ("clear.mp4", "transparent", ".mp4 cannot keep a transparent background; use .mov (prores_ks) or .webm"),
    ("clip.avi", "studio", "video files end in .mp4, .mov, .webm"),
])
def test_render_refuses_an_output_that_cannot_hold_what_was_asked(tmp_path, out, background, expected):
    result = run_headless("render", "--out", str(tmp_path / out), "--background", background, "--duration", "1")
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())


def test_render_transparent_mov_from_the_command_line_keeps_alpha(tmp_path):
    from render.video import alpha_range

    out = tmp_path / "clear.mov"
    result = run_headless("render", "--out", str(out), "--background", "transparent", "--duration", "0.2",
                          "--fps", "10", "--size", "160x96", "--camera", "head")
    assert result.returncode == 0, result.stderr
    assert Path(out).read_bytes()[4:12] == b"ftypqt  "
    assert alpha_range(out) == (0, 255)
