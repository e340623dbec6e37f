"""Small asyncio clients that talk to a real API server over real sockets."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path

DEADLINE_S = 60.0  # a hang guard, never a timing assert


@dataclass
class Served:
    port: int
    token: str
    service: object
    thread: object
    media: Path
    recordings: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def server(self):
        return self.thread.server


def run(coroutine, deadline_s: float = DEADLINE_S):
    """Run a client scenario to its end, failing (not hanging) if it takes past the deadline."""
    return asyncio.run(asyncio.wait_for(coroutine, deadline_s))


class Client:
    """A WebSocket client that keeps what the server pushes apart from the replies to its requests."""

    def __init__(self, session, ws) -> None:
        self.session, self.ws = session, ws
        self.frames: list[dict] = []
        self.audio: list[dict] = []
        self.events: list[dict] = []
        self.telemetry: list[dict] = []
        self.replies: list[dict] = []
        self._next_id = 100

    @classmethod
    async def connect(cls, served: Served, name: str = "tester", token: str | None = None) -> tuple[Client, dict]:
        import aiohttp

        session = aiohttp.ClientSession()
        ws = await session.ws_connect(f"{served.url}/api")
        client = cls(session, ws)
        answer = await client.request("auth", {"token": served.token if token is None else token, "client": name})
        return client, answer

    async def close(self) -> None:
        await self.ws.close()
        await self.session.close()

    async def receive(self, timeout: float = 30.0) -> dict | None:
        """The next message (None when the server closed the connection); pushes are also filed by type."""
        import aiohttp

        message = await self.ws.receive(timeout=timeout)
        if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING):
            return None
        data = json.loads(message.data)
        if "ok" in data:
            self.replies.append(data)
        else:
            {"frame": self.frames, "audio": self.audio, "event": self.events, "telemetry": self.telemetry}[
                data["type"]].append(data)
        return data

    async def send_raw(self, text: str) -> None:
        await self.ws.send_str(text)

    async def request(self, type_: str, payload: dict | None = None, **envelope) -> dict | None:
        """Send a request and return its reply (pushes that arrive first are kept); None if the server closed."""
        self._next_id += 1
        request_id = envelope.pop("id", self._next_id)
        await self.send_raw(json.dumps({"id": request_id, "type": type_, "payload": payload or {}, **envelope}))
        return await self.reply_to(request_id)

    async def reply_to(self, request_id) -> dict | None:
        while True:
            data = await self.receive()
            if data is None:
                return None
            if "ok" in data and (data.get("id") == request_id or (not data["ok"] and data.get("id") is None)):
                return data  # an error the server gave before it could read the id counts as the answer

    async def next_reply(self) -> dict | None:
        while True:
            data = await self.receive()
            if data is None or "ok" in data:
                return data

    async def until_event(self, kind: str) -> dict:
        while True:
            for event in self.events:
                if event["data"]["kind"] == kind:
                    self.events.remove(event)
                    return event
            if await self.receive() is None:
                raise AssertionError(f"the server closed the connection before event {kind!r}")

    async def pump_for(self, seconds: float) -> None:
        """Keep reading for a while (a well-behaved client)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                if await self.receive(timeout=max(0.01, end - time.monotonic())) is None:
                    return
            except asyncio.TimeoutError:
                return
