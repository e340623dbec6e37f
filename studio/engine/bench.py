"""Engine benchmarks: cost per 10 ms hop, text to first lip frame (and heard), speech to frame (through real devices)."""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable

import numpy as np

from studio.engine.motion import HOP_S
from studio.engine.sources import ENGINE_RATE, AudioSource

OPEN_MOUTH = 0.1  # mouth_openness above this counts as "the mouth opened"
PHASE_STEPS_MS = (0, 2, 4, 6, 8)  # where a burst's onset falls within a 10 ms hop, stepped over the trials
HOP = int(ENGINE_RATE * HOP_S)


def speech_like(seconds: float, rate: int = ENGINE_RATE) -> np.ndarray:
    """Alternating vowel bursts and pauses: buzz at 130 Hz through /a/-like formants."""
    t = np.arange(int(seconds * rate)) / rate
    harmonics = np.arange(1, 30)
    shape = np.exp(-((harmonics * 130 - 700) / 250) ** 2) + 0.6 * np.exp(-((harmonics * 130 - 1200) / 300) ** 2)
    wave = (shape[:, None] * np.sin(2 * np.pi * 130 * harmonics[:, None] * t[None])).sum(0)
    envelope = (np.sin(2 * np.pi * 3 * t) > -0.3).astype(float)
    return (0.3 * wave / np.abs(wave).max() * envelope).astype(np.float32)


class HopFeeder(AudioSource):
    """Hands the engine one 10 ms hop per read, as a live device does, without waiting for real time."""

    def __init__(self, audio: np.ndarray) -> None:
        super().__init__("bench hops")
        self.audio = audio
        self._read = 0

    @property
    def finished(self) -> bool:
        return self._read >= len(self.audio)

    @property
    def position(self) -> int:
        """Samples handed to the engine so far."""
        return self._read

    def start(self) -> None:
        self._read = 0

    def stop(self) -> None:
        pass

    def read_available(self) -> tuple[int, np.ndarray]:
        start, self._read = self._read, self._read + HOP
        return start, self.audio[start:start + HOP]


def live_pace_hop_costs_ms(engine, audio: np.ndarray, warmup_hops: int = 20) -> list[float]:
    """Run `engine` one pass per 10 ms hop of `audio` at live pace (sleeping to each hop's due time), and return
    each pass's cost in ms after the first `warmup_hops`: what the engine thread pays while other work runs."""
    feeder = HopFeeder(audio)
    engine.set_source(feeder)
    costs: list[float] = []
    index, due = 0, time.perf_counter()
    while not feeder.finished:
        started = time.perf_counter()
        engine.run_once()
        if index >= warmup_hops:
            costs.append((time.perf_counter() - started) * 1000.0)
        index += 1
        due += HOP_S
        time.sleep(max(0.0, due - time.perf_counter()))
    return costs


def _median_p99(values: list[float]) -> tuple[float, float]:
    data = np.array(values)
    return float(np.median(data)), float(np.percentile(data, 99))


