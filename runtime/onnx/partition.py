"""Partitioning in small pure steps: ``supported(op)`` -> ``propose_clusters(graph)`` -> ``fuse``.

- ``reason(op)`` says why one node cannot run in onnxruntime (None: it can): no converter, a dtype
  ONNX lacks here (strings only from a constant table of text, into a ``strings`` converter), a
  shape or axis input that is not a constant, an output the converter does not produce but
  someone reads. ``supported(op)`` is ``reason(op) is None``.
- ``propose_clusters(graph, frozen)`` groups supported nodes into maximal clusters in one pass
  over a topological order: a node joins the clusters of its producers when the union stays
  acyclic (no path leaves the union and comes back, every other cluster taken as one node:
  ``contraction.py``), so the result is deterministic and each cluster can run as one node; the
  finished partition is checked once more as a whole. Constants and frozen variable reads are not members: each cluster
  gets its own copy of those it reads. Nodes of TF1 control flow (reachable from a ``Switch`` or
  ``Enter``) and nodes in cycles stay native. A cluster too small to pay for an onnxruntime call
  (only data movement, or fewer ops than ``min_cluster_ops`` and no big matmul/conv nor loop)
  stays native -- unless it holds all a signature computes, and more than two elementwise ops'
  worth: that signature's run is then one onnxruntime call (``Plan.direct``), cheaper than the
  interpreter loop. With signature groups, a cluster never mixes ops of different signature sets;
  with ``split_cpu_pinned`` (clusters may run on a GPU), never ops ``tf.device`` put on a CPU with
  others, as TF's placer keeps those on the CPU.
- ``fuse(graph, clusters, frozen, region)`` returns a NEW GraphDef: each cluster becomes one
  ``_OrtCluster`` node carrying a self-contained GraphDef of its ops (``Placeholder`` inputs,
  ``Const`` copies, frozen variables as ``Const``, the library functions they call), and each
  member whose outputs are read outside the cluster by an op of the served ``region`` (or by
  nobody: a fetch) becomes an ``IdentityN`` of the cluster's outputs under its own name, so every
  tensor name still resolves. Other members are kept, unreachable unless fetched by name.
  Small frozen variable reads outside the clusters become ``Const`` too: values of the plan.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass

import numpy as np

from apis.tensorflow.core.framework import graph_pb2, node_def_pb2
from runtime import dtypes, tensor_util
from runtime.execution.signature_check import called_functions
from runtime.graph.device import pinned_to_cpu
from runtime.graph.graph import Graph, Operation
from runtime.graph.op_def import parse_input
from runtime.onnx import converter as converter_lib
from runtime.onnx.contraction import Contraction, contraction_cycle
from runtime.onnx.cost import DATA_MOVEMENT, estimate_flops
from runtime.onnx.interface import CLUSTER_OP

logger = logging.getLogger(__name__)

_CONTROL_FLOW_SOURCES = frozenset({"Switch", "RefSwitch", "Enter", "RefEnter"})
LOOPS = frozenset({"While", "StatelessWhile"})
# Ops heavy enough to be worth an onnxruntime call on their own.
HEAVY = frozenset(
    {"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum", "Conv2D", "DepthwiseConv2dNative"}
)
# Slow natively whatever their size (numpy has no convolution: windows are gathered first).
CONVOLUTIONS = frozenset({"Conv2D", "DepthwiseConv2dNative"})


@dataclass(frozen=True)
class Cluster:
    """Names of a cluster's member ops, in topological order."""

    name: str
    nodes: tuple[str, ...]


def is_constant(op: Operation) -> bool:
    return op.type == "Const" and op.attrs.get("dtype") in converter_lib.ONNX_TYPES


