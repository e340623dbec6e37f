"""The service on an engine it is given (a window's) and on its own headless one."""

from __future__ import annotations

import pytest

from studio.api.messages import ApiError
from studio.api.security import AllowedFolders
from studio.api.service import SilentSpeaker, StudioService
from studio.presets import persona_by_name, preset_by_name
from tests.studio.engine.helpers import wait_until


def test_a_given_engine_and_mixer_are_used_as_they_are(tmp_path):
    from studio.engine.pipeline import Engine
    from studio.expressions import ExpressionMixer

    mixer = ExpressionMixer()
    engine = Engine(expression=mixer)
    speaker = engine.speaker
    service = StudioService(persona_by_name("default"), preset_by_name("default"), AllowedFolders([tmp_path]),
                            engine=engine, mixer=mixer)
    assert service.engine is engine and engine.speaker is speaker and service.play_audio
    assert service.trigger("smile").active == ["smile"] and mixer.active_names() == ["smile"]
    with pytest.raises(ApiError, match="has no expression 'grin'; it has: smile"):
        service.trigger("grin")


def test_the_headless_engine_plays_no_sound_and_says_why(tmp_path):
    service = StudioService(persona_by_name("default"), preset_by_name("default"), AllowedFolders([tmp_path]),
                            prewarm=False)
    assert isinstance(service.engine.speaker, SilentSpeaker)
    service.start()
    try:
        spoken = service.speak("Hello.")
        assert spoken.duration_s > 0.2
        wait_until(lambda: service.engine.source is not None, what="the engine to take the line")
        assert service.engine.source.play is False  # timer-paced: no device touched
        assert "--play-audio" in service.engine.speaker.status  # the engine tried its speaker at start: it says why not
        with pytest.raises(ApiError) as raised:
            service.speak("   ")
        assert raised.value.code == "bad_request" and "empty" in raised.value.message
    finally:
        service.close()
