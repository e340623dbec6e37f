"""The local control API: one WebSocket endpoint and a small HTTP surface over the engine (docs/api.md).

`messages` holds the pydantic model of every message and the JSON schema; `service` drives a Qt-free
engine; `server` speaks the wire (aiohttp); `security` keeps the token, the client names and the folders.
"""
