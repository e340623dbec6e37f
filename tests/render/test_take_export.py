"""Exports rendered from a take: MP4 in sync (decoded back), alpha in MOV and WebM, re-targeting, bad targets."""

from __future__ import annotations

import os
import tracemalloc

import numpy as np
import pytest

from render.take_export import ExportCancelled, export_take
from render.video import alpha_range, probe_video
from studio.avatar.io import default_avatar_path, load_avatar
from studio.engine.pipeline import MOUTH_CHANNELS
from studio.frame import FrameState
from studio.presets import Persona, persona_by_name, preset_by_name
from studio.recording.recorder import take_manifest
from studio.recording.session import record_offline, write_take
from studio.recording.take import open_take

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
FPS = 30


@pytest.fixture(scope="module")
def avatar():
    return load_avatar(default_avatar_path())


@pytest.fixture(scope="module")
def spoken_take(tmp_path_factory, avatar):
    folder = tmp_path_factory.mktemp("takes") / "spoken"
    return record_offline(folder, avatar, persona_by_name("default"), preset_by_name("default"),
                          text="Mama made a banana pie, papa ate it all.", fps=FPS)


def _decode(path):
    import av

    with av.open(str(path)) as container:
        images = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        audio = np.concatenate([f.to_ndarray().mean(axis=0) for f in container.decode(audio=0)])
        return images, audio, stream.rate


def test_mp4_is_in_sync_and_the_mouth_opens_with_the_sound(tmp_path, spoken_take, avatar):
    from render.offscreen import OffscreenRenderer
    from render.take_export import take_frames

    out = tmp_path / "take.mp4"
    size = (320, 240)
    progress = []
    written = export_take(spoken_take, "mp4", out, avatar=avatar, size=size, camera="head", progress=progress.append)
    assert progress[-1] == 1.0 and len(progress) == written["frames"]
    probe = probe_video(out)
    assert probe["has_audio"] and probe["frames"] == written["frames"]
    assert abs(probe["duration_s"] - probe["audio_duration_s"]) <= 1.0 / FPS
    assert probe["duration_s"] == pytest.approx(spoken_take.duration_s, abs=1.0 / FPS)

    images, audio, rate = _decode(out)
    # the mouth's share of each decoded frame: its difference from the same frame rendered with the mouth shut
    frames = take_frames(spoken_take, FPS)
    with OffscreenRenderer(avatar, size=size, camera="head") as renderer:
        shut = [renderer.render(f.replace(arkit=np.where(np.isin(np.arange(52), MOUTH_CHANNELS), 0.0, f.arkit)))[..., :3]
                for f in frames]
    mouth = np.array([np.abs(a.astype(np.float32) - b).mean() for a, b in zip(images, shut)])
    hop = rate / FPS

    def voiced_energy(chunk: np.ndarray) -> float:  # 100..1000 Hz: vowels open the mouth, hiss does not
        if len(chunk) < 8:
            return 0.0
        spectrum = np.abs(np.fft.rfft(chunk * np.hanning(len(chunk)))) ** 2
        freqs = np.fft.rfftfreq(len(chunk), 1.0 / rate)
        return float(np.sqrt(spectrum[(freqs > 100) & (freqs < 1000)].sum()))

    energy = np.array([voiced_energy(audio[int(k * hop):int((k + 1) * hop)]) for k in range(len(mouth))])
    mouth, energy = mouth - mouth.mean(), energy - energy.mean()

    def correlation(lag: int) -> float:
        a, b = (mouth[lag:], energy[:len(energy) - lag]) if lag >= 0 else (mouth[:lag], energy[-lag:])
        return float(np.corrcoef(a, b)[0, 1])

    scores = {lag: correlation(lag) for lag in range(-6, 7)}
    best = max(scores, key=scores.get)
    assert scores[best] > 0.5, scores
    assert abs(best) <= 1, f"the mouth is {best} frames off the sound: {scores}"


@pytest.mark.parametrize("kind", ["webm", "mov"])
def test_transparent_export_keeps_alpha(tmp_path, spoken_take, avatar, kind):
    out = tmp_path / f"take.{kind}"
    short = spoken_take.head(0.2)
    written = export_take(short, kind, out, avatar=avatar, size=(160, 120), background="transparent")
    assert written["alpha"]
    low, high = alpha_range(out)
    assert low == 0 and high == 255  # clear around the avatar, opaque on it
    assert probe_video(out)["has_audio"]


