"""glibc's heap: fewer arenas, and free pages handed back to the system.

Light on purpose (ctypes only): ``cli.main`` caps the arenas before anything else is imported
or any thread starts. Elsewhere than glibc each function does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
import time


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def _malloc_trim():
    trim = getattr(_libc(), "malloc_trim", None)  # glibc only (musl has none): nothing to trim
    if trim is None:
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_TRIM = _malloc_trim()

M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)
ARENAS = 2


def limit_arenas(environ=os.environ) -> bool:
    """Caps glibc's malloc arenas at ``ARENAS``, unless the operator set ``MALLOC_ARENA_MAX``;
    true if capped. Called at start, before any thread: glibc gives threads arenas of their own
    (up to 8 per core), and every version swap's arrays, freed on one thread after being made on
    others, left each arena's heap fragmented: +25% RSS over 100 MobileNetV2 swaps with the
    default, none with two (``benchmarks/version_swaps.py``)."""
    mallopt = getattr(_libc(), "mallopt", None)
    if "MALLOC_ARENA_MAX" in environ or mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_ARENA_MAX, ARENAS) == 1


def trim() -> None:
    """Returns the free pages of every malloc arena to the system (glibc; elsewhere nothing)."""
    if _TRIM is not None:
        _TRIM(0)


TRIM_DELAY_SECONDS = 0.05
TRIM_INTERVAL_SECONDS = 1.0  # at most one trim a second: the pages it returns fault in again


class _Trimmer:
    """Trims the heap a moment after it is asked to, once however often it was asked meanwhile:
    a large request's last buffers (its body, its answer) are freed after its end is seen, and
    glibc keeps them in the heap (its mmap threshold rises to the largest block freed, so later
    large buffers come from the heap too: +60 MiB of RSS per 16 MB REST request, never given
    back). Not a fixed mmap threshold: every array of the kernels over it would then be mapped
    and faulted in afresh (measured: 20x slower elementwise ops on 1.6 MB arrays)."""

    def __init__(self) -> None:
        self._wanted = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def request(self) -> None:
        if _TRIM is None:
            return
        self._wanted.set()
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="heap_trim", daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            time.sleep(TRIM_DELAY_SECONDS)
            self._wanted.clear()
            trim()
            time.sleep(TRIM_INTERVAL_SECONDS)


_TRIMMER = _Trimmer()


def trim_soon() -> None:
    """``trim`` in a moment, on a thread of its own (see ``_Trimmer``)."""
    _TRIMMER.request()
