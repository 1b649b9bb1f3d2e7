"""Indicator fusion: an indicator column's ``reduce_sum(one_hot(SparseToDense))`` becomes one op.

TF's ``indicator_column`` turns its ids' SparseTensor into dense ids with ``SparseToDense``
(default_value filling the empty cells), one-hots them with ``OneHot(ids, depth, 1, 0)`` (axis
-1) and sums the one-hot axis away with ``Sum(., -2)`` (keep_dims false): three kernels and a
[B, N, depth] intermediate for what is a count of each id per row. ``_IndicatorCounts``
(``runtime/kernels/feature_column_ops.py``) computes the counts in one call.

The match is structural and exact, from the ``Sum``: its reduction axis the Const -2, its input a
``OneHot`` of axis -1 whose depth (non-negative), on and off values are Consts 1 and 0 in the
``Sum``'s dtype (float32, float64, int32 or int64), whose indices are a ``SparseToDense`` output.
No control inputs; neither inner op fed by a signature, fetched, controlling another op or read by
anything but the next op of the match. The ``Sum`` node becomes the fused op under its own name;
the inner ops stay in the GraphDef and, read by nothing, are no longer served.
"""

from __future__ import annotations

import logging

from apis.tensorflow.core.framework import graph_pb2
from runtime import dtypes
from runtime.graph.graph import Graph, Operation, Tensor
from runtime.kernels.feature_column_ops import INDICATOR_OP_TYPE
from runtime.onnx.subgraph_match import Matcher, NoMatch, attrs, const, rewritten

logger = logging.getLogger(__name__)

_COUNT_TYPES = frozenset((dtypes.DT_FLOAT, dtypes.DT_DOUBLE, dtypes.DT_INT32, dtypes.DT_INT64))


def fuse_indicator_columns(
    graph: Graph, region: set[str], fetched: set[str], fed: set[str]
) -> graph_pb2.GraphDef | None:
    """``graph``'s GraphDef with each matched indicator count of ``region`` fused (module
    docstring), or None when none matches. ``fetched``: tensor names signatures fetch; ``fed``:
    ops they feed."""
    controlling = {c.name for op in graph.get_operations() for c in op.control_inputs}
    fusions: dict[str, tuple[Operation, int]] = {}
    for op in graph.get_operations():
        if op.type != "Sum" or op.name not in region:
            continue
        try:
            to_dense, depth = _match(op)
        except NoMatch as why:
            logger.debug("indicator column %s not fused: %s", op.name, why)
            continue
        inner = [to_dense, op.inputs[0].op]
        if any(m.name in fed or m.name in controlling or m.name not in region for m in inner):
            continue
        if any(t.name in fetched for m in inner for t in m.outputs):
            continue
        if op.name in fed:
            continue
        fusions[op.name] = (to_dense, depth)
    logger.debug("indicator fusion: %d columns fused", len(fusions))
    return rewritten(graph, fusions, _rewrite)


def _sole_reader(tensor: Tensor, reader: Operation) -> None:
    if [c.name for c in tensor.consumers()] != [reader.name]:
        raise NoMatch(f"{tensor.name} is read by more than {reader.name}")


def _match(total: Operation) -> tuple[Operation, int]:
    """(the SparseToDense, depth) of the count whose ``Sum`` is ``total``; raises NoMatch."""
    m = Matcher()
    if total.control_inputs:
        raise NoMatch(f"{total.name}: control inputs")
    dtype = total.attrs.get("T")
    if dtype not in _COUNT_TYPES:
        raise NoMatch(f"{total.name}: T={dtype!r}")
    attrs(total, keep_dims=False)
    const(total.inputs[1], [-2])
    hot = m.take(total.inputs[0], "OneHot")
    _sole_reader(hot.outputs[0], total)
    attrs(hot, T=dtype)
    if hot.attrs.get("axis", -1) not in (-1, None):  # an absent attr is OneHot's default, -1
        raise NoMatch(f"{hot.name}: axis={hot.attrs.get('axis')!r}")
    depth = const(hot.inputs[1])
    if depth.ndim != 0 or int(depth) < 0:
        raise NoMatch(f"{hot.name}: depth {depth.tolist()}")
    for tensor, want in ((hot.inputs[2], 1), (hot.inputs[3], 0)):
        value = const(tensor, [want])
        if value.ndim != 0:
            raise NoMatch(f"{tensor.name}: not a scalar")
    to_dense = m.take(hot.inputs[0], "SparseToDense")
    _sole_reader(to_dense.outputs[0], hot)
    return to_dense, int(depth)


def _rewrite(node, to_dense: Operation, depth: int) -> None:
    """``node`` (the ``Sum``) becomes the fused op, keeping its name, device, dtype and shapes."""
    name, device, dtype = node.name, node.device, node.attr["T"].type
    shapes = list(node.attr["_output_shapes"].list.shape) if "_output_shapes" in node.attr else []
    node.Clear()
    node.name, node.op, node.device = name, INDICATOR_OP_TYPE, device
    node.input.extend(t.name for t in to_dense.inputs)
    node.attr["T"].type = dtype
    node.attr["depth"].i = depth
    node.attr["Tindices"].type = to_dense.attrs["Tindices"]
    node.attr["Tvalues"].type = to_dense.attrs["T"]
    node.attr["validate_indices"].b = bool(to_dense.attrs.get("validate_indices", True))
    if shapes:
        node.attr["_output_shapes"].list.shape.extend(shapes)
