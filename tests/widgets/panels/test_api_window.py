"""The control API as the window serves it, with real WebSocket clients on 127.0.0.1.

The clients run on a thread of their own while the test's GUI thread keeps the window's event loop turning, as
an operator's window does (a command that changes the window waits for the GUI thread)."""

from __future__ import annotations

import socket
import threading
from contextlib import closing
from pathlib import Path

from PySide6.QtCore import Qt

from studio.api import security
from tests.studio.api.clients import Client, Served, run
from widgets.panels.outputs_panel import OutputsPanel

WAIT_MS = 90_000  # a hang guard, never a timing assert


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class InThread:
    """A client scenario run to its end on its own thread: `done()` to wait on, `result()` to read it."""

    def __init__(self, coroutine) -> None:
        self.outcome: tuple[object, BaseException | None] | None = None
        self.thread = threading.Thread(target=self._run, args=(coroutine,), daemon=True)
        self.thread.start()

    def _run(self, coroutine) -> None:
        try:
            self.outcome = (run(coroutine, 80.0), None)
        except BaseException as error:  # noqa: BLE001 - handed to the test thread
            self.outcome = (None, error)

    def done(self) -> bool:
        return self.outcome is not None

    def result(self):
        value, error = self.outcome
        if error is not None:
            raise error
        return value


def finished(qtbot, scenario: InThread):
    qtbot.waitUntil(scenario.done, timeout=WAIT_MS)
    return scenario.result()


def serve(qtbot, window) -> Served:
    """Switch the API on in the window's Outputs panel, on a free port."""
    row = window.outputs_dock.widget().api_row
    row.port.setValue(free_port())
    qtbot.mouseClick(row.enabled, Qt.MouseButton.LeftButton)
    assert row.enabled.isChecked(), row.status.text()
    return Served(window.api.thread.port, row.token.text(), service=None, thread=None, media=Path(), recordings=Path())


def test_a_client_setting_persona_and_preset_updates_the_windows_panels(qtbot, studio_window) -> None:
    with closing(studio_window(real_engine=True)) as window:  # closed even when the test fails (stops the server)
        panels = window.panels
        assert (panels.persona_doc.item.name, window.presets.preset.name) == ("default", "default")
        served = serve(qtbot, window)
        window.api.names.approve("show-control")  # as the operator's Allow does

        async def switch() -> list[dict]:
            client, answer = await Client.connect(served, "show-control")
            replies = [answer, await client.request("persona.set", {"name": "teacher"}),
                       await client.request("preset.set", {"name": "performance"}), await client.request("status"),
                       await client.request("persona.set", {"name": "nobody"}),
                       await client.request("expression.trigger", {"name": "warm smile"}),  # the teacher's own
                       await client.request("expression.release", {"name": "warm smile"})]
            await client.close()
            return replies

        answer, persona, preset, status, missing, smile, unsmile = finished(qtbot, InThread(switch()))
        assert answer["ok"] and persona["ok"] and preset["ok"], (answer, persona, preset)
        assert persona["result"]["name"] == "teacher" and preset["result"]["name"] == "performance"
        # the panels show it exactly as when the operator picks it there
        assert panels.persona_panel.chooser.currentText() == "teacher" and window.persona.name == "teacher"
        assert panels.preset_panel.chooser.currentText() == "performance" and window.presets.preset.name == "performance"
        assert panels.preset_panel.fps_spin.value() == 25 and window.latency_model.target_ms == 100
        assert status["result"]["persona"] == "teacher" and status["result"]["preset"] == "performance"
        assert not missing["ok"] and missing["error"]["code"] == "not_found" and "nobody" in missing["error"]["message"]
        assert panels.persona_panel.chooser.currentText() == "teacher"
        assert smile["result"]["active"] == ["warm smile"] and unsmile["ok"], (smile, unsmile)

        panels.select_persona("clinician")  # the operator's own choice is what the API reports
        panels.persona_doc.update("voice.rate_wpm", 201)  # and an unsaved edit is never discarded by a client

        async def after_operator() -> list[dict]:
            client, _answer = await Client.connect(served, "show-control")
            replies = [await client.request("status"), await client.request("persona.set", {"name": "presenter"})]
            await client.close()
            return replies

        status, refused = finished(qtbot, InThread(after_operator()))
        assert status["result"]["persona"] == "clinician" and status["result"]["preset"] == "medical", status
        assert not refused["ok"] and refused["error"]["code"] == "conflict", refused
        assert panels.persona_doc.item.name == "clinician" and panels.persona_doc.item.voice.rate_wpm == 201


