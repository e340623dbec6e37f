"""The window's API switch: the control API on the window's own engine, on loopback, turned on and off at will.

Qt-free, so the Outputs panel only shows it. The server runs on its own thread (ServerThread); the engine hands it
frames through bounded queues and never waits on a client.
"""

from __future__ import annotations

import errno
from collections.abc import Callable

from studio.api import security

DEFAULT_PORT = 8765
LOOPBACK = "127.0.0.1"


class ApiSwitch:
    """`start(port)` serves the API on 127.0.0.1 (None, or the reason in plain words); `stop()` ends it cleanly.

    `make_service` builds the StudioService on the window's engine (None if the engine cannot run)."""

    def __init__(self, make_service: Callable[[], object | None]) -> None:
        self.make_service = make_service
        self.thread = None
        self.error: str | None = None

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

    def start(self, port: int = DEFAULT_PORT) -> str | None:
        from studio.api.server import ApiServer, ServerThread

        if self.thread is not None:
            return None
        try:
            token = self.token()
            names = security.ClientNames(require_approval=False)
        except ValueError as error:
            return self._failed(str(error))
        service = self.make_service()
        if service is None:
            return self._failed("the speech engine is not running, so there is nothing to control")
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
        if thread is not None:
            thread.server.service.stop_waiting()
            thread.stop()
