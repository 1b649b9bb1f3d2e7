"""AvailabilityPreservingPolicy: which version of a model to load or unload next.

Pure: a snapshot of every version of one model (its harness state and whether the source
still aspires to it) goes in, at most one action comes out. The policy never lets a model
drop to zero available versions while a replacement is on its way:

- unload the lowest un-aspired ready version, but only when nothing is aspired any more,
  when an aspired version is already ready, or when more than one un-aspired version is
  ready (one of them keeps serving);
- otherwise load the highest aspired version that is still new.

So a new version is loaded before the old one is unloaded, and a version that fails to load
never costs the versions being served. This is TF Serving's ``AvailabilityPreservingPolicy``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class HarnessState(enum.Enum):
    """A managed version's lifecycle (TF Serving's ``LoaderHarness::State``, condensed)."""

    NEW = "new"  # aspired, not yet loading
    LOADING = "loading"  # load approved; running or waiting to retry
    READY = "ready"  # loaded and serving
    UNLOADING = "unloading"  # no new handles; waits for in-flight ones, then unloads
    DISABLED = "disabled"  # unloaded
    ERROR = "error"  # load failed for good


class Action(enum.Enum):
    LOAD = "load"
    UNLOAD = "unload"


@dataclass(frozen=True)
class VersionSnapshot:
    version: int
    state: HarnessState
    is_aspired: bool


@dataclass(frozen=True)
class ServableAction:
    action: Action
    version: int


def next_action(versions: list[VersionSnapshot]) -> ServableAction | None:
    """The next step for one model's versions, or None when it is up to date."""
    has_aspired = any(v.is_aspired for v in versions)
    has_aspired_ready = any(v.is_aspired and v.state is HarnessState.READY for v in versions)
    unaspired_ready = [v for v in versions if not v.is_aspired and v.state is HarnessState.READY]
    if unaspired_ready and (not has_aspired or has_aspired_ready or len(unaspired_ready) > 1):
        return ServableAction(Action.UNLOAD, min(v.version for v in unaspired_ready))
    new_aspired = [v.version for v in versions if v.is_aspired and v.state is HarnessState.NEW]
    if new_aspired:
        return ServableAction(Action.LOAD, max(new_aspired))
    return None