def test_switching_the_api_off_while_a_command_waits_for_the_window_returns_at_once(qtbot, studio_window) -> None:
    """The operator switches the API off while a client's persona change waits for the GUI thread: no deadlock."""
    with closing(studio_window(real_engine=True)) as window:  # closed even when the test fails (stops the server)
        served = serve(qtbot, window)
        window.api.names.approve("late")
        service = window.api.thread.server.service
        asked = threading.Event()
        gui_call = service.gui.call

        def call_noted(function, wait_s=60.0):
            asked.set()
            return gui_call(function, wait_s)

        service.gui.call = call_noted

        async def change() -> dict | None:
            client, _answer = await Client.connect(served, "late")
            reply = await client.request("persona.set", {"name": "teacher"})
            await client.session.close()
            return reply

        scenario = InThread(change())
        assert asked.wait(60)  # the command waits for the GUI thread, which is busy here
        panel: OutputsPanel = window.outputs_dock.widget()
        panel.api_row.enabled.setChecked(False)  # stops the server from the GUI thread
        reply = finished(qtbot, scenario)
        assert reply is None or reply["error"]["code"] == "engine_error", reply
        assert window.persona.name == "default"


def test_a_new_client_waits_until_the_operator_allows_or_denies_it_and_an_approval_is_kept(qtbot, studio_window) -> None:
    with closing(studio_window(real_engine=True)) as window:
        row = window.outputs_dock.widget().api_row
        served = serve(qtbot, window)
        notices = []
        window.outputs_dock.widget().approval_asked.connect(notices.append)

        async def deck() -> list[dict | None]:
            client, answer = await Client.connect(served, "stream-deck")  # waits here for the operator
            replies = [answer, await client.request("status")]
            await client.close()
            return replies

        scenario = InThread(deck())
        qtbot.waitUntil(lambda: "stream-deck" in row.prompts, timeout=WAIT_MS)
        frame, allow, _deny = row.prompts["stream-deck"]
        qtbot.waitUntil(frame.isVisible, timeout=WAIT_MS)  # on screen: the dock is brought forward
        assert notices == ["stream-deck"]
        assert "Client 'stream-deck' wants to control the avatar" in window.statusBar().currentMessage()
        assert not scenario.done()  # no answer before the operator's
        qtbot.mouseClick(allow, Qt.MouseButton.LeftButton)
        assert not frame.isVisible()  # the question is answered: its row goes at once
        answer, status = finished(qtbot, scenario)
        assert answer["ok"] and status["ok"] and status["result"]["persona"] == "default", (answer, status)
        assert "stream-deck" not in row.prompts
        qtbot.waitUntil(lambda: row.approved.findText("stream-deck") >= 0, timeout=WAIT_MS)
        assert security.ClientNames().approved_names() == ["stream-deck"]  # kept in the user config folder

        async def intruder() -> tuple[dict | None, dict | None]:
            client, answer = await Client.connect(served, "intruder")
            closed = await client.receive()
            await client.session.close()
            return answer, closed

        scenario = InThread(intruder())
        qtbot.waitUntil(lambda: "intruder" in row.prompts, timeout=WAIT_MS)
        qtbot.mouseClick(row.prompts["intruder"][2], Qt.MouseButton.LeftButton)
        refused, closed = finished(qtbot, scenario)
        assert not refused["ok"] and refused["error"]["code"] == "not_approved", refused
        assert refused["error"]["message"] == "client 'intruder' is not approved: the operator denied it"
        assert closed is None  # and the connection is closed
        assert security.ClientNames().approved_names() == ["stream-deck"]

        window.api.approvals.wait_s = 0.5  # an operator who never answers: the client is refused, not left hanging
        scenario = InThread(Client.connect(served, "unanswered"))
        client, ignored = finished(qtbot, scenario)
        assert ignored["error"]["code"] == "not_approved" and "did not answer within 0.5 s" in ignored["error"]["message"]
        run(client.session.close())
        qtbot.waitUntil(lambda: not row.prompts, timeout=WAIT_MS)

    with closing(studio_window(real_engine=True)) as window:  # the next session remembers the approval
        row = window.outputs_dock.widget().api_row
        assert [row.approved.itemText(i) for i in range(row.approved.count())] == ["stream-deck"]
        served = serve(qtbot, window)
        window.api.approvals.wait_s = 0.5  # were it asked about, it would be refused at once

        async def again() -> tuple[dict | None, dict | None, dict | None]:
            client, answer = await Client.connect(served, "stream-deck")
            status = await client.request("status")
            revoked = await client.receive()  # the operator revokes it while it is connected
            await client.session.close()
            return answer, status, revoked

        scenario = InThread(again())
        qtbot.waitUntil(lambda: window.api.client_count() == 1, timeout=WAIT_MS)
        assert not row.prompts and row.approved.currentText() == "stream-deck"  # the one there is, chosen
        qtbot.mouseClick(row.revoke, Qt.MouseButton.LeftButton)
        answer, status, revoked = finished(qtbot, scenario)
        assert answer["ok"] and status["ok"] and revoked is None, (answer, status, revoked)
        assert security.ClientNames().approved_names() == [] and row.approved.count() == 0
        client, asked_again = finished(qtbot, InThread(Client.connect(served, "stream-deck")))
        assert asked_again["error"]["code"] == "not_approved"  # asked about again (and not answered here)
        run(client.session.close())


