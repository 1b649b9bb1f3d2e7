"""Bucketized fusion: a bucketized column's SparseTensor subgraph becomes one op.

A linear model or crossed column reading a ``bucketized_column`` builds, from the ``Bucketize``
output ``x``, B = ``StridedSlice(Shape(x), [0], [1], [1])`` (shrink_axis_mask 1) and then:

- values: ``AddV2(Reshape(x, [-1]), Mul(K, i2))``, i2 = ``Tile(Range(0, D, 1), Pack(B))`` (the
  Range, of constants, may have been folded to its Const);
- indices: ``Cast(Transpose(Pack(Reshape(Tile(ExpandDims(Range(0, B, 1), 1), [1, D]), [-1]),
  i2), [1, 0]))`` to int64;
- dense_shape: ``Cast(Pack(B, D))`` to int64.

About 20 ops, which delegation otherwise sends to onnxruntime as a cluster of their own (about
20 us a call for a Mul and an AddV2). ``_BucketizedSparseTensor``
(``runtime/kernels/feature_column_ops.py``) computes the three in one numpy call.

The match is structural and exact (op types, constants, attrs; no control inputs; no op fed by a
signature), starting at the values' ``AddV2``; the indices and dense_shape are matched among the
consumers of i2 and B, each only where it is exactly the form above. The fused op is a new node;
each matched terminal (the ``AddV2``, and the two ``Cast`` nodes where found) becomes an
``Identity`` of its output under its own name. The other matched ops stay in the GraphDef, so
anything else reading them computes them as before.
"""

from __future__ import annotations

import logging

import numpy as np

from apis.tensorflow.core.framework import graph_pb2
from runtime import dtypes
from runtime.graph.graph import Graph, Operation, Tensor
from runtime.kernels.feature_column_ops import OP_TYPE
from runtime.onnx.subgraph_match import Matcher, NoMatch, attrs, const, rewritten, same

logger = logging.getLogger(__name__)


def fuse_bucketized_columns(graph: Graph, region: set[str], fed: set[str]) -> graph_pb2.GraphDef | None:
    """``graph``'s GraphDef with each matched bucketized SparseTensor of ``region`` fused (module
    docstring), or None when none matches. ``fed``: the ops signatures feed."""
    existing = {op.name for op in graph.get_operations()}
    rewrites: dict[str, tuple[str, int, int]] = {}  # terminal -> (fused node, output, dtype)
    fused: list[tuple[str, Tensor, int, int]] = []
    for op in graph.get_operations():
        if op.type != "AddV2" or op.name not in region:
            continue
        m = Matcher()
        try:
            x, width, buckets, batch, columns = _match_values(m, op)
        except NoMatch as why:
            logger.debug("bucketized column %s not fused: %s", op.name, why)
            continue
        if any(o.name in fed for o in m.ops):
            continue
        name = _unique(f"{op.name}/bucketized_sparse_tensor", existing)
        terminals = {op.name: (name, 1, x.dtype)}
        for matched, index in ((_indices(batch, columns, width), 0), (_dense_shape(batch, width), 2)):
            if matched and matched[-1].name in region and not any(o.name in fed for o in matched):
                terminals[matched[-1].name] = (name, index, dtypes.DT_INT64)
        rewrites.update(terminals)
        fused.append((name, x, width, buckets))
    if not fused:
        return None
    graph_def = rewritten(graph, rewrites, _to_identity) or graph.as_graph_def(with_library=False)
    for name, x, width, buckets in fused:
        _add_fused(graph_def, name, x, width, buckets)
    logger.debug("bucketized fusion: %d columns fused", len(fused))
    return graph_def


def _unique(name: str, existing: set[str]) -> str:
    base, n = name, 0
    while name in existing:
        n += 1
        name = f"{base}_{n}"
    existing.add(name)
    return name


def _batch_of(m: Matcher, batch: Tensor) -> Tensor:
    """B = StridedSlice(Shape(x), [0], [1], [1]) with only shrink_axis_mask 1: x."""
    slice_op = m.take(batch, "StridedSlice")
    attrs(
        slice_op,
        T=dtypes.DT_INT32,
        begin_mask=0,
        end_mask=0,
        ellipsis_mask=0,
        new_axis_mask=0,
        shrink_axis_mask=1,
    )
    for tensor, value in zip(slice_op.inputs[1:], ([0], [1], [1])):
        const(tensor, value)
    shape = m.take(slice_op.inputs[0], "Shape")
    return shape.inputs[0]


def _range(m: Matcher, tensor: Tensor, limit: Tensor | None) -> Tensor:
    """Range(0, limit, 1), int32: the limit tensor (checked equal to ``limit`` when given)."""
    op = m.take(tensor, "Range")
    const(op.inputs[0], 0)
    const(op.inputs[2], 1)
    if op.inputs[0].dtype != dtypes.DT_INT32:  # Tidx is its inputs' type
        raise NoMatch(f"{op.name}: not an int32 range")
    if limit is not None:
        same(op.inputs[1], limit)
    return op.inputs[1]


