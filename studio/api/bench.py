"""What serving the API costs the engine: the engine loop per 10 ms hop with 0, 1 and 8 subscribed clients, with
one client that stopped reading (it must cost nothing: the engine never waits for a client), and while 10,000
fuzzed requests come to the WebSocket or the HTTP door."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import secrets
import socket
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

SUBSCRIPTION = {"frames_hz": 60, "audio": "pcm_s16le", "events": True, "telemetry_hz": 2}

FUZZ_MESSAGES = 10_000
FUZZ_BASES = (  # well-formed requests the fuzz mutates
    {"type": "status"},
    {"type": "speak", "payload": {"text": "Hi."}},
    {"type": "speak", "payload": {"text": "Ok", "voice": "en-us", "rate_wpm": 200, "pitch": 40}},
    {"type": "play", "payload": {"path": "missing.wav"}},
    {"type": "stop"},
    {"type": "expression.trigger", "payload": {"name": "smile"}},
    {"type": "expression.release", "payload": {"name": "smile"}},
    {"type": "persona.set", "payload": {"name": "default"}},
    {"type": "preset.set", "payload": {"name": "default"}},
    {"type": "recording.start", "payload": {}},
    {"type": "recording.stop"},
    {"type": "subscribe", "payload": {"frames_hz": 5, "events": True}},
    {"type": "subscribe", "payload": {}},
    {"type": "auth", "payload": {"token": "x" * 20, "client": "fuzz"}},
)
# for the bench: none of these change the engine's source, persona or preset, which the bench itself drives
STEADY_FUZZ_BASES = tuple(m for m in FUZZ_BASES if m["type"] in ("status", "expression.trigger", "expression.release",
                                                                   "subscribe", "auth"))
ODD_VALUES = [None, True, False, 0, -1, 2**63, 1e308, -1e308, float("nan"), float("inf"), "", "x" * 5000, "\x00",
              "\ud800", "../../etc/passwd", "/etc/passwd", [], [1, "a"], {}, {"a": {"b": [None]}}, "é" * 30]


def fuzz_request(rng: random.Random, request_id: int, bases: Sequence[dict] = FUZZ_BASES) -> str | bytes:
    """A request for the fuzz test and the bench, mostly broken: wrong values and keys, cut or flipped bytes,
    garbage, deep nesting, over the size limit."""
    kind = rng.random()
    message = json.loads(json.dumps(rng.choice(bases)))
    message["id"] = request_id
    if kind < 0.35:  # a field's value of the wrong kind, or an unknown field
        target = message.setdefault("payload", {}) if rng.random() < 0.7 else message
        key = rng.choice([*target.keys(), "extra", "id", "type", "payload"]) if target else "extra"
        target[key] = rng.choice(ODD_VALUES)
        if key == "id":
            message["id"] = request_id  # keep it answerable by id
    elif kind < 0.45:  # an unknown or odd type
        message["type"] = rng.choice(["", "speak ", "SPEAK", "status\x00", "x" * 41, "recording", "a.b.c"])
    elif kind < 0.75:  # the text of a request with bytes changed, cut or added
        data = bytearray(json.dumps(message).encode())
        for _ in range(rng.randint(1, 6)):
            at = rng.randrange(len(data))
            choice = rng.random()
            if choice < 0.4:
                data[at] = rng.randrange(256)
            elif choice < 0.7:
                del data[at:at + rng.randint(1, 8)]
            else:
                data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
            if not data:
                data = bytearray(b"{")
        return bytes(data)
    elif kind < 0.85:  # garbage
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
    elif kind < 0.9:  # very deep nesting
        depth = rng.choice([100, 1000, 20_000])
        return "[" * depth + "]" * depth
    elif kind < 0.95:  # a message over the size limit
        message["payload"] = {"text": "y" * 70_000}
    return json.dumps(message)


class _Clients:
    """Well-behaved WebSocket clients in their own process (as real clients are: their parsing does not share
    the engine's interpreter lock), reading everything they are sent."""

    def __init__(self, port: int, token: str, count: int) -> None:
        import subprocess
        import sys

        code = f"from studio.api.bench import run_clients; run_clients({port}, {token!r}, {count})"
        self.process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)
        line = self.process.stdout.readline()
        if line.strip() != "ready":
            self.process.kill()
            raise RuntimeError(f"bench clients did not start: {line!r}")

    def stop(self) -> int:
        """Disconnect them; the frames they received in all."""
        self.process.stdin.close()
        frames = int(self.process.stdout.readline() or 0)
        self.process.wait(30)
        return frames


