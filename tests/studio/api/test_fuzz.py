"""10,000 random and mutated messages at the WebSocket and 10,000 at the HTTP command door (a flood there is
rate-limited, 429), plus mutated first messages: each is answered once, nothing crashes or hangs, and afterwards
the server still answers /health and the engine still makes frames."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import replace

from tests.studio.api.clients import Client, run

SEED = 38
WEBSOCKET_MESSAGES = 10_000
HTTP_MESSAGES = 10_000
FIRST_MESSAGES = 60

VALID = [
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
]
ODD_VALUES = [None, True, False, 0, -1, 2**63, 1e308, -1e308, float("nan"), float("inf"), "", "x" * 5000, "\x00",
              "\ud800", "../../etc/passwd", "/etc/passwd", [], [1, "a"], {}, {"a": {"b": [None]}}, "é" * 30]


def _mutated(rng: random.Random, request_id: int) -> str | bytes:
    """A request, mostly broken: wrong values and keys, cut or flipped bytes, garbage, deep nesting."""
    kind = rng.random()
    message = json.loads(json.dumps(rng.choice(VALID)))
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


def test_fuzzed_messages_are_each_answered_and_the_server_stays_up(served):
    from studio.api.messages import ErrorReply, Reply

    rng = random.Random(SEED)
    limits = served.server.limits
    served.thread.call(setattr, served.server, "limits", replace(limits, rate_per_s=1e6, burst=10**6))
    frames_before = served.service.engine.work.frames_emitted

    sent = []

    async def websocket():
        client, answer = await Client.connect(served, "fuzzer")
        assert answer["ok"], answer
        answers = []
        for index in range(WEBSOCKET_MESSAGES):
            message = _mutated(rng, index)
            sent.append(message)
            if isinstance(message, bytes):
                await client.ws.send_bytes(message)
            else:
                await client.send_raw(message)
            try:
                answer = await client.next_reply()
            except asyncio.TimeoutError:
                raise AssertionError(f"no answer to message {index}: {message[:300]!r}") from None
            assert answer is not None, f"the server closed the connection after message {index}: {message[:200]!r}"
            answers.append(answer)
        await client.close()
        return answers

    async def first_messages():
        """Fuzz before authenticating: every connection gets one error and is closed."""
        import aiohttp

        refused = []
        async with aiohttp.ClientSession() as session:
            for index in range(FIRST_MESSAGES):
                async with session.ws_connect(f"{served.url}/api") as ws:
                    message = _mutated(rng, index)
                    await (ws.send_bytes(message) if isinstance(message, bytes) else ws.send_str(message))
                    reply = await ws.receive(timeout=30)
                    refused.append(json.loads(reply.data))
        return refused

    async def http():
        import aiohttp

        statuses = []
        headers = {"Authorization": f"Bearer {served.token}", "X-Client-Name": "http-fuzzer"}
        async with aiohttp.ClientSession() as session:
            for index in range(HTTP_MESSAGES):
                message = _mutated(rng, index)
                body = message if isinstance(message, bytes) else message.encode("utf-8", "surrogatepass")
                async with session.post(f"{served.url}/api/command", data=body, headers=headers) as response:
                    statuses.append((response.status, await response.json()))
            async with session.get(f"{served.url}/health") as response:
                health = response.status
        return statuses, health

    try:
        answers = run(websocket(), deadline_s=600)
        refused = run(first_messages())
        statuses, health = run(http())
    finally:
        served.thread.call(setattr, served.server, "limits", limits)
        if served.service.status().recording:
            served.service.stop_recording()
    for index, answer in enumerate(answers):  # one well-formed reply or error per message, with its id when it had one
        (Reply if answer["ok"] else ErrorReply).model_validate(answer)
        if isinstance(sent[index], str):  # bytes changed may have changed the id too
            assert answer["id"] in (index, None), (index, answer)
    codes = {answer["error"]["code"] for answer in answers if not answer["ok"]}
    assert {"bad_json", "bad_request", "unknown_type", "too_large"} <= codes, codes
    assert sum(answer["ok"] for answer in answers) > 100  # the fuzz also reached the commands
    assert all(not reply["ok"] for reply in refused)
    assert {code for code, _body in statuses} <= {200, 400, 403, 404, 409, 413, 429}, {code for code, _ in statuses}
    for _code, body in statuses:
        (Reply if body["ok"] else ErrorReply).model_validate(body)
    assert health == 200

    async def afterwards():
        await asyncio.sleep(limits.auth_retry_after_s)  # the fuzz's wrong tokens blocked this address for a while
        client, answer = await Client.connect(served, "after-fuzz")
        status = await client.request("status")
        await client.close()
        return answer, status

    answer, status = run(afterwards())
    assert answer["ok"] and status["ok"]
    assert served.service.engine.work.frames_emitted > frames_before and served.service.engine.running
