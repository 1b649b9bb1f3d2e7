"""A memory budget for many models: ``--model_memory_budget_bytes`` (ours; TF Serving has none).

With a budget, a model is loaded when a request first asks for it, not at start-up, and
before a load the least recently used idle models are unloaded (evicted) until what stays
resident plus the new one fits the budget. Idle: no request pinned to any of its versions,
none waiting for it, none of its versions loading or unloading: a model serving a request
is never evicted. An evicted model stays aspired and reported AVAILABLE (not resident): its
next request loads it again, waiting for the load within its deadline.

Pure: what the manager holds goes in (``Resident`` per model), what to do comes out
(``plan_room``). What a version holds is what ``serving.resources.memory.model_footprint`` walks
once it is loaded; before its first load, the bytes of its directory on disk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

FLAG = "--model_memory_budget_bytes"
WAIT_SECONDS = 600.0  # a request without a deadline waits at most this long for its model's load
NOT_RESIDENT = "Not resident: loaded on its first request (--model_memory_budget_bytes)."


@dataclass(frozen=True)
class Resident:
    """One model's versions that hold memory (loading, loaded or unloading)."""

    name: str
    bytes: int
    last_used: float  # time.monotonic() of its last pinned request (or load)
    evictable: bool  # idle, see the module docstring
    leaving: int = 0  # of ``bytes``, what its versions being unloaded hold (given back soon)


@dataclass(frozen=True)
class Room:
    load_now: bool
    evict: tuple[str, ...] = ()  # least recently used first


def plan_room(budget: int, model: str, need: int, residents: list[Resident]) -> Room:
    """Whether ``model`` may load a version needing ``need`` bytes now, and which idle models to
    evict for it. It loads now when everything fits, or when nothing but ``model`` itself is
    resident (a model larger than the budget still loads, alone). Otherwise the least recently
    used evictable models are evicted until it would fit, and it loads once their memory is
    given back (``load_now`` False: the manager asks again when an unload ends)."""
    own = sum(r.bytes for r in residents if r.name == model)
    others = [r for r in residents if r.name != model]
    held = own + sum(r.bytes for r in others)
    if held + need <= budget or not any(r.bytes for r in others):
        return Room(True)
    excess, evict = held - sum(r.leaving for r in residents) + need - budget, []
    for r in sorted((r for r in others if r.evictable and r.bytes), key=lambda r: r.last_used):
        if excess <= 0:
            break
        evict.append(r.name)
        excess -= r.bytes
    return Room(False, tuple(evict))


def over_budget(budget: int, residents: list[Resident], keep: str) -> tuple[str, ...]:
    """The idle models to evict, least recently used first, so that what is resident fits
    ``budget`` again (after a load found its model larger than its estimate); never ``keep``."""
    excess = sum(r.bytes - r.leaving for r in residents) - budget
    evict = []
    for r in sorted(
        (r for r in residents if r.evictable and r.bytes and r.name != keep), key=lambda r: r.last_used
    ):
        if excess <= 0:
            break
        evict.append(r.name)
        excess -= r.bytes
    return tuple(evict)


def scaled_budget(budget: int, residents: list[Resident], grown: int) -> int:
    """The budget in the units of what the walks measure, where the process grew by ``grown``
    bytes of RSS over its baseline while they counted less: what onnxruntime allocates for itself
    (its kernels' state, arenas, repacked weights), the graphs' Python objects and the heap's
    fragmentation are in no walk. Each counted byte is taken to cost ``grown / counted``, so the
    budget bounds the RSS models add, not only what the walks see."""
    counted = sum(r.bytes for r in residents)
    if counted <= 0 or grown <= counted:
        return budget
    return int(budget * counted / grown)


def disk_bytes(path: str) -> int:
    """The bytes of a version directory's files: what a version is taken to hold before its
    first load (its checkpoint dominates; what it holds once loaded replaces this)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total
