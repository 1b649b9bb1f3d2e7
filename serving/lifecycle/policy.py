"""Which version of a model to load or unload next: TF Serving's two aspired-version policies.

Pure: a snapshot of every version of one model (its harness state and whether the source
still aspires to it) goes in, at most one action comes out.

``AVAILABILITY`` (the default; TF Serving's only choice) never lets a model drop to zero
available versions while a replacement is on its way:

- unload the lowest un-aspired ready version, but only when nothing is aspired any more,
  when an aspired version is already ready, or when more than one un-aspired version is
  ready (one of them keeps serving);
- otherwise load the highest aspired version that is still new.

So a new version is loaded before the old one is unloaded, and a version that fails to load
never costs the versions being served. This is TF Serving's ``AvailabilityPreservingPolicy``.
During a swap both versions are in memory: twice the model.

``RESOURCE`` (TF Serving's ``ResourcePreservingPolicy``, which its server offers no way to
choose) unloads every version no longer aspired first, and loads a new one only once none of
those holds memory any more: half the peak, and a gap without an available version (requests
meanwhile are answered as for a model not yet loaded). Chosen per model by
``--aspired_version_policy`` (``parse_policies``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from runtime import errors


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


AVAILABILITY = "availability_preserving"
RESOURCE = "resource_preserving"
_NAMES = {"availability_preserving": AVAILABILITY, "availability": AVAILABILITY}
_NAMES |= {"resource_preserving": RESOURCE, "resource": RESOURCE}


def parse_policies(text: str) -> tuple[str, dict[str, str]]:
    """``--aspired_version_policy``: a policy for every model, then ``model=policy`` for some
    (e.g. ``availability_preserving,big_model=resource_preserving``; ``availability`` and
    ``resource`` for short). Returns (the default policy, the per-model ones); ValueError
    names what does not parse."""
    default, per_model = AVAILABILITY, {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.rpartition("=")
        policy = _NAMES.get(value.strip().lower())
        if policy is None:
            raise ValueError(
                f"unknown version swap policy {value.strip()!r} (availability_preserving or resource_preserving)"
            )
        if name:
            per_model[name.strip()] = policy
        else:
            default = policy
    return default, per_model


def swap_policies(text: str):
    """``parse_policies(text)`` as a function of the model name; InvalidArgumentError (the
    server does not start) if the flag does not parse."""
    try:
        default, per_model = parse_policies(text)
    except ValueError as e:
        raise errors.InvalidArgumentError(None, None, f"--aspired_version_policy: {e}") from None
    return lambda name: per_model.get(name, default)


def next_action(versions: list[VersionSnapshot], policy: str = AVAILABILITY) -> ServableAction | None:
    """The next step for one model's versions under ``policy``, or None when it is up to date."""
    if policy == RESOURCE:
        return _resource_preserving(versions)
    has_aspired = any(v.is_aspired for v in versions)
    has_aspired_ready = any(v.is_aspired and v.state is HarnessState.READY for v in versions)
    unaspired_ready = [v for v in versions if not v.is_aspired and v.state is HarnessState.READY]
    if unaspired_ready and (not has_aspired or has_aspired_ready or len(unaspired_ready) > 1):
        return ServableAction(Action.UNLOAD, min(v.version for v in unaspired_ready))
    new_aspired = [v.version for v in versions if v.is_aspired and v.state is HarnessState.NEW]
    if new_aspired:
        return ServableAction(Action.LOAD, max(new_aspired))
    return None


_HOLDING = (HarnessState.LOADING, HarnessState.READY, HarnessState.UNLOADING)


def _resource_preserving(versions: list[VersionSnapshot]) -> ServableAction | None:
    """``ResourcePreservingPolicy``: unload the lowest un-aspired ready version; load the
    highest new aspired one only when no un-aspired version is loading, ready or unloading."""
    unaspired_ready = [v.version for v in versions if not v.is_aspired and v.state is HarnessState.READY]
    if unaspired_ready:
        return ServableAction(Action.UNLOAD, min(unaspired_ready))
    if any(not v.is_aspired and v.state in _HOLDING for v in versions):
        return None
    new_aspired = [v.version for v in versions if v.is_aspired and v.state is HarnessState.NEW]
    if new_aspired:
        return ServableAction(Action.LOAD, max(new_aspired))
    return None
