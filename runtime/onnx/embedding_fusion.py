"""Embedding fusion: each ``safe_embedding_lookup_sparse`` of a constant table becomes one op.

Feature columns' embeddings and the linear model's weighted sums call TF's
``safe_embedding_lookup_sparse`` (``default_id`` None, no per-id weights), which leaves about 35
ops per column in the graph: ``SparseReshape`` of the ids to 2-D, ``GreaterEqual``/``Where``/
``GatherV2`` pruning ids < 0, ``SparseFillEmptyRows``, ``Unique``, ``GatherV2`` of the table,
``SparseSegmentSum``/``Mean``/``SqrtN``, a ``Tile``/``ZerosLike``/``Select`` zeroing the filled
rows and a ``Reshape`` back to the ids' leading dimensions. Natively each costs a few microseconds;
in onnxruntime they are mostly shape plumbing. ``_SafeEmbeddingLookupSparse``
(``runtime/kernels/embedding_ops.py``) computes the same result from the ids' three tensors and
the table in one numpy call.

The match is structural and exact, from the final ``Reshape`` back to the ids: op types, the
constants and attrs of each step, and that every op of the match has no control edges and no
consumer served outside the match (nor a fetched output), so nothing else sees an intermediate. The
table must be a ``Const`` (a frozen variable: ``gather_folding`` made it one; nothing writes it)
of rank 2 and float32/float64. Anything else stays as it is. The final ``Reshape`` becomes the
fused op under its own name; the matched ops are left in the GraphDef, unused by the signatures
(so a fetch of one by name still computes it as before).
"""

from __future__ import annotations

import logging

from apis.tensorflow.core.framework import graph_pb2
from runtime import dtypes
from runtime.graph.graph import Graph, Operation, Tensor
from runtime.kernels.embedding_ops import OP_TYPE
from runtime.onnx.subgraph_match import Matcher, NoMatch, attrs, const, rewritten, same

logger = logging.getLogger(__name__)

_COMBINERS = {"SparseSegmentSum": "sum", "SparseSegmentMean": "mean", "SparseSegmentSqrtN": "sqrtn"}
_TABLE_DTYPES = (dtypes.DT_FLOAT, dtypes.DT_DOUBLE)


def fuse_embedding_lookups(
    graph: Graph, region: set[str], fetched: set[str], fed: set[str]
) -> graph_pb2.GraphDef | None:
    """``graph``'s GraphDef with each matched lookup of ``region`` fused (module docstring), or
    None when none matches. ``fetched``: tensor names signatures fetch; ``fed``: ops they feed."""
    controlling = {c.name for op in graph.get_operations() for c in op.control_inputs}
    fusions: dict[str, tuple[list[str], str, Tensor]] = {}
    for op in graph.get_operations():
        if op.type != "Reshape" or op.name not in region or op.inputs[0].op.type != "Select":
            continue
        try:
            inputs, combiner, table, matched = _match(op)
        except NoMatch as why:
            logger.debug("embedding lookup %s not fused: %s", op.name, why)
            continue
        inner = set(matched) - {op}
        names = {m.name for m in matched}
        if any(m.name not in region or m.name in fed for m in matched) or names & controlling - {op.name}:
            continue
        served_outside = region - names
        if any(c.name in served_outside for m in inner for t in m.outputs for c in t.consumers()):
            continue
        if any(t.name in fetched for m in inner for t in m.outputs):
            continue
        fusions[op.name] = ([t.name for t in inputs], combiner, table)
    logger.debug("embedding fusion: %d lookups fused", len(fusions))
    return rewritten(graph, fusions, _rewrite)


def _match(final: Operation) -> tuple[list[Tensor], str, Tensor, list[Operation]]:
    """([indices, values, dense_shape, table], combiner, table, matched ops) of the
    lookup whose last op is ``final``; raises NoMatch."""
    m = Matcher()
    m.take(final.outputs[0], "Reshape")
    select = m.take(final.inputs[0], "Select")
    dense_shape, rank = _match_output_shape(m, final, select)
    tile, zeros, seg_out = select.inputs
    seg = m.take(seg_out, tuple(_COMBINERS))
    same(m.take(zeros, "ZerosLike").inputs[0], seg_out)
    sfer = _match_empty_rows(m, tile, seg_out)
    table = _match_segments(m, seg, sfer)
    indices, values = _match_ids(m, sfer, dense_shape, rank)
    return [indices, values, dense_shape, table], _COMBINERS[seg.type], table, m.ops


