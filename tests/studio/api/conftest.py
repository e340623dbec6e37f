"""One real API server for the module: a headless engine (real onnxruntime, espeak, no sound card) behind
aiohttp on a free port of 127.0.0.1."""

from __future__ import annotations

import os

import pytest

from tests.studio.api.clients import Served


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from studio.api.security import AllowedFolders, ClientNames, load_or_create_token
    from studio.api.server import ApiServer, ServerThread
    from studio.api.service import StudioService
    from studio.presets import persona_by_name, preset_by_name

    home = tmp_path_factory.mktemp("home")
    previous = os.environ.get("AVATAR_STUDIO_HOME")
    os.environ["AVATAR_STUDIO_HOME"] = str(home)
    media, recordings = home / "media", home / "recordings"
    media.mkdir()
    service = StudioService(persona_by_name("default"), preset_by_name("default"), AllowedFolders([media, recordings]),
                            recordings=recordings, prewarm=False)
    service.start()
    token = load_or_create_token()
    thread = ServerThread(ApiServer(service, token, ClientNames(home / "clients.json")))
    port = thread.start()
    yield Served(port, token, service, thread, media, recordings)
    thread.stop()
    service.close()
    if previous is None:
        os.environ.pop("AVATAR_STUDIO_HOME", None)
    else:
        os.environ["AVATAR_STUDIO_HOME"] = previous

