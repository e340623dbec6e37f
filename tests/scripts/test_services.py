"""scripts/services.sh: starts real Xvfb and PulseAudio with nothing a minimal Debian lacks, or says why not."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ROOT / "scripts" / "services.sh"
# What a minbase Debian root has (coreutils, bash) plus what scripts/setup.sh installs: no procps.
ALLOWED_TOOLS = ("bash", "env", "cat", "mkdir", "chmod", "rm", "seq", "sleep",
                 "Xvfb", "xdpyinfo", "pulseaudio", "pactl", "pacat", "xkbcomp")


def restricted_path(tmp_path: Path) -> str:
    """A PATH holding only ALLOWED_TOOLS, so a script calling anything else (pgrep, ps) fails here too."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ALLOWED_TOOLS:
        found = shutil.which(tool)
        assert found, f"{tool} is missing: run the tests with `make test`, which installs it"
        (tools / tool).symlink_to(found)
    return str(tools)


def services(command: str, state: Path, path: str | None = None, **extra: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in ("AVATAR_DISPLAY", "DISPLAY")}
    env.update(AVATAR_SERVICES_DIR=str(state), **extra)
    if path:
        env["PATH"] = path
    return subprocess.run(["bash", str(SERVICES), command], env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def state(tmp_path):
    folder = tmp_path / "state"
    yield folder
    services("stop", folder)


def test_start_needs_no_process_tools_and_both_services_answer(tmp_path, state):
    started = services("start", state, path=restricted_path(tmp_path))
    assert started.returncode == 0, started.stderr
    exports = dict(line.removeprefix("export ").split("=", 1) for line in started.stdout.splitlines())
    assert subprocess.run(["xdpyinfo", "-display", exports["DISPLAY"]], capture_output=True).returncode == 0
    pulse = subprocess.run(["pactl", "info"], env=dict(os.environ, PULSE_SERVER=exports["PULSE_SERVER"]),
                           capture_output=True, text=True)
    assert "vsink" in pulse.stdout

    pids = [int((state / f"{name}.pid").read_text()) for name in ("xvfb", "pulse", "pacat")]
    assert services("stop", state).returncode == 0
    for pid in pids:
        assert wait_until_gone(pid), f"process {pid} still runs after `services.sh stop`"


def wait_until_gone(pid: int, polls: int = 100) -> bool:
    """True once the process has exited (gone, or a zombie its new parent has not reaped yet)."""
    for _ in range(polls):
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


def test_an_x_server_that_cannot_start_stops_with_one_line_naming_it_and_its_log(state):
    failed = services("start", state, AVATAR_DISPLAY=":notanumber")
    assert failed.returncode == 1
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "Xvfb" in lines[0] and str(state / "xvfb.log") in lines[0]
    assert not (state / "pulse.pid").exists()


def test_a_display_already_in_use_is_refused_not_shared(state):
    display = os.environ.get("DISPLAY")
    assert display, "DISPLAY is not set: run the tests with `make test`, which starts Xvfb"
    refused = services("start", state, AVATAR_DISPLAY=display)
    assert refused.returncode == 1
    assert f"display {display} is already in use" in refused.stderr
