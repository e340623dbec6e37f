"""The control API over real sockets on 127.0.0.1, against a real headless engine."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import time

import numpy as np

from studio.api.messages import AudioPush, EventPush, FramePush, SpeakResult, StatusResult
from tests.studio.api.clients import Client, run

LINE = "Hello there, how are you today?"


def test_a_client_speaks_a_line_and_gets_frames_whose_mouth_opens_and_the_audio(served):
    async def scenario():
        client, answer = await Client.connect(served, "speaker")
        assert answer["ok"] and answer["result"]["client"] == "speaker"
        subscribed = await client.request("subscribe", {"frames_hz": 30, "events": True, "audio": "pcm_s16le"})
        assert subscribed["ok"], subscribed
        await client.pump_for(0.3)  # frames of the idle avatar before it speaks
        before = len(client.frames)
        spoken = await client.request("speak", {"text": LINE})
        assert spoken["ok"], spoken
        await client.until_event("speech_finished")
        await client.pump_for(0.3)
        await client.close()
        return client, before, SpeakResult(**spoken["result"])

    client, before, spoken = run(scenario())
    for message in client.frames:
        FramePush.model_validate(message)  # every frame as the schema says
    for message in client.audio:
        AudioPush.model_validate(message)
    for message in client.events:
        EventPush.model_validate(message)
    assert before > 0, "no frames before speaking"
    idle_jaw = max(frame["data"]["arkit"]["jawOpen"] for frame in client.frames[:before])
    speaking_jaw = max(frame["data"]["arkit"]["jawOpen"] for frame in client.frames[before:])
    assert idle_jaw < 0.05 and speaking_jaw > 0.3, (idle_jaw, speaking_jaw)
    assert all(len(frame["data"]["pose"]) == 55 and len(frame["data"]["arkit"]) == 52 for frame in client.frames)
    times = np.array([frame["data"]["media_time_s"] for frame in client.frames])
    assert np.all(np.diff(times) > 0)
    rate = (len(times) - 1) / (times[-1] - times[0])  # on the media clock: frames per second of media time
    assert 27 <= rate <= 33, rate
    samples = sum(len(base64.b64decode(chunk["data"]["samples"])) // 2 for chunk in client.audio)
    assert samples >= spoken.duration_s * spoken.sample_rate * 0.95, (samples, spoken.duration_s)
    loud = max(np.abs(np.frombuffer(base64.b64decode(c["data"]["samples"]), "<i2")).max() for c in client.audio)
    assert loud > 3000, "the streamed audio holds no speech"


def test_refused_requests_get_errors_and_a_second_client_keeps_its_frames(served):
    async def scenario():
        watcher, answer = await Client.connect(served, "watcher")
        assert answer["ok"]
        assert (await watcher.request("subscribe", {"frames_hz": 20, "events": True}))["ok"]
        reading = asyncio.create_task(watcher.pump_for(3600))
        outcomes = {}

        import aiohttp

        async with aiohttp.ClientSession() as session:  # no token: a command first
            async with session.ws_connect(f"{served.url}/api") as ws:
                await ws.send_str(json.dumps({"id": 1, "type": "status"}))
                outcomes["no_token"] = json.loads((await ws.receive(timeout=10)).data)
                outcomes["no_token_closed"] = (await ws.receive(timeout=10)).type
        stranger, outcomes["wrong_token"] = await Client.connect(served, "stranger", token="not-the-token")
        outcomes["wrong_token_closed"] = await stranger.receive()
        await stranger.close()
        again, outcomes["retry_at_once"] = await Client.connect(served, "stranger")
        await again.close()
        await asyncio.sleep(served.server.limits.auth_retry_after_s + 0.2)  # the wait the refusal asked for

        client, answer = await Client.connect(served, "careless")
        assert answer["ok"], answer
        await client.send_raw("{not json")
        outcomes["malformed"] = await client.next_reply()
        outcomes["unknown"] = await client.request("dance")
        outcomes["wrong_type"] = await client.request("subscribe", {"frames_hz": "fast"})
        outcomes["oversized"] = await client.request("speak", {"text": "a" * 70_000})
        outcomes["too_long"] = await client.request("speak", {"text": "word " * 200})
        outcomes["outside"] = await client.request("play", {"path": "/etc/passwd"})
        os.symlink("/etc/hostname", served.media / "escape.wav")
        outcomes["symlink_out"] = await client.request("play", {"path": "escape.wav"})
        outcomes["dotdot"] = await client.request("play", {"path": "../../../../etc/hostname"})
        outcomes["still_answers"] = await client.request("status")
        async def read_replies(count):
            return [await client.next_reply() for _ in range(count)]

        reading_flood = asyncio.create_task(read_replies(400))
        for index in range(400):  # a flood: far over 50 per second, its replies read as they come
            await client.send_raw(json.dumps({"id": f"flood-{index}", "type": "status"}))
        flood = await reading_flood
        await client.close()
        watcher_seen = len(watcher.frames)
        await asyncio.sleep(0.5)
        reading.cancel()
        await watcher.close()
        return outcomes, flood, watcher, watcher_seen

    outcomes, flood, watcher, watcher_seen = run(scenario())

    def code(name):
        return outcomes[name]["error"]["code"] if outcomes[name] and not outcomes[name]["ok"] else outcomes[name]

    assert code("no_token") == "unauthenticated" and outcomes["no_token_closed"].name in ("CLOSE", "CLOSED")
    assert code("wrong_token") == "bad_token" and outcomes["wrong_token_closed"] is None
    assert code("retry_at_once") == "retry_later"
    assert code("malformed") == "bad_json"
    assert code("unknown") == "unknown_type" and "speak" in outcomes["unknown"]["error"]["message"]
    assert code("wrong_type") == "bad_request" and "payload.frames_hz" in outcomes["wrong_type"]["error"]["message"]
    assert code("oversized") == "too_large"
    assert code("too_long") == "text_too_long"
    assert code("outside") == "path_not_allowed"
    assert code("symlink_out") == "path_not_allowed" and "/etc/hostname" in outcomes["symlink_out"]["error"]["message"]
    assert code("dotdot") == "path_not_allowed"
    assert outcomes["still_answers"]["ok"]
    codes = [reply["error"]["code"] if not reply["ok"] else "ok" for reply in flood]
    assert codes.count("rate_limited") > 100 and codes.count("ok") >= 50, {c: codes.count(c) for c in set(codes)}
    # the watcher kept its frames all along, at its rate on the media clock, nothing dropped
    times = np.array([frame["data"]["media_time_s"] for frame in watcher.frames])
    assert watcher_seen > 20 and len(watcher.frames) > watcher_seen
    assert np.all(np.diff(times) > 0) and np.diff(times).max() < 0.1, np.diff(times).max()
    kinds = [event["data"]["detail"].get("client") for event in watcher.events if event["data"]["kind"] == "client_connected"]
    assert "careless" in kinds and "stranger" not in kinds  # only admitted clients are announced


def _raw_ws_handshake(port: int, receive_buffer: int) -> socket.socket:
    """A client that completes the WebSocket handshake over a plain socket and then can stop reading."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(f"GET /api HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert b" 101 " in head.split(b"\r\n")[0], head
    return sock