def bench_engine(seconds: float = 10.0, rounds: int = 3) -> dict:
    """Engine cost per 10 ms hop, per model variant: median and p99 over `rounds` passes of `seconds` of
    speech-like audio, fed one hop at a time as live audio arrives.

    `{variant}_hop_*`: features + model + prosody + motion (the target; the mean shows what the median
    hides: pitch is measured every other hop, so hop costs alternate). `{variant}_engine_loop_hop_*`: one
    whole pass of the engine loop per hop as the engine thread runs it (also expression, FrameState,
    telemetry, queues). The per-stage medians say where the time goes; `machine_busy_pct` is the
    1-minute load average over the core count at the start (100 = every core busy with something else).
    """
    from studio.engine.face_model import FaceModel
    from studio.engine.features import LogMelExtractor
    from studio.engine.motion import MotionGenerator, ProsodyTracker
    from studio.engine.pipeline import Engine

    audio = speech_like(seconds)
    result: dict = {"machine_busy_pct": 100.0 * os.getloadavg()[0] / (os.cpu_count() or 1)}
    stages = ("features", "model", "prosody", "motion")
    for variant in ("fp32", "int8"):
        try:
            model = FaceModel(variant)
            engine = Engine(model_variant=variant)
        except Exception as error:  # a variant that is not built yet
            result[f"{variant}_error"] = str(error)
            continue
        result[f"{variant}_provider"] = engine.face_provider  # CUDA where onnxruntime-gpu finds a GPU, else CPU
        costs: dict[str, list[float]] = {stage: [] for stage in ("hop", "engine_loop_hop", *stages)}
        for _ in range(rounds):
            features, prosody, motion = LogMelExtractor(), ProsodyTracker(), MotionGenerator()
            model.reset()
            for index, i in enumerate(range(0, len(audio) - HOP + 1, HOP)):
                chunk = audio[i:i + HOP]
                t0 = time.perf_counter()
                frames = features.push(chunk)
                t1 = time.perf_counter()
                model.step(frames)
                t2 = time.perf_counter()
                hops = prosody.push(chunk)
                t3 = time.perf_counter()
                for p in hops:
                    motion.step(i / ENGINE_RATE, p)
                t4 = time.perf_counter()
                if index >= 20:  # past the warm-up
                    for stage, begin, end in zip(stages, (t0, t1, t2, t3), (t1, t2, t3, t4)):
                        costs[stage].append((end - begin) * 1000.0)
                    costs["hop"].append((t4 - t0) * 1000.0)
            feeder = HopFeeder(audio)
            queue = engine.subscribe(10_000)
            engine.set_source(feeder)
            index = 0
            while not feeder.finished:
                t0 = time.perf_counter()
                engine.run_once()
                if index >= 20:
                    costs["engine_loop_hop"].append((time.perf_counter() - t0) * 1000.0)
                index += 1
            engine.unsubscribe(queue)
        for key in ("hop", "engine_loop_hop"):
            result[f"{variant}_{key}_median_ms"], result[f"{variant}_{key}_p99_ms"] = _median_p99(costs[key])
            result[f"{variant}_{key}_mean_ms"] = float(np.mean(costs[key]))
        for stage in stages:
            result[f"{variant}_{stage}_median_ms"] = float(np.median(costs[stage]))
    return result


def text_to_first_lip_frame_ms(text: str = "Hello, how are you today?", trials: int = 5) -> dict:
    """From asking for speech to the first frame with the mouth open: offline (analyze_text, compute time)
    and live (an Engine given a TextSource: synthesis, start and real-time pacing), silent and, where an
    output device exists, played on the engine's persistent speaker output.

    `_played_ms`: until that frame is produced (pacing by the device's callbacks, which run ahead of the
    sound by the output latency). `_played_heard_ms`: until the sound that frame depicts reaches the DAC,
    per the source's media clock: when a renderer presenting at the heard media time shows it. The
    first played trial is the first sound of a fresh engine (no warm-up is dropped).
    """
    from studio.engine.offline import analyze_text
    from studio.engine.pipeline import Engine
    from studio.speech.visemes import mouth_openness

    offline, live = [], []
    for _ in range(trials):
        start = time.perf_counter()
        _, frames = analyze_text(text, fps=100)
        next(f for f in frames if mouth_openness(f.arkit) > OPEN_MOUTH)
        offline.append((time.perf_counter() - start) * 1000.0)
    engine = Engine()
    queue = engine.subscribe(10_000)
    engine.start()
    played: list[float] = []
    heard: list[float] = []
    try:
        for play, times in ((True, played), (False, live)):
            for _ in range(trials):
                source, start, frame = _speak_until_the_mouth_opens(engine, queue, text, play)
                if frame is not None:
                    times.append((time.monotonic() - start) * 1000.0)
                if play and source.silent_reason:  # no output device: the played figure would be the silent one
                    played.clear()
                    break
                if play and frame is not None:
                    heard.append(_heard_ms(engine, source, frame, start))
    finally:
        engine.stop()
    result = {
        "text_to_first_lip_frame_offline_ms": float(np.median(offline)),
        "text_to_first_lip_frame_ms": float(np.median(live)) if live else float("nan"),
    }
    if played:
        result["text_to_first_lip_frame_played_ms"] = float(np.median(played))
        result["text_to_first_lip_frame_played_max_ms"] = float(np.max(played))
        result["text_to_first_lip_frame_played_heard_ms"] = float(np.median(heard))
        result["text_to_first_lip_frame_played_trials"] = len(played)
    return result


