"""Per-Session resources (variables, later tables), keyed as TF's ``ResourceMgr`` keys them.

A resource lives under (container, name, kind): the container is a node's ``container`` attr or
``localhost`` when empty, the name its ``shared_name`` attr or, when empty, the node's name
(TF's ``use_node_name_as_default``). Every Session owns one ResourceMgr, so Sessions over the
same graph never share state, and ``Session.close`` drops it.

Thread-safety: the manager's maps take a lock; each ``Var`` takes its own lock for
read-modify-write updates (``AssignAdd``), while plain reads and assignments swap one reference.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from runtime import dtypes, errors

DEFAULT_CONTAINER = "localhost"
ANONYMOUS_NAME = "cd2c89b7-88b7-44c8-ad83-06c2a9158347"  # TF's ResourceHandle::ANONYMOUS_NAME

# The C++ type names TF prints in resource errors ("Resource localhost/v/N10tensorflow3VarE ...").
VAR_KIND = "N10tensorflow3VarE"


@dataclass(frozen=True)
class ResourceHandle:
    """The value of a DT_RESOURCE tensor: where the resource lives and what it holds."""

    container: str
    name: str
    kind: str
    dtype: int = dtypes.DT_INVALID
    shape: tuple | None = None

    def __repr__(self) -> str:
        return f"<ResourceHandle {self.container}/{self.name}/{self.kind}>"


class Var:
    """A variable's storage: a numpy value, or None while uninitialized.

    Ref variables (``VariableV2``) pass the Var itself along their ref edges; the Session
    dereferences it where an op reads a value.
    """

    __slots__ = ("name", "dtype", "shape", "value", "lock")

    def __init__(self, name: str, dtype: int, shape: tuple | None = None):
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.value: np.ndarray | None = None
        self.lock = threading.Lock()

    @property
    def is_initialized(self) -> bool:
        return self.value is not None

    def read(self) -> np.ndarray:
        """The value; FailedPreconditionError as TF's ref deref when uninitialized."""
        value = self.value
        if value is None:
            raise errors.FailedPreconditionError(
                None, None, f"Attempting to use uninitialized value {self.name}"
            )
        return value


class ResourceMgr:
    """Resources of one Session by (container, name, kind)."""

    def __init__(self):
        self._resources: dict[tuple[str, str, str], object] = {}
        self._lock = threading.Lock()

    def lookup(self, handle: ResourceHandle):
        """The resource, or NotFoundError with TF's text."""
        resource = self._resources.get((handle.container, handle.name, handle.kind))
        if resource is None:
            raise errors.NotFoundError(
                None,
                None,
                f"Resource {handle.container}/{handle.name}/{handle.kind} does not exist.",
            )
        return resource

    def get(self, handle: ResourceHandle):
        return self._resources.get((handle.container, handle.name, handle.kind))

    def lookup_or_create(self, handle: ResourceHandle, create: Callable[[], object]):
        key = (handle.container, handle.name, handle.kind)
        resource = self._resources.get(key)
        if resource is None:
            with self._lock:
                resource = self._resources.get(key)
                if resource is None:
                    resource = self._resources[key] = create()
        return resource

    def delete(self, handle: ResourceHandle) -> None:
        with self._lock:
            if self._resources.pop((handle.container, handle.name, handle.kind), None) is None:
                raise errors.NotFoundError(
                    None,
                    None,
                    f"Resource {handle.container}/{handle.name}/{handle.kind} does not exist.",
                )

    def clear(self) -> None:
        with self._lock:
            self._resources.clear()

    def __len__(self) -> int:
        return len(self._resources)


def resource_key(container: str, shared_name: str, node_name: str) -> tuple[str, str]:
    """(container, name) of a resource op, with TF's defaults for empty attrs."""
    return container or DEFAULT_CONTAINER, shared_name or node_name
