"""`avatar-studio record`, `export` and `takes` from the command line: exit codes, messages, nothing half-written."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from studio.recording.take import FRAMES, MANIFEST

ROOT = Path(__file__).resolve().parents[2]


def _run(*args, env=None, limit_bytes=None):
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over the limit, a write fails with EFBIG, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run([sys.executable, "-m", "widgets.app", *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "EGL_PLATFORM": "surfaceless", **(env or {})},
                          preexec_fn=limit if limit_bytes else None, timeout=300)


@pytest.fixture(scope="module")
def take(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli") / "hello"
    result = _run("record", "--text", "Hello there.", "--take", folder, "--preset", "medical")
    assert result.returncode == 0, result.stderr
    assert "recorded take" in result.stdout and "preset medical" in result.stdout
    return folder


def test_record_refuses_bad_input_with_exit_2(tmp_path, take):
    result = _run("record", "--text", "Hi", "--take", take)
    assert result.returncode == 2 and "already exists and is not an empty folder" in result.stderr
    result = _run("record", "--text", "Hi", "--take", tmp_path / "t", "--persona", "nobody")
    assert result.returncode == 2 and "nobody" in result.stderr
    assert not (tmp_path / "t").exists()
    result = _run("record", "--take", tmp_path / "t")
    assert result.returncode == 2 and "one of the arguments --audio --text is required" in result.stderr


def test_export_csv_and_bvh_and_list(tmp_path, take):
    result = _run("export", take, "--csv", tmp_path / "out.csv")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out.csv").read_text().startswith("Timecode,BlendShapeCount,EyeBlinkLeft")
    result = _run("export", take, "--bvh", tmp_path / "out.bvh")
    assert result.returncode == 0 and (tmp_path / "out.bvh").read_text().startswith("HIERARCHY\nROOT pelvis")
    result = _run("takes", "--dir", take.parent)
    assert result.returncode == 0 and "hello" in result.stdout and "complete" in result.stdout


def test_export_to_a_full_disk_fails_clearly_and_leaves_no_file(tmp_path, take):
    result = _run("export", take, "--mp4", tmp_path / "big.mp4", "--size", "320x240", limit_bytes=4_000)
    assert result.returncode == 1
    assert "export to" in result.stderr and "failed" in result.stderr and "nothing was written" in result.stderr
    assert list(tmp_path.iterdir()) == []
    result = _run("export", take, "--csv", tmp_path / "big.csv", limit_bytes=2_000)
    assert result.returncode == 1 and "nothing was written" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_export_of_a_damaged_take_names_the_problem(tmp_path, take):
    import shutil

    damaged = tmp_path / "damaged"
    shutil.copytree(take, damaged)
    (damaged / FRAMES).write_bytes((damaged / FRAMES).read_bytes()[:-100])
    result = _run("export", damaged, "--csv", tmp_path / "x.csv")
    assert result.returncode == 2 and "half-written record" in result.stderr and "repairable" in result.stderr
    (damaged / MANIFEST).unlink()
    result = _run("export", damaged, "--csv", tmp_path / "x.csv")
    assert result.returncode == 2 and "no manifest.json" in result.stderr
    assert not (tmp_path / "x.csv").exists()