def test_retargeting_renders_the_take_with_another_persona(tmp_path, spoken_take, avatar):
    import av

    red = Persona(name="red-shirt", colors={"shirt": (0.9, 0.05, 0.05)}, style={"gains": {"jawOpen": 0.5}})
    from render.take_export import take_frames

    retargeted = take_frames(spoken_take, FPS, red)
    original = take_frames(spoken_take, FPS)
    jaw = 17
    assert max(f.arkit[jaw] for f in original) > 0.2
    assert all(abs(r.arkit[jaw] - o.arkit[jaw] * 0.5) < 1e-6 for r, o in zip(retargeted, original))
    first_frames = spoken_take.head(0.1)
    images = {}
    for name, persona in (("same", None), ("red", red)):
        out = tmp_path / f"{name}.mp4"
        export_take(first_frames, "mp4", out, avatar=avatar, persona=persona, size=(160, 120))
        with av.open(str(out)) as container:
            images[name] = next(container.decode(video=0)).to_ndarray(format="rgb24").astype(np.int32)
    changed = np.abs(images["red"] - images["same"]).max(axis=2) > 40
    assert changed.mean() > 0.01  # the shirt is another colour
    red_pixels = (images["red"][..., 0] > 150) & (images["red"][..., 1] < 60)
    assert red_pixels.mean() > 0.01


def test_bad_targets_fail_clearly_and_leave_nothing(tmp_path, spoken_take, avatar):
    import threading

    with pytest.raises(ValueError, match="folder .* does not exist"):
        export_take(spoken_take, "csv", tmp_path / "missing" / "x.csv")
    with pytest.raises(ValueError, match="must end in .webm"):
        export_take(spoken_take, "webm", tmp_path / "x.mp4", avatar=avatar)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(ExportCancelled):
        export_take(spoken_take, "mp4", tmp_path / "cancelled.mp4", avatar=avatar, size=(160, 120), cancel=cancel)
    with pytest.raises(ExportCancelled):
        export_take(spoken_take, "csv", tmp_path / "cancelled.csv", cancel=cancel)
    assert list(tmp_path.iterdir()) == []


def _long_take(folder, avatar, seconds: int):
    """A take of `seconds` with moving weights and pose and a tone for its audio, written as a recording is."""
    rng = np.random.default_rng(seconds)
    frames = (FrameState(media_time_s=i / FPS, arkit=rng.random(52, np.float32), pose=0.1 * rng.random((55, 3)),
                         voice_activity=0.5, sequence=i) for i in range(seconds * FPS))
    audio = (0.3 * np.sin(np.arange(seconds * 16000) * 0.07)).astype(np.float32)
    return write_take(folder, take_manifest("default", "default", avatar, 16000, FPS), frames, audio).path


@pytest.mark.parametrize("kind", ["csv", "bvh", "mp4"])
def test_exporting_a_long_take_costs_the_memory_a_short_one_does(tmp_path, avatar, kind):
    peaks = {}
    for seconds in (15, 120):
        folder = _long_take(tmp_path / f"take{seconds}", avatar, seconds)
        out = tmp_path / f"take{seconds}.{kind}"
        options = {"fps": 2, "size": (64, 48)} if kind == "mp4" else {}  # the video: every sample of audio, few frames
        tracemalloc.start()
        try:
            written = export_take(open_take(folder), kind, out, avatar=avatar, **options)
            peaks[seconds] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert written["duration_s"] == pytest.approx(seconds, abs=0.5)
    if kind == "mp4":
        assert probe_video(out)["audio_duration_s"] == pytest.approx(120, abs=0.1)
    else:
        assert len(out.read_text().splitlines()) > 120 * FPS  # every frame was written
    # before: every frame, the whole audio and the whole text in memory (CSV 4 -> 29 MB, MP4 77 -> 85 MB)
    grown = (peaks[120] - peaks[15]) / 1e6
    assert grown < 2.0, f"{peaks[15] / 1e6:.1f} MB for 15 s, {peaks[120] / 1e6:.1f} MB for 120 s"
