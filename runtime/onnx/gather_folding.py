"""Gather folding: a row lookup into read-only variables becomes one ``GatherV2`` of a constant.

TF1's partitioned ``embedding_lookup`` is a dozen tiny ops per lookup (``FloorMod``/``FloorDiv``
of the ids, two ``DynamicPartition``, one ``ResourceGather`` per shard, ``ParallelDynamicStitch``)
and a plain one is a ``ResourceGather`` of a variable handle: neither converts to ONNX, and each
op costs a few microseconds natively. Where nothing served writes a variable, such a lookup is a
pure function of one integer ids tensor whose only valid values are the rows ``[0, N)`` of its
variables (N: their first dimensions summed; any other id fails both before and after). So it is
evaluated once, on ``arange(N)``, with the native kernels themselves, and the table that comes
out replaces it: ``GatherV2(table, ids, 0)``, one op that clusters with its neighbours.

A ``ResourceGather`` of a variable handle folds to the variable's value. A stitch
(``DynamicStitch``, ``ParallelDynamicStitch``) folds when it depends, through the index math of
TF's partition strategies, constants and variable gathers only, on one rank-1 integer tensor (the
nearest such cut), ids -1 and N fail in it (so its valid ids are exactly ``[0, N)``), and its
table is at most ``MAX_TABLE_BYTES``.
The GraphDef returned is a new one; the anchor keeps its name, so every reader still resolves.
"""

from __future__ import annotations

import logging
from collections import deque

import numpy as np

from apis.tensorflow.core.framework import graph_pb2
from runtime import dtypes, tensor_util
from runtime.execution.interpreter import run_plan
from runtime.execution.planner import build_plan
from runtime.graph.graph import Graph, Operation, Tensor

logger = logging.getLogger(__name__)

ANCHORS = frozenset({"ResourceGather", "DynamicStitch", "ParallelDynamicStitch"})
MAX_TABLE_BYTES = 64 << 20
_MAX_CONE = 64  # ops between an anchor and its ids: a partitioned lookup has about 3 per shard
_LEAVES = frozenset({"Const", "VarHandleOp"})
# What TF's partition strategies ('mod', 'div') compute from the ids on the way to the shards.
_INDEX_MATH = frozenset(
    {
        "FloorMod", "FloorDiv", "Cast", "DynamicPartition", "Range", "Size", "Shape", "Reshape",
        "Maximum", "Minimum", "Less", "GreaterEqual", "Sub", "AddV2", "Add", "Mul", "Select",
        "SelectV2", "StridedSlice", "Identity", "ResourceGather",
    }
)  # fmt: skip


def fold_gathers(graph: Graph, region: set[Operation], resources) -> graph_pb2.GraphDef | None:
    """``graph``'s GraphDef with each foldable lookup of ``region`` replaced (see the module
    docstring), or None when none is. Variables are read from ``resources``: the caller
    guarantees nothing served writes them."""
    folds: dict[str, tuple[Tensor, np.ndarray]] = {}
    for op in graph.get_operations():
        if op.type in ANCHORS and op in region and len(op.outputs) == 1:
            found = _fold(op, resources)
            if found is not None:
                folds[op.name] = found
    if not folds:
        return None
    graph_def = graph.as_graph_def(with_library=False)  # (re-imported over the library)
    for node in graph_def.node:
        if node.name in folds:
            ids, table = folds[node.name]
            _rewrite(graph_def, node, ids, table)
    return graph_def


def _fold(anchor: Operation, resources) -> tuple[Tensor, np.ndarray] | None:
    """(ids, table) for ``anchor``, or None when it is not a foldable lookup."""
    if anchor.type == "ResourceGather":  # its table is its variable's value, its ids its indices
        value = _variable_value(anchor, resources)
        return None if value is None else (anchor.inputs[1], value)
    cone = _cone(anchor)
    if cone is None:
        return None
    for ids in _candidates(anchor, cone):
        rows = _rows(anchor, ids, resources)
        if rows is None:
            continue
        plan = build_plan([ids], [anchor.outputs[0]], (), resources, None)
        numpy_dtype = dtypes.as_numpy_dtype(ids.dtype)
        try:
            table = np.asarray(run_plan(plan, [np.arange(rows, dtype=numpy_dtype)])[0])
        except Exception as exc:  # noqa: BLE001 - a lookup that cannot be evaluated stays as it is
            logger.debug("gather %s not folded: %s", anchor.name, exc)
            return None
        if table.ndim < 1 or table.shape[0] != rows or table.nbytes > MAX_TABLE_BYTES:
            return None
        if any(_succeeds(plan, np.array([bad], numpy_dtype)) for bad in (-1, rows)):
            return None  # ids outside [0, N) are valid too: not a partitioned lookup
        return ids, table
    return None


