"""Delegation inside the functions that stay calls: the bodies and branches of While, If and Case.

A ``While`` whose cond and body convert whole (``control_flow_ops.while_reason``) is left alone:
it becomes one ONNX ``Loop`` in the cluster around it. Any other TF2 loop's cell runs in its body,
once per step; inlining cannot flatten a loop, so the body itself is partitioned and fused, into a NEW FunctionDef named ``<name>__ort`` (the
original stays in the library, untouched), and the loop node is pointed at it. Cluster nodes in
a body carry ``key``: the delegation they belong to (options and report), since the body's
Operations only exist once the Session instantiates the function. Function bodies are read with
``runtime.graph.function_def.instantiate`` (flat ``node:k`` references), which is also how the Session reads
the rewritten ones. Functions with attr parameters (polymorphic bodies) are left as they are.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from apis.tensorflow.core.framework import function_pb2, graph_pb2
from runtime.graph.function_def import instantiate
from runtime.graph.graph import Graph
from runtime.onnx import partition
from runtime.onnx.cond_ops import IF_OPS, branches_reason
from runtime.onnx.control_flow_ops import WHILE_OPS, while_reason
from runtime.onnx.inline import inline_calls

logger = logging.getLogger(__name__)

LOOP_OPS = frozenset({"While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase"})
SUFFIX = "__ort"


def delegate_functions(
    graph_def: graph_pb2.GraphDef,
    library: Mapping[str, function_pb2.FunctionDef],
    key: str,
    partitioning: Mapping[str, object] | None = None,
    on_clusters: Callable[[str, Graph, list[partition.Cluster]], None] | None = None,
    whole_loops: bool = True,
) -> tuple[graph_pb2.GraphDef, dict[str, function_pb2.FunctionDef]]:
    """``graph_def`` with its loop/branch nodes pointed at delegated copies of their functions,
    and the library with those copies added. ``partitioning``: ``propose_clusters``' keyword
    arguments (cluster sizes, placement). ``on_clusters(function, body graph, clusters)`` is
    told of every body's clusters (for the report). ``whole_loops``: leave the While nodes that
    convert whole as they are (False: delegate their bodies too, for a cluster's fallback)."""
    new_library = dict(library)
    renamed: dict[str, str] = {}

    def rewrite(name: str) -> str:
        if name in renamed:
            return renamed[name]
        renamed[name] = name  # a recursive reference sees the original
        try:
            fdef = _delegated(library[name], new_library, rewrite, (key, partitioning or {}), on_clusters)
        except Exception as exc:  # noqa: BLE001 - a body we cannot partition runs as it is
            logger.info("function %s stays native: %s: %s", name, type(exc).__name__, exc)
            fdef = None
        if fdef is not None:
            renamed[name] = fdef.signature.name
            new_library[fdef.signature.name] = fdef
        return renamed[name]

    result = graph_pb2.GraphDef()
    result.CopyFrom(graph_def)
    _point_at(result.node, library, rewrite, whole_loops)
    return result, new_library


def _point_at(nodes, library: Mapping, rewrite: Callable[[str], str], whole_loops: bool = True) -> bool:
    """Rewrites the func attrs of loop/branch nodes (not whole-loop ones); whether any changed."""
    changed = False
    for node in nodes:
        if node.op not in LOOP_OPS:
            continue
        if whole_loops and node.op in WHILE_OPS and while_reason(node, library) is None:
            continue
        if whole_loops and node.op in IF_OPS and branches_reason(node, library) is None:
            continue  # converts whole, as one ONNX If: its branches stay as they are
        for value in node.attr.values():
            funcs = [value.func] if value.WhichOneof("value") == "func" else list(value.list.func)
            for func in funcs:
                if func.name in library:
                    new = rewrite(func.name)
                    changed |= new != func.name
                    func.name = new
    return changed


def _delegated(fdef, new_library, rewrite, keyed, on_clusters) -> function_pb2.FunctionDef | None:
    key, partitioning = keyed
    if fdef.signature.attr:
        return None
    body = instantiate(fdef, {}, new_library)
    body_def = inline_calls(body.graph.as_graph_def(with_library=False), new_library)
    nested = _point_at(body_def.node, new_library, rewrite)
    graph = Graph(functions=new_library)
    graph.import_graph_def(body_def)
    clusters = partition.propose_clusters(graph, **partitioning)
    if on_clusters is not None:
        on_clusters(fdef.signature.name, graph, clusters)
    if not clusters and not nested:
        return None
    fused = partition.fuse(graph, clusters) if clusters else body_def
    new = function_pb2.FunctionDef()
    new.signature.CopyFrom(fdef.signature)
    new.signature.name = fdef.signature.name + SUFFIX
    new.attr.MergeFrom(fdef.attr)
    for node in fused.node:
        if node.op == "_Arg":
            continue
        copy = new.node_def.add()
        copy.CopyFrom(node)
        if node.op == partition.CLUSTER_OP:
            copy.attr["key"].s = key.encode()
    for arg, tensor in zip(fdef.signature.output_arg, body.rets):
        new.ret[arg.name] = tensor.name
    for name in fdef.signature.control_output:
        new.control_ret[name] = fdef.control_ret[name]
    return new