def _match_output_shape(m: Matcher, final: Operation, select: Operation) -> tuple[Tensor, int]:
    """Reshape(select, concat([slice(cast(dense_shape), [0], [r-1]), shape(select)[1:]], 0))."""
    concat = m.take(final.inputs[1], "ConcatV2")
    if len(concat.inputs) != 3:
        raise NoMatch(f"{concat.name}: not two values")
    const(concat.inputs[2], 0)
    leading = m.take(concat.inputs[0], "Slice")
    trailing = m.take(concat.inputs[1], "Slice")
    same(m.take(trailing.inputs[0], "Shape").inputs[0], select.outputs[0])
    const(trailing.inputs[1], [1])
    const(trailing.inputs[2], [-1])
    cast = m.take(leading.inputs[0], "Cast")
    const(leading.inputs[1], [0])
    size = const(leading.inputs[2])
    if size.shape != (1,) or size[0] < 1:
        raise NoMatch(f"{leading.name}: size {size.tolist()}")
    rank = int(size[0]) + 1
    dense_shape = cast.inputs[0]
    if dense_shape.shape is None or tuple(dense_shape.shape) != (rank,):
        raise NoMatch(f"{dense_shape.name}: shape {dense_shape.shape}, not ({rank},)")
    return dense_shape, rank


def _match_empty_rows(m: Matcher, tile_out: Tensor, seg_out: Tensor) -> Operation:
    """Tile(Reshape(sfer:2, [-1, 1]), Pack(1, StridedSlice(Shape(seg), [1], [2], [1]))): sfer."""
    tile = m.take(tile_out, "Tile")
    reshape = m.take(tile.inputs[0], "Reshape")
    const(reshape.inputs[1], [-1, 1])
    stack = m.take(tile.inputs[1], "Pack")
    if len(stack.inputs) != 2:
        raise NoMatch(f"{stack.name}: not two values")
    const(stack.inputs[0], 1)
    width = m.take(stack.inputs[1], "StridedSlice")
    attrs(width, begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=1)
    same(m.take(width.inputs[0], "Shape").inputs[0], seg_out)
    for tensor, want in zip(width.inputs[1:], ([1], [2], [1])):
        const(tensor, want)
    return m.take(reshape.inputs[0], "SparseFillEmptyRows", 2)


def _match_segments(m: Matcher, seg: Operation, sfer: Operation) -> Tensor:
    """seg(GatherV2(table, Unique(sfer:1):0), Unique:1, sfer:0[:, 0]): the table."""
    data, idx, segment_ids = seg.inputs
    unique = m.take(idx, "Unique", 1)
    same(unique.inputs[0], sfer.outputs[1])
    table = _match_rows(m, m.skip_identities(data), unique.outputs[0])
    if segment_ids.op.type == "Cast":
        segment_ids = m.take(segment_ids, "Cast").inputs[0]
    rows = m.take(segment_ids, "StridedSlice")
    same(rows.inputs[0], sfer.outputs[0])
    attrs(rows, begin_mask=1, end_mask=1, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=2)
    for tensor, want in zip(rows.inputs[1:], ([0, 0], [0, 1], [1, 1])):
        const(tensor, want)
    return table