def test_the_api_on_off_state_and_port_are_kept_for_the_next_window(qtbot, studio_home, tmp_path) -> None:
    """Closed with the API on at a port, the next window serves there again; closed with it off, it stays off."""
    import json

    from studio.presets import persona_by_name
    from tests.conftest import make_random_avatar
    from widgets.main_window import MainWindow
    from widgets.models import EngineController

    layout_path = tmp_path / "layout.json"

    def studio() -> MainWindow:
        window = MainWindow(make_random_avatar(), engine=EngineController(), show_dialogs=False, layout_path=layout_path,
                            persona=persona_by_name("default"))
        qtbot.addWidget(window)
        window.show()
        qtbot.waitExposed(window)
        return window

    with closing(studio()) as window:
        row = window.outputs_dock.widget().api_row
        assert not row.enabled.isChecked() and row.port.value() == 8765
        served = serve(qtbot, window)
        window.api.names.approve("returning")
    assert json.loads(layout_path.read_text())["options"]["api"] == {"on": True, "port": served.port}

    with closing(studio()) as window:
        row = window.outputs_dock.widget().api_row
        assert row.port.value() == served.port
        qtbot.waitUntil(lambda: window.api.running, timeout=WAIT_MS)  # switched on as the window comes up
        assert row.enabled.isChecked() and window.api.thread.port == served.port

        async def status() -> dict | None:
            client, _answer = await Client.connect(served, "returning")
            reply = await client.request("status")
            await client.close()
            return reply

        assert finished(qtbot, InThread(status()))["ok"]
        qtbot.mouseClick(row.enabled, Qt.MouseButton.LeftButton)
        assert not window.api.running

    with closing(studio()) as window:
        row = window.outputs_dock.widget().api_row
        qtbot.wait(50)  # the window's loop has run: nothing was switched on
        assert not row.enabled.isChecked() and not window.api.running and row.port.value() == served.port

    saved = json.loads(layout_path.read_text())
    saved["options"]["api"] = {"on": "yes", "port": 70000}
    layout_path.write_text(json.dumps(saved))
    with closing(studio()) as window:
        panel = window.outputs_dock.widget()
        assert panel.message.text() == (f"{layout_path}: options.api is {{'on': 'yes', 'port': 70000}}; expected "
                                        '{"on": true or false, "port": 1..65535}, so the API stays off')
        assert not panel.api_row.enabled.isChecked() and panel.api_row.port.value() == 8765
