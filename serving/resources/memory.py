"""Memory: giving an unloaded version's back to the system, and what each loaded version holds.

A loaded SavedModel is a graph of Python objects with reference cycles (ops and their graph,
plans and their steps), so dropping the last reference frees nothing until the cyclic collector
runs; with a few hundred thousand long-lived objects in the process, its oldest generation runs
rarely, and each version swap left ~50 MiB behind until then (MobileNetV2). And memory freed
by glibc's ``free`` stays in the process's heap unless trimmed. ``release_freed`` does both,
once per unload, on the unload's thread (a full collection costs some tens of ms; requests keep
running meanwhile on the other threads between its steps).
"""

from __future__ import annotations

import gc
import logging
import os
import time

from runtime import Session
from runtime.footprint import Footprint, footprint
from serving.resources import heap

logger = logging.getLogger(__name__)


def release_freed() -> None:
    """Collects unreachable cycles, then returns the heap's free pages to the system."""
    gc.collect()
    heap.trim()


def rss_bytes() -> int:
    """This process's resident memory (Linux ``/proc/self/statm``; 0 where there is none)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def available_bytes() -> int:
    """The memory this process may use: its cgroup's limit where one is set, else the
    machine's physical memory; 0 if unknown."""
    for path, unlimited in (
        ("/sys/fs/cgroup/memory.max", "max"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", None),
    ):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text != unlimited and text.isdigit() and int(text) < (1 << 60):
            return int(text)
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


# -- what each loaded version holds -------------------------------------------------------------

REFRESH_SECONDS = 5.0  # a version's footprint is walked again at most this often (ms per model)
_FOOTPRINT = "memory.footprint"  # its key in the version's cache: (when, Footprint)
_SHARED: list[type] = [Session]  # what no version's walk enters (another model's, everyone's)


def shared_by_all(cls: type) -> type:
    """Marks ``cls`` as held by every model (a batch scheduler shared by all): no version's
    footprint counts what its objects hold. The part that defines it says so (a decorator),
    so this module needs to know none of them."""
    _SHARED.append(cls)
    return cls


def model_footprint(servable, max_age: float = REFRESH_SECONDS) -> Footprint:
    """The bytes ``servable``'s version holds (``runtime.footprint``: its arrays, and what its
    onnxruntime sessions were given, which grows as clusters compile on first use), walked
    again when older than ``max_age`` seconds; kept in the version's cache."""
    now = time.monotonic()
    cached = servable.cache.get(_FOOTPRINT)
    if cached is not None and now - cached[0] < max_age:
        return cached[1]
    own, session = [], getattr(servable.bundle, "session", None)
    while session is not None and session not in own:  # the bundle's Session, through wrappers
        own.append(session)
        session = getattr(session, "wrapped", None)
    value = footprint(servable.bundle, stop_types=tuple(_SHARED), allow=tuple(own))
    servable.cache[_FOOTPRINT] = (now, value)
    return value


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"
