"""Engine benchmarks: cost per 10 ms hop, text to first lip frame, speech to frame (through real devices)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

import numpy as np

from studio.engine.motion import HOP_S
from studio.engine.sources import ENGINE_RATE

OPEN_MOUTH = 0.1  # mouth_openness above this counts as "the mouth opened"


def _speech_like(seconds: float, rate: int = ENGINE_RATE) -> np.ndarray:
    """Alternating vowel bursts and pauses: buzz at 130 Hz through /a/-like formants."""
    t = np.arange(int(seconds * rate)) / rate
    harmonics = np.arange(1, 30)
    shape = np.exp(-((harmonics * 130 - 700) / 250) ** 2) + 0.6 * np.exp(-((harmonics * 130 - 1200) / 300) ** 2)
    wave = (shape[:, None] * np.sin(2 * np.pi * 130 * harmonics[:, None] * t[None])).sum(0)
    envelope = (np.sin(2 * np.pi * 3 * t) > -0.3).astype(float)
    return (0.3 * wave / np.abs(wave).max() * envelope).astype(np.float32)


def bench_engine(seconds: float = 10.0) -> dict:
    """Engine cost per 10 ms hop (features + model + motion), median and p99, per model variant."""
    from studio.engine.face_model import FaceModel
    from studio.engine.features import LogMelExtractor
    from studio.engine.motion import MotionGenerator, ProsodyTracker

    audio = _speech_like(seconds)
    hop = int(ENGINE_RATE * HOP_S)
    result: dict = {}
    for variant in ("fp32", "int8"):
        try:
            model = FaceModel(variant)
        except Exception as error:  # a variant that is not built yet
            result[f"{variant}_error"] = str(error)
            continue
        features, prosody, motion = LogMelExtractor(), ProsodyTracker(), MotionGenerator()
        costs = []
        for i in range(0, len(audio) - hop + 1, hop):
            chunk = audio[i:i + hop]
            start = time.perf_counter()
            output = model.step(features.push(chunk))
            for p in prosody.push(chunk):
                motion.step(i / ENGINE_RATE, p)
            costs.append((time.perf_counter() - start) * 1000.0)
            del output
        costs = np.array(costs[20:])
        result[f"{variant}_hop_median_ms"] = float(np.median(costs))
        result[f"{variant}_hop_p99_ms"] = float(np.percentile(costs, 99))
    return result


def text_to_first_lip_frame_ms(text: str = "Hello, how are you today?", trials: int = 5) -> dict:
    """From asking for speech to the first frame with the mouth open: offline (analyze_text) and live (Engine)."""
    from studio.engine.offline import analyze_text
    from studio.engine.pipeline import Engine
    from studio.engine.sources import TextSource
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
    try:
        for _ in range(trials):
            engine.set_source(None)
            time.sleep(0.3)
            queue.drain()
            start = time.perf_counter()
            engine.set_source(TextSource(text, play=False))
            deadline = start + 10.0
            while time.perf_counter() < deadline:
                frame = queue.get(timeout=0.1)
                if frame is not None and mouth_openness(frame.arkit) > OPEN_MOUTH:
                    live.append((time.perf_counter() - start) * 1000.0)
                    break
    finally:
        engine.stop()
    return {
        "text_to_first_lip_frame_offline_ms": float(np.median(offline)),
        "text_to_first_lip_frame_ms": float(np.median(live)) if live else float("nan"),
    }


def speech_to_frame(present: Callable | None = None, trials: int = 10, monitor: str = "vsink.monitor") -> dict:
    """Play silence then a vowel burst into the PulseAudio sink, record it back through the monitor source
    into a running Engine, and time from the burst leaving the output (its DAC time) to the first frame
    with the mouth open (after `present(frame)` when given: the render/present step)."""
    import sounddevice

    from studio.engine.pipeline import Engine
    from studio.engine.sources import MicrophoneSource
    from studio.speech.visemes import mouth_openness

    previous = os.environ.get("PULSE_SOURCE")
    os.environ["PULSE_SOURCE"] = monitor
    rate = 48000
    burst = _speech_like(0.6, rate)
    state = {"play": False, "position": 0, "onset": None}

    def output_callback(outdata, frames, time_info, status):
        outdata[:] = 0.0
        if state["play"]:
            position = state["position"]
            chunk = burst[position:position + frames]
            outdata[: len(chunk), 0] = chunk
            if position == 0:
                latency = time_info.outputBufferDacTime - time_info.currentTime if time_info.currentTime else 0.0
                state["onset"] = time.monotonic() + (latency if 0 <= latency < 1 else 0.0)
            state["position"] = position + len(chunk)
            if state["position"] >= len(burst):
                state["play"] = False

    latencies = []
    try:
        engine = Engine(MicrophoneSource("pulse"))
        queue = engine.subscribe(10_000)
        engine.start()
        with sounddevice.OutputStream(samplerate=rate, channels=1, dtype="float32", callback=output_callback,
                                      latency="low"):
            for _ in range(trials):
                time.sleep(0.8)  # silence: the mouth settles
                queue.drain()
                state.update(play=True, position=0, onset=None)
                deadline = time.monotonic() + 3.0
                while time.monotonic() < deadline:
                    frame = queue.get(timeout=0.05)
                    if frame is None or state["onset"] is None or mouth_openness(frame.arkit) <= OPEN_MOUTH:
                        continue
                    if present is not None:
                        present(frame)
                    latencies.append((time.monotonic() - state["onset"]) * 1000.0)
                    break
                while state["play"]:
                    time.sleep(0.05)
        engine.stop()
    finally:
        if previous is None:
            os.environ.pop("PULSE_SOURCE", None)
        else:
            os.environ["PULSE_SOURCE"] = previous
    if not latencies:
        return {"speech_to_frame_trials": 0}
    return {
        "speech_to_frame_ms_median": float(np.median(latencies)),
        "speech_to_frame_ms_p95": float(np.percentile(latencies, 95)),
        "speech_to_frame_trials": len(latencies),
    }


def run_all() -> dict:
    result = bench_engine()
    result.update(text_to_first_lip_frame_ms())
    result.update(speech_to_frame())
    result["threads_left"] = threading.active_count()
    return result
