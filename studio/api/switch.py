"""The window's API switch: the control API on the window's own engine, on loopback, turned on and off at will.

Qt-free, so the Outputs panel only shows it. The server runs on its own thread (ServerThread); the engine hands it
frames through bounded queues and never waits on a client. As in VTube Studio's plugin API, a client name the
operator has not approved yet waits (up to `APPROVAL_WAIT_S`) while the window asks; an approval is kept in the
user config folder (security.ClientNames) until the operator revokes it.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable

from studio.api import security

DEFAULT_PORT = 8765
LOOPBACK = "127.0.0.1"
APPROVAL_WAIT_S = 60.0


class _Question:
    def __init__(self) -> None:
        self.answered = threading.Event()
        self.admitted = False
        self.why = ""
        self.waiting = 0  # connections with this name waiting for the answer


class OperatorApprovals:
    """Client names waiting for the operator's yes or no.

    `ask(name)` blocks its thread (an executor's, never the event loop) until the operator `answer`s, the wait runs
    out or `close` ends every question; connections with the same name share one question. The window lists
    `waiting()`."""

    def __init__(self, wait_s: float = APPROVAL_WAIT_S) -> None:
        self.wait_s = float(wait_s)
        self._lock = threading.Lock()
        self._questions: dict[str, _Question] = {}
        self._open = True

    def ask(self, name: str) -> tuple[bool, str]:
        """(admitted, why not)."""
        with self._lock:
            if not self._open:
                return False, "the API is stopping"
            question = self._questions.setdefault(name, _Question())
            question.waiting += 1
        answered = question.answered.wait(self.wait_s)
        with self._lock:
            question.waiting -= 1
            if not answered and not question.waiting and self._questions.get(name) is question:
                del self._questions[name]
        if not answered:
            return False, f"the operator did not answer within {self.wait_s:g} s; connect again to ask again"
        return question.admitted, question.why

    def waiting(self) -> list[str]:
        """The names the operator is being asked about, oldest first."""
        with self._lock:
            return list(self._questions)

    def answer(self, name: str, admitted: bool) -> None:
        with self._lock:
            question = self._questions.pop(name, None)
        if question is not None:
            self._settle(question, admitted, "" if admitted else "the operator denied it")

    def open(self) -> None:
        with self._lock:
            self._open = True

    def close(self, why: str = "the API was switched off before the operator answered") -> None:
        """Refuse every waiting name now, and every new one until `open`."""
        with self._lock:
            self._open = False
            questions, self._questions = list(self._questions.values()), {}
        for question in questions:
            self._settle(question, False, why)

    @staticmethod
    def _settle(question: _Question, admitted: bool, why: str) -> None:
        question.admitted, question.why = admitted, why
        question.answered.set()


class ApiSwitch:
    """`start(port)` serves the API on 127.0.0.1 (None, or the reason in plain words); `stop()` ends it cleanly.

    `make_service` builds the StudioService on the window's engine (None if the engine cannot run). Every client
    name must be approved: the operator answers `approvals` (security.ClientNames keeps the approved names)."""

    def __init__(self, make_service: Callable[[], object | None], approval_wait_s: float = APPROVAL_WAIT_S) -> None:
        self.make_service = make_service
        self.thread = None
        self.error: str | None = None
        self.approvals = OperatorApprovals(approval_wait_s)
        self.names: security.ClientNames | None = None

    @property
    def running(self) -> bool:
        return self.thread is not None

    @property
    def address(self) -> str | None:
        return f"ws://{LOOPBACK}:{self.thread.port}/api" if self.thread is not None else None

    def token(self) -> str:
        """The token the CLI uses too (made on first use, kept owner-only in the user config folder)."""
        return security.load_or_create_token()

    def new_token(self) -> str:
        """Replace the token; clients must use the new one from their next connection on (the running server too)."""
        token = security.new_token()
        if self.thread is not None:
            self.thread.server.token = token
        return token

    def client_count(self) -> int:
        return len(self.thread.server.client_names) if self.thread is not None else 0

    def approved_names(self) -> list[str]:
        """The client names the operator approved (kept from earlier sessions); empty when the file is unreadable
        (starting says why)."""
        if self.names is None:
            try:
                self.names = security.ClientNames(require_approval=True, approver=self.approvals.ask)
            except ValueError:
                return []
        return self.names.approved_names()

    def revoke(self, name: str) -> None:
        """Forget the approval and disconnect that client now; it is asked about again when it reconnects."""
        if self.names is not None or self.approved_names():
            self.names.revoke(name)
        if self.thread is not None:
            server = self.thread.server
            self.thread.call(lambda: [server.drop(client, "the operator revoked its approval")
                                      for client in list(server.clients) if client.name == name])

    def start(self, port: int = DEFAULT_PORT) -> str | None:
        from studio.api.server import ApiServer, ServerThread

        if self.thread is not None:
            return None
        try:
            token = self.token()
            names = security.ClientNames(require_approval=True, approver=self.approvals.ask)
        except ValueError as error:
            return self._failed(str(error))
        service = self.make_service()
        if service is None:
            return self._failed("the speech engine is not running, so there is nothing to control")
        self.names = names
        self.approvals.open()
        thread = ServerThread(ApiServer(service, token, names), LOOPBACK, port)
        try:
            thread.start()
        except OSError as error:
            thread.stop()
            if error.errno == errno.EADDRINUSE:
                return self._failed(f"port {port} is in use by another program; choose another port")
            return self._failed(f"cannot serve on {LOOPBACK}:{port}: {error.strerror or error}")
        self.thread, self.error = thread, None
        return None

    def _failed(self, reason: str) -> str:
        self.error = reason
        return reason

    def stop(self) -> None:
        """Close every client and the port; the window's engine keeps running."""
        thread, self.thread = self.thread, None
        self.approvals.close()
        if thread is not None:
            thread.server.service.stop_waiting()
            thread.stop()
