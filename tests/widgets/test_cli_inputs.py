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


COMMANDS = {
    "gui": lambda tmp: ["gui"],
    "selftest": lambda tmp: ["selftest"],
    "render": lambda tmp: ["render", "--out", str(tmp / "out.mp4"), "--duration", "0.2"],
    "lipsync": lambda tmp: ["lipsync", str(_tone(tmp)), "--out", str(tmp / "out.csv")],
    "bench": lambda tmp: ["bench", "--quick"],
    "record": lambda tmp: ["record", "--text", "Hi.", "--take", str(tmp / "take")],
    "soak": lambda tmp: ["soak", "--duration", "10", "--report", str(_folder(tmp / "report"))],
}


def _folder(path: Path) -> Path:
    path.mkdir(exist_ok=True)
    return path


def _tone(folder: Path) -> Path:
    import numpy as np
    import soundfile

    path = folder / "tone.wav"
    soundfile.write(path, 0.2 * np.sin(np.arange(16000) / 16000 * 2 * np.pi * 220), 16000)
    return path


def _broken_preset(folder: Path) -> Path:
    path = folder / "broken.yaml"
    path.write_text("schema_version: 1\nname: broken\nmodules: {face: ultra}\n")
    return path


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("option, value, expected", [
    ("--preset", "nosuch", "no preset named 'nosuch'; available: "),
    ("--persona", "nosuch", "no persona named 'nosuch'; available: "),
    ("--preset", "BROKEN_FILE", "broken.yaml: field 'modules.face' = 'ultra'"),
])
def test_every_engine_command_refuses_a_bad_preset_or_persona_with_exit_2(tmp_path, command, option, value, expected):
    """Before any window opens (no DISPLAY here: opening one would crash, not exit 2) and before any work."""
    if value == "BROKEN_FILE":
        value = str(_broken_preset(tmp_path))
    arguments = COMMANDS[command](tmp_path)
    before = set(tmp_path.iterdir())
    result = run_headless(*arguments, option, value, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert expected in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert set(tmp_path.iterdir()) == before, "nothing is written"


def test_a_missing_preset_or_persona_file_is_named(tmp_path):
    missing = tmp_path / "gone" / "mine.yaml"
    for option, kind in (("--preset", "preset"), ("--persona", "persona")):
        result = run_headless("gui", option, str(missing))
        assert result.returncode == 2 and f"{missing}: no such {kind} file" in result.stderr, result.stderr


def test_a_bad_avatar_for_the_gui_exits_2_before_a_window(tmp_path):
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"\x00" * 64)
    result = run_headless("gui", "--avatar", str(corrupt))
    assert result.returncode == 2 and "is not a valid avatar" in result.stderr, result.stderr


def test_render_takes_size_and_rate_from_a_preset_file(tmp_path):
    from render.video import probe_video

    preset = tmp_path / "tiny.yaml"
    preset.write_text("schema_version: 1\nname: tiny\nrender: {width: 320, height: 180, fps: 10}\n")
    out = tmp_path / "tiny.mp4"
    result = run_headless("render", "--out", str(out), "--duration", "0.5", "--preset", str(preset))
    assert result.returncode == 0, result.stderr
    video = probe_video(out)
    assert (video["width"], video["height"], video["frames"], round(video["fps"])) == (320, 180, 5, 10)


def test_names_and_files_resolve_alike(tmp_path):
    import argparse

    from studio.presets import persona_by_name, preset_by_name
    from widgets.commands import check_gui_inputs

    copy = tmp_path / "my medical.yaml"
    copy.write_text((Path(__file__).resolve().parents[2] / "presets" / "medical.yaml").read_text())
    avatar, persona, preset = check_gui_inputs(argparse.Namespace(avatar=None, persona="default", preset=str(copy)))
    assert avatar is None and persona == persona_by_name("default")
    assert preset == preset_by_name("medical")
    _avatar, _persona, by_default = check_gui_inputs(argparse.Namespace(avatar=None, persona=None, preset=None))
    assert by_default.name == persona_by_name("default").default_preset
