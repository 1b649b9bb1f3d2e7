"""The checks TF's graph constructor makes on a GraphDef before it builds a graph.

TF Serving loads a SavedModel by importing its GraphDef (``ConvertGraphDefToGraph``); a malformed
one fails the load with INVALID_ARGUMENT and the constructor's text, and Python's
``tf.import_graph_def`` raises the same text as a ValueError. Both hold here: ``InvalidGraphError``
is an InvalidArgumentError and a ValueError. In TF's order: node names (valid, unique, with an op,
control inputs last), then inputs naming no node, then cycles ("N nodes in a cycle", counted as
TF's topological walk counts them: a TF1 while loop's NextIteration -> Merge back edge is no cycle).

Pure functions over NodeDefs; ``runtime.graph`` calls them and the Session never sees such a graph.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from apis.tensorflow.core.framework import node_def_pb2
from runtime import errors
from runtime.op_def import parse_input

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


def check_acyclic(nodes: Sequence[node_def_pb2.NodeDef]) -> None:
    """TF's topological walk over the new nodes (inputs from nodes already in the graph count as
    ready); whatever it cannot reach lies on or after a cycle."""
    index = {node.name: i for i, node in enumerate(nodes)}
    next_iterations = {node.name for node in nodes if node.op in ("NextIteration", "RefNextIteration")}
    pending = [0] * len(nodes)
    consumers: list[list[tuple[int, bool]]] = [[] for _ in nodes]
    for i, node in enumerate(nodes):
        pending[i] = len(node.input)
        merge = node.op in ("Merge", "RefMerge")
        back_edges = 0
        for text in node.input:
            source, _, control = parse_input(text)
            back_edge = merge and not control and source in next_iterations
            back_edges += back_edge
            if source in index:
                consumers[index[source]].append((i, back_edge))
            else:
                pending[i] -= 1  # a node already in the graph: ready
        if back_edges:
            pending[i] = sum(t.startswith("^") for t in node.input) + 1
    ready = [i for i, count in enumerate(pending) if count == 0]
    processed = 0
    while ready:
        processed += 1
        for consumer, back_edge in consumers[ready.pop()]:
            if not back_edge:
                pending[consumer] -= 1
                if pending[consumer] == 0:
                    ready.append(consumer)
    if processed < len(nodes):
        raise InvalidGraphError(f"{len(nodes) - processed} nodes in a cycle")
