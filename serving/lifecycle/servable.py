"""Servable: one loaded version of a model, how it is loaded, and the states it goes through.

A ``Servable`` returned by ``ServerCore.servable_handle`` is a handle: while it is referenced
(or until its ``with`` block ends) the manager will not unload that version, exactly like TF
Serving's ``ServableHandle``. The bundle is shared and read-only; it is safe to use from many
threads at once.
"""

from __future__ import annotations

import enum
import os
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


class Servable:
    """A loaded model version: ``bundle`` is a ``loader.SavedModelBundle``; ``cache`` holds
    what request paths derive from it once per version.

    ``with servable: ...`` releases the pin at the end of the block; otherwise the pin is
    released when the last reference goes away. A plain slotted class: one is made per request.
    """

    __slots__ = ("name", "version", "bundle", "_release", "cache")

    def __init__(self, name: str, version: int, bundle: Any, _release: Any = None, cache: dict | None = None):
        self.name = name
        self.version = version
        self.bundle = bundle
        self._release = _release
        # What request paths derive from the bundle (e.g. ``predict.PredictSignature``), built on
        # first use; the manager gives every handle to one version the same dict.
        self.cache = {} if cache is None else cache

    @property
    def id(self) -> ServableId:
        return ServableId(self.name, self.version)

    def __repr__(self) -> str:
        return f"Servable(name={self.name!r}, version={self.version})"

    def __enter__(self) -> Servable:
        return self

    def __exit__(self, *exc) -> None:
        if self._release is not None:
            self._release()

    def unpin(self) -> None:
        """What the end of a ``with`` block on this servable does."""
        self.__exit__(None, None, None)


def fingerprint(path: str) -> tuple:
    """What a version directory holds (names, sizes, mtimes): changes while it is written."""
    entries = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            try:
                st = os.stat(full)
            except OSError:
                continue
            entries.append((os.path.relpath(full, path), st.st_size, st.st_mtime_ns))
    return tuple(entries)
