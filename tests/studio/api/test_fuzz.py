"""10,000 random and mutated messages at the WebSocket and 10,000 at the HTTP command door (a flood there is
rate-limited, 429), plus mutated first messages: each is answered once, nothing crashes or hangs, and afterwards
the server still answers /health and the engine still makes frames.

The engine's per-hop budget is checked structurally, not timed (times are in `avatar-studio bench`): no parsing,
validation or sending runs on the engine thread during the fuzz, the engine keeps making whole frames throughout,
and every client's send queue, a stalled reader's included, stays within its bound."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import replace

from studio.api.bench import fuzz_request, stalled_client
from tests.studio.api.clients import Client, run
from tests.studio.interop.engine_watch import EngineWatch

SEED = 38
WEBSOCKET_MESSAGES = 10_000
HTTP_MESSAGES = 10_000
FIRST_MESSAGES = 60
CHECK_EVERY = 500  # messages between two looks at the engine (it must have made a frame since the last)

def test_fuzzed_messages_are_each_answered_and_the_server_stays_up(served):
    from studio.api.messages import ErrorReply, Reply

    rng = random.Random(SEED)
    limits = served.server.limits
    served.thread.call(setattr, served.server, "limits", replace(limits, rate_per_s=1e6, burst=10**6))
    engine = served.service.engine
    frames_before = engine.work.frames_emitted
    queue_lengths: list[int] = []

    def queues() -> list[int]:
        """Messages waiting for each client, read on the server's loop."""
        return [len(client.replies) + len(client.pushes) for client in served.server.clients]

    def look(index: int, watch: EngineWatch, made: list[int], where: str) -> None:
        if index % 100 == 99:
            queue_lengths.extend(served.thread.call(queues))
        if index % CHECK_EVERY == CHECK_EVERY - 1:
            made[0] = watch.wait_for_frames_after(made[0], f"by message {index + 1} at the {where}")
            watch.take_frames()

    sent = []

    async def websocket(watch: EngineWatch, made: list[int]):
        client, answer = await Client.connect(served, "fuzzer")
        assert answer["ok"], answer
        answers = []
        for index in range(WEBSOCKET_MESSAGES):
            message = fuzz_request(rng, index)
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
            look(index, watch, made, "WebSocket")
        await client.close()
        return answers

    async def first_messages():
        """Fuzz before authenticating: every connection gets one error and is closed."""
        import aiohttp

        refused = []
        async with aiohttp.ClientSession() as session:
            for index in range(FIRST_MESSAGES):
                async with session.ws_connect(f"{served.url}/api") as ws:
                    message = fuzz_request(rng, index)
                    await (ws.send_bytes(message) if isinstance(message, bytes) else ws.send_str(message))
                    reply = await ws.receive(timeout=30)
                    refused.append(json.loads(reply.data))
        return refused

    async def http(watch: EngineWatch, made: list[int]):
        import aiohttp

        statuses = []
        headers = {"Authorization": f"Bearer {served.token}", "X-Client-Name": "http-fuzzer"}
        async with aiohttp.ClientSession() as session:
            for index in range(HTTP_MESSAGES):
                message = fuzz_request(rng, index)
                body = message if isinstance(message, bytes) else message.encode("utf-8", "surrogatepass")
                async with session.post(f"{served.url}/api/command", data=body, headers=headers) as response:
                    statuses.append((response.status, await response.json()))
                look(index, watch, made, "HTTP door")
            async with session.get(f"{served.url}/health") as response:
                health = response.status
        return statuses, health

    stalled = stalled_client(served.port, served.token)  # subscribed to everything, never reads
    try:
        with EngineWatch(engine) as watch:
            made = [watch.wait_for_frames_after(engine.work.frames_emitted, "before the fuzz")]
            answers = run(websocket(watch, made), deadline_s=600)
            stalled.close()
            refused = run(first_messages())
            statuses, health = run(http(watch, made), deadline_s=600)
    finally:
        stalled.close()
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
    assert watch.message_work() == []  # nothing parsed, validated or sent on the engine thread...
    assert watch.ran("pipeline.py", "_emit")  # ...which was watched making its frames
    watch.check_frames()
    assert len(queue_lengths) > 100 and max(queue_lengths) <= limits.send_queue

    async def afterwards():
        await asyncio.sleep(limits.auth_retry_after_s)  # the fuzz's wrong tokens blocked this address for a while
        client, answer = await Client.connect(served, "after-fuzz")
        status = await client.request("status")
        await client.close()
        return answer, status

    answer, status = run(afterwards())
    assert answer["ok"] and status["ok"]
    assert served.service.engine.work.frames_emitted > frames_before and served.service.engine.running