def run_clients(port: int, token: str, count: int) -> None:
    """In the clients' process: connect, subscribe, print 'ready', read until stdin closes, print the frames read."""
    import sys

    import aiohttp

    async def main() -> None:
        frames = [0]

        async def read(ws) -> None:
            async for message in ws:
                if '"type": "frame"' in message.data[:40]:
                    frames[0] += 1

        async with aiohttp.ClientSession() as session:
            sockets = []
            for index in range(count):
                ws = await session.ws_connect(f"http://127.0.0.1:{port}/api")
                await ws.send_json({"id": 1, "type": "auth", "payload": {"token": token, "client": f"bench-{index}"}})
                await ws.receive_json()
                await ws.send_json({"id": 2, "type": "subscribe", "payload": SUBSCRIPTION})
                sockets.append(ws)
            readers = [asyncio.ensure_future(read(ws)) for ws in sockets]
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
            for reader in readers:
                reader.cancel()
            for ws in sockets:
                await ws.close()
        print(frames[0], flush=True)

    asyncio.run(main())


class _Fuzzer:
    """10,000 fuzzed requests at one door from a process of its own (its work does not share the engine's
    interpreter lock, as a real client's does not), started on `go()`."""

    def __init__(self, port: int, token: str, door: str, count: int) -> None:
        import subprocess
        import sys

        code = f"from studio.api.bench import run_fuzzer; run_fuzzer({port}, {token!r}, {door!r}, {count})"
        self.process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)
        line = self.process.stdout.readline()
        if line.strip() != "ready":
            self.process.kill()
            raise RuntimeError(f"bench fuzzer did not start: {line!r}")

    def go(self) -> None:
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def sending(self) -> bool:
        return self.process.poll() is None

    def answered(self) -> int:
        """How many requests were answered (once it has ended)."""
        answered = int(self.process.stdout.readline() or 0)
        self.process.wait(30)
        return answered


def run_fuzzer(port: int, token: str, door: str, count: int) -> None:
    """In the fuzzer's process: print 'ready', wait for a line on stdin, send `count` fuzzed requests at `door`
    ("websocket" or "http"), each after the answer to the one before, and print how many were answered."""
    import sys

    import aiohttp

    rng = random.Random(38)
    url = f"http://127.0.0.1:{port}"


    async def websocket(session) -> int:
        answered, ws = 0, None
        for index in range(count):
            if ws is None or ws.closed:  # the server may close a connection; the fuzz goes on on a new one
                ws = await session.ws_connect(f"{url}/api")
                await ws.send_json({"id": 0, "type": "auth", "payload": {"token": token, "client": "bench-fuzzer"}})
                await ws.receive(timeout=30)
            message = fuzz_request(rng, index, STEADY_FUZZ_BASES)
            await (ws.send_bytes(message) if isinstance(message, bytes) else ws.send_str(message))
            while True:  # past the frames and events a fuzzed subscription asked for, to the answer
                message = await ws.receive(timeout=30)
                if message.type != aiohttp.WSMsgType.TEXT:
                    ws = None
                    break
                if "ok" in json.loads(message.data):
                    answered += 1
                    break
        return answered

    async def http(session) -> int:
        answered = 0
        headers = {"Authorization": f"Bearer {token}", "X-Client-Name": "bench-http-fuzzer"}
        for index in range(count):
            message = fuzz_request(rng, index, STEADY_FUZZ_BASES)
            data = message if isinstance(message, bytes) else message.encode()
            async with session.post(f"{url}/api/command", data=data, headers=headers) as response:
                await response.read()
                answered += 1
        return answered

    async def main() -> None:
        async with aiohttp.ClientSession() as session:
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            answered = await (websocket(session) if door == "websocket" else http(session))
        print(answered, flush=True)

    asyncio.run(main())


