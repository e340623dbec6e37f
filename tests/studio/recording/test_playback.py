"""TakePlayer: play, pause, seek, loop; the picture follows the audio clock when sound plays."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest

from studio.avatar.io import default_avatar_path, load_avatar
from studio.frame import FrameState
from studio.recording.playback import TakePlayer
from studio.recording.recorder import take_manifest
from studio.recording.session import write_take


@pytest.fixture(scope="module")
def avatar():
    return load_avatar(default_avatar_path())


def _take(tmp_path, avatar, with_audio: bool, seconds: int = 3):
    frames = [FrameState(media_time_s=10 + i / 30, arkit=np.full(52, i / (30 * seconds)), sequence=i)
              for i in range(30 * seconds)]
    audio = (0.2 * np.sin(np.arange(seconds * 16000) * 0.05)).astype(np.float32) if with_audio else None
    return write_take(tmp_path / f"t{seconds}", take_manifest("default", "default", avatar, 16000, 30), frames, audio)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_transport_without_sound_follows_the_clock(tmp_path, avatar):
    take = _take(tmp_path, avatar, with_audio=False)
    clock = Clock()
    player = TakePlayer(take, clock=clock)
    assert player.duration_s == pytest.approx(3.0)
    player.play()
    clock.now += 1.0
    assert player.position() == pytest.approx(1.0)
    assert player.frame().sequence == 30
    player.pause()
    clock.now += 5.0
    assert player.position() == pytest.approx(1.0) and player.state == "paused"
    player.seek(2.5)
    assert player.frame().sequence == 75
    player.play()
    clock.now += 1.0  # past the end: it stops on the last frame
    assert player.position() == pytest.approx(3.0) and player.state == "paused"
    assert player.frame().sequence == 89
    player.loop = True
    player.play()  # from the end, play starts again at 0
    clock.now += 2.9
    assert player.position() == pytest.approx(2.9)
    clock.now += 0.2  # past the end: loops back to the start and goes on
    assert player.position() == pytest.approx(0.0) and player.state == "playing"
    clock.now += 0.5
    assert player.position() == pytest.approx(0.5)


def test_with_sound_the_position_is_the_audio_clock(tmp_path, avatar):
    take = _take(tmp_path, avatar, with_audio=True)
    player = TakePlayer(take)
    player.seek(1.0)
    player.play()
    try:
        assert player.silent_reason is None, player.silent_reason  # the PulseAudio null sink from run-tests.sh
        deadline = time.monotonic() + 10
        while player._clip.heard is None and time.monotonic() < deadline:
            player.position()
            time.sleep(0.01)
        heard_frame, at = player._clip.heard
        expected = max(1.0, 1.0 + heard_frame / player._clip.rate + (time.monotonic() - at))
        assert player.position() == pytest.approx(expected, abs=0.1)  # (the callback may move `heard` meanwhile)
        player.pause()
        held = player.position()
        time.sleep(0.05)
        assert player.position() == held and held >= 1.0
    finally:
        player.close()


def test_a_lost_output_device_leaves_the_pictures_playing_and_stops_the_sound_reader(tmp_path, avatar, monkeypatch):
    from studio.engine.output import SpeakerOutput

    take = _take(tmp_path, avatar, with_audio=True, seconds=15)
    player = TakePlayer(take)
    player.seek(2.0)
    player.play()
    try:
        deadline = time.monotonic() + 10
        while player._clip.heard is None and time.monotonic() < deadline:
            player.position()
            time.sleep(0.01)
        reader = player._clip._thread
        monkeypatch.setattr(SpeakerOutput, "check", lambda self: False)  # the device vanished
        lost_at = player.position()
        assert player._clip is None and "audio output lost" in player.silent_reason
        reader.join(timeout=5.0)
        assert not reader.is_alive()  # it would wait for the gone device forever, holding audio.wav open
        time.sleep(0.2)
        assert player.state == "playing" and player.position() >= lost_at + 0.15  # the monotonic clock paces it
    finally:
        player.close()


def test_playing_a_long_take_costs_the_memory_a_short_one_does(tmp_path, avatar):
    peaks = {}
    for seconds in (15, 120):
        take = _take(tmp_path, avatar, with_audio=True, seconds=seconds)
        tracemalloc.start()
        player = TakePlayer(take)
        try:
            player.play()
            deadline = time.monotonic() + 10
            while player._clip is not None and player._clip.heard is None and time.monotonic() < deadline:
                player.frame()
                time.sleep(0.01)
            assert player.silent_reason is None and player._clip.heard is not None  # it is playing, with sound
            peaks[seconds] = tracemalloc.get_traced_memory()[1]
        finally:
            player.close()
            tracemalloc.stop()
    # before: the whole take's audio prepared for the speaker (20.7 MB for 15 s, 153.4 MB for 120 s)
    grown = (peaks[120] - peaks[15]) / 1e6
    assert grown < 2.0, f"{peaks[15] / 1e6:.1f} MB for 15 s, {peaks[120] / 1e6:.1f} MB for 120 s"
