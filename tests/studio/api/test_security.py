"""The token file, client names, allowed folders, the rate limit and the message parser, without a server."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from studio.api.messages import ApiError, parse_request, schema_text
from studio.api.security import (
    AllowedFolders,
    ClientNames,
    PathNotAllowed,
    TokenBucket,
    is_loopback,
    load_or_create_token,
    new_token,
    token_matches,
)


def test_the_token_is_made_once_owner_only_and_can_be_replaced(tmp_path):
    path = tmp_path / "config" / "api-token"
    token = load_or_create_token(path)
    assert len(token) >= 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_token(path) == token
    os.chmod(path, 0o644)  # loosened by hand: tightened again on the next start
    assert load_or_create_token(path) == token and stat.S_IMODE(path.stat().st_mode) == 0o600
    replaced = new_token(path)
    assert replaced != token and load_or_create_token(path) == replaced
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert token_matches(replaced, replaced) and not token_matches(replaced, token) and not token_matches(replaced, None)
    path.write_text("short\n")
    with pytest.raises(ValueError, match="at least 16"):
        load_or_create_token(path)


def test_client_names_are_approved_denied_and_asked_about(tmp_path):
    path = tmp_path / "clients.json"
    open_door = ClientNames(path)
    assert open_door.decide("anyone") == (True, "")  # without approval required, the token is the approval
    strict = ClientNames(path, require_approval=True)
    admitted, why = strict.decide("chatbot")
    assert not admitted and "--approve 'chatbot'" in why
    strict.approve("chatbot")
    assert ClientNames(path).decide("chatbot")[0]  # kept in the file
    asked = []
    asking = ClientNames(path, require_approval=True,
                         approver=lambda name: (asked.append(name) or name == "deck", "the operator denied it"))
    assert asking.decide("deck")[0] and asked == ["deck"]
    assert asking.decide("intruder") == (False, "client 'intruder' is not approved: the operator denied it")
    saved = json.loads(path.read_text())
    assert "deck" in saved["approved"] and saved["require_approval"] is False  # a run's override is not written
    asking.revoke("deck")
    assert asking.approved_names() == ["chatbot"]
    assert asking.decide("deck")[0] and asked == ["deck", "intruder", "deck"]  # asked again after the revoke
    asking.deny("deck")
    admitted, why = ClientNames(path).decide("deck")
    assert not admitted and "denied" in why
    path.write_text("{broken")
    with pytest.raises(ValueError, match="clients.json"):
        ClientNames(path)


def test_paths_must_resolve_inside_the_allowed_folders(tmp_path):
    allowed, outside = tmp_path / "media", tmp_path / "private"
    allowed.mkdir()
    outside.mkdir()
    (allowed / "line.wav").write_bytes(b"RIFF")
    (outside / "secret.wav").write_bytes(b"RIFF")
    os.symlink(outside / "secret.wav", allowed / "link.wav")
    os.symlink(outside, allowed / "door")
    folders = AllowedFolders([allowed])
    assert folders.resolve("line.wav") == (allowed / "line.wav").resolve()
    assert folders.resolve(str(allowed / "line.wav")) == (allowed / "line.wav").resolve()
    for escape in ("link.wav", "door/secret.wav", "../private/secret.wav", str(outside / "secret.wav")):
        with pytest.raises(PathNotAllowed, match="outside the allowed folders"):
            folders.resolve(escape)
    with pytest.raises(PathNotAllowed, match="no such file"):
        folders.resolve("missing.wav")
    with pytest.raises(PathNotAllowed, match="not a file"):
        AllowedFolders([tmp_path]).resolve("media")


def test_token_bucket_allows_the_burst_then_the_rate():
    now = [0.0]
    bucket = TokenBucket(rate=10, burst=5, clock=lambda: now[0])
    assert [bucket.take() for _ in range(6)] == [True] * 5 + [False]
    now[0] += 0.35  # three and a half tokens back
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]


def test_loopback_addresses():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.1.2.3")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5") and not is_loopback("example.org")


@pytest.mark.parametrize(("text", "code", "names"), [
    ("{", "bad_json", "not valid JSON"),
    ("[1, 2]", "bad_request", "JSON object"),
    ('{"type": 5}', "bad_request", "field 'type' = 5"),
    ('{"type": "speak", "payload": {"text": 3}}', "bad_request", "field 'payload.text' = 3"),
    ('{"type": "speak", "payload": {"text": "hi", "volume": 3}}', "bad_request", "payload.volume"),
    ('{"type": "subscribe", "payload": {"frames_hz": 500}}', "bad_request", "payload.frames_hz"),
    ('{"type": "subscribe", "payload": {"audio": "mp3"}}', "bad_request", "pcm_s16le"),
    ('{"type": "persona.set", "payload": {"name": "../etc/passwd"}}', "bad_request", "payload.name"),
    ('{"type": "speak", "payload": {"text": "' + "x" * 600 + '"}}', "text_too_long", "payload.text"),
    ('{"type": "fly"}', "unknown_type", "allowed: auth, speak"),
    ('{"id": {"a": 1}, "type": "status"}', "bad_request", "field 'id'"),
    ("[" * 100_000 + "]" * 100_000, "bad_json", "not valid JSON"),
])
def test_bad_requests_name_the_field_and_what_is_allowed(text, code, names):
    with pytest.raises(ApiError) as raised:
        parse_request(text, max_bytes=1_000_000)
    assert raised.value.code == code and names in raised.value.message, raised.value.message


def test_an_error_keeps_the_request_id_when_it_has_one():
    with pytest.raises(ApiError) as raised:
        parse_request('{"id": "abc", "type": "speak", "payload": {}}', max_bytes=1000)
    assert raised.value.request_id == "abc" and "payload.text" in raised.value.message


def test_the_committed_schema_is_the_generated_one():
    committed = Path(__file__).resolve().parents[3] / "docs" / "api-schema.json"
    assert committed.read_text(encoding="utf-8") == schema_text(), \
        "docs/api-schema.json is stale: run `avatar-studio serve --schema > docs/api-schema.json`"
