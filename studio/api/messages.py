"""Every message of the control API as a pydantic model, the parser that turns bad input into one clear
error, and the JSON schema generated from the same models (docs/api-schema.json).

A request is `{"id": ..., "type": "speak", "payload": {...}}`; its answer is `{"id": ..., "ok": true,
"type": "speak", "result": {...}}` or `{"id": ..., "ok": false, "error": {"code": ..., "message": ...}}`.
What a client subscribed to comes as `{"type": "frame" | "audio" | "telemetry" | "event", "data": {...}}`,
without an id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema

from studio.presets import MAX_CUE_CHARS

API_VERSION = 1
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 _.+-]{0,63}$"  # persona, preset, client and take names: no path separators
AUDIO_ENCODINGS = ("pcm_s16le", "pcm_f32le")

ErrorCode = Literal[
    "bad_json", "bad_request", "unknown_type", "too_large", "text_too_long", "path_not_allowed", "not_found",
    "unauthenticated", "bad_token", "not_approved", "retry_later", "rate_limited", "too_many_clients", "conflict",
    "engine_error", "internal",
]


class ApiError(Exception):
    """A request the API refuses: `code` is one of ErrorCode, `message` one line naming the field and what is allowed."""

    def __init__(self, code: str, message: str, request_id: str | int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _request_id_value(value: object) -> object:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, str) and len(value) <= 64):
        return value
    raise ValueError("an id is a string of up to 64 characters, an integer or null")


RequestId = Annotated[Any, AfterValidator(_request_id_value), WithJsonSchema(
    {"anyOf": [{"type": "string", "maxLength": 64}, {"type": "integer"}, {"type": "null"}]})]
Name = Annotated[str, Field(pattern=NAME_PATTERN)]


class Envelope(_Message):
    """What every request looks like before its payload is read."""

    id: RequestId = Field(None, description="echoed in the reply; any string up to 64 characters, or an integer")
    type: Annotated[str, Field(max_length=40)]
    payload: dict[str, Any] = {}


# ---------------------------------------------------------------- payloads (what a client sends)

class AuthPayload(_Message):
    token: Annotated[str, Field(max_length=256)] = Field(description="the token `avatar-studio serve --show-token` prints")
    client: Name = Field(description="the client's name, as the operator approves it")


class SpeakPayload(_Message):
    text: Annotated[str, Field(min_length=1, max_length=MAX_CUE_CHARS)]
    voice: Annotated[str, Field(pattern=r"^[A-Za-z0-9_+-]{1,32}$")] | None = Field(
        None, description="espeak-ng voice, e.g. en-us (default: the persona's)")
    rate_wpm: Annotated[int, Field(ge=80, le=450)] | None = None
    pitch: Annotated[int, Field(ge=0, le=99)] | None = None


class PlayPayload(_Message):
    path: Annotated[str, Field(min_length=1, max_length=4096)] = Field(
        description="an audio file inside an allowed folder; a relative path is taken inside the first one")


class EmptyPayload(_Message):
    pass


class ExpressionPayload(_Message):
    name: Annotated[str, Field(min_length=1, max_length=40)] = Field(description="one of the persona's expressions")


class NamePayload(_Message):
    name: Name


class RecordingStartPayload(_Message):
    name: Name | None = Field(None, description="the take's folder name (default: take-DATE-TIME)")


class SubscribePayload(_Message):
    """What this connection receives from now on (replaces the previous subscription; all off unsubscribes)."""

    frames_hz: Annotated[float, Field(ge=1, le=60)] | None = Field(None, description="FrameStates per second of media time")
    telemetry_hz: Annotated[float, Field(ge=0.2, le=10)] | None = None
    events: bool = False
    audio: Literal["none", "pcm_s16le", "pcm_f32le"] = Field(
        "none", description="the engine's audio as it is analysed (16 kHz mono), base64 in this encoding")


# ---------------------------------------------------------------- results (what a reply carries)

class AuthResult(_Message):
    client: str
    api_version: int
    studio_version: str


class SpeakResult(_Message):
    duration_s: float
    voice: str
    sample_rate: int = Field(description="rate of the audio pushed to `audio` subscribers")


class PlayResult(_Message):
    path: str = Field(description="the file played, symlinks resolved")
    duration_s: float | None


class Ack(_Message):
    pass


class ExpressionResult(_Message):
    active: list[str]


class PersonaResult(_Message):
    name: str
    expressions: list[str]
    voice: str


class PresetResult(_Message):
    name: str
    face_model: str
    face_rate_hz: float


class RecordingResult(_Message):
    take: str
    folder: str
    frames: int | None = None
    duration_s: float | None = None


class StatusResult(_Message):
    state: str
    speaking: bool
    persona: str
    preset: str
    expressions: list[str]
    recording: str | None
    media_time_s: float
    frames_emitted: int
    face_provider: str
    clients: list[str]


class SubscribeResult(_Message):
    frames_hz: float | None
    telemetry_hz: float | None
    events: bool
    audio: str


@dataclass(frozen=True)
class Command:
    payload: type[BaseModel]
    result: type[BaseModel]
    summary: str
    http: bool = True  # also a one-shot POST /api/command


COMMANDS: dict[str, Command] = {
    "auth": Command(AuthPayload, AuthResult, "first message of a WebSocket connection: the token and the client's name",
                    http=False),
    "speak": Command(SpeakPayload, SpeakResult, "speak a line with the persona's voice (on-device TTS)"),
    "play": Command(PlayPayload, PlayResult, "play an audio file from an allowed folder"),
    "stop": Command(EmptyPayload, Ack, "stop speaking or playing; the avatar goes back to idle"),
    "expression.trigger": Command(ExpressionPayload, ExpressionResult, "fade one of the persona's expressions in"),
    "expression.release": Command(ExpressionPayload, ExpressionResult, "fade it out again"),
    "persona.set": Command(NamePayload, PersonaResult, "switch persona by name (voice, motion and expression style)"),
    "preset.set": Command(NamePayload, PresetResult, "switch preset by name (face model and rates)"),
    "recording.start": Command(RecordingStartPayload, RecordingResult, "record a take into the recordings folder"),
    "recording.stop": Command(EmptyPayload, RecordingResult, "stop recording and finish the take"),
    "status": Command(EmptyPayload, StatusResult, "what the studio is doing now"),
    "subscribe": Command(SubscribePayload, SubscribeResult, "choose the frames, audio, telemetry and events pushed "
                         "to this connection", http=False),
}


# ---------------------------------------------------------------- replies and pushes (what the server sends)

class ErrorBody(_Message):
    code: ErrorCode
    message: str


class Reply(_Message):
    id: RequestId
    ok: Literal[True]
    type: str
    result: dict[str, Any]


class ErrorReply(_Message):
    id: RequestId
    ok: Literal[False]
    error: ErrorBody


class FrameData(_Message):
    """One FrameState (studio.frame): the 52 ARKit weights by name and the SMPL-X body parameters."""

    media_time_s: float
    sequence: int
    arkit: dict[str, float]
    pose: list[list[float]] = Field(description="55 SMPL-X joints x axis-angle (radians); joint 0 is the root")
    transl: list[float] = Field(description="root translation in metres")
    voice_activity: float
    expression: str
    timings_ms: dict[str, float]


class AudioData(_Message):
    media_time_s: float = Field(description="media time of the first sample (the frames' clock)")
    sample_rate: int
    channels: int
    encoding: Literal["pcm_s16le", "pcm_f32le"]
    samples: str = Field(description="base64 of little-endian samples")


class EventData(_Message):
    kind: str = Field(description="e.g. speech_started, speech_finished, source_error, expression, persona, preset, "
                                  "recording_started, recording_stopped, client_connected, client_dropped")
    detail: dict[str, Any] = {}


class FramePush(_Message):
    type: Literal["frame"]
    data: FrameData


class AudioPush(_Message):
    type: Literal["audio"]
    data: AudioData


class TelemetryPush(_Message):
    type: Literal["telemetry"]
    data: dict[str, Any]


class EventPush(_Message):
    type: Literal["event"]
    data: EventData


PUSHES: dict[str, type[BaseModel]] = {"frame": FramePush, "audio": AudioPush, "telemetry": TelemetryPush,
                                      "event": EventPush}


# ---------------------------------------------------------------- parsing

def _where_and_why(error: ValidationError, prefix: str) -> tuple[str, str]:
    first = error.errors()[0]
    where = ".".join(str(part) for part in (prefix, *first["loc"]) if part != "") or "(message)"
    value = first.get("input")
    shown = "" if isinstance(value, (dict, list)) or first["type"] == "missing" else f" = {_short(value)}"
    return where, f"field '{where}'{shown}: {first['msg']}"


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _request_id(data: dict) -> str | int | None:
    """The id to answer with, when the request has a usable one (else None)."""
    value = data.get("id")
    if isinstance(value, bool):
        return None
    if isinstance(value, int) or (isinstance(value, str) and len(value) <= 64):
        return value
    return None


def parse_request(text: str | bytes, max_bytes: int) -> tuple[Envelope, BaseModel]:
    """The request's envelope and its validated payload; ApiError with the code and one line saying what is wrong."""
    size = len(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
    if size > max_bytes:
        raise ApiError("too_large", f"message of {size} bytes; allowed up to {max_bytes}")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise ApiError("bad_json", f"not valid JSON: {str(error)[:120]}") from None
    if not isinstance(data, dict):
        raise ApiError("bad_request", f"a request is a JSON object with id, type and payload; got {type(data).__name__}")
    request_id = _request_id(data)
    try:
        envelope = Envelope.model_validate(data)
    except ValidationError as error:
        raise ApiError("bad_request", _where_and_why(error, "")[1], request_id) from None
    command = COMMANDS.get(envelope.type)
    if command is None:
        raise ApiError("unknown_type", f"unknown type {_short(envelope.type)}; allowed: {', '.join(COMMANDS)}",
                       request_id)
    try:
        payload = command.payload.model_validate(envelope.payload)
    except ValidationError as error:
        where, why = _where_and_why(error, "payload")
        code = "text_too_long" if where == "payload.text" and error.errors()[0]["type"] == "string_too_long" else "bad_request"
        raise ApiError(code, why, request_id) from None
    return envelope, payload


def reply(request_id: str | int | None, type_: str, result: BaseModel | dict) -> str:
    body = result.model_dump(mode="json") if isinstance(result, BaseModel) else result
    return json.dumps({"id": request_id, "ok": True, "type": type_, "result": body})


def error_reply(request_id: str | int | None, code: str, message: str) -> str:
    return json.dumps({"id": request_id, "ok": False, "error": {"code": code, "message": message}})


# ---------------------------------------------------------------- schema

def api_schema() -> dict:
    """The whole API as one JSON document: envelope, each request type's payload and result, replies, pushes."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Avatar Studio control API",
        "api_version": API_VERSION,
        "endpoints": {"websocket": "GET /api (upgrade)", "command": "POST /api/command", "health": "GET /health",
                      "schema": "GET /api/schema"},
        "envelope": Envelope.model_json_schema(),
        "requests": {name: {"summary": command.summary, "http": command.http,
                            "payload": command.payload.model_json_schema(),
                            "result": command.result.model_json_schema()}
                     for name, command in COMMANDS.items()},
        "reply": Reply.model_json_schema(),
        "error": ErrorReply.model_json_schema(),
        "pushes": {name: model.model_json_schema() for name, model in PUSHES.items()},
    }


def schema_text() -> str:
    """api_schema() as the text committed in docs/api-schema.json."""
    return json.dumps(api_schema(), indent=2, sort_keys=True) + "\n"
