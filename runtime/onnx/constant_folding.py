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
from runtime.graph import Graph, Operation
from runtime.interpreter import run_plan
from runtime.kernels import lookup as kernel_lookup
from runtime.onnx.subgraph_match import rewritten
from runtime.plan import build_plan

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
