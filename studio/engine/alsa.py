"""alsa-lib's own error messages silenced, and real-time priority for PortAudio's ALSA callback thread.

PortAudio reaches PulseAudio (and real cards) through alsa-lib, which prints every buffer
under/overrun it recovers from straight to stderr (`ALSA lib pcm.c:...:(snd_pcm_recover) underrun
occurred`), and a page of `Unknown PCM` lines while PortAudio lists devices. The studio counts
underruns itself (PortAudio reports each one to the stream: `SpeakerOutput.underruns`), so `install()`
points alsa-lib's error handler at a C function that ignores its arguments (libc's `getpid`).

Not a Python handler: alsa-lib calls it on the audio thread, in the middle of recovering from an
underrun, and a Python handler would wait there for the GIL, turning one short underrun into a
silence as long as whatever thread holds the GIL (measured: over a second).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading

_lock = threading.Lock()
_installed = False


def install() -> bool:
    """Silence alsa-lib's messages for this process (idempotent); False where there is no alsa-lib."""
    global _installed
    with _lock:
        if _installed:
            return True
        if not sys.platform.startswith("linux"):
            return False
        try:
            library = ctypes.CDLL(ctypes.util.find_library("asound") or "libasound.so.2")
            setter = library.snd_lib_error_set_handler
            # Any C function that ignores extra arguments and has no effect will do: the caller
            # cleans up a variadic call's arguments on every Linux ABI.
            ignore = ctypes.cast(ctypes.CDLL(None).getpid, ctypes.c_void_p)
        except (OSError, AttributeError):
            return False
        setter.argtypes = [ctypes.c_void_p]
        setter.restype = ctypes.c_int
        setter(ignore)
        _installed = True
        return True


def installed() -> bool:
    return _installed


def enable_realtime(stream) -> bool:
    """Ask PortAudio to run this (not yet started) ALSA stream's callback thread at real-time priority.

    A loaded machine otherwise leaves the callback thread waiting behind every busy thread (the
    renderer's, other programs') for tens of milliseconds. PortAudio falls back to normal priority
    where the user may not raise it (no CAP_SYS_NICE or RLIMIT_RTPRIO). False where the stream is not
    an ALSA stream or PortAudio lacks the call.
    """
    try:
        import sounddevice

        if sounddevice.query_hostapis(sounddevice.query_devices(stream.device)["hostapi"])["name"] != "ALSA":
            return False
        portaudio = ctypes.CDLL(ctypes.util.find_library("portaudio") or "libportaudio.so.2")
        enable = portaudio.PaAlsa_EnableRealtimeScheduling
    except (OSError, AttributeError, ValueError, KeyError, TypeError):
        return False
    enable.argtypes = [ctypes.c_void_p, ctypes.c_int]
    enable.restype = None
    enable(int(sounddevice._ffi.cast("uintptr_t", stream._ptr)), 1)
    return True


def raise_sound_server_threads(priority: int = 10) -> int:
    """Real-time priority for the PulseAudio client library's threads in this process ("threaded-ml").

    alsa-lib's PulseAudio plugin hands our blocks to the sound server from its own thread; left at normal
    priority on a loaded machine it waits behind every busy thread, and the device runs dry however
    promptly the callback ran. Where the user may not raise priorities this changes nothing. Returns how
    many threads were raised.
    """
    import os

    raised = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 0
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm") as name:
                if name.read().strip() != "threaded-ml":
                    continue
            if os.sched_getscheduler(int(task)) == os.SCHED_OTHER:
                os.sched_setscheduler(int(task), os.SCHED_FIFO, os.sched_param(priority))
                raised += 1
        except (OSError, ValueError):
            continue
    return raised

