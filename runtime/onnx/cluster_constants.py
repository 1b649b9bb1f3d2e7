"""``ClusterConstants``: the values of the constants clusters read by name.

A delegated model's weights reach its clusters by name (``partition.fuse``'s ``by_name``): each
cluster's subgraph holds a ``Placeholder`` per weight, and its runner asks here for the value of
the op of that name in the Session's graph when it first needs it (to convert the cluster, or to
run it natively). So a weight lives once, in the restored variables (or the graph's own
``Const``), however many clusters read it. Values are seeded at delegation (the frozen reads and
what is computed from them, ``delegate.freeze_variables``); any other (a delegation read from
the cluster cache) is computed by running its op in the Session, once.

Thread-safe. Holds its Session weakly: runners live as long as the Session's graph does.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence

import numpy as np


class ClusterConstants:
    """Op name -> value, for the ops of one Session's graph that clusters read by name."""

    def __init__(self, session, seed: Mapping[str, np.ndarray] | None = None):
        self._session = weakref.ref(session)
        self._values: dict[str, np.ndarray] = dict(seed or {})
        self._lock = threading.Lock()

    def values(self, names: Sequence[str]) -> list[np.ndarray]:
        """The values of ops ``names`` (each op's output 0), computed in the Session if unseeded."""
        with self._lock:
            missing = [name for name in dict.fromkeys(names) if name not in self._values]
            if missing:
                session = self._session()
                if session is None:
                    raise RuntimeError("the Session of these cluster constants is gone")
                computed = session.run([f"{name}:0" for name in missing])
                self._values.update((n, np.asarray(v)) for n, v in zip(missing, computed))
            return [self._values[name] for name in names]
