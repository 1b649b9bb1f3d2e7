"""The checks TF's graph constructor makes on a GraphDef before it builds a graph.

TF Serving loads a SavedModel by importing its GraphDef (``ConvertGraphDefToGraph``); a malformed
one fails the load with INVALID_ARGUMENT and the constructor's text, and Python's
``tf.import_graph_def`` raises the same text as a ValueError. Both hold here: ``InvalidGraphError``
is an InvalidArgumentError and a ValueError. In TF's order: node names (valid, unique, with an op,
control inputs last), then inputs naming no node, then each node in TF's topological order (its
inputs' output indices, then its NodeDef against the op's definition, ``runtime/graph/node_check.py``), then
cycles ("N nodes in a cycle", counted as TF's walk counts them: a TF1 while loop's NextIteration
-> Merge back edge is no cycle).

Pure functions over NodeDefs; ``runtime.graph.graph`` calls them and the Session never sees such a graph.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Collection, Sequence

from apis.tensorflow.core.framework import node_def_pb2
from runtime import errors

# TF's IsValidNodeName (internal names with a leading "_" allowed, as imports of function
# bodies and TF's own exports use them).
_VALID_NAME = re.compile(r"[A-Za-z0-9._][A-Za-z0-9_./>-]*")


class InvalidGraphError(errors.InvalidArgumentError, ValueError):
    """A GraphDef TF's import refuses: INVALID_ARGUMENT for the server, ValueError for Python."""

    def __init__(self, message: str):
        super().__init__(None, None, message)


def check_node_index(nodes: Sequence[node_def_pb2.NodeDef], existing: Collection[str]) -> None:
    """TF's ``BuildNodeIndex``: every name valid and unique, every node with an op type, control
    inputs after the data inputs."""
    seen: set[str] = set()
    for node in nodes:
        name = node.name
        if not _VALID_NAME.fullmatch(name):
            raise InvalidGraphError(f"Node '{name}': Node name contains invalid characters")
        if name in seen or name in existing:
            raise InvalidGraphError(f"Node '{name}' is not unique")
        seen.add(name)
        if not node.op:
            raise InvalidGraphError(f"Node '{name}' does not specify an operation")
        control = False
        for text in node.input:
            if text.startswith("^"):
                control = True
            elif control:
                raise InvalidGraphError(
                    f"Node '{name}': Control dependencies must come after regular dependencies"
                )


def topological_order(
    nodes: Sequence[node_def_pb2.NodeDef], inputs: Sequence[Sequence[tuple[str, int, bool]]]
) -> list[int]:
    """The order TF's graph constructor processes the new nodes in (the ready node of lowest
    index first; inputs from nodes already in the graph count as ready). ``inputs`` are each
    node's inputs as ``runtime.graph.op_def.parse_input`` gives them. Nodes it never reaches lie on or after a cycle:
    ``cycle_error`` reports them after the reached nodes are checked."""
    index = {node.name: i for i, node in enumerate(nodes)}
    next_iterations = {node.name for node in nodes if node.op in ("NextIteration", "RefNextIteration")}
    pending = [0] * len(nodes)
    consumers: list[list[tuple[int, bool]]] = [[] for _ in nodes]
    for i, node in enumerate(nodes):
        pending[i] = len(node.input)
        merge = node.op in ("Merge", "RefMerge")
        back_edges = 0
        for source, _, control in inputs[i]:
            back_edge = merge and not control and source in next_iterations
            back_edges += back_edge
            if source in index:
                consumers[index[source]].append((i, back_edge))
            else:
                pending[i] -= 1  # a node already in the graph: ready
        if back_edges:
            pending[i] = sum(control for _, _, control in inputs[i]) + 1
    ready = [i for i, count in enumerate(pending) if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        current = heapq.heappop(ready)
        order.append(current)
        for consumer, back_edge in consumers[current]:
            if not back_edge:
                pending[consumer] -= 1
                if pending[consumer] == 0:
                    heapq.heappush(ready, consumer)
    return order


def cycle_error(count: int, order: Sequence[int]) -> InvalidGraphError | None:
    """TF's error for the nodes of ``count`` that ``topological_order`` never reached, if any."""
    if len(order) < count:
        return InvalidGraphError(f"{count - len(order)} nodes in a cycle")
    return None
