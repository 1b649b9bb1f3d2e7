"""What the manager keeps per model version (TF Serving's ``LoaderHarness``) and what requests
hold of one: ``Pinned`` (the version as every request shares it) and ``Handle`` (one
``get_servable`` caller's), with the states reported for it (``VersionState``).

Thread-safety is the manager's (``serving/lifecycle/manager.py``): a ``Harness`` is changed only under its
lock; a ``Pinned`` is read without one (its ``pins`` list's append and pop are atomic).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from runtime import errors
from serving.lifecycle.policy import HarnessState
from serving.lifecycle.servable import ManagerState, Servable, ServableId

now = time.monotonic
NONE: dict = {}  # (an empty table, shared: never written)
HOLDING = (HarnessState.LOADING, HarnessState.READY, HarnessState.UNLOADING)  # states that hold memory


def as_op_error(e: BaseException) -> errors.OpError:
    if isinstance(e, errors.OpError):
        return e
    return errors.UnknownError(None, None, f"{type(e).__name__}: {e}")


def status_string(error: errors.OpError | None) -> str:
    """absl::Status::ToString(): ``OK`` or ``CODE: message``."""
    if error is None:
        return "OK"
    return f"{errors.CODE_NAMES.get(error.code, 'UNKNOWN')}: {error.message}"


@dataclass(eq=False)
class Harness:
    id: ServableId
    path: str
    state: HarnessState = HarnessState.NEW
    is_aspired: bool = True
    bundle: Any = None
    cache: dict = field(default_factory=dict)  # Servable.cache of every handle to this version
    error: errors.OpError | None = None
    pinned: Pinned | None = None  # while requests may pin it (``_set_available``)
    fingerprint: tuple | None = None  # of the directory at the last failed attempt
    waiting_retry: bool = False
    cancel: threading.Event = field(default_factory=threading.Event)
    retry_now: threading.Event = field(default_factory=threading.Event)
    size: int = -1  # bytes it holds once loaded (-1: not measured yet)
    idle: bool = False  # budget: aspired but not resident, reported AVAILABLE (not resident)
    evicted: bool = False  # budget: unloaded to make room, still aspired


class Pinned(Servable):
    """A loaded version as requests see it: one object per version, shared by every request.
    A pin is an entry in ``pins`` (a list's append and pop are atomic under the GIL, so pinning
    takes no lock); ``with`` releases it. Once ``retired`` is set, after the version has left
    the manager's tables, no new pin may stay: ``AspiredVersionsManager.pin`` checks it after
    pinning, and the unload waits for ``pins`` to empty after setting it."""

    __slots__ = ("pins", "retired", "unpin", "used")

    def __init__(self, h: Harness):
        super().__init__(h.id.name, h.id.version, h.bundle, cache=h.cache)
        self.pins: list[None] = []
        self.retired = False
        self.used = now()  # when a request last pinned it (the memory budget's recency)
        self.unpin = self.pins.pop  # what ``with`` does at the end; ``finally: unpin()`` is cheaper

    def __exit__(self, *exc) -> None:
        self.pins.pop()


class Handle(Servable):
    """What ``get_servable`` returns: a Servable whose pin on its version is released exactly
    once, by its ``with`` block's end or, failing that, when it is collected (which cannot
    happen during the block: its thread holds the handle)."""

    __slots__ = ("_pinned",)

    def __init__(self, pinned: Pinned):
        super().__init__(pinned.name, pinned.version, pinned.bundle, cache=pinned.cache)
        self._pinned: Pinned | None = pinned

    def __exit__(self, *exc) -> None:
        self._release_pin()

    def __del__(self) -> None:
        self._release_pin()

    def _release_pin(self) -> None:
        pinned = self._pinned
        if pinned is not None:
            self._pinned = None
            pinned.pins.pop()


@dataclass(frozen=True)
class VersionState:
    version: int
    state: ManagerState
    error: errors.OpError | None = None
    seq: int = 0
    resident: bool = True  # False: AVAILABLE but loaded on its first request (memory budget)


def request_text(name: str, version: int | None) -> str:
    """How TF Serving names a request for a servable in its errors."""
    return f"Latest({name})" if version is None else f"Specific({name}, {version})"