def _match_rows(m: Matcher, data: Tensor, ids: Tensor) -> Tensor:
    """GatherV2(table, ids, 0), or as a partitioned lookup folded by ``gather_folding`` leaves it:
    Reshape(GatherV2(table, Reshape(ids, [-1]), 0), concat([Shape(ids), table.shape[1:]], 0)).
    The table."""
    shape = None
    if data.op.type == "Reshape":
        reshape = m.take(data, "Reshape")
        data, shape = reshape.inputs
    gather = m.take(data, "GatherV2")
    const(gather.inputs[2], 0)
    attrs(gather, batch_dims=0)
    table = gather.inputs[0]
    value = const(table)
    if table.dtype not in _TABLE_DTYPES or value.ndim != 2:
        raise NoMatch(f"{table.name}: not a float matrix")
    if shape is None:
        same(gather.inputs[1], ids)
        return table
    flat = m.take(gather.inputs[1], "Reshape")
    same(flat.inputs[0], ids)
    const(flat.inputs[1], [-1])
    concat = m.take(shape, "ConcatV2")
    if len(concat.inputs) != 3:
        raise NoMatch(f"{concat.name}: not two values")
    same(m.take(concat.inputs[0], "Shape").inputs[0], ids)
    const(concat.inputs[1], value.shape[1:])
    const(concat.inputs[2], 0)
    return table


def _match_ids(m: Matcher, sfer: Operation, dense_shape: Tensor, rank: int) -> tuple[Tensor, Tensor]:
    """sfer(GatherV2(sr:0, keep), GatherV2(Identity(values), keep), Identity(sr:1), 0), keep the
    positions of values >= 0, sr the SparseReshape of the ids to 2-D: (indices, values)."""
    kept_indices, kept_values, shape_out, default = sfer.inputs
    const(default, 0)
    first, second = m.take(kept_indices, "GatherV2"), m.take(kept_values, "GatherV2")
    for gather in (first, second):
        same(gather.inputs[1], first.inputs[1])
        const(gather.inputs[2], 0)
        attrs(gather, batch_dims=0)
    keep = m.take(first.inputs[1], "Reshape")
    const(keep.inputs[1], [-1])
    where = m.take(keep.inputs[0], "Where")
    valid = m.take(where.inputs[0], "GreaterEqual")
    const(valid.inputs[1], 0)
    same(valid.inputs[0], second.inputs[0])
    values = m.take(valid.inputs[0], "Identity").inputs[0]
    reshape = m.take(first.inputs[0], "SparseReshape")
    same(m.take(shape_out, "Identity").inputs[0], reshape.outputs[1])
    same(reshape.inputs[1], dense_shape)
    indices = reshape.inputs[0]
    _match_new_shape(m, reshape.inputs[2], dense_shape, rank)
    return indices, values


def _match_new_shape(m: Matcher, new_shape: Tensor, dense_shape: Tensor, rank: int) -> None:
    """[Cast](Pack(Prod(Slice(dense_shape, [0], [r-1]), [0]), GatherV2(dense_shape, r-1, 0)))."""
    if new_shape.op.type == "Cast":
        new_shape = m.take(new_shape, "Cast").inputs[0]
    stack = m.take(new_shape, "Pack")
    if len(stack.inputs) != 2:
        raise NoMatch(f"{stack.name}: not two values")
    attrs(stack, axis=0)
    prod = m.take(stack.inputs[0], "Prod")
    attrs(prod, keep_dims=False)
    const(prod.inputs[1], [0])
    leading = m.take(prod.inputs[0], "Slice")
    same(leading.inputs[0], dense_shape)
    const(leading.inputs[1], [0])
    const(leading.inputs[2], [rank - 1])
    last = m.take(stack.inputs[1], "GatherV2")
    same(last.inputs[0], dense_shape)
    const(last.inputs[1], rank - 1)
    const(last.inputs[2], 0)
    attrs(last, batch_dims=0)


def _rewrite(node, inputs: list[str], combiner: str, table: Tensor) -> None:
    """``node`` (the final Reshape) becomes the fused op, keeping its name, device and shape."""
    name, device = node.name, node.device
    shapes = list(node.attr["_output_shapes"].list.shape) if "_output_shapes" in node.attr else []
    node.Clear()
    node.name, node.op, node.device = name, OP_TYPE, device
    node.input.extend(inputs)
    node.attr["combiner"].s = combiner.encode()
    node.attr["T"].type = table.dtype
    node.attr["_output_shapes"].list.shape.extend(shapes[:1])
    if not shapes:
        node.attr["_output_shapes"].list.shape.add(unknown_rank=True)