def _masked_text_frame(text: str) -> bytes:
    data = text.encode()
    mask = os.urandom(4)
    length = bytes([0x80 | len(data)]) if len(data) < 126 else bytes([0x80 | 126]) + len(data).to_bytes(2, "big")
    header = bytes([0x81]) + length
    return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data))


def test_a_client_that_stops_reading_is_dropped_and_others_carry_on(served):
    sock = _raw_ws_handshake(served.port, receive_buffer=4096)
    sock.sendall(_masked_text_frame(json.dumps({"id": 1, "type": "auth", "payload": {"token": served.token,
                                                                                   "client": "sleepy"}})))
    sock.sendall(_masked_text_frame(json.dumps({"id": 2, "type": "subscribe",
                                                "payload": {"frames_hz": 60, "audio": "pcm_f32le", "events": True}})))
    frames_before = served.service.engine.work.frames_emitted

    async def scenario():
        watcher, answer = await Client.connect(served, "patient")
        assert answer["ok"]
        assert (await watcher.request("subscribe", {"frames_hz": 10, "events": True}))["ok"]
        dropped = None
        while dropped is None:  # sleepy never reads; the server must give up on it
            event = await watcher.until_event("client_dropped")
            if event["data"]["detail"]["client"] == "sleepy":
                dropped = event
        frames = len(watcher.frames)
        status = await watcher.request("status")
        await watcher.close()
        return dropped, frames, status

    try:
        dropped, frames, status = run(scenario())
    finally:
        sock.close()
    assert "too slow" in dropped["data"]["detail"]["reason"], dropped
    assert frames > 0
    assert "sleepy" not in StatusResult(**status["result"]).clients
    assert served.service.engine.work.frames_emitted > frames_before
    assert served.thread.call(lambda: served.server.dropped_clients) >= 1


