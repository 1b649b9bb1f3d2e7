"""``fold_constants``: ops computed from constants alone become ``Const`` nodes, once, at delegation.

Grappler does the same for TF's session: ``head/range`` -> ``AsString`` -> ``ExpandDims`` chains,
shapes of constants and casts of constant scalars would otherwise run on every request, and
each such op left native also splits the clusters around it. An op folds when each data input
is a ``Const`` or a folded op, it has no control inputs, its kernel is stateless and context-free
(no resources, no functions, no TF1 control flow, nothing random), no signature feeds it, and
each of its outputs is at most ``MAX_BYTES``. The values come from our own kernels (one plan
over all of them), so a folded graph computes what the unfolded one did; a folded node keeps its
name, so every name a signature uses still resolves. Around a loop this makes shapes constants
(TF1's ``dynamic_rnn`` transposes by ``concat([1, 0], range(2, rank))``), so the ops reading them
can convert.
"""

from __future__ import annotations

import logging

import numpy as np

from apis.tensorflow.core.framework import graph_pb2
from runtime import dtypes, tensor_util
from runtime.execution.interpreter import run_plan
from runtime.execution.planner import build_plan
from runtime.graph.graph import Graph, Operation
from runtime.kernels import lookup as kernel_lookup
from runtime.onnx.subgraph_match import rewritten

logger = logging.getLogger(__name__)

MAX_BYTES = 1 << 20  # bigger results stay computed: a constant that size costs memory per model
_NEVER = frozenset(
    {
        "Placeholder", "PlaceholderWithDefault", "PlaceholderV2", "Enter", "RefEnter", "Exit", "Switch",
        "RefSwitch", "Merge", "RefMerge", "NextIteration", "LoopCond", "Assert", "Print", "PrintV2",
        "_Arg", "_Retval", "Const", "HostConst", "NoOp",
    }
)  # fmt: skip
_OPAQUE = (dtypes.DT_RESOURCE, dtypes.DT_VARIANT)


def foldable(op: Operation) -> bool:
    """Whether ``op`` computes the same value on every run from its inputs alone."""
    definition = kernel_lookup(op.type)
    if definition is None or op.type in _NEVER or "Random" in op.type or not op.inputs:
        return False
    if definition.stateful or definition.accepts_dead or definition.needs_context or op.control_inputs:
        return False
    if any(value.WhichOneof("value") == "func" for value in op.node_def.attr.values()):
        return False
    tensors = list(op.inputs) + list(op.outputs)
    return all(t.dtype is not None and dtypes.base_dtype(t.dtype) not in _OPAQUE for t in tensors)


def constant_ops(graph: Graph, region: set[str], fed: set[str]) -> list[Operation]:
    """The region's foldable ops whose data inputs are all constants (``Const`` or such ops)."""
    constant = {op.name for op in graph.get_operations() if op.type == "Const" and op.name not in fed}
    candidates = [
        op for op in graph.get_operations() if op.name in region and op.name not in fed and foldable(op)
    ]
    found: list[Operation] = []
    changed = True
    while changed:  # a fixed point: GraphDefs need not list producers first
        changed = False
        for op in candidates:
            if op.name not in constant and all(t.op.name in constant for t in op.inputs):
                constant.add(op.name)
                found.append(op)
                changed = True
    return found


def fold_constants(graph: Graph, region: set[str], fed: set[str], resources) -> graph_pb2.GraphDef | None:
    """The graph with its region's constant single-output ops as ``Const`` (see the module
    docstring), or None when nothing folds."""
    ops = [op for op in constant_ops(graph, region, fed) if len(op.outputs) == 1]
    if not ops:
        return None
    try:
        plan = build_plan((), [op.outputs[0] for op in ops], (), resources, graph.functions)
        with np.errstate(all="ignore"):  # as a Session runs kernels: inf and nan, no warnings
            values = run_plan(plan, [])
    except Exception as exc:  # noqa: BLE001 - an op that fails now fails at run time, as before
        logger.info("constant folding skipped: %s: %s", type(exc).__name__, exc)
        return None
    folded = {}
    for op, value in zip(ops, values):
        array = np.asarray(value)
        if array.dtype != object and array.nbytes > MAX_BYTES:
            continue
        if array.dtype == object and array.size * 64 > MAX_BYTES:
            continue
        folded[op.name] = (op.outputs[0].dtype, array)
    logger.debug("constant folding: %d ops became Const", len(folded))
    return rewritten(graph, folded, _make_const)


