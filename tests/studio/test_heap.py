"""The C heap policy: megabyte arrays freed on worker threads, with small objects kept between them, go back
to the system, where glibc's default keeps them (each case in a fresh process, so the policy is its own)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHURN = """
import sys, threading
import numpy as np
from studio.heap import limit_heap_retention
from studio.housekeeping import rss_mb
if sys.argv[1] == "limit":
    assert limit_heap_retention()
before = rss_mb()
kept = []
def churn(seed):
    rng = np.random.default_rng(seed)
    window = []
    for _ in range(400):
        window.append(np.ones(int(rng.integers(40_000, 400_000)), np.float64))  # 0.3-3 MB: meshes, audio, takes
        kept.append(np.ones(16, np.float64))  # small and long-lived, allocated between them
        if len(window) > 8:
            window.pop(0)
for seed in range(4):  # a thread each, as the LOD builder, the recorder and the TTS use
    worker = threading.Thread(target=churn, args=(seed,))
    worker.start()
    worker.join()
print(rss_mb() - before)
"""


def _retained_mb(policy: str) -> float:
    result = subprocess.run([sys.executable, "-c", CHURN, policy], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return float(result.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the policy is glibc's")
def test_freed_large_arrays_go_back_to_the_system_under_the_studio_heap_policy():
    assert _retained_mb("default") > 15.0  # glibc's own policy keeps them: what grew a working session
    assert _retained_mb("limit") < 8.0


def _housekeeper_on(voice_activity: float, seconds: float):
    from studio.engine.pipeline import LatestFrameSlot
    from studio.frame import FrameState
    from studio.housekeeping import Housekeeper
    from studio.presets import preset_by_name

    class Engine:  # the slot is the engine's own; only the frames are made up
        slot = LatestFrameSlot()

    keeper = Housekeeper(preset_by_name("education"), memory_mb=lambda: 0.0)  # gc only every 45 minutes
    for index in range(int(seconds / 0.5)):
        Engine.slot.put(FrameState(media_time_s=index * 0.5, voice_activity=voice_activity))
        keeper.tick(Engine)
    return keeper


def test_free_memory_goes_back_every_minute_of_quiet_and_never_while_someone_speaks():
    from studio.housekeeping import RELEASE_INTERVAL_S

    quiet = _housekeeper_on(0.0, 5 * RELEASE_INTERVAL_S + 1.0)
    assert quiet.releases == 5 and quiet.gc_runs == 0
    assert _housekeeper_on(1.0, 5 * RELEASE_INTERVAL_S + 1.0).releases == 0