def test_http_surface(served):
    import urllib.error
    import urllib.request

    def post(body: bytes, headers: dict) -> tuple[int, dict]:
        request = urllib.request.Request(f"{served.url}/api/command", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    with urllib.request.urlopen(f"{served.url}/health", timeout=30) as response:
        assert response.status == 200 and json.loads(response.read())["status"] == "ready"
    auth = {"Authorization": f"Bearer {served.token}", "X-Client-Name": "curl"}
    status, body = post(b'{"id": 7, "type": "status"}', auth)
    assert status == 200 and body["id"] == 7 and body["result"]["persona"] == "default"
    status, body = post(b'{"type": "status"}', {})
    assert status == 401 and body["error"]["code"] == "unauthenticated"
    status, body = post(b'{"type": "subscribe", "payload": {"events": true}}', auth)
    assert status == 400 and "WebSocket" in body["error"]["message"]
    status, body = post(b'{"type": "expression.trigger", "payload": {"name": "no-such-face"}}', auth)
    assert status == 404 and "smile" in body["error"]["message"]
    status, body = post(b'{"id": "padded", "type": "status"' + b" " * 60_000 + b"}", auth)  # under 64 KiB: read whole
    assert status == 200 and body["id"] == "padded", body
    status, body = post(b"x" * 70_000, auth)
    assert status == 413 and body["error"]["code"] == "too_large"
    status, body = post(b'{"type": "status"}', {**auth, "X-Client-Name": "../../etc"})
    assert status == 400
    status, body = post(b'{"type": "status"}', {**auth, "Authorization": "Bearer guess"})
    assert status == 401 and body["error"]["code"] == "bad_token"
    status, body = post(b'{"type": "status"}', auth)  # the right token, too soon after a wrong one
    assert status == 429 and body["error"]["code"] == "retry_later"
    time.sleep(served.server.limits.auth_retry_after_s + 0.2)
    assert post(b'{"type": "status"}', auth)[0] == 200


def test_a_connection_that_never_authenticates_is_closed(served):
    from dataclasses import replace

    import aiohttp

    limits = served.server.limits

    async def silent():
        async with aiohttp.ClientSession() as session, session.ws_connect(f"{served.url}/api") as ws:
            refused = json.loads((await ws.receive(timeout=30)).data)
            closed = await ws.receive(timeout=30)
            return refused, closed

    served.thread.call(setattr, served.server, "limits", replace(limits, auth_timeout_s=0.3))
    try:
        refused, closed = run(silent())
    finally:
        served.thread.call(setattr, served.server, "limits", limits)
    assert refused["error"]["code"] == "unauthenticated" and "no auth message" in refused["error"]["message"]
    assert closed.type.name in ("CLOSE", "CLOSED")


def test_commands_change_what_the_frames_show_and_record_a_take(served):
    from studio.recording.take import open_take

    async def scenario():
        client, _ = await Client.connect(served, "director")
        assert (await client.request("subscribe", {"frames_hz": 50}))["ok"]
        started = await client.request("recording.start", {"name": "api-take"})
        assert started["ok"], started
        fired = await client.request("expression.trigger", {"name": "smile"})
        assert fired["ok"] and fired["result"]["active"] == ["smile"]
        client.frames.clear()
        await client.pump_for(1.0)
        smiling = max(frame["data"]["arkit"]["mouthSmileLeft"] for frame in client.frames)
        released = await client.request("expression.release", {"name": "smile"})
        assert released["ok"] and released["result"]["active"] == []
        persona = await client.request("persona.set", {"name": "teacher"})
        preset = await client.request("preset.set", {"name": "performance"})
        bad_persona = await client.request("persona.set", {"name": "nobody"})
        stopped = await client.request("recording.stop")
        status = await client.request("status")
        back = [await client.request("persona.set", {"name": "default"}),
                await client.request("preset.set", {"name": "default"})]
        await client.close()
        return smiling, persona, preset, bad_persona, stopped, status, back

    smiling, persona, preset, bad_persona, stopped, status, back = run(scenario())
    assert smiling > 0.5
    assert persona["ok"] and persona["result"]["name"] == "teacher"
    assert preset["ok"] and preset["result"]["name"] == "performance"
    assert bad_persona["error"]["code"] == "not_found" and "teacher" in bad_persona["error"]["message"]
    assert stopped["ok"] and stopped["result"]["frames"] > 0
    assert status["result"]["persona"] == "teacher" and status["result"]["recording"] is None
    assert all(answer["ok"] for answer in back)
    take = open_take(served.recordings / "api-take")
    assert len(take.frames) == stopped["result"]["frames"]


def test_the_server_stays_up_when_a_client_vanishes_mid_request(served):
    sock = _raw_ws_handshake(served.port, receive_buffer=65536)
    sock.sendall(_masked_text_frame(json.dumps({"id": 1, "type": "auth", "payload": {"token": served.token,
                                                                                   "client": "vanisher"}})))
    sock.sendall(_masked_text_frame(json.dumps({"id": 2, "type": "speak", "payload": {"text": "Gone already."}})))
    sock.close()

    async def scenario():
        client, answer = await Client.connect(served, "after")
        status = await client.request("status")
        await client.close()
        return answer, status

    answer, status = run(scenario())
    assert answer["ok"] and status["ok"]


def test_a_played_file_moves_the_mouth_through_the_face_model(served):
    import soundfile

    from studio.speech.espeak import EspeakSynth

    clip = EspeakSynth().synthesize("Bob met Pam by the maple tree.")
    soundfile.write(served.media / "line.wav", clip.audio, clip.sample_rate)

    async def scenario():
        client, _ = await Client.connect(served, "player")
        assert (await client.request("subscribe", {"frames_hz": 50, "events": True}))["ok"]
        played = await client.request("play", {"path": "line.wav"})
        await client.until_event("speech_finished")
        await client.close()
        return played, client.frames

    played, frames = run(scenario())
    assert played["ok"] and played["result"]["path"] == str((served.media / "line.wav").resolve()), played
    assert max(frame["data"]["arkit"]["jawOpen"] for frame in frames) > 0.2


def test_telemetry_max_clients_and_approval_by_name(served):
    from dataclasses import replace

    server, limits = served.server, served.server.limits

    async def telemetry():
        client, _ = await Client.connect(served, "monitor")
        assert (await client.request("subscribe", {"telemetry_hz": 5}))["ok"]
        while not client.telemetry:
            assert await client.receive() is not None
        await client.close()
        return client.telemetry[0]["data"]

    data = run(telemetry())
    assert data["engine"]["frames"] > 0 and "total" in data["engine"]["stages"] and data["api"]["clients"] >= 1

    async def crowded():
        first, answer = await Client.connect(served, "first")
        assert answer["ok"]
        connected = served.thread.call(lambda: len(server.clients))
        served.thread.call(setattr, server, "limits", replace(limits, max_clients=connected))
        second, refused = await Client.connect(served, "second")
        closed = await second.receive()
        await second.close()
        await first.close()
        return refused, closed

    try:
        refused, closed = run(crowded())
    finally:
        served.thread.call(setattr, server, "limits", limits)
    assert refused["error"]["code"] == "too_many_clients" and closed is None

    async def unapproved():
        stranger, refused = await Client.connect(served, "unknown-bot")
        await stranger.close()
        served.server.names.approve("unknown-bot")
        known, admitted = await Client.connect(served, "unknown-bot")
        await known.close()
        served.server.names.deny("unknown-bot")
        denied_client, denied = await Client.connect(served, "unknown-bot")
        await denied_client.close()
        return refused, admitted, denied

    server.names.require_approval = True
    try:
        refused, admitted, denied = run(unapproved())
    finally:
        server.names.require_approval = False
    assert refused["error"]["code"] == "not_approved" and "--approve 'unknown-bot'" in refused["error"]["message"]
    assert admitted["ok"]
    assert denied["error"]["code"] == "not_approved" and "denied" in denied["error"]["message"]


def test_stop_ends_the_line_and_the_mouth_comes_to_rest(served):
    async def scenario():
        client, _ = await Client.connect(served, "stopper")
        assert (await client.request("subscribe", {"frames_hz": 50, "events": True}))["ok"]
        spoken = await client.request("speak", {"text": "This is a long line that will not be finished today."})
        assert spoken["ok"]
        while not client.frames or client.frames[-1]["data"]["arkit"]["jawOpen"] < 0.2:
            assert await client.receive() is not None
        speaking_at = client.frames[-1]["data"]["media_time_s"]
        stopped = await client.request("stop")
        await client.until_event("speech_stopped")
        status = await client.request("status")
        client.frames.clear()
        while not client.frames or client.frames[-1]["data"]["arkit"]["jawOpen"] > 0.02:
            assert await client.receive() is not None
        await client.close()
        rest_after_s = client.frames[-1]["data"]["media_time_s"] - speaking_at
        return stopped, status, [event["data"]["kind"] for event in client.events], rest_after_s, spoken

    stopped, status, later_events, rest_after_s, spoken = run(scenario())
    assert rest_after_s < spoken["result"]["duration_s"] / 2, (rest_after_s, spoken)  # on the media clock
    assert stopped["ok"] and status["result"]["speaking"] is False and status["result"]["state"] == "idle"
    assert "speech_finished" not in later_events
