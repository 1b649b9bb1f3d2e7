"""Structural matching of TF subgraphs, shared by the delegation-time fusions.

``embedding_fusion``, ``bucketized_fusion`` and ``indicator_fusion`` each recognise one subgraph
TF's feature columns build, walking from its last op back through producers: ``Matcher.take``
accepts a producer of the expected type and records it, ``const``, ``same`` and ``attrs`` check
the rest, and any difference raises ``NoMatch`` (the subgraph then stays as it is).
``rewritten`` applies the chosen rewrites to a copy of the graph.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from apis.tensorflow.core.framework import graph_pb2
from runtime import tensor_util
from runtime.graph.graph import Graph, Operation, Tensor


class NoMatch(Exception):
    """The subgraph is not the one a fusion recognises."""


class Matcher:
    """Walks producers of one candidate, recording each op it takes."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []

    def take(self, tensor: Tensor, op_types: str | tuple[str, ...], index: int = 0) -> Operation:
        op = tensor.op
        types = (op_types,) if isinstance(op_types, str) else op_types
        if op.type not in types or tensor.value_index != index or op.control_inputs:
            raise NoMatch(f"{tensor.name}: not {types}:{index}")
        if op not in self.ops:
            self.ops.append(op)
        return op

    def skip_identities(self, tensor: Tensor) -> Tensor:
        while tensor.op.type == "Identity":
            tensor = self.take(tensor, "Identity").inputs[0]
        return tensor


def const(tensor: Tensor, expected=None) -> np.ndarray:
    """The value of a ``Const`` tensor; equal to ``expected`` (flattened) when given."""
    if tensor.op.type != "Const" or tensor.op.control_inputs:
        raise NoMatch(f"{tensor.name}: not a Const")
    value = tensor_util.make_ndarray(tensor.op.node_def.attr["value"].tensor)
    if expected is not None:
        want = np.asarray(expected).reshape(-1)
        if value.ndim > 1 or value.size != want.size or not np.array_equal(value.reshape(-1), want):
            raise NoMatch(f"{tensor.name}: {value.tolist()} is not {want.tolist()}")
    return value


def same(a: Tensor, b: Tensor) -> None:
    if a.name != b.name:
        raise NoMatch(f"{a.name} is not {b.name}")


def attrs(op: Operation, **expected) -> None:
    for key, want in expected.items():
        if op.attrs.get(key, 0) != want:
            raise NoMatch(f"{op.name}: {key}={op.attrs.get(key)!r}, not {want!r}")


def rewritten(graph: Graph, rewrites: dict[str, tuple], rewrite: Callable) -> graph_pb2.GraphDef | None:
    """``graph``'s GraphDef with ``rewrite(node, *rewrites[node.name])`` applied to each node
    named; None when there is nothing to rewrite."""
    if not rewrites:
        return None
    graph_def = graph.as_graph_def(with_library=False)  # (re-imported over the library)
    for node in graph_def.node:
        if node.name in rewrites:
            rewrite(node, *rewrites[node.name])
    return graph_def