def _make_const(node, dtype: int, array: np.ndarray) -> None:
    """Turns ``node`` into a ``Const`` of ``array`` (as ``dtype``), keeping its name and device."""
    proto = tensor_util.make_tensor_proto(array, dtype=dtypes.base_dtype(dtype))
    node.op = "Const"
    del node.input[:]
    node.attr.clear()
    node.attr["dtype"].type = dtypes.base_dtype(dtype)
    node.attr["value"].tensor.CopyFrom(proto)


def frozen_chains(
    graph: Graph, region: set[str], frozen: dict[str, np.ndarray], fed: set[str], resources
) -> dict[str, np.ndarray]:
    """Values computed from frozen variable reads (and constants) alone: the op name -> value of
    each foldable single-output op of the region (``Identity``, ``Cast``, ``Reshape``, a batch
    norm's ``Rsqrt(variance + eps) * gamma``: any chain of them after a ``ReadVariableOp``) whose
    result is no bigger than its biggest input. They join the frozen reads as constants of the
    clusters that read them, so a converter needing a constant input (a depthwise filter) gets
    one, whatever Keras put between the variable and it, and no cluster recomputes them per run.
    An op that makes a bigger value (``Tile``) stays an op, and so does what reads it.

    Found layer by layer (static shapes may be unknown, so sizes are judged on the values): each
    round computes the ops whose inputs are all known, with the known values fed."""
    values = dict(frozen)
    constants = {op.name: op for op in graph.get_operations() if op.type == "Const"}
    candidates = [
        op
        for op in graph.get_operations()
        if op.name in region and op.name not in fed and op.name not in values and len(op.outputs) == 1
    ]
    derived: dict[str, np.ndarray] = {}
    while True:
        layer = [op for op in candidates if op.name not in values and _computable(op, values, constants)]
        if not layer:
            return derived
        results = _run_layer(graph, layer, values, resources)
        if results is None:
            return derived
        for op, value in zip(layer, results):
            candidates.remove(op)  # (a bigger value is not tried again)
            if value.size <= max(_size(t, values) for t in op.inputs):
                values[op.name] = derived[op.name] = value


def _computable(op: Operation, values: dict, constants: dict) -> bool:
    sources = [t.op.name for t in op.inputs]
    return (
        bool(sources)
        and all(s in values or s in constants for s in sources)
        and any(s in values for s in sources)
        and foldable(op)
    )


def _size(tensor, values: dict) -> int:
    value = values.get(tensor.op.name)
    if value is not None:
        return value.size
    shape = tensor.shape  # a Const's
    return int(np.prod(shape)) if shape is not None else 0


def _run_layer(graph: Graph, layer: list[Operation], values: dict, resources) -> list | None:
    """The layer's values, computed by our kernels with the known values fed (None: it failed)."""
    fed = list({t.op.name: t for op in layer for t in op.inputs if t.op.name in values}.values())
    try:
        plan = build_plan(fed, [op.outputs[0] for op in layer], (), resources, graph.functions)
        with np.errstate(all="ignore"):
            results = run_plan(plan, [values[t.op.name] for t in fed])
    except Exception as exc:  # noqa: BLE001 - what fails now fails at run time, as before
        logger.info("frozen variable chains not folded: %s: %s", type(exc).__name__, exc)
        return None
    return [np.asarray(value) for value in results]
