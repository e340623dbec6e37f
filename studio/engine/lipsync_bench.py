"""`lipsync` speed and memory on long files: the real command in a fresh process, one core.

The test file is spoken English (espeak-ng sentences, tiled) at 48 kHz, written in chunks so
the bench itself stays small. Speed includes the process start-up (imports, model load) as a
user waits for it; peak RSS is the command's own high-water mark.

An installed studio starts from compiled bytecode (pip and PyInstaller compile it at install; Python writes it on
the first run), but a shell that sets PYTHONDONTWRITEBYTECODE, as CI machines often do, would make every
measured run compile the studio's modules from source again (about 0.12 s here). The commands run with the
bytecode cached in the bench's scratch folder, which a first run on a one-second file fills; a second run on it
gives `lipsync_startup_s` (the start-up, nearly alone).

The speed figures are the median of `SPEED_RUNS` runs on the same file: on a shared 2-core machine the same
bench read 89x and, minutes later, 115x real time (its CPU time moved as much), so a single sample decided a
threshold by chance. The slowest run is reported beside the median.

Linux keeps a process's peak RSS across fork and exec, so a command forked straight from the bench
(by then a gigabyte of renderers and models) would report the bench's size. A small launcher is forked
instead; the command, forked from that fresh process, reports its own peak to the launcher's `wait4`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BENCH_RATE = 48000
SPEED_RUNS = 3


def write_speech_file(path: Path, minutes: float, rate: int = BENCH_RATE) -> Path:
    """A WAV of `minutes` of speech, written a few seconds at a time."""
    import soundfile

    from studio.engine.sources import resample_clip
    from studio.speech.espeak import EspeakSynth

    lines = ("Bob met Pam by the maple tree.", "Would you move to Oslo?", "The quick brown fox jumps over the lazy dog.",
             "We will meet at noon, if the weather is fine.", "Please pass me a cup of warm milk.")
    synth = EspeakSynth("en-us")
    pieces = []
    for line in lines:
        clip = synth.synthesize(line)
        pieces.append(resample_clip(clip.audio, clip.sample_rate, rate))
        pieces.append(np.zeros(int(0.4 * rate), np.float32))
    loop = np.concatenate(pieces).astype(np.float32)
    total = int(minutes * 60 * rate)
    with soundfile.SoundFile(str(path), "w", samplerate=rate, channels=1, subtype="PCM_16") as out:
        written = 0
        while written < total:
            block = loop[: total - written]
            out.write(block)
            written += len(block)
    return path


# Runs argv[1:], then prints "maxrss_kb cpu_s" of that child alone on its last stderr line.
_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
sys.stderr.write(f"\\n{usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_measured(command: list[str], bytecode: Path) -> tuple[int, float, float, float, str]:
    """(exit code, wall s, CPU s, peak RSS MB, stderr) of a command pinned to one core, its bytecode in `bytecode`."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONPYCACHEPREFIX=str(bytecode))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    core = min(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None

    def one_core() -> None:
        if core is not None:
            os.sched_setaffinity(0, {core})

    started = time.perf_counter()
    child = subprocess.run([sys.executable, "-c", _LAUNCHER, *command], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, preexec_fn=one_core, check=False)
    wall = time.perf_counter() - started
    stderr = child.stderr.decode(errors="replace")
    stderr, _, measured = stderr.rstrip("\n").rpartition("\n")
    rss_kb, cpu = measured.split()
    return child.returncode, wall, float(cpu), int(rss_kb) / 1024.0, stderr.rstrip("\n")


def speed_figures(audio_s: float, walls: list[float], cpus: list[float]) -> dict[str, float]:
    """Real-time factors of repeated runs on `audio_s` seconds of audio: the median run's, and the slowest's."""
    return {
        "lipsync_realtime_factor": round(audio_s / statistics.median(walls), 1),
        "lipsync_slowest_realtime_factor": round(audio_s / max(walls), 1),
        "lipsync_wall_s": round(statistics.median(walls), 2),
        # on a shared machine the wall clock includes other processes' turns; CPU time does not
        "lipsync_cpu_realtime_factor": round(audio_s / statistics.median(cpus), 1),
        "lipsync_speed_runs_count": len(walls),
    }


def bench_lipsync(minutes: tuple[float, ...] = (4.0, 20.0)) -> dict:
    """`lipsync_realtime_factor` (wall clock, start-up included; median of SPEED_RUNS) and
    `lipsync_cpu_realtime_factor` (its CPU time) on the first length, `lipsync_peak_rss_{N}min_mb` for each."""
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="lipsync-bench-") as scratch:
        bytecode = Path(scratch) / "bytecode"
        out = Path(scratch) / "out.csv"

        def lipsync(audio: Path) -> tuple[int, float, float, float, str]:
            command = [sys.executable, "-m", "widgets.app", "lipsync", str(audio), "--out", str(out), "--fps", "60"]
            return run_measured(command, bytecode)

        one_second = write_speech_file(Path(scratch) / "speech_1s.wav", 1 / 60)
        lipsync(one_second)  # the first run compiles and caches the bytecode
        code, wall, _cpu, _rss, _stderr = lipsync(one_second)
        if code == 0:
            figures["lipsync_startup_s"] = round(wall, 2)
        for length in minutes:
            audio = write_speech_file(Path(scratch) / f"speech_{length:g}min.wav", length)
            runs = [lipsync(audio) for _ in range(SPEED_RUNS if length == minutes[0] else 1)]
            failed = next((run for run in runs if run[0] != 0), None)
            if failed is not None:
                code, *_measured, stderr = failed
                figures[f"lipsync_{length:g}min_error"] = (stderr.strip().splitlines() or [f"exit {code}"])[-1]
                continue
            if length == minutes[0]:
                figures.update(speed_figures(length * 60, [run[1] for run in runs], [run[2] for run in runs]))
            figures[f"lipsync_peak_rss_{length:g}min_mb"] = round(max(run[3] for run in runs), 1)
            audio.unlink()
            out.unlink(missing_ok=True)
    from studio.engine.offline import offline_variant

    figures["lipsync_model"] = offline_variant()
    return figures
