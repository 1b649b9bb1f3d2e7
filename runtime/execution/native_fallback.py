"""``NativeFallback``: the graph a Session ran before delegation rewrote it, to answer for it.

Delegation (``runtime.onnx``) is an optimisation: its rewritten graph must answer what the
original answers. Clusters check themselves (each first run against the native kernels); this is
the net under everything else the rewrite does (raised loops, folded constants, the fused graph
itself). When a run of the rewritten graph raises, the same feeds run on the original graph:

- if that raises too, its error is the answer (TF's error for a bad input, as without delegation);
- if it answers, the rewrite broke that signature: the signature (the run's feeds, fetches and
  targets) runs on the original graph from then on, which is logged and reported once.

The original graph is kept, or imported again when first needed (``original``); its tensors are
found by name (the rewrite keeps every name). Thread-safe: the state (that graph, its runtime, the
signatures moved back) is written under a lock and read without one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from runtime import errors
from runtime.graph.graph import Graph

logger = logging.getLogger(__name__)

# Errors a second run cannot answer otherwise: the deadline has passed, the caller gave up.
_FINAL = (errors.DeadlineExceededError, errors.CancelledError)


class NativeFallback:
    """The original graph and its function runtime, with the signatures moved back to it."""

    def __init__(
        self,
        original: Graph | Callable[[], Graph],
        runtime: Callable[[Graph], object],
        on_fallback: Callable[[str, str], None] | None = None,
    ):
        """``original``: the graph, or what imports it again when first needed (a loader, which
        has its GraphDef: a frozen model's weights are then not held twice). ``runtime(graph)``:
        its function library runtime over the Session's resources (variables are found by name,
        so an imported copy reads the restored ones). ``on_fallback(signature, why)`` is told
        once per signature moved back (the report)."""
        self._original, self._runtime = original, runtime
        self._graph: Graph | None = original if isinstance(original, Graph) else None
        self._functions = None
        self._on_fallback = on_fallback
        self._native: dict[tuple, tuple] = {}  # a key of the rewritten graph -> the original's key
        self._lock = threading.Lock()

    @property
    def graph(self) -> Graph:
        if self._graph is None:
            with self._lock:
                if self._graph is None:
                    self._graph = self._original()
        return self._graph

    @property
    def functions(self):
        if self._functions is None:
            graph = self.graph
            with self._lock:
                if self._functions is None:
                    self._functions = self._runtime(graph)
        return self._functions

    def is_native(self, key: tuple) -> bool:
        return key in self._native

    def native_key(self, key: tuple) -> tuple | None:
        """``key`` ((feeds, fetches, targets) of the rewritten graph) on the original graph, or
        None where a name is not there."""
        found = self._native.get(key)
        if found is not None:
            return found
        feeds, fetches, targets = key
        graph = self.graph
        try:
            return (
                tuple(graph.get_tensor_by_name(t.name) for t in feeds),
                tuple(graph.get_tensor_by_name(t.name) for t in fetches),
                tuple(graph.get_operation_by_name(op.name) for op in targets),
            )
        except (KeyError, ValueError):
            return None

    def recover(self, key: tuple, exc: Exception, run_native: Callable[[tuple], list]) -> list:
        """The answer to a run of ``key`` that raised ``exc`` on the rewritten graph: the
        original graph's (``run_native(original key)``), or ``exc`` where there is none."""
        native_key = self.native_key(key) if not isinstance(exc, _FINAL) else None
        if native_key is None:
            raise exc
        results = run_native(native_key)  # raises the original graph's error: TF's answer
        self.move_back(key, native_key, f"{type(exc).__name__}: {exc}")
        return results

    def move_back(self, key: tuple, native_key: tuple, why: str) -> None:
        with self._lock:
            if key in self._native:
                return
            self._native[key] = native_key
        signature = ", ".join(t.name for t in key[1]) or ", ".join(op.name for op in key[2])
        logger.warning(
            "onnxruntime delegation: fetching %s runs natively from now on (the delegated graph failed "
            "where the original answers): %s",
            signature,
            why,
        )
        if self._on_fallback is not None:
            self._on_fallback(f"signature {signature}", why)