def reason(op: Operation, constants: Collection[str] = ()) -> str | None:
    """Why ``op`` cannot run in onnxruntime, or None when it can (with its converter).

    ``constants``: ops (beyond ``Const`` nodes) whose values every cluster holds as constants:
    frozen variable reads and what is computed from them alone (``frozen_variables.freeze_variables``)."""
    definition = converter_lib.lookup(op.type)
    if definition is None:
        return "no ONNX converter"
    tensors = [*op.inputs, *op.outputs]
    if definition.unread_from is not None:  # unread inputs: any constant, or a tensor ONNX can hold
        unread = op.inputs[definition.unread_from :]
        tensors = [
            *op.inputs[: definition.unread_from],
            *[t for t in unread if t.op.type != "Const"],
            *op.outputs,
        ]
    for tensor in tensors:
        dtype = tensor.dtype
        if definition.lists and dtype is not None and dtypes.base_dtype(dtype) == dtypes.DT_VARIANT:
            continue  # a TensorList: allowed inside a cluster (never across its boundary)
        if definition.strings and dtype is not None and dtypes.base_dtype(dtype) == dtypes.DT_STRING:
            if tensor.op is op or (tensor.op.type == "Const" and _text_table(tensor.op)):
                continue  # a constant table of text, and what the op gives of it
        if dtype is None or dtypes.base_dtype(dtype) not in converter_lib.ONNX_TYPES:
            shown = dtypes.name(dtype) if dtype else "unknown"
            return f"dtype {shown} of {tensor.name}"
    if definition.dtypes is not None and op.inputs and op.inputs[0].dtype not in definition.dtypes:
        return f"{dtypes.name(op.inputs[0].dtype)} input"
    for index in definition.const_inputs:
        if -len(op.inputs) <= index < len(op.inputs) and not _constant_input(op.inputs[index].op, constants):
            return f"input {index % len(op.inputs)} is not a constant"
    if definition.num_outputs is not None:
        read = op.graph._max_output_ref.get(op.name, 0)
        if read >= definition.num_outputs:
            return f"output {read} is read and not converted"
    return definition.check(op) if definition.check is not None else None


def _constant_input(source: Operation, constants: Collection[str]) -> bool:
    return is_constant(source) or source.name in constants


def _text_table(const: Operation) -> bool:
    return converter_lib.is_text(tensor_util.make_ndarray(const.node_def.attr["value"].tensor))


def supported(op: Operation, constants: Collection[str] = ()) -> bool:
    return reason(op, constants) is None


