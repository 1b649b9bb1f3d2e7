"""Steps 1-4 of ``delegate``: a loaded Session's graph rewritten so that clusters run in
onnxruntime (the fused GraphDef, its function library, the report, the frozen values).

Steps, each a pure function of the one before except where the Session's variables are read:

1. ``inline_calls``: TF2 call nodes whose bodies only compute become their bodies;
   ``raise_conds``: regular TF1 conds become functional If nodes (first: a loop holding one is regular);
   ``raise_frames``: regular TF1 while loops become functional While nodes (TensorArrays as TensorLists);
   ``freeze_loop_variables``: read-only variables a While takes become constants of its body;
   ``delegate_functions``: While/If bodies that stay functions get delegated copies (a While
   that converts whole becomes one ONNX ``Loop`` in a cluster instead);
2. the served region: ops the signatures need (clusters never mix ops of different signature
   sets, nor take in a tensor a signature feeds), or the whole graph;
3. variables (``frozen_variables.py``): if no op of that region can write a variable (``Assign*``,
   ``Scatter*``, ``*Apply*``, in the graph or in a function it calls), every ``ReadVariableOp`` of a
   ``VarHandleOp`` and ``Identity`` of a ``VariableV2`` is frozen: its current value (after
   restore and init) becomes a constant of the clusters that read it, and so does what is
   computed from frozen reads alone (``constant_folding.frozen_chains``: the Identity, Cast or
   batch-norm arithmetic Keras puts between a weight and its reader); row lookups into
   variables (partitioned ``embedding_lookup`` too) become ``GatherV2`` of a constant table
   (``gather_folding``); otherwise reads stay native;
   then ops of constants only become constants (``constant_folding``) and each
   ``safe_embedding_lookup_sparse`` of a constant table becomes one op (``embedding_fusion``),
   as do bucketized and indicator columns' plumbing (``bucketized_fusion``, ``indicator_fusion``);
4. ``propose_clusters`` then ``fuse`` give a new GraphDef, imported as a new Graph over a copy
   of the function library (plus the delegated bodies), with the collections carried over by name;
   clusters read weights by name (``cluster_constants.py``); control edges that order nothing
   (from frozen reads, or implied by data edges) are dropped, so the Session skips those ops.

``delegate`` imports this module on demand, only where the cluster cache does not hold the
result: the rewrites ask the converters what converts, and the converters import onnx.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

import numpy as np

from apis.tensorflow.core.framework import graph_pb2
from runtime.graph.graph import Graph, Operation
from runtime.graph.op_def import op_signature
from runtime.kernels import lookup as kernel_lookup
from runtime.onnx import (
    converters,  # noqa: F401 - registers every converter, which partition asks
    partition,
)
from runtime.onnx.bucketized_fusion import fuse_bucketized_columns
from runtime.onnx.constant_folding import fold_constants, frozen_chains
from runtime.onnx.control_flow_ops import WHILE_OPS
from runtime.onnx.cost import BOOKKEEPING, DATA_MOVEMENT, estimate_flops
from runtime.onnx.embedding_fusion import fuse_embedding_lookups
from runtime.onnx.frozen_variables import freeze_variables, loop_variable_values, writes_variables
from runtime.onnx.functions import delegate_functions
from runtime.onnx.gather_folding import fold_gathers
from runtime.onnx.indicator_fusion import fuse_indicator_columns
from runtime.onnx.inline import inline_calls
from runtime.onnx.interface import CLUSTER_OP, signature_pairs
from runtime.onnx.loop_variables import freeze_loop_variables
from runtime.onnx.options import DelegationOptions, uses_gpu
from runtime.onnx.raise_conds import raise_conds
from runtime.onnx.raise_frames import raise_frames
from runtime.onnx.report import ClusterSummary, DelegationReport


def rewrite(session, options: DelegationOptions, signatures, key: str):
    """Steps 1-4: (the fused GraphDef, its function library, the report, the frozen values)."""
    original = session.graph
    partitioning = {  # propose_clusters' keyword arguments, for the graph and function bodies
        "min_cluster_ops": options.min_cluster_ops,
        "heavy_flops": options.heavy_cluster_flops,
        "split_cpu_pinned": uses_gpu(options),
    }
    body_clusters: list[ClusterSummary] = []
    body_native: dict[str, tuple[str, str]] = {}
    graph_def, library = (
        inline_calls(original.as_graph_def(with_library=False), original.functions),
        original.functions,
    )
    graph_def, library = raise_conds(graph_def, library)
    graph_def, library = raise_frames(graph_def, library)
    if options.freeze_variables and any(node.op in WHILE_OPS for node in graph_def.node):
        graph = Graph(functions=library)
        graph.import_graph_def(graph_def, derived=True)
        region = list(served_region(graph, signatures))
        values = loop_variable_values(region, library, session.resources)
        graph_def, library = freeze_loop_variables(graph_def, library, values)
    inlined_def, library = delegate_functions(
        graph_def,
        library,
        key,
        partitioning,
        _body_report(body_clusters, body_native),
    )
    fill_default_type_attrs(inlined_def)
    inlined = Graph(functions=library)
    inlined.import_graph_def(inlined_def, derived=True)
    inlined, needed = _rewritten(inlined, signatures, options, session.resources)
    region = list(needed)
    frozen, note = {}, "variables read natively (delegation options)"
    fed = fed_producers(inlined, signatures)
    if options.freeze_variables:
        frozen, note = freeze_variables(inlined, region, session.resources)
    reads = len(frozen)
    if frozen:  # what Keras puts between a variable and its reader (Identity, Cast, Reshape)
        frozen.update(frozen_chains(inlined, _names(region), frozen, fed, session.resources))
    within = {op.name: key for op, key in needed.items() if op.name not in fed}
    clusters = partition.propose_clusters(inlined, frozen, within, **partitioning)
    fused_def = partition.fuse(
        inlined, clusters, frozen, {op.name for op in region}, fetched_tensors(signatures), by_name=True
    )
    for node in fused_def.node:
        if node.op == CLUSTER_OP:
            node.attr["key"].s = key.encode()
    add_loop_fallbacks(fused_def, key, partitioning)
    drop_inert_control_edges(fused_def, frozen)
    report = build_report(inlined, region, clusters, frozen, note, reads)
    report.clusters.extend(body_clusters)
    report.native.update(body_native)
    return fused_def, library, report, frozen


def named_constants(fused_def: graph_pb2.GraphDef, frozen: dict) -> dict[str, np.ndarray]:
    """The frozen values clusters read by name (the rest of ``frozen`` is not kept)."""
    names = {
        name.decode()
        for node in fused_def.node
        if node.op == CLUSTER_OP
        for name in node.attr["constant_names"].list.s
    }
    return {name: frozen[name] for name in names if name in frozen}


def _rewritten(inlined: Graph, signatures, options: DelegationOptions, resources) -> tuple[Graph, dict]:
    """The graph after the delegation-time rewrites, with its served region. Each pass maps the
    graph and its region to a new GraphDef, or None when it changes nothing: lookups of read-only
    variables become GatherV2 of constants, ops of constants only become constants, and each
    safe_embedding_lookup_sparse of a constant table becomes one op, as do each bucketized
    column's SparseTensor and each indicator column's SparseToDense -> one_hot -> sum."""
    library = inlined.functions
    needed = served_region(inlined, signatures)
    passes = []
    if options.freeze_variables and writes_variables(needed, library) is None:
        passes.append(lambda g, ops: fold_gathers(g, set(ops), resources))
    passes.append(lambda g, ops: fold_constants(g, _names(ops), fed_producers(g, signatures), resources))
    passes.append(
        lambda g, ops: fuse_embedding_lookups(
            g, _names(ops), fetched_tensors(signatures), fed_producers(g, signatures)
        )
    )
    passes.append(lambda g, ops: fuse_bucketized_columns(g, _names(ops), fed_producers(g, signatures)))
    passes.append(
        lambda g, ops: fuse_indicator_columns(
            g, _names(ops), fetched_tensors(signatures), fed_producers(g, signatures)
        )
    )
    for rewrite in passes:
        graph_def = rewrite(inlined, needed)
        if graph_def is not None:
            inlined = Graph(functions=library)
            inlined.import_graph_def(graph_def, derived=True)
            needed = served_region(inlined, signatures)
    return inlined, needed


def _names(ops) -> set[str]:
    return {op.name for op in ops}


def fill_default_type_attrs(graph_def: graph_pb2.GraphDef) -> None:
    """Sets the type attrs TF leaves out of a NodeDef at their default (``Unique``'s ``out_idx``)
    to that default, the kernel's keyword default, so the partitioner knows every output dtype."""
    for node in graph_def.node:
        definition = kernel_lookup(node.op)
        signature = op_signature(node.op)
        if definition is None or signature is None:
            continue
        for arg in signature.outputs:
            name = arg.type_attr
            if name is None or name in node.attr:
                continue
            default = definition.attr_defaults.get(name)
            if isinstance(default, int):
                node.attr[name].type = default


def drop_inert_control_edges(graph_def: graph_pb2.GraphDef, frozen: dict) -> None:
    """Removes control edges that order nothing, so the plan skips the ops behind them and
    forwards the ``Identity`` nodes they held. An edge ``^c`` into ``y`` orders nothing when ``c``
    is a frozen variable read (its value is a constant of the clusters now; nothing served writes
    the variable, so the read cannot fail), when ``c`` already precedes ``y`` along data edges,
    or when ``c`` is a ``NoOp`` (a TF2 function's control outputs) all of whose own edges order
    nothing for ``y``. Nodes stay: only edges go, so every name a signature uses still resolves.
    """
    nodes = {n.name: n for n in graph_def.node}
    inert = set(frozen)

    def data_ancestors(node, limit: int = 256) -> set[str]:
        seen: set[str] = set()
        stack = [i for i in node.input if not i.startswith("^")]
        while stack and len(seen) < limit:
            name = stack.pop().split(":")[0]
            if name not in seen and name in nodes:
                seen.add(name)
                stack.extend(i for i in nodes[name].input if not i.startswith("^"))
        return seen

    def orders_nothing(control: str, before: set[str], depth: int = 0) -> bool:
        if control in inert or control in before:
            return True
        node = nodes.get(control)
        return (
            node is not None
            and node.op == "NoOp"
            and depth < 8
            and all(i.startswith("^") and orders_nothing(i[1:], before, depth + 1) for i in node.input)
        )

    for node in graph_def.node:
        controls = [i[1:] for i in node.input if i.startswith("^")]
        if not controls:
            continue
        before = data_ancestors(node)
        drop = {c for c in controls if orders_nothing(c, before)}
        if drop:
            keep = [i for i in node.input if not (i.startswith("^") and i[1:] in drop)]
            del node.input[:]
            node.input.extend(keep)


def add_loop_fallbacks(graph_def: graph_pb2.GraphDef, key: str, partitioning: dict) -> None:
    """Gives each cluster holding whole loops a ``native_subgraph``: the same ops with the loops'
    bodies delegated (``delegate_functions``), which it runs if its conversion or validation fails,
    so a loop that cannot run as one ONNX ``Loop`` after all runs as loops that never could."""
    for node in graph_def.node:
        if node.op != CLUSTER_OP:
            continue
        sub = graph_pb2.GraphDef.FromString(node.attr["subgraph"].s)
        if not any(n.op in WHILE_OPS for n in sub.node):
            continue
        library = {f.signature.name: f for f in sub.library.function}
        native, new_library = delegate_functions(sub, library, key, partitioning, whole_loops=False)
        del native.library.function[:]
        native.library.function.extend(new_library[name] for name in sorted(new_library))
        node.attr["native_subgraph"].s = native.SerializeToString(deterministic=True)


def served_region(graph: Graph, signatures: Iterable | None) -> dict[Operation, frozenset[int]]:
    """Each op some signature needs -> the indices of the signatures that need it.

    ``signatures``: (feeds, fetches) pairs of tensor names (a fed tensor cuts its producer off),
    or plain fetch names (one signature); None: the whole graph, as one signature.
    """
    if signatures is None:
        return dict.fromkeys(graph.get_operations(), frozenset({0}))
    pairs = signature_pairs(signatures)
    needed: dict[Operation, set[int]] = {}
    for index, (feeds, fetches) in enumerate(pairs):
        fed = {graph.get_tensor_by_name(t) for t in feeds}
        stack = [_element_op(graph, name) for name in fetches]
        seen = set(stack)
        while stack:
            op = stack.pop()
            needed.setdefault(op, set()).add(index)
            for pred in [t.op for t in op.inputs if t not in fed] + op.control_inputs:
                if pred not in seen:
                    seen.add(pred)
                    stack.append(pred)
    return {op: frozenset(needed[op]) for op in graph.get_operations() if op in needed}


def _element_op(graph: Graph, name: str) -> Operation:
    element = graph.as_graph_element(name.lstrip("^"))
    return element if isinstance(element, Operation) else element.op


def fetched_tensors(signatures: Iterable | None) -> set[str]:
    """The tensor names the signatures fetch (operation names, e.g. targets, are left out)."""
    if signatures is None:
        return set()
    return {name for _, fetches in signature_pairs(signatures) for name in fetches if ":" in name}


def fed_producers(graph: Graph, signatures: Iterable | None) -> set[str]:
    """Ops whose outputs some signature feeds: they must stay outside clusters."""
    if signatures is None:
        return set()
    return {graph.get_tensor_by_name(t).op.name for feeds, _ in signature_pairs(signatures) for t in feeds}


def build_report(
    graph: Graph,
    region: list[Operation],
    clusters: list[partition.Cluster],
    frozen: dict,
    note: str,
    reads: int,
) -> DelegationReport:
    """``frozen``: the values clusters hold as constants, of which ``reads`` variable reads."""
    report = DelegationReport(frozen_variables=reads, variables_note=note)
    report.clusters.extend(summaries(graph, clusters))
    for name, kind, why, flops in explain_native(graph, region, clusters, constants=frozen):
        report.native[name] = (kind, why)
        report.native_op_flops[name] = flops
        report.native_flops += flops
    return report


def explain_native(
    graph: Graph,
    ops: Iterable[Operation],
    clusters: list[partition.Cluster],
    prefix: str = "",
    constants: Collection[str] = (),
):
    """(name, type, why it stayed native, FLOPs) of each op outside the clusters (not bookkeeping,
    nor one of the ``constants`` computed once at delegation)."""
    members = {name for c in clusters for name in c.nodes}
    excluded = partition.control_flow_region(graph)
    for op in ops:
        if op.name in members or op.type in BOOKKEEPING or op.type == "_Arg" or op.name in constants:
            continue
        why = partition.reason(op, constants)
        if op.name in excluded:
            why = "TF1 control flow"
        elif why is None:
            why = _unclustered(op)
        yield prefix + op.name, op.type, why, estimate_flops(op)


def _unclustered(op: Operation) -> str:
    """Why a supported op is in no cluster (``propose_clusters`` keeps only clusters worth a call)."""
    if op.type in DATA_MOVEMENT:
        return "only data movement in its cluster"
    if any(partition.is_list(t.dtype) for t in [*op.inputs, *op.outputs]):
        return "a TensorList would cross its cluster's boundary"
    return "in a cluster too small to pay for an onnxruntime call"


def _body_report(body_clusters: list, body_native: dict):
    """The callback ``delegate_functions`` tells of each body's clusters: summaries and the ops
    left native (their FLOPs are the loop op's estimate, so 0 here)."""

    def told(name: str, graph: Graph, clusters: list[partition.Cluster]) -> None:
        body_clusters.extend(summaries(graph, clusters, f"{name}/"))
        for op_name, kind, why, _ in explain_native(graph, graph.get_operations(), clusters, f"{name}/"):
            body_native[op_name] = (kind, why)

    return told


def summaries(graph: Graph, clusters: list[partition.Cluster], prefix: str = "") -> list[ClusterSummary]:
    found = []
    for spec in clusters:
        ops = [graph.get_operation_by_name(n) for n in spec.nodes]
        kinds: dict[str, int] = {}
        for op in ops:
            kinds[op.type] = kinds.get(op.type, 0) + 1
        found.append(ClusterSummary(prefix + spec.name, spec.nodes, kinds, sum(map(estimate_flops, ops))))
    return found