def _match_values(m: Matcher, add: Operation) -> tuple[Tensor, int, int, Tensor, Tensor]:
    """add = AddV2(Reshape(x, [-1]), Mul(K, i2)): (x, D, K, B, i2)."""
    attrs(add, T=dtypes.DT_INT32)
    m.take(add.outputs[0], "AddV2")
    flat = m.take(add.inputs[0], "Reshape")
    const(flat.inputs[1], [-1])
    x = flat.inputs[0]
    mul = m.take(add.inputs[1], "Mul")
    buckets = _scalar(mul.inputs[0])
    columns = mul.inputs[1]
    tile = m.take(columns, "Tile")
    width = _columns_width(m, tile.inputs[0])
    multiples = m.take(tile.inputs[1], "Pack")
    attrs(multiples, axis=0, N=1)
    batch = multiples.inputs[0]
    same(_batch_of(m, batch), x)
    return x, width, buckets, batch, columns


def _columns_width(m: Matcher, tensor: Tensor) -> int:
    """Range(0, D, 1) of a constant D, or the Const it folded to (``constant_folding``): D."""
    if tensor.op.type == "Const":
        value = const(tensor)
        if value.dtype != np.int32 or value.ndim != 1 or not np.array_equal(value, np.arange(value.size)):
            raise NoMatch(f"{tensor.name}: not a range")
        return value.size
    return _scalar(_range(m, tensor, None))


def _scalar(tensor: Tensor) -> int:
    value = const(tensor)
    if value.ndim != 0:
        raise NoMatch(f"{tensor.name}: not a scalar")
    return int(value)


def _only(tensor: Tensor, op_type: str) -> Operation | None:
    found = [c for c in tensor.consumers() if c.type == op_type]
    return found[0] if len(found) == 1 else None


def _indices(batch: Tensor, columns: Tensor, width: int) -> list[Operation]:
    """Cast(Transpose(Pack(Reshape(Tile(ExpandDims(Range(0, B, 1), 1), [1, D]), [-1]), i2),
    [1, 0])) to int64, among i2's consumers: its ops, the Cast last; [] where not exactly that."""
    for stack in columns.consumers():
        m = Matcher()
        try:
            if stack.type != "Pack" or len(stack.inputs) != 2 or stack.inputs[1].name != columns.name:
                continue
            attrs(stack, axis=0)
            transpose = _only(stack.outputs[0], "Transpose")
            cast = _only(transpose.outputs[0], "Cast") if transpose is not None else None
            if cast is None or cast.control_inputs or transpose.control_inputs or stack.control_inputs:
                continue
            const(transpose.inputs[1], [1, 0])
            attrs(cast, SrcT=dtypes.DT_INT32, DstT=dtypes.DT_INT64, Truncate=False)
            rows = m.take(stack.inputs[0], "Reshape")
            const(rows.inputs[1], [-1])
            tile = m.take(rows.inputs[0], "Tile")
            const(tile.inputs[1], [1, width])
            expand = m.take(tile.inputs[0], "ExpandDims")
            const(expand.inputs[1], 1)
            _range(m, expand.inputs[0], batch)
            return [*m.ops, stack, transpose, cast]
        except NoMatch:
            continue
    return []


def _dense_shape(batch: Tensor, width: int) -> list[Operation]:
    """Cast(Pack(B, D)) to int64, among B's consumers: [Pack, Cast]; [] where not exactly that."""
    for stack in batch.consumers():
        if stack.type != "Pack" or len(stack.inputs) != 2 or stack.inputs[0].name != batch.name:
            continue
        cast = _only(stack.outputs[0], "Cast")
        try:
            if cast is None or cast.control_inputs or stack.control_inputs:
                continue
            attrs(stack, axis=0)
            const(stack.inputs[1], width)
            attrs(cast, SrcT=dtypes.DT_INT32, DstT=dtypes.DT_INT64, Truncate=False)
            return [stack, cast]
        except NoMatch:
            continue
    return []


def _to_identity(node, fused: str, index: int, dtype: int) -> None:
    """``node`` becomes Identity(fused:index), keeping its name, device and output shape."""
    name, device = node.name, node.device
    shapes = list(node.attr["_output_shapes"].list.shape) if "_output_shapes" in node.attr else []
    node.Clear()
    node.name, node.op, node.device = name, "Identity", device
    node.input.append(f"{fused}:{index}")
    node.attr["T"].type = dtype
    if shapes:
        node.attr["_output_shapes"].list.shape.extend(shapes[:1])


def _add_fused(graph_def: graph_pb2.GraphDef, name: str, x: Tensor, width: int, buckets: int) -> None:
    node = graph_def.node.add()
    node.name, node.op, node.device = name, OP_TYPE, x.op.node_def.device
    node.input.append(x.name)
    node.attr["source_dimension"].i = width
    node.attr["num_buckets"].i = buckets
    node.attr["T"].type = x.dtype
    shapes = node.attr["_output_shapes"].list.shape
    for rank in (2, 1, 1):
        shape = shapes.add()
        for _ in range(rank):
            shape.dim.add(size=-1)
