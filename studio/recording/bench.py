"""What recording costs the engine: the engine loop per 10 ms hop with and without a take being written."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np


def bench_recording_overhead(seconds: float = 10.0, rounds: int = 3) -> dict:
    """Median and p99 engine-loop cost per hop, fed at live pace (one hop per 10 ms), alternating rounds
    without and with a TakeRecorder attached (its frame queue, the audio tap and its writer thread sharing
    the CPU and the interpreter lock), plus the take's data rate."""
    from studio.avatar.io import default_avatar_path, load_avatar
    from studio.engine.bench import HopFeeder, speech_like
    from studio.engine.motion import HOP_S
    from studio.engine.pipeline import Engine
    from studio.engine.sources import ENGINE_RATE
    from studio.recording.recorder import TakeRecorder, take_manifest

    audio = speech_like(seconds)
    engine = Engine()
    avatar = load_avatar(default_avatar_path())
    costs: dict[str, list[float]] = {"without": [], "with": []}
    written = {"bytes": 0, "seconds": 0.0, "dropped": 0}
    with tempfile.TemporaryDirectory(prefix="take-bench-") as folder:
        for round_index in range(rounds * 2):
            mode = "with" if round_index % 2 else "without"
            recorder = None
            if mode == "with":
                manifest = take_manifest("default", "default", avatar, ENGINE_RATE, engine.fps, source="bench")
                recorder = TakeRecorder(Path(folder) / f"take-{round_index}", manifest, engine.subscribe(1024), min_free_mb=1)
                recorder.start()
                engine.listen_source_audio(recorder.add_audio)
            feeder = HopFeeder(audio)
            engine.set_source(feeder)
            index, due = 0, time.perf_counter()
            while not feeder.finished:  # one hop per 10 ms, as live audio arrives; the writer works in between
                started = time.perf_counter()
                engine.run_once()
                if index >= 20:
                    costs[mode].append((time.perf_counter() - started) * 1000.0)
                index += 1
                due += HOP_S
                time.sleep(max(0.0, due - time.perf_counter()))
            if recorder is not None:
                engine.unlisten_source_audio(recorder.add_audio)
                engine.unsubscribe(recorder.queue)
                recorder.stop("bench")
                written["bytes"] += recorder.bytes_written
                written["seconds"] += recorder.elapsed_s
                written["dropped"] += recorder.queue.dropped
    without, with_recording = np.array(costs["without"]), np.array(costs["with"])
    return {
        "engine_hop_without_recording_median_ms": float(np.median(without)),
        "engine_hop_with_recording_median_ms": float(np.median(with_recording)),
        "engine_hop_without_recording_p99_ms": float(np.percentile(without, 99)),
        "engine_hop_with_recording_p99_ms": float(np.percentile(with_recording, 99)),
        "recording_overhead_median_ms": float(np.median(with_recording) - np.median(without)),
        "take_data_rate_mb_per_min": written["bytes"] / 2**20 / max(written["seconds"], 1e-9) * 60.0,
        "recorder_dropped_frames": int(written["dropped"]),
    }
