"""Giving an unloaded version's memory back to the system.

A loaded SavedModel is a graph of Python objects with reference cycles (ops and their graph,
plans and their steps), so dropping the last reference frees nothing until the cyclic collector
runs; with a few hundred thousand long-lived objects in the process, its oldest generation runs
rarely, and each version swap left ~50 MiB behind until then (MobileNetV2). And memory freed
by glibc's ``free`` stays in the process's heap unless trimmed. ``release_freed`` does both,
once per unload, on the unload's thread (a full collection costs some tens of ms; requests keep
running meanwhile on the other threads between its steps).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import sys

logger = logging.getLogger(__name__)


def _malloc_trim():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim  # glibc only (musl has none): absent -> nothing to trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_TRIM = _malloc_trim()


def release_freed() -> None:
    """Collects unreachable cycles, then returns the heap's free pages to the system."""
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)