def topological_order(graph: Graph) -> list[Operation]:
    """Ops in a topological order (ties by graph order); ops on cycles are left out."""
    ops = graph.get_operations()
    position = {op: i for i, op in enumerate(ops)}
    pending = {op: len(_preds(op)) for op in ops}
    consumers: dict[Operation, list[Operation]] = {op: [] for op in ops}
    for op in ops:
        for pred in _preds(op):
            consumers[pred].append(op)
    ready = [(position[op], op.name) for op in ops if pending[op] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        op = ops[heapq.heappop(ready)[0]]
        order.append(op)
        for consumer in consumers[op]:
            pending[consumer] -= 1
            if pending[consumer] == 0:
                heapq.heappush(ready, (position[consumer], consumer.name))
    return order


def _preds(op: Operation) -> list[Operation]:
    return list(dict.fromkeys([t.op for t in op.inputs] + op.control_inputs))


def control_flow_region(graph: Graph) -> set[str]:
    """Ops downstream of a TF1 ``Switch``/``Enter``: their inputs may be dead or per-iteration."""
    consumers: dict[str, list[str]] = {}
    for op in graph.get_operations():
        for pred in _preds(op):
            consumers.setdefault(pred.name, []).append(op.name)
    stack = [op.name for op in graph.get_operations() if op.type in _CONTROL_FLOW_SOURCES]
    region = set(stack)
    while stack:
        for name in consumers.get(stack.pop(), ()):
            if name not in region:
                region.add(name)
                stack.append(name)
    return region


def propose_clusters(
    graph: Graph,
    frozen: Mapping[str, object] | None = None,
    within: Mapping[str, Hashable] | None = None,
    min_cluster_ops: int = 1,
    heavy_flops: float = 0.0,
    split_cpu_pinned: bool = False,
) -> list[Cluster]:
    """Maximal acyclic clusters of supported ops (see the module docstring), deterministic.

    ``frozen``: variable reads that will be constants. ``within``: the only ops to consider, each
    with a group key (e.g. which signatures need it): a cluster never mixes keys, so running one
    signature never needs another's inputs -- except that an op needed by fewer signatures joins
    a cluster it reads only from (running the others computes it too, but needs nothing more;
    keys must then be frozensets). A cluster is kept when it holds a matrix product or
    convolution of at least ``heavy_flops`` (estimated at batch 1), or at least ``min_cluster_ops``
    ops with one that computes: an onnxruntime call costs about as much as a few interpreter steps,
    so a smaller cluster runs faster natively. A TensorList (DT_VARIANT) never crosses a
    cluster's boundary: the ops that would pass one stay native, and the rest is proposed again.
    ``split_cpu_pinned``: a cluster never mixes ops pinned to a CPU (``tf.device``) with others.
    """
    banned: set[str] = set()
    place = (lambda op: pinned_to_cpu(op.device)) if split_cpu_pinned else (lambda op: False)
    while True:
        clusters = _propose(graph, frozen or {}, within, min_cluster_ops, heavy_flops, banned, place)
        crossing = _list_crossings(graph, clusters, within)
        if not crossing:
            return clusters
        banned |= crossing


def _list_crossings(graph: Graph, clusters: list[Cluster], region) -> set[str]:
    """Members that would take a TensorList from outside their cluster or expose one from it."""
    ops = [graph.get_operation_by_name(name) for cluster in clusters for name in cluster.nodes]
    if not any(is_list(t.dtype) for op in ops for t in [*op.inputs, *op.outputs]):
        return set()  # (no TensorList at all: the common case, without walking every consumer)
    consumers = _consumers(graph, region)
    found = set()
    for cluster in clusters:
        members = set(cluster.nodes)
        for name in cluster.nodes:
            op = graph.get_operation_by_name(name)
            if any(is_list(t.dtype) and t.op.name not in members for t in op.inputs):
                found.add(name)
            outside = [i for c, i in consumers.get(name, ()) if c not in members]
            if outside or not consumers.get(name):  # exposed: outputs 0..max read (see _escaping)
                if any(is_list(t.dtype) for t in op.outputs[: max([0, *outside]) + 1]):
                    found.add(name)
    return found


def is_list(dtype: int | None) -> bool:
    return dtype is not None and dtypes.base_dtype(dtype) == dtypes.DT_VARIANT


def _propose(
    graph: Graph, frozen, within, min_cluster_ops: int, heavy_flops: float, banned, place
) -> list[Cluster]:
    group = (lambda name: None) if within is None else within.get
    order = topological_order(graph)
    index = {op.name: i for i, op in enumerate(order)}
    excluded = control_flow_region(graph)
    sources = {op.name for op in order if is_constant(op) or op.name in frozen}
    preds = {op.name: [p.name for p in _preds(op) if p.name not in sources] for op in order}
    state = Contraction(preds, index)
    cluster_of, members = state.cluster_of, state.members
    keys: dict[int, Hashable] = {}  # its ops' group key, and where they are placed (``place``)
    next_id = 0
    for op in order:
        if op.name in sources or op.name in excluded or (within is not None and op.name not in within):
            continue
        if op.name in banned or not supported(op, frozen):
            continue
        joined = None
        key = (group(op.name), place(op))
        producers = sorted({cluster_of[p] for p in preds[op.name] if p in cluster_of})
        candidates = [c for c in producers if keys[c] == key]
        if not candidates:  # needed by fewer signatures: joins only if it takes no new input
            candidates = [
                c
                for c in producers
                if _narrower(key, keys[c]) and all(p in members[c] for p in preds[op.name])
            ][:1]
        for c in candidates:
            if joined is None:
                if not state.reaches({c}, {op.name}):
                    joined = c
                    state.add(c, op.name)
            elif not state.reaches({joined, c}, members[joined] | members[c]):
                state.merge(joined, c)
        if joined is None:
            state.new(next_id, op.name)
            keys[next_id] = key
            next_id += 1
    parts = _signature_parts(graph, order, within, sources, cluster_of)
    whole = _whole_clusters(state, keys, parts)
    clusters = []
    for number, names in sorted(members.items(), key=lambda item: min(index[n] for n in item[1])):
        types = [graph.get_operation_by_name(n).type for n in names]
        compute = sum(t not in DATA_MOVEMENT for t in types)
        heavy = HEAVY.intersection(types) and _flops(graph, names) >= heavy_flops
        heavy = heavy or LOOPS.intersection(types) or CONVOLUTIONS.intersection(types)  # (loops: per step)
        steps = sum(t not in _FREE and t != "NoOp" for t in types)  # forwarding costs no step natively
        if compute and (steps >= min_cluster_ops or heavy or (number in whole and _worth_a_call(types))):
            nodes = tuple(sorted(names, key=index.__getitem__))
            clusters.append(Cluster(f"ort_cluster_{len(clusters)}", nodes))
    return _acyclic(clusters, preds)


def _acyclic(clusters: list[Cluster], preds) -> list[Cluster]:
    """``clusters`` checked once more as a whole (``contraction_cycle``), for a fused graph that
    must run: any left on or behind a cycle stay native (a bug, logged as such), never fused."""
    stuck = contraction_cycle([c.nodes for c in clusters], preds)
    if stuck is None:
        return clusters
    logger.warning(
        "%s: %s would close a cycle when fused; they stay native",
        UNSOUND_PARTITION,
        ", ".join(clusters[i].name for i in stuck),
    )
    kept = [c for i, c in enumerate(clusters) if i not in set(stuck)]
    return [Cluster(f"ort_cluster_{i}", c.nodes) for i, c in enumerate(kept)]


# What the log says of a partition that failed its check (tests look for it).
UNSOUND_PARTITION = "unsound partition"


def _worth_a_call(types: list[str]) -> bool:
    """Whether a signature's whole computation costs more natively than one onnxruntime call:
    about three steps of elementwise math, or fewer steps of anything else. Below that, native
    steps are faster, and hold the GIL where onnxruntime releases it (in a busy server, each
    release is a thread switch)."""
    cost = sum(1 if t in _CHEAP else 2 for t in types if t not in _FREE and t != "NoOp")
    return cost >= 3


# Elementwise math one numpy call computes.
_CHEAP = frozenset("Add AddV2 Sub Mul RealDiv Maximum Minimum Neg Abs Relu Square Sqrt Cast".split())


def _whole_clusters(state: Contraction, keys: dict, signature_parts: dict) -> set[int]:
    """The candidate clusters that are all of what some signature computes, so that it runs as
    one onnxruntime call. First a signature's independent clusters of one key merge into one,
    where the contracted graph stays acyclic (``state`` changes)."""
    merged_into: dict[int, int] = {}

    def find(c: int) -> int:
        while c in merged_into:
            c = merged_into[c]
        return c

    members = state.members
    for parts in signature_parts.values():
        parts = {c if c < 0 else find(c) for c in parts}
        if len(parts) > 1 and -1 not in parts and len({keys[c] for c in parts}) == 1:
            union = set().union(*(members[c] for c in parts))  # independent parts: one call
            if not state.reaches(parts, union):
                target = min(parts)
                for c in parts - {target}:
                    state.merge(target, c)
                    merged_into[c] = target
    final = [{c if c < 0 else find(c) for c in parts} for parts in signature_parts.values()]
    # Kept even where another signature runs it beside native steps (half_plus_two's y = ax + b
    # after ParseExample): there it costs about an onnxruntime call more than native.
    return {c for parts in final if len(parts) == 1 for c in parts if c >= 0}


# Ops that are fed or only forward a value: a plan runs them as no step of its own.
_FREE = frozenset({"Placeholder", "PlaceholderWithDefault", "Identity", "IdentityN", "StopGradient"})


def _signature_parts(graph: Graph, order, within, sources, cluster_of) -> dict[Hashable, set[int]]:
    """Per signature (each member of a frozenset group key; the one region without groups):
    the candidate clusters its ops are in, and -1 if one of them runs as a native step. Sources,
    free ops and ops that feed only sources (a variable whose reads are frozen) cost no step."""
    consumers = _consumers(graph, within)
    parts: dict[Hashable, set[int]] = {}
    for op in order:
        key = None if within is None else within.get(op.name, _OUTSIDE)
        if key is _OUTSIDE or op.name in sources or op.type in _FREE or op.type == "Const":
            continue
        if op.name in cluster_of:
            part = cluster_of[op.name]
        elif all(c in sources for c, _ in consumers.get(op.name, [("", 0)])):
            continue
        else:
            part = -1
        for signature in key if isinstance(key, frozenset) else (key,):
            parts.setdefault(signature, set()).add(part)
    return parts


_OUTSIDE = object()


def _flops(graph: Graph, names) -> float:
    return sum(estimate_flops(graph.get_operation_by_name(n)) for n in names)


def _narrower(key: tuple, cluster_key: tuple) -> bool:
    """Whether an op of (group, place) ``key`` is needed only where the cluster is (signature
    sets), and placed alike."""
    (group, place), (cluster_group, cluster_place) = key, cluster_key
    return (
        place == cluster_place
        and isinstance(group, frozenset)
        and isinstance(cluster_group, frozenset)
        and group < cluster_group
    )


# -- fuse -------------------------------------------------------------------------------------
def fuse(
    graph: Graph,
    clusters: list[Cluster],
    frozen: Mapping[str, np.ndarray] | None = None,
    region: Collection[str] | None = None,
    fetched: Collection[str] = (),
    by_name: bool = False,
) -> graph_pb2.GraphDef:
    """A new GraphDef with each cluster replaced by one ``_OrtCluster`` node (module docstring),
    without the function library: ``graph.functions`` holds it.

    ``region``: the ops that will run (the served signatures'); a reader outside it does not make
    a cluster output (it would run the member's kept original node natively, if ever run).
    ``fetched``: tensor names the signatures fetch; each is a cluster output even when only
    members read it, so that no fetch runs a member's original node (and what it needs) again.
    ``by_name``: frozen variable reads and constants over ``EMBEDDED_BYTES`` (a model's weights)
    reach each cluster by name instead of as copies: a ``Placeholder`` of the subgraph listed in
    the cluster's ``constant_inputs``, whose value is that of the graph's op of the same index in
    ``constant_names`` (``cluster_constants.py``). Weights then live once, in the variables
    (or the graph's own ``Const``), not again in each cluster's subgraph.
    """
    frozen = frozen or {}
    consumers = (_consumers(graph, region), _consumers(graph))
    for name in fetched:
        op_name, _, index = name.partition(":")
        for table in consumers:  # the fetch is a reader outside every cluster
            table.setdefault(op_name, []).append(("^fetch", int(index or 0)))
    replaced: dict[str, node_def_pb2.NodeDef] = {}
    added = []
    for cluster in clusters:
        fused, identities = _fuse_one(graph, cluster, frozen, consumers, by_name)
        added.append(fused)
        replaced.update(identities)
    for name, value in frozen.items():  # native readers too: a plan constant, not a step per run
        if name not in replaced and np.asarray(value).nbytes <= NATIVE_FROZEN_BYTES:
            replaced[name] = _constant(graph.get_operation_by_name(name), value)
    result = graph.as_graph_def(with_library=False)  # (the caller has the library: the graph's)
    nodes = [replaced.get(node.name, node) for node in result.node]
    del result.node[:]
    result.node.extend(nodes + added)
    return result


# Constants over this size reach clusters by name (``fuse``'s ``by_name``), smaller ones as copies.
EMBEDDED_BYTES = 1 << 10


def _big_constant(op: Operation) -> bool:
    if not is_constant(op):
        return False
    tensor = op.node_def.attr["value"].tensor
    return (
        len(tensor.tensor_content) > EMBEDDED_BYTES
        or sum(
            len(field) for field in (tensor.float_val, tensor.int_val, tensor.int64_val, tensor.double_val)
        )
        * 4
        > EMBEDDED_BYTES
    )


# Frozen variable reads up to this size also become Consts outside clusters (a bigger one stays a
# read: its step costs nothing next to what reads it, and a copy in the GraphDef would).
NATIVE_FROZEN_BYTES = 1 << 16


def _consumers(graph: Graph, region: Collection[str] | None = None) -> dict[str, list[tuple[str, int]]]:
    """Per op: (consumer, output index or -1 for a control edge), consumers in ``region`` only."""
    found: dict[str, list[tuple[str, int]]] = {}
    for op in graph.get_operations():
        if region is not None and op.name not in region:
            continue
        for text in op.node_def.input:
            source, index, is_control = parse_input(text)
            found.setdefault(source, []).append((op.name, -1 if is_control else index))
    return found


def _common_device(devices: list[str]) -> str:
    """The members' ``tf.device``: theirs if one, a CPU if all name one, else none."""
    if len(set(devices)) == 1:
        return devices[0]
    return "/device:CPU:0" if all(map(pinned_to_cpu, devices)) else ""


def _fuse_one(graph: Graph, cluster: Cluster, frozen, consumers, by_name: bool):
    members = set(cluster.nodes)
    ops = [graph.get_operation_by_name(n) for n in cluster.nodes]
    sub = graph_pb2.GraphDef()
    inputs: dict[str, str] = {}  # external tensor name -> placeholder
    named: dict[str, str] = {}  # constant op -> placeholder (``by_name``)
    copied: set[str] = set()
    controls: list[str] = []
    body = []
    for op in ops:
        node = node_def_pb2.NodeDef()
        node.CopyFrom(op.node_def)
        del node.input[:]
        node.device = ""
        for text, tensor in zip([t for t in op.node_def.input if not t.startswith("^")], op.inputs):
            source = tensor.op
            if source.name in members:
                node.input.append(text)
            elif by_name and (source.name in frozen or _big_constant(source)):
                if source.name not in named:
                    named[source.name] = f"_constant_{len(named)}"
                    placeholder = sub.node.add(name=named[source.name], op="Placeholder")
                    placeholder.attr["dtype"].type = dtypes.base_dtype(tensor.dtype)
                    _set_output_shape(placeholder, tensor.shape)
                node.input.append(named[source.name])
            elif is_constant(source) or source.name in frozen or source.type == "Const":  # (any dtype:
                # one of another dtype is an input no converter reads, see ``reason``)
                if source.name not in copied:
                    copied.add(source.name)
                    sub.node.append(_constant(source, frozen.get(source.name)))
                node.input.append(source.name)
            else:
                if tensor.name not in inputs:
                    inputs[tensor.name] = f"_input_{len(inputs)}"
                    placeholder = sub.node.add(name=inputs[tensor.name], op="Placeholder")
                    placeholder.attr["dtype"].type = dtypes.base_dtype(tensor.dtype)
                    _set_output_shape(placeholder, tensor.shape)
                node.input.append(inputs[tensor.name])
        controls += [f"^{c.name}" for c in op.control_inputs if c.name not in members]
        # Kept for the native runs (validation, fallback): an Assert still runs before what it guards.
        node.input.extend(f"^{c.name}" for c in op.control_inputs if c.name in members)
        body.append(node)
    sub.node.extend(body)
    sub.library.function.extend(graph.functions[f] for f in _functions_called(graph, ops))
    outputs, identities = _escaping(graph, cluster, members, consumers)
    fused = node_def_pb2.NodeDef(name=cluster.name, op=CLUSTER_OP)
    fused.input.extend(list(inputs) + list(dict.fromkeys(controls)))
    fused.attr["subgraph"].s = sub.SerializeToString(deterministic=True)
    fused.attr["input_names"].list.s.extend(n.encode() for n in inputs.values())
    fused.attr["output_names"].list.s.extend(t.encode() for t in outputs)
    fused.attr["ops"].list.s.extend(n.encode() for n in cluster.nodes)
    if named:
        fused.attr["constant_names"].list.s.extend(n.encode() for n in named)
        fused.attr["constant_inputs"].list.s.extend(n.encode() for n in named.values())
    fused.attr["flops"].f = sum(estimate_flops(op) for op in ops)  # with heavy_ops, sizes the thread pool
    fused.attr["heavy_ops"].i = sum(op.type in HEAVY for op in ops)
    fused.attr["device"].s = _common_device([op.device for op in ops]).encode()
    fused.attr["Tin"].list.type.extend(_dtype(graph, t) for t in inputs)
    fused.attr["Tout"].list.type.extend(_dtype(graph, t) for t in outputs)
    for _ in outputs:
        fused.attr["_output_shapes"].list.shape.add(unknown_rank=True)
    slot = {t: i for i, t in enumerate(outputs)}
    for name, needed in identities.items():
        if not needed:  # no outputs (a NoOp) but waited for: it now waits for the cluster
            identities[name] = node_def_pb2.NodeDef(name=name, op="NoOp", input=[f"^{cluster.name}"])
            continue
        node = node_def_pb2.NodeDef(name=name, op="IdentityN")
        node.input.extend(_slot_name(cluster.name, slot[f"{name}:{k}"]) for k in range(needed))
        node.attr["T"].list.type.extend(_dtype(graph, f"{name}:{k}") for k in range(needed))
        identities[name] = node
    return fused, identities


def _functions_called(graph: Graph, ops: list[Operation]) -> list[str]:
    """Library functions the ops run (a While's cond and body), nested calls included, sorted."""
    library = graph.functions
    found: set[str] = set()
    pending = [n for op in ops for n in called_functions(op.node_def, library)]
    while pending:
        name = pending.pop()
        if name not in found:
            found.add(name)
            pending += [n for node in library[name].node_def for n in called_functions(node, library)]
    return sorted(found)


def _slot_name(cluster_name: str, index: int) -> str:
    return cluster_name if index == 0 else f"{cluster_name}:{index}"


def _escaping(graph: Graph, cluster: Cluster, members: set[str], consumers):
    """The cluster's output tensors, and each escaping member with how many outputs it exposes.

    ``consumers``: (in the served region, anywhere): a member escapes when a served op outside the
    cluster reads it (or none reads it: a fetch); its IdentityN covers what any op reads."""
    served, everywhere = consumers
    identities: dict[str, int] = {}
    for name in cluster.nodes:
        outside = [(c, i) for c, i in served.get(name, ()) if c not in members]
        if served.get(name) and not outside:
            continue  # read only inside the cluster
        read = max([i for c, i in everywhere.get(name, ()) if c not in members] + [0]) + 1
        identities[name] = min(read, graph.get_operation_by_name(name).num_outputs)
    # A member kept as it is (not exposed) must still find every output it reads: one that reads
    # past what an exposed member's IdentityN gives is exposed too (it is then an IdentityN itself).
    changed = True
    while changed:
        changed = False
        for name in cluster.nodes:
            op = graph.get_operation_by_name(name)
            if name not in identities and any(
                identities.get(t.op.name, 10**9) <= t.value_index for t in op.inputs
            ):
                identities[name], changed = 1, True
    outputs = [f"{name}:{k}" for name in cluster.nodes if name in identities for k in range(identities[name])]
    return outputs, identities


def _set_output_shape(node: node_def_pb2.NodeDef, shape: tuple | None) -> None:
    """Records a cluster input's static shape as TF records an op's (converters read it: a
    grouped convolution's group count is the input depth over the filter's)."""
    if shape is None:
        return
    proto = node.attr["_output_shapes"].list.shape.add()
    for size in shape:
        proto.dim.add(size=-1 if size is None else size)


def _dtype(graph: Graph, tensor_name: str) -> int:
    dtype = graph.get_tensor_by_name(tensor_name).dtype
    return dtypes.base_dtype(dtype) if dtype else dtypes.DT_FLOAT


def _constant(op: Operation, value: np.ndarray | None) -> node_def_pb2.NodeDef:
    """A ``Const`` with ``op``'s name: the op itself, or the frozen value of a variable read."""
    node = node_def_pb2.NodeDef(name=op.name, op="Const")
    if value is None:
        node.attr["dtype"].CopyFrom(op.node_def.attr["dtype"])
        node.attr["value"].CopyFrom(op.node_def.attr["value"])
        return node
    dtype = dtypes.base_dtype(op.outputs[0].dtype)
    node.attr["dtype"].type = dtype
    node.attr["value"].tensor.CopyFrom(tensor_util.make_tensor_proto(np.asarray(value), dtype))
    return node