def engine_hop_during_fuzz(engine, server, port: int, token: str, audio: np.ndarray,
                           messages: int = FUZZ_MESSAGES) -> dict:
    """Engine loop per hop at live pace (p50, p95 ms) quiet, and while `messages` fuzzed requests come to the
    WebSocket or the HTTP door, each sent when the one before was answered, with the rate limit lifted so that
    every one is read, parsed and answered (the most a client can ask of the server); and the engine's own count
    of frames over its budget in each case."""
    from studio.engine.bench import live_pace_hop_costs_ms
    from studio.interop.bench import hop_costs_while

    limits = server.call(lambda: server.server.limits)
    server.call(setattr, server.server, "limits", replace(limits, rate_per_s=1e6, burst=10**6))
    figures: dict[str, float] = {}
    try:
        for label in ("quiet", "websocket_fuzz", "http_fuzz"):
            over = engine.telemetry.over_budget_count
            if label == "quiet":
                costs = live_pace_hop_costs_ms(engine, audio)
            else:
                fuzzer = _Fuzzer(port, token, label.removesuffix("_fuzz"), messages)
                fuzzer.go()
                costs = hop_costs_while(engine, audio, fuzzer.sending)
                figures[f"{label}_answered_count"] = float(fuzzer.answered())
            figures[f"engine_hop_{label}_ms_p50"] = float(np.percentile(costs, 50))
            figures[f"engine_hop_{label}_ms_p95"] = float(np.percentile(costs, 95))
            figures[f"engine_hop_{label}_hops_count"] = float(len(costs))
            figures[f"engine_over_budget_{label}_count"] = float(engine.telemetry.over_budget_count - over)
    finally:
        server.call(setattr, server.server, "limits", limits)
    return figures


def stalled_client(port: int, token: str) -> socket.socket:
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
    from studio.engine.bench import live_pace_hop_costs_ms, speech_like
    from studio.presets import persona_by_name, preset_by_name

    service = StudioService(persona_by_name("default"), preset_by_name("default"), AllowedFolders([os.getcwd()]),
                            prewarm=False)
    engine = service.engine  # driven here, one pass per hop, as the engine thread would
    token = secrets.token_urlsafe(32)
    server = ServerThread(ApiServer(service, token))
    port = server.start()
    audio = speech_like(seconds)
    cases = (("0_clients", 0), ("1_client", 1), ("8_clients", 8), ("1_stalled_client", -1))
    costs: dict[str, list[float]] = {label: [] for label, _count in cases}
    received: dict[str, float] = {}
    dropped: dict[str, int] = {}
    stalled_dropped = 0

    try:
        live_pace_hop_costs_ms(engine, audio)  # warm-up: first calls of the model, the features and the server's paths
        for _round in range(rounds):
            for label, count in cases:
                stalled = stalled_client(port, token) if count < 0 else None
                clients = _Clients(port, token, count) if count > 0 else None
                dropped_before = server.call(lambda: server.server.dropped_clients)
                costs[label] += live_pace_hop_costs_ms(engine, audio)
                dropped[label] = dropped.get(label, 0) + server.call(lambda: server.server.stats()["messages_dropped"])
                if clients is not None:
                    received[label] = received.get(label, 0.0) + clients.stop() / count
                if stalled is not None:
                    stalled_dropped += server.call(lambda: server.server.dropped_clients) - dropped_before
                    stalled.close()
        fuzzed = engine_hop_during_fuzz(engine, server, port, token, audio)
    finally:
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
    figures["stalled_clients_dropped_count"] = float(stalled_dropped)
    figures["api_cost_stalled_client_median_ms"] = figures["engine_hop_1_stalled_client_median_ms"] - baseline
    figures.update(fuzzed)
    return figures
