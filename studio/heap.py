"""The C heap's policy for a long session: large blocks on their own pages, few arenas, free pages returned.

Kept apart from `studio.housekeeping` so that the command line can apply it first thing, before any import
that allocates, without loading the engine's modules.
"""

from __future__ import annotations

import ctypes
import sys

MMAP_THRESHOLD_BYTES = 256 * 1024  # blocks this big and up get their own pages, returned to the system when freed
MALLOC_ARENAS = 2
_M_MMAP_THRESHOLD, _M_ARENA_MAX = -3, -8  # glibc mallopt parameters


def _glibc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None
    except OSError:  # musl or another C library: its own policy stays
        return None


def limit_heap_retention() -> bool:
    """Keep the C heap from holding on to memory the studio has freed; call once, early in the process.

    A working session builds and drops megabyte arrays all the time (a mesh per persona edit or LOD, a take's
    frames for playback, each spoken line's audio) on several threads. glibc by default raises its mmap
    threshold after the first large free, so later large arrays land in per-thread heaps that fragment and are
    never given back: a 5-minute scripted operator session (`soak --gui`) grew from 615 to 942 MB, of which
    malloc_trim could free 257 MB. A fixed threshold gives every large block its own pages (unmapped on free), and two arenas
    bound how many heaps can each keep free memory. True where the C library took the settings (glibc)."""
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(libc.mallopt(_M_ARENA_MAX, MALLOC_ARENAS))


def release_free_memory() -> bool:
    """Give the free pages inside the C heaps back to the system (glibc malloc_trim); True if any were."""
    libc = _glibc()
    return bool(libc.malloc_trim(0)) if libc is not None else False