def tts_heard_latency(text: str = "Hello, how are you today?", trials: int = 10) -> dict:
    """Text to the first lip frame heard at the DAC, with the speaker's adaptive buffer: the `audio` section.

    Each trial asks a running engine to speak `text` (synthesis, then played on its persistent speaker) and
    times from the request until the sound that the first mouth-open frame depicts reaches the DAC (the
    source's media clock, anchored at the DAC). `tts_heard_latency_ms_*`: as the speaker adapts on this
    machine (its first size follows `cpu_pressure_pct`, then underruns grow it); `speaker_buffer_ms` is the
    buffer at the end, `_max_ms` the largest it grew to, `output_underruns_count` the device's underruns.
    `tts_heard_latency_min_buffer_ms_*`: the same with the buffer held at its minimum, as a quiet machine
    plays (here with `min_buffer_underruns_count` underruns: each a gap a quiet machine would not have).
    The first trial of each is a fresh engine's first sound.
    """
    from studio.engine.output import MIN_BUFFER_S, OutputBufferPolicy, cpu_pressure_pct

    result: dict = {"machine_busy_pct": 100.0 * os.getloadavg()[0] / (os.cpu_count() or 1)}
    pressure = cpu_pressure_pct()
    if pressure is not None:
        result["cpu_pressure_pct"] = pressure
    adaptive = _heard_latencies(text, trials, None)
    if "note" in adaptive:
        return result | adaptive
    held = _heard_latencies(text, trials, OutputBufferPolicy(min_s=MIN_BUFFER_S, max_s=MIN_BUFFER_S))
    for prefix, run in (("", adaptive), ("min_buffer_", held)):
        heard = run["heard"]
        if heard:
            result[f"tts_heard_latency_{prefix}ms_p50"] = float(np.median(heard))
            result[f"tts_heard_latency_{prefix}ms_p95"] = float(np.percentile(heard, 95))
            result[f"tts_heard_latency_{prefix}trials"] = len(heard)
        result[f"{prefix}output_underruns_count"] = run["underruns"]
    result.update({"speaker_buffer_start_ms": adaptive["first_ms"], "speaker_buffer_ms": adaptive["buffers"][-1],
                   "speaker_buffer_max_ms": max(adaptive["buffers"])})
    return result


def _heard_latencies(text: str, trials: int, policy) -> dict:
    """{'heard': ms per trial, 'buffers': the speaker's buffer (ms) after each, 'underruns', 'first_ms': the
    buffer it opened with} (or {'note'})."""
    from studio.engine.pipeline import Engine

    engine = Engine()
    if policy is not None:
        engine.speaker.policy = policy
    queue = engine.subscribe(10_000)
    engine.start()
    heard: list[float] = []
    buffers: list[float] = []
    try:
        for _ in range(trials):
            source, start, frame = _speak_until_the_mouth_opens(engine, queue, text, play=True)
            if source.silent_reason:  # no output device: nothing is heard
                return {"note": f"not measured: {source.silent_reason}"}
            buffers.append(engine.speaker.buffer_ms)
            if frame is not None and source.clock.ready:
                heard.append(_heard_ms(engine, source, frame, start))
        underruns = engine.speaker.underruns
    finally:
        engine.stop()
    return {"heard": heard, "buffers": buffers, "underruns": underruns, "first_ms": 1000.0 * engine.speaker.policy.first_s}


