"""What serving the API costs the engine: the engine loop per 10 ms hop with 0, 1 and 8 subscribed clients, and
with one client that stopped reading (it must cost nothing: the engine never waits for a client)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import socket
import threading
import time

import numpy as np

SUBSCRIPTION = {"frames_hz": 60, "audio": "pcm_s16le", "events": True, "telemetry_hz": 2}


class _Clients:
    """Well-behaved WebSocket clients on their own event loop thread, reading everything they are sent."""

    def __init__(self, port: int, token: str) -> None:
        self.port, self.token = port, token
        self.frames = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="api-bench-clients", daemon=True)
        self._thread.start()
        self._tasks: list = []

    def connect(self, count: int) -> None:
        ready = [asyncio.run_coroutine_threadsafe(self._connect(index), self._loop) for index in range(count)]
        self._tasks = [future.result(60) for future in ready]

    async def _connect(self, index: int):
        import aiohttp

        session = aiohttp.ClientSession()
        ws = await session.ws_connect(f"http://127.0.0.1:{self.port}/api")
        await ws.send_json({"id": 1, "type": "auth", "payload": {"token": self.token, "client": f"bench-{index}"}})
        await ws.receive_json()
        await ws.send_json({"id": 2, "type": "subscribe", "payload": SUBSCRIPTION})
        return session, ws, asyncio.ensure_future(self._read(ws))

    async def _read(self, ws) -> None:
        async for message in ws:
            if '"type": "frame"' in message.data[:40]:
                self.frames += 1

    def disconnect(self) -> None:
        async def close(session, ws, reader):
            reader.cancel()
            await ws.close()
            await session.close()

        for task in self._tasks:
            asyncio.run_coroutine_threadsafe(close(*task), self._loop).result(30)
        self._tasks = []

    def stop(self) -> None:
        self.disconnect()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def _stalled_client(port: int, token: str) -> socket.socket:
    """A client that authenticates, subscribes to everything, and never reads again."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(f"GET /api HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    for request in ({"id": 1, "type": "auth", "payload": {"token": token, "client": "bench-stalled"}},
                    {"id": 2, "type": "subscribe", "payload": SUBSCRIPTION}):
        data = json.dumps(request).encode()
        mask = os.urandom(4)
        length = bytes([0x80 | len(data)]) if len(data) < 126 else bytes([0x80 | 126]) + len(data).to_bytes(2, "big")
        sock.sendall(bytes([0x81]) + length + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
    return sock


def bench_api(seconds: float = 5.0, rounds: int = 2) -> dict:
    """Median and p99 of one engine-loop pass per hop, fed at live pace, while the API server runs with
    0, 1 and 8 clients subscribed to 60 Hz frames, the audio, events and telemetry, and with 1 stalled client;
    the cases alternate over `rounds` (after a warm-up pass), so that a busy moment of the machine is shared."""
    from studio.api.security import AllowedFolders
    from studio.api.server import ApiServer, ServerThread
    from studio.api.service import StudioService
    from studio.engine.bench import HopFeeder, speech_like
    from studio.engine.motion import HOP_S
    from studio.presets import persona_by_name, preset_by_name

    service = StudioService(persona_by_name("default"), preset_by_name("default"), AllowedFolders([os.getcwd()]),
                            prewarm=False)
    engine = service.engine  # driven here, one pass per hop, as the engine thread would
    token = secrets.token_urlsafe(32)
    server = ServerThread(ApiServer(service, token))
    port = server.start()
    clients = _Clients(port, token)
    audio = speech_like(seconds)
    cases = (("0_clients", 0), ("1_client", 1), ("8_clients", 8), ("1_stalled_client", -1))
    costs: dict[str, list[float]] = {label: [] for label, _count in cases}
    received: dict[str, float] = {}
    dropped: dict[str, int] = {}

    def feed(into: list[float] | None) -> None:
        feeder = HopFeeder(audio)
        engine.set_source(feeder)
        index, due = 0, time.perf_counter()
        while not feeder.finished:
            started = time.perf_counter()
            engine.run_once()
            if into is not None and index >= 20:
                into.append((time.perf_counter() - started) * 1000.0)
            index += 1
            due += HOP_S
            time.sleep(max(0.0, due - time.perf_counter()))

    try:
        feed(None)  # warm-up: first calls of the model, the features and the server's paths
        for _round in range(rounds):
            for label, count in cases:
                stalled = _stalled_client(port, token) if count < 0 else None
                clients.connect(max(count, 0))
                frames_before = clients.frames
                feed(costs[label])
                if count > 0:
                    received[label] = received.get(label, 0.0) + (clients.frames - frames_before) / count
                dropped[label] = dropped.get(label, 0) + server.call(lambda: server.server.stats()["messages_dropped"])
                clients.disconnect()
                if stalled is not None:
                    stalled.close()
    finally:
        clients.stop()
        server.stop()
        service.close()
    figures: dict[str, float] = {}
    for label, values in costs.items():
        figures[f"engine_hop_{label}_median_ms"] = float(np.median(values))
        figures[f"engine_hop_{label}_p99_ms"] = float(np.percentile(values, 99))
        figures[f"dropped_messages_{label}_count"] = float(dropped[label])
    for label, frames in received.items():
        figures[f"frames_received_per_client_{label}_fps"] = frames / (rounds * seconds)
    baseline = figures["engine_hop_0_clients_median_ms"]
    figures["api_cost_8_clients_median_ms"] = figures["engine_hop_8_clients_median_ms"] - baseline
    figures["api_cost_stalled_client_median_ms"] = figures["engine_hop_1_stalled_client_median_ms"] - baseline
    return figures
