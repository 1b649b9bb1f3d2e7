"""Servable: one loaded version of a model, and the states a version goes through.

A ``Servable`` returned by ``ServerCore.servable_handle`` is a handle: while it is referenced
(or until its ``with`` block ends) the manager will not unload that version, exactly like TF
Serving's ``ServableHandle``. The bundle is shared and read-only; it is safe to use from many
threads at once.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, NamedTuple


class ServableId(NamedTuple):
    name: str
    version: int

    def __str__(self) -> str:
        return f"{{name: {self.name} version: {self.version}}}"


class ManagerState(enum.IntEnum):
    """``ServableState::ManagerState``; values are ``ModelVersionStatus.State``'s."""

    START = 10
    LOADING = 20
    AVAILABLE = 30
    UNLOADING = 40
    END = 50


@dataclass(frozen=True)
class Servable:
    """A loaded model version: ``bundle`` is a ``loader.SavedModelBundle``.

    ``with servable: ...`` releases the pin at the end of the block; otherwise the pin is
    released when the last reference goes away.
    """

    name: str
    version: int
    bundle: Any
    _release: Any = field(default=None, compare=False, repr=False)

    @property
    def id(self) -> ServableId:
        return ServableId(self.name, self.version)

    def __enter__(self) -> Servable:
        return self

    def __exit__(self, *exc) -> None:
        if self._release is not None:
            self._release()
