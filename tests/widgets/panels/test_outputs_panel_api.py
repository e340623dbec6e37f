"""The Outputs panel's control API row: switched on in a real window, a real WebSocket client on 127.0.0.1 is
answered with the shown token and refused with a wrong one; switched off, the port closes."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from studio.api import security
from tests.studio.api.clients import Client, Served, run
from widgets.panels.outputs_panel import OutputsPanel


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_outputs_panel_switches_the_control_api_on_the_windows_engine(qtbot, studio_window) -> None:
    window = studio_window(real_engine=True)
    panel: OutputsPanel = window.outputs_dock.widget()
    row = panel.api_row
    assert not row.enabled.isChecked() and row.status.text() == "off" and row.port.value() == 8765
    assert row.token.text() == security.load_or_create_token()

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = taken.getsockname()[1]
        row.port.setValue(busy)
        qtbot.mouseClick(row.enabled, Qt.MouseButton.LeftButton)
        assert not row.enabled.isChecked()
        assert row.status.text() == f"port {busy} is in use by another program; choose another port"

    port = free_port()
    row.port.setValue(port)
    qtbot.mouseClick(row.enabled, Qt.MouseButton.LeftButton)
    assert row.enabled.isChecked(), row.status.text()
    assert row.status.text() == f"ws://127.0.0.1:{port}/api — 0 clients connected"
    assert window.api.thread.server.service.engine is window.engine.engine  # the window's own engine, not another

    qtbot.mouseClick(row.renew, Qt.MouseButton.LeftButton)
    token = row.token.text()
    assert token == security.load_or_create_token()
    served = Served(port, token, service=None, thread=None, media=Path(), recordings=Path())
    window.api.names.approve("panel-test")  # as the operator's Allow does (tests/widgets/panels/test_api_window.py)

    async def talk() -> tuple[dict, dict, int, dict, dict | None]:
        client, answer = await Client.connect(served, "panel-test")
        status = await client.request("status")
        connected = window.api.client_count()
        await client.close()
        stranger, refused = await Client.connect(served, "stranger", token="not-the-token")
        closed = await stranger.receive()
        await stranger.session.close()
        return answer, status, connected, refused, closed

    answer, status, connected, refused, closed = run(talk())
    assert answer["ok"], answer
    assert status["ok"] and status["result"]["persona"] == window.persona.name, status
    assert status["result"]["clients"] == ["panel-test"] and connected == 1
    assert not refused["ok"] and refused["error"]["code"] == "bad_token" and closed is None

    qtbot.mouseClick(row.enabled, Qt.MouseButton.LeftButton)
    assert not row.enabled.isChecked() and row.status.text() == "off"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    assert window.engine.running  # the window's engine goes on without the API

    qtbot.mouseClick(row.enabled, Qt.MouseButton.LeftButton)
    assert row.enabled.isChecked(), row.status.text()
    window.close()  # closing the window stops the server too
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
