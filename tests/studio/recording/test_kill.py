"""A recorder killed with SIGKILL mid-take: on the next start the take is found, repaired, and at most
the last second is lost (frames and audio)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

from studio.engine.sources import ENGINE_RATE
from studio.recording.take import find_unfinished, open_take, repair_take
from tests.studio.engine.helpers import vowel

ROOT = Path(__file__).resolve().parents[3]


def test_sigkilled_recorder_loses_at_most_one_second(tmp_path):
    import soundfile

    audio = np.tile(np.concatenate([vowel(0.4), np.zeros(int(0.2 * ENGINE_RATE), np.float32)]), 20)  # 12 s of speech
    soundfile.write(tmp_path / "speech.wav", audio, ENGINE_RATE)
    takes = tmp_path / "recordings"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen([sys.executable, "-m", "tests.studio.recording.live_recorder", str(tmp_path / "speech.wav"),
                              str(takes / "killed")], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    times = []
    try:
        for line in child.stdout:
            if line.startswith("frame "):
                times.append(float(line.split()[1]))
            if len(times) > 1 and times[-1] - times[0] >= 4.0:  # 4 s into the take (well past the first flushes)
                break
        assert times, "the recorder printed no frame"
        os.kill(child.pid, signal.SIGKILL)
        rest, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    times += [float(line.split()[1]) for line in rest.splitlines() if line.startswith("frame ")]
    emitted_until = times[-1]

    assert find_unfinished(takes) == [takes / "killed"]
    done = repair_take(takes / "killed")
    assert done
    take = open_take(takes / "killed")
    assert take.manifest["status"] == "recovered"
    recovered_until = take.frames[-1].media_time_s
    assert emitted_until - recovered_until <= 1.0, f"lost {emitted_until - recovered_until:.2f} s of frames"
    audio_until = take.start_media_s + len(take.audio) / ENGINE_RATE
    assert emitted_until - audio_until <= 1.0, f"lost {emitted_until - audio_until:.2f} s of audio"
    assert np.abs(take.audio).max() > 0.1  # the speech itself, not silence
    assert find_unfinished(takes) == []
