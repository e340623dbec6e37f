"""The API on the wire (aiohttp): `GET /api` (WebSocket), `POST /api/command`, `GET /health`, `GET /api/schema`.

Threads: the engine thread puts each FrameState into one drop-oldest `FrameQueue` and each audio chunk into a
bounded deque, and never waits for anything here. A pump thread hands them to the event loop in batches; the
loop serialises a frame once for all clients due one and appends it to each client's bounded send queue
(oldest dropped when full); one writer task per client sends it. A client that stays behind is disconnected,
and its socket's kernel buffer is small, so a stalled reader is found within seconds. Commands run on one
worker thread, so the loop never waits for speech synthesis or a model load either.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import studio
from studio.api.messages import (
    API_VERSION,
    COMMANDS,
    NAME_PATTERN,
    ApiError,
    AuthResult,
    Envelope,
    SubscribePayload,
    SubscribeResult,
    api_schema,
    error_reply,
    parse_request,
    reply,
)
from studio.api.security import ClientNames, Limits, TokenBucket, token_matches
from studio.api.service import StudioService
from studio.engine.sources import ENGINE_RATE

HTTP_STATUS = {"bad_json": 400, "bad_request": 400, "unknown_type": 400, "text_too_long": 400, "path_not_allowed": 403,
               "not_found": 404, "conflict": 409, "too_large": 413, "rate_limited": 429, "retry_later": 429,
               "unauthenticated": 401, "bad_token": 401, "not_approved": 403, "too_many_clients": 503,
               "engine_error": 500, "internal": 500}
CLOSE_POLICY = 1008  # WebSocket close codes: refused (auth, flood)
CLOSE_TRY_LATER = 1013  # too many clients, retry later
CLOSE_GOING_AWAY = 1001
AUDIO_QUEUE_CHUNKS = 400  # about 4 s of engine audio waiting for the pump
TELEMETRY_TICK_S = 0.1
PUMP_WAIT_S = 0.05


class _Client:
    """One authenticated WebSocket connection: its subscription, bounded send queue and writer task.

    Replies and pushes wait in one bounded queue. When it is full the oldest push (a frame, audio, an event) is
    dropped; a reply is never dropped: a client whose queue holds nothing but unread replies is disconnected
    instead, as is one that kept its queue full for `slow_client_drops` pushes. So a request is answered or
    its connection ends, never silently lost.
    """

    def __init__(self, server: ApiServer, ws, name: str, peer: str, transport) -> None:
        limits = server.limits
        self.server, self.ws, self.name, self.peer, self.transport = server, ws, name, peer, transport
        self.replies: deque[str] = deque()
        self.pushes: deque[str] = deque()
        self.wake = asyncio.Event()
        self.capacity = limits.send_queue
        self.behind = 0  # pushes dropped since the queue was last empty
        self.dropped = 0
        self.sent = 0
        self.bucket = TokenBucket(limits.rate_per_s, limits.burst)
        self.limited_in_row = 0
        self.subscription = SubscribePayload()
        self.next_frame_due: float | None = None
        self.next_telemetry_due = 0.0
        self.closed = False
        self.writer: asyncio.Task | None = None

    def push(self, text: str, is_reply: bool = False) -> None:
        """Queue a message; never waits."""
        if self.closed:
            return
        if len(self.replies) + len(self.pushes) >= self.capacity:
            if not self.pushes:
                self.server.drop(self, f"too slow: {len(self.replies)} replies unread")
                return
            self.pushes.popleft()
            self.dropped += 1
            self.behind += 1
            if self.behind >= self.server.limits.slow_client_drops:
                self.server.drop(self, f"too slow: {self.behind} messages dropped before it caught up")
                return
        (self.replies if is_reply else self.pushes).append(text)
        self.wake.set()

    def answer(self, text: str) -> None:
        self.push(text, is_reply=True)

    async def write(self) -> None:
        timeout = self.server.limits.send_timeout_s
        try:
            while not self.closed:
                await self.wake.wait()
                self.wake.clear()
                while (self.replies or self.pushes) and not self.closed:
                    text = self.replies.popleft() if self.replies else self.pushes.popleft()
                    await asyncio.wait_for(self.ws.send_str(text), timeout)
                    self.sent += 1
                self.behind = 0
        except asyncio.TimeoutError:
            self.server.drop(self, f"too slow: a message took over {timeout:g} s to leave")
        except (ConnectionError, RuntimeError):  # the peer went away (aiohttp raises ConnectionResetError)
            self.server.drop(self, "connection lost")


class ApiServer:
    """The API over one StudioService. `start()` binds and serves on the running event loop; `close()` ends it."""

    def __init__(self, service: StudioService, token: str, names: ClientNames | None = None,
                 limits: Limits | None = None) -> None:
        self.service = service
        self.token = token
        self.names = names or ClientNames(require_approval=False)
        self.limits = limits or Limits()
        self.clients: set[_Client] = set()
        self.client_names: tuple[str, ...] = ()
        self.dropped_clients = 0
        self.host, self.port = "127.0.0.1", 0
        self._blocked_until: dict[str, float] = {}  # address -> monotonic time it may try a token again
        self._http_buckets: dict[str, TokenBucket] = {}
        self._authenticating = 0  # WebSocket connections waiting for their auth message
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="api-command")
        self._audio: deque[tuple[float, np.ndarray]] = deque(maxlen=AUDIO_QUEUE_CHUNKS)
        self._stopping = threading.Event()
        self._batch_taken = threading.Event()  # set while no batch waits for the loop
        self._batch_taken.set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner = None
        self._pump_thread: threading.Thread | None = None
        self._frames = None
        self._tasks: list[asyncio.Task] = []
        service.clients = lambda: list(self.client_names)
        service.on_event(self._event_from_any_thread)

    # ---------------------------------------------------------------- lifecycle

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Bind and serve (the engine must be running); returns the port (useful with port 0)."""
        from aiohttp import web

        self._loop = asyncio.get_running_loop()
        app = web.Application(client_max_size=self.limits.max_message_bytes)
        app.router.add_get("/health", self._health)
        app.router.add_get("/api", self._websocket)
        app.router.add_post("/api/command", self._http_command)
        app.router.add_get("/api/schema", self._schema)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, port), family=family, backlog=64)
        await web.SockSite(self._runner, sock).start()
        self.host, self.port = host, sock.getsockname()[1]
        self._frames = self.service.engine.subscribe(256)
        self.service.engine.listen_audio(self._on_audio)
        self._stopping.clear()
        self._pump_thread = threading.Thread(target=self._pump, name="api-pump", daemon=True)
        self._pump_thread.start()
        self._tasks = [asyncio.create_task(self._telemetry_loop())]
        return self.port

    async def close(self) -> None:
        self._stopping.set()
        for task in self._tasks:
            task.cancel()
        for client in list(self.clients):
            client.closed = True
            if client.writer is not None:
                client.writer.cancel()
            try:
                await asyncio.wait_for(client.ws.close(code=CLOSE_GOING_AWAY, message=b"server stopping"), 1.0)
            except (asyncio.TimeoutError, ConnectionError, RuntimeError):
                client.transport.abort()
        if self._pump_thread is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._pump_thread.join)
        engine = self.service.engine
        engine.unlisten_audio(self._on_audio)
        if self._frames is not None:
            engine.unsubscribe(self._frames)
        if self._runner is not None:
            await self._runner.cleanup()
        self._executor.shutdown(wait=True)

    # ---------------------------------------------------------------- engine side (engine and pump threads)

    def _on_audio(self, media_time_s: float, samples: np.ndarray) -> None:
        """On the engine thread: copy and go (the deque is bounded; its oldest chunk goes first)."""
        self._audio.append((media_time_s, samples.copy()))

    def _pump(self) -> None:
        """Hand frames and audio to the loop, one batch at a time: while the loop is busy with the last batch the
        frames wait in the engine's drop-oldest queue, so a stalled loop holds at most that queue's worth."""
        frames_queue = self._frames
        while not self._stopping.is_set():
            if not self._batch_taken.wait(PUMP_WAIT_S):
                continue
            first = frames_queue.get(timeout=PUMP_WAIT_S)
            frames = [first, *frames_queue.drain()] if first is not None else []
            audio = []
            while self._audio:
                audio.append(self._audio.popleft())
            self.service.poll()
            if frames or audio:
                self._batch_taken.clear()
                if not self._call_soon(self._fanout, frames, audio):
                    self._batch_taken.set()

    def _call_soon(self, callback: Callable, *args) -> bool:
        """Run `callback(*args)` on the loop soon; False when the loop is gone (the server is stopping)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(callback, *args)
                return True
            except RuntimeError:  # the loop closed in between
                pass
        return False

    def _event_from_any_thread(self, kind: str, detail: dict) -> None:
        self._call_soon(self.broadcast_event, kind, detail)

    # ---------------------------------------------------------------- fan-out (event loop)

    def _fanout(self, frames: list, audio: list) -> None:
        try:
            self._send_out(frames, audio)
        finally:
            self._batch_taken.set()

    def _send_out(self, frames: list, audio: list) -> None:
        clients = [client for client in self.clients if not client.closed]
        for frame in frames:
            text = None
            for client in clients:
                rate = client.subscription.frames_hz
                if rate is None:
                    continue
                period, due, now = 1.0 / rate, client.next_frame_due, frame.media_time_s
                if due is not None and now < due - 1e-6:
                    continue
                client.next_frame_due = now + period if due is None or now - due > period else due + period
                if text is None:
                    text = json.dumps({"type": "frame", "data": frame.to_dict()})
                client.push(text)
        if audio:
            encoded: dict[str, list[str]] = {}
            for client in clients:
                encoding = client.subscription.audio
                if encoding == "none":
                    continue
                if encoding not in encoded:
                    encoded[encoding] = [_audio_text(media, samples, encoding) for media, samples in audio]
                for text in encoded[encoding]:
                    client.push(text)

    def broadcast_event(self, kind: str, detail: dict) -> None:
        text = json.dumps({"type": "event", "data": {"kind": kind, "detail": detail}}, default=str)
        for client in list(self.clients):
            if client.subscription.events:
                client.push(text)

    async def _telemetry_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(TELEMETRY_TICK_S)
            now = loop.time()
            due = [client for client in self.clients
                   if client.subscription.telemetry_hz and now >= client.next_telemetry_due and not client.closed]
            if not due:
                continue
            data = {"engine": self.service.engine.telemetry.snapshot(), "api": self.stats()}
            text = json.dumps({"type": "telemetry", "data": data}, default=float)
            for client in due:
                client.next_telemetry_due = now + 1.0 / client.subscription.telemetry_hz
                client.push(text)

    def stats(self) -> dict:
        return {"clients": len(self.clients), "dropped_clients": self.dropped_clients,
                "messages_dropped": sum(client.dropped for client in self.clients)}

    def drop(self, client: _Client, reason: str) -> None:
        """Disconnect a client now (it is not read from or written to again)."""
        if client.closed:
            return
        client.closed = True
        client.replies.clear()
        client.pushes.clear()
        client.transport.abort()
        self._forget(client)
        self.dropped_clients += 1
        self.broadcast_event("client_dropped", {"client": client.name, "reason": reason})

    def _forget(self, client: _Client) -> None:
        self.clients.discard(client)
        self.client_names = tuple(sorted(c.name for c in self.clients))

    # ---------------------------------------------------------------- HTTP

    async def _health(self, request):
        from aiohttp import web

        ready = self.service.ready
        body = {"status": "ready" if ready else "starting", "api_version": API_VERSION,
                "studio_version": studio.__version__, "clients": len(self.clients)}
        return web.json_response(body, status=200 if ready else 503)

    async def _schema(self, request):
        from aiohttp import web

        return web.json_response(api_schema())

    def _blocked(self, address: str) -> float:
        """Seconds this address must still wait before it may present a token again (0: it may)."""
        now = time.monotonic()
        if len(self._blocked_until) > 4096:
            self._blocked_until = {a: t for a, t in self._blocked_until.items() if t > now}
        return max(0.0, self._blocked_until.get(address, 0.0) - now)

    async def _refuse_token(self, address: str) -> str:
        self._blocked_until[address] = time.monotonic() + self.limits.auth_retry_after_s
        await asyncio.sleep(self.limits.auth_failure_delay_s)
        return f"wrong token; this address may try again in {self.limits.auth_retry_after_s:g} s"

    def _retry_later(self, wait: float) -> str:
        return f"a wrong token was given from this address; try again in {wait:.1f} s"

    async def _admit(self, name: str) -> tuple[bool, str]:
        return await asyncio.get_running_loop().run_in_executor(None, self.names.decide, name)

    async def _http_command(self, request):
        from aiohttp import web

        def answer(text: str, code: str | None = None):
            return web.Response(text=text, content_type="application/json", status=HTTP_STATUS.get(code, 200))

        def refuse(code: str, message: str, request_id=None):
            return answer(error_reply(request_id, code, message), code)

        address = request.remote or "?"
        wait = self._blocked(address)
        if wait:
            return refuse("retry_later", self._retry_later(wait))
        header = request.headers.get("Authorization", "")
        if not header.startswith("Bearer "):
            return refuse("unauthenticated", "send the token as 'Authorization: Bearer TOKEN'")
        if not token_matches(self.token, header[len("Bearer "):].strip()):
            return refuse("bad_token", await self._refuse_token(address))
        name = request.headers.get("X-Client-Name", "http")
        if not re.fullmatch(NAME_PATTERN, name):
            return refuse("bad_request", f"header X-Client-Name {name[:40]!r}: use 1..64 letters, digits, space _ . + -")
        admitted, why = await self._admit(name)
        if not admitted:
            return refuse("not_approved", why)
        if len(self._http_buckets) > 4096:
            self._http_buckets.clear()
        bucket = self._http_buckets.setdefault(address, TokenBucket(self.limits.rate_per_s, self.limits.burst))
        if not bucket.take():
            return refuse("rate_limited", f"more than {self.limits.rate_per_s:g} requests per second; slow down")
        body = bytearray()  # read until past the limit at most (one read may return only part of the body)
        while len(body) <= self.limits.max_message_bytes:
            chunk = await request.content.read(self.limits.max_message_bytes + 1 - len(body))
            if not chunk:
                break
            body += chunk
        if len(body) > self.limits.max_message_bytes:
            return refuse("too_large", f"request body over {self.limits.max_message_bytes} bytes")
        try:
            envelope, payload = parse_request(body, self.limits.max_message_bytes)
            if not COMMANDS[envelope.type].http:
                raise ApiError("bad_request", f"type {envelope.type!r} needs the WebSocket endpoint /api", envelope.id)
        except ApiError as error:
            return refuse(error.code, error.message, error.request_id)
        text, code = await self._command(envelope, payload)
        return answer(text, code)

    # ---------------------------------------------------------------- commands

    async def _command(self, envelope: Envelope, payload) -> tuple[str, str | None]:
        """(reply text, error code or None) for a command other than auth and subscribe."""
        service = self.service
        handlers = {
            "speak": lambda p: service.speak(p.text, p.voice, p.rate_wpm, p.pitch),
            "play": lambda p: service.play(p.path),
            "stop": lambda p: service.stop(),
            "expression.trigger": lambda p: service.trigger(p.name),
            "expression.release": lambda p: service.release(p.name),
            "persona.set": lambda p: service.set_persona(p.name),
            "preset.set": lambda p: service.set_preset(p.name),
            "recording.start": lambda p: service.start_recording(p.name),
            "recording.stop": lambda p: service.stop_recording(),
            "status": lambda p: service.status(),
        }
        handler = handlers.get(envelope.type)
        if handler is None:
            return error_reply(envelope.id, "bad_request", f"type {envelope.type!r} is not a command here"), "bad_request"
        try:
            result = await asyncio.get_running_loop().run_in_executor(self._executor, handler, payload)
        except ApiError as error:
            return error_reply(envelope.id, error.code, error.message), error.code
        except Exception as error:  # noqa: BLE001 - a failing command is an error reply; the server goes on
            message = f"{envelope.type} failed: {type(error).__name__}: {error}"
            return error_reply(envelope.id, "engine_error", message), "engine_error"
        return reply(envelope.id, envelope.type, result), None

    # ---------------------------------------------------------------- WebSocket

    async def _websocket(self, request):
        from aiohttp import WSMsgType, web

        ws = web.WebSocketResponse(max_msg_size=self.limits.hard_message_bytes, heartbeat=30.0, compress=False)
        await ws.prepare(request)
        transport = request.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.limits.socket_send_buffer)
        address = request.remote or "?"
        self._authenticating += 1
        try:
            client = await self._authenticate(ws, address, transport)
        finally:
            self._authenticating -= 1
        if client is None:
            return ws
        self.clients.add(client)
        self.client_names = tuple(sorted(c.name for c in self.clients))
        client.writer = asyncio.create_task(client.write())
        self.broadcast_event("client_connected", {"client": client.name})
        try:
            async for message in ws:
                if client.closed:
                    break
                if message.type in (WSMsgType.TEXT, WSMsgType.BINARY):
                    if not await self._on_message(client, message.data):
                        break
                    await asyncio.sleep(0)  # messages already read come without a pause: let the writer send too
                elif message.type == WSMsgType.ERROR:
                    break
        finally:
            if client.writer is not None:
                client.writer.cancel()
            if not client.closed:
                client.closed = True
                self._forget(client)
        return ws

    async def _authenticate(self, ws, address: str, transport) -> _Client | None:
        """The first message must be `auth` with the right token and an admitted name; else an error and close."""
        from aiohttp import WSMsgType

        async def refuse(code: str, message: str, request_id=None, close_code: int = CLOSE_POLICY) -> None:
            await ws.send_str(error_reply(request_id, code, message))
            await ws.close(code=close_code, message=code.encode())

        if len(self.clients) >= self.limits.max_clients:
            await refuse("too_many_clients", f"{self.limits.max_clients} clients are connected already; the most "
                         "allowed", close_code=CLOSE_TRY_LATER)
            return None
        if self._authenticating > self.limits.max_clients:  # connections that never say who they are count too
            await refuse("too_many_clients", f"{self._authenticating - 1} connections are still to authenticate",
                         close_code=CLOSE_TRY_LATER)
            return None
        wait = self._blocked(address)
        if wait:
            await refuse("retry_later", self._retry_later(wait), close_code=CLOSE_TRY_LATER)
            return None
        try:
            message = await ws.receive(timeout=self.limits.auth_timeout_s)
        except asyncio.TimeoutError:
            await refuse("unauthenticated", f"no auth message within {self.limits.auth_timeout_s:g} s")
            return None
        if message.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
            return None
        try:
            envelope, payload = parse_request(message.data, self.limits.max_message_bytes)
        except ApiError as error:
            await refuse(error.code if error.code != "unknown_type" else "unauthenticated",
                         f"{error.message} (the first message must be auth)", error.request_id)
            return None
        if envelope.type != "auth":
            await refuse("unauthenticated", f"the first message must be auth with the token, not {envelope.type!r}",
                         envelope.id)
            return None
        if not token_matches(self.token, payload.token):
            await refuse("bad_token", await self._refuse_token(address), envelope.id)
            return None
        admitted, why = await self._admit(payload.client)
        if not admitted:
            await refuse("not_approved", why, envelope.id)
            return None
        await ws.send_str(reply(envelope.id, "auth", AuthResult(client=payload.client, api_version=API_VERSION,
                                                                   studio_version=studio.__version__)))
        return _Client(self, ws, payload.client, address, transport)

    async def _on_message(self, client: _Client, data: str | bytes) -> bool:
        """Answer one message; False when the connection is to close."""
        if not client.bucket.take():
            client.limited_in_row += 1
            if client.limited_in_row >= self.limits.flood_close_after:
                client.answer(error_reply(None, "rate_limited", f"{client.limited_in_row} requests over the rate limit "
                                        "in a row; closing the connection"))
                await asyncio.sleep(0)
                self.drop(client, "flooding")
                return False
            client.answer(error_reply(None, "rate_limited",
                                    f"more than {self.limits.rate_per_s:g} requests per second; slow down"))
            return True
        client.limited_in_row = 0
        try:
            envelope, payload = parse_request(data, self.limits.max_message_bytes)
        except ApiError as error:
            client.answer(error_reply(error.request_id, error.code, error.message))
            return True
        if envelope.type == "auth":
            client.answer(error_reply(envelope.id, "bad_request", "already authenticated on this connection"))
        elif envelope.type == "subscribe":
            client.subscription = payload
            client.next_frame_due = None
            client.next_telemetry_due = 0.0
            client.answer(reply(envelope.id, "subscribe", SubscribeResult(**payload.model_dump())))
        else:
            text, _code = await self._command(envelope, payload)
            client.answer(text)
        return True


def _audio_text(media_time_s: float, samples: np.ndarray, encoding: str) -> str:
    if encoding == "pcm_s16le":
        raw = (np.clip(samples, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()
    else:
        raw = samples.astype("<f4").tobytes()
    data = {"media_time_s": media_time_s, "sample_rate": ENGINE_RATE, "channels": 1, "encoding": encoding,
            "samples": base64.b64encode(raw).decode("ascii")}
    return json.dumps({"type": "audio", "data": data})


class ServerThread:
    """An ApiServer on its own event loop thread (tests, the bench, and later the window)."""

    def __init__(self, server: ApiServer, host: str = "127.0.0.1", port: int = 0) -> None:
        self.server, self.host, self.port = server, host, port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="api-server", daemon=True)

    def start(self) -> int:
        self._thread.start()
        self.port = asyncio.run_coroutine_threadsafe(self.server.start(self.host, self.port), self._loop).result(30)
        return self.port

    def call(self, callback: Callable, *args):
        """Run `callback(*args)` on the server's loop and return its result (to read its state safely)."""
        async def run():
            return callback(*args)

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(30)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


async def serve_until_stopped(server: ApiServer, host: str, port: int, on_ready: Callable[[int], None]) -> None:
    """`avatar-studio serve`: bind, say so, and serve until SIGINT or SIGTERM."""
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, stop.set)
        except (NotImplementedError, RuntimeError):  # Windows: Ctrl+C arrives as KeyboardInterrupt instead
            pass
    bound = await server.start(host, port)
    on_ready(bound)
    try:
        await stop.wait()
    finally:
        await server.close()