def _speak_until_the_mouth_opens(engine, queue, text: str, play: bool):
    """From silence, have the running `engine` speak `text`: (the source, when it was asked at on the monotonic
    clock, the first mouth-open frame or None after 10 s)."""
    from studio.engine.sources import TextSource
    from studio.speech.visemes import mouth_openness

    engine.set_source(None)
    time.sleep(0.3)
    queue.drain()
    start = time.monotonic()
    source = TextSource(text, play=play)
    engine.set_source(source)
    while time.monotonic() < start + 10.0:
        frame = queue.get(timeout=0.1)
        if frame is not None and mouth_openness(frame.arkit) > OPEN_MOUTH:
            return source, start, frame
    return source, start, None


def _heard_ms(engine, source, frame, start: float) -> float:
    """When the sound `frame` depicts reached the DAC (the played source's clock), in ms after `start`."""
    time.sleep(0.1)  # a few more DAC observations on the source's clock
    depicted = frame.media_time_s - engine.source_start_media_s
    return (source.clock.media_to_monotonic(depicted) - start) * 1000.0


def speech_to_frame(present: Callable | None = None, trials: int = 10, monitor: str = "vsink.monitor") -> dict:
    """Play silence then a vowel burst into the PulseAudio sink (on the engine's persistent speaker output),
    record it back through the monitor source into the running Engine, and time from the burst's first
    sample reaching the DAC (the output's DAC time) to the first frame with the mouth open (after
    `present(frame)` when given: the render/present step).

    Only a frame that could have heard the burst counts: its depicted time plus the model's lookahead
    window reaches the burst's place in the captured audio. `speech_to_frame_depicted_minus_sound_ms_median`
    says which instant that frame shows, relative to the sound (a few hops early is the model anticipating
    the mouth movement; the full lookahead early means the mouth was already open in silence).
    `_from_capture` starts the clock when the capture clock says the onset was captured instead: without
    the audio device's loopback (`_device_loopback_ms`, which a PulseAudio null sink's monitor sets per
    connection, anywhere from ~10 to ~60 ms), but with the device's late deliveries (the clock is the line
    through its earliest blocks; PulseAudio hands over 5 ms blocks in bursts, up to ~13 ms behind it).
    `_from_callback` starts when the callback that delivered the onset's block ran: the studio's share alone.

    The onset's place within the engine's 10 ms hop is stepped over the trials (0, 2, 4, 6, 8 ms of
    extra silence before the burst). The opening mouth can dwell near OPEN_MOUTH for a few hops, and
    whether it crosses the threshold a few hops earlier or later depends on that sub-hop phase; left to
    chance, the phase followed the measuring loop's own timing, which is why a 30 ms `present()` (even
    a plain sleep) used to move the median first-open frame 20-40 ms later in media time.
    """
    from studio.engine.pipeline import Engine
    from studio.engine.sources import MicrophoneSource
    from studio.speech.visemes import mouth_openness

    class ProbedMicrophone(MicrophoneSource):
        """Notes where the burst lands in the captured audio (engine samples), as the engine reads it, and when
        each device block was delivered."""

        armed = False
        sound_at: int | None = None
        deliveries: deque = deque(maxlen=4000)  # (monotonic s, device samples delivered so far)

        def _input_callback(self, indata, frames, time_info, status) -> None:
            super()._input_callback(indata, frames, time_info, status)
            self.deliveries.append((time.monotonic(), self._ring.written))

        def delivered_at(self, engine_sample: int) -> float | None:
            """When the device block holding this engine sample reached the capture callback."""
            device_sample = engine_sample * self.device_rate / ENGINE_RATE - self._resampler.lead_in
            return next((at for at, written in list(self.deliveries) if written > device_sample), None)

        def read_available(self) -> tuple[int, np.ndarray]:
            start, samples = super().read_available()
            if self.armed and self.sound_at is None and samples.size:
                loud = np.flatnonzero(np.abs(samples) > 0.01)
                if loud.size:
                    self.sound_at = start + int(loud[0])
            return start, samples

    previous = os.environ.get("PULSE_SOURCE")
    os.environ["PULSE_SOURCE"] = monitor
    rate = 48000
    latencies, depicted, from_capture, from_callback, loopback = [], [], [], [], []
    try:
        microphone = ProbedMicrophone("pulse")
        engine = Engine(microphone)
        window_s = (engine.model.lookahead_frames + 1) * HOP_S
        queue = engine.subscribe(10_000)
        engine.start()
        try:
            engine.speaker.open()
            bursts = [engine.speaker.prepare(np.concatenate([np.zeros(rate * phase_ms // 1000, np.float32),
                                                             speech_like(0.6, rate)]), rate)
                      for phase_ms in PHASE_STEPS_MS]
            for trial in range(trials):
                burst = bursts[trial % len(bursts)]
                lead_s = PHASE_STEPS_MS[trial % len(bursts)] / 1000.0  # silence before the onset
                time.sleep(0.8)  # silence: the mouth settles
                queue.drain()
                microphone.sound_at, microphone.armed = None, True
                clip = engine.speaker.play(burst)
                deadline = time.monotonic() + 3.0
                while time.monotonic() < deadline:
                    frame = queue.get(timeout=0.05)
                    sound_at = microphone.sound_at
                    if frame is None or clip.started_at is None or sound_at is None:
                        continue
                    sound_media = engine.source_start_media_s + sound_at / ENGINE_RATE
                    if frame.media_time_s + window_s < sound_media or mouth_openness(frame.arkit) <= OPEN_MOUTH:
                        continue
                    arrived = microphone.clock.media_to_monotonic(sound_at / ENGINE_RATE) if microphone.clock.ready else None
                    if present is not None:
                        present(frame)
                    now = time.monotonic()
                    latencies.append((now - clip.started_at - lead_s) * 1000.0)
                    depicted.append((frame.media_time_s - sound_media) * 1000.0)
                    if arrived is not None:
                        from_capture.append((now - arrived) * 1000.0)
                        loopback.append((arrived - clip.started_at - lead_s) * 1000.0)
                    delivered = microphone.delivered_at(sound_at)
                    if delivered is not None:
                        from_callback.append((now - delivered) * 1000.0)
                    break
                microphone.armed = False
                while not clip.done and time.monotonic() < deadline:
                    time.sleep(0.05)
        finally:
            engine.stop()
    finally:
        if previous is None:
            os.environ.pop("PULSE_SOURCE", None)
        else:
            os.environ["PULSE_SOURCE"] = previous
    if not latencies:
        return {"speech_to_frame_trials": 0}
    result = {
        "speech_to_frame_ms_median": float(np.median(latencies)),
        "speech_to_frame_ms_p95": float(np.percentile(latencies, 95)),
        "speech_to_frame_depicted_minus_sound_ms_median": float(np.median(depicted)),
        "speech_to_frame_trials": len(latencies),
    }
    if from_capture:  # the studio's own share: from the onset reaching the capture callback
        result.update({
            "speech_to_frame_from_capture_ms_median": float(np.median(from_capture)),
            "speech_to_frame_from_capture_ms_p95": float(np.percentile(from_capture, 95)),
            "speech_to_frame_device_loopback_ms_median": float(np.median(loopback)),
        })
    if from_callback:  # the studio's share alone: from the callback that delivered the onset's block
        result.update({
            "speech_to_frame_from_callback_ms_median": float(np.median(from_callback)),
            "speech_to_frame_from_callback_ms_p95": float(np.percentile(from_callback, 95)),
        })
    return result
