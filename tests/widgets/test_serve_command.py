"""`avatar-studio serve` as a user runs it: a process with no display and no sound card, its token, its refusals."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _environment(home: Path) -> dict:
    environment = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "PULSE_SERVER")}
    environment["AVATAR_STUDIO_HOME"] = str(home)
    return environment


def _serve(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "widgets.app", "serve", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=_environment(home))


def test_serve_answers_health_and_commands_then_stops_on_ctrl_c(tmp_path):
    token = _serve(tmp_path, "--show-token").stdout.strip()
    assert len(token) >= 32
    assert stat.S_IMODE((tmp_path / "config" / "api-token").stat().st_mode) == 0o600
    process = subprocess.Popen([sys.executable, "-m", "widgets.app", "serve", "--port", "0"], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_environment(tmp_path))
    try:
        ready = process.stdout.readline()  # printed once the engine runs and the port is bound
        assert "ready on ws://127.0.0.1:" in ready, ready + process.stderr.read()
        port = int(ready.split("ws://127.0.0.1:")[1].split("/")[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30) as response:
            assert response.status == 200 and json.loads(response.read())["status"] == "ready"
        request = urllib.request.Request(f"http://127.0.0.1:{port}/api/command", method="POST",
                                         data=b'{"id": "s", "type": "speak", "payload": {"text": "Ready."}}',
                                         headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
        assert answer["ok"] and answer["result"]["duration_s"] > 0.2, answer
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(60)
    assert code == 0, process.stderr.read()


def test_serve_refuses_a_remote_bind_without_the_flag_and_prints_the_schema(tmp_path):
    refused = _serve(tmp_path, "--host", "0.0.0.0")
    assert refused.returncode == 2 and "--allow-remote" in refused.stderr
    schema = _serve(tmp_path, "--schema")
    from studio.api.messages import schema_text

    assert schema.returncode == 0 and schema.stdout == schema_text()
    first = _serve(tmp_path, "--show-token").stdout.strip()
    replaced = _serve(tmp_path, "--new-token").stdout.strip()
    assert replaced != first and _serve(tmp_path, "--show-token").stdout.strip() == replaced
    assert _serve(tmp_path, "--approve", "stream-deck").returncode == 0
    clients = json.loads((tmp_path / "config" / "api-clients.json").read_text())
    assert clients["approved"] == ["stream-deck"]
    bad = _serve(tmp_path, "--persona", "nobody")
    assert bad.returncode == 2 and "nobody" in bad.stderr
