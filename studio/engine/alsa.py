"""ALSA's own error messages, counted instead of printed.

PortAudio reaches PulseAudio (and real cards) through alsa-lib, which prints every buffer
under/overrun it recovers from straight to stderr (`ALSA lib pcm.c:...:(snd_pcm_recover) underrun
occurred`). A studio terminal full of those says nothing useful; the count does. `install()` routes
alsa-lib's messages to a handler that counts xruns and keeps the latest message, once per process.
The handler only runs when alsa-lib reports something (an xrun, a device error), never per block.
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import sys
import threading

_HANDLER_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p)


class AlsaMessages:
    """What alsa-lib reported since `install()`: xruns (under- and overruns) and the latest message."""

    def __init__(self) -> None:
        self.xruns = 0
        self.messages = 0
        self.last_message = ""
        self.installed = False


messages = AlsaMessages()
_lock = threading.Lock()
_library = None
_handler = None  # kept referenced: alsa-lib holds a raw pointer to it


def _on_message(file: bytes | None, line: int, function: bytes | None, error: int, text: bytes | None) -> None:
    # `text` is a printf format; its arguments are not passed through ctypes, so keep it as it is.
    message = (text or b"").decode("utf-8", "replace")
    where = (function or b"").decode("utf-8", "replace")
    messages.messages += 1
    messages.last_message = f"{where}: {message}" if where else message
    if where == "snd_pcm_recover":  # "%s occurred": an under- or overrun it recovered from
        messages.xruns += 1


def install() -> bool:
    """Count alsa-lib's messages instead of printing them (idempotent); False where there is no alsa-lib."""
    global _library, _handler
    with _lock:
        if messages.installed:
            return True
        if not sys.platform.startswith("linux"):
            return False
        name = ctypes.util.find_library("asound") or "libasound.so.2"
        try:
            _library = ctypes.CDLL(name)
            setter = _library.snd_lib_error_set_handler
        except (OSError, AttributeError):
            return False
        setter.argtypes = [_HANDLER_TYPE]
        setter.restype = ctypes.c_int
        _handler = _HANDLER_TYPE(_on_message)
        setter(_handler)
        messages.installed = True
        atexit.register(_uninstall)
        return True


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


def _uninstall() -> None:
    """Back to alsa-lib's default handler before the interpreter (and our handler) goes away."""
    if _library is not None and messages.installed:
        _library.snd_lib_error_set_handler(ctypes.cast(None, _HANDLER_TYPE))
        messages.installed = False