def _succeeds(plan, ids: np.ndarray) -> bool:
    try:
        run_plan(plan, [ids])
    except Exception:  # noqa: BLE001 - failing is what a row outside every shard must do
        return False
    return True


def _cone(anchor: Operation) -> list[Operation] | None:
    """The non-leaf ancestors of ``anchor`` (itself first, breadth first) within ``_MAX_CONE``
    ops; None if one has control inputs or its cone is larger."""
    order, seen, queue = [], {anchor}, deque([anchor])
    while queue:
        op = queue.popleft()
        if op.control_inputs:
            return None
        order.append(op)
        for pred in (t.op for t in op.inputs):
            if pred not in seen and pred.type not in _LEAVES:
                seen.add(pred)
                queue.append(pred)
        if len(order) > _MAX_CONE:
            break
    return order


def _candidates(anchor: Operation, cone: list[Operation]):
    """Rank-1 integer tensors of the cone, nearest the anchor first."""
    for op in cone:
        for tensor in op.inputs:
            shape = tensor.shape
            if tensor.op.type in _LEAVES or tensor.dtype is None or not dtypes.is_integer(tensor.dtype):
                continue
            if shape is not None and len(shape) == 1:
                yield tensor


def _rows(anchor: Operation, ids: Tensor, resources) -> int | None:
    """N, the valid ids' count, if ``ids`` cuts ``anchor`` off every non-constant input through
    stateless ops (and variable gathers); None otherwise."""
    rows, stack, seen = 0, [anchor], {anchor}
    while stack:
        op = stack.pop()
        if op.control_inputs or len(seen) > _MAX_CONE:
            return None
        if op.type == "ResourceGather":
            value = _variable_value(op, resources)
            if value is None or not value.ndim:
                return None
            rows += value.shape[0]
        elif op.type not in _LEAVES and op.type not in _INDEX_MATH and op is not anchor:
            return None
        for tensor in op.inputs:
            if tensor is ids or tensor.op in seen or tensor.op.type in _LEAVES:
                continue
            seen.add(tensor.op)
            stack.append(tensor.op)
    return rows or None


def _variable_value(gather: Operation, resources) -> np.ndarray | None:
    """The value a ``ResourceGather`` (batch_dims 0) of a ``VarHandleOp`` reads, or None."""
    handle = gather.inputs[0].op
    if handle.type != "VarHandleOp" or gather.attrs.get("batch_dims", 0) != 0:
        return None
    try:
        plan = build_plan((), [handle.outputs[0]], (), resources, None)
        (found,) = run_plan(plan, [])
        value = resources.get(found).value
    except Exception:  # noqa: BLE001 - an unreadable variable is not folded
        return None
    if value is None or np.asarray(value).nbytes > MAX_TABLE_BYTES:
        return None
    return np.asarray(value)


def _rewrite(graph_def: graph_pb2.GraphDef, node, ids: Tensor, table: np.ndarray) -> None:
    """``node`` becomes ``GatherV2(<node>/folded_table, ids, <node>/folded_axis)``."""
    table_name, axis_name = f"{node.name}/folded_table", f"{node.name}/folded_axis"
    for name, value in ((table_name, table), (axis_name, np.asarray(0, np.int32))):
        const = graph_def.node.add(name=name, op="Const", device=node.device)
        const.attr["dtype"].type = dtypes.from_numpy(value.dtype)
        const.attr["value"].tensor.CopyFrom(tensor_util.make_tensor_proto(value))
    name, device = node.name, node.device
    node.Clear()
    node.name, node.op, node.device = name, "GatherV2", device
    node.input.extend([table_name, ids.name, axis_name])
    node.attr["Tparams"].type = dtypes.from_numpy(table.dtype)
    node.attr["Tindices"].type = ids.dtype
    node.attr["Taxis"].type = dtypes.from_numpy(np.dtype(np.int32))
    node.attr["batch_dims"].i = 0
