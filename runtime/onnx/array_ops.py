"""Converters for TF's array ops: identity, shapes, reshaping, slicing, joining, gathering.

Shape-valued inputs are int32 in TF and int64 in ONNX: converters cast them. ``Reshape`` uses
``allowzero=1`` because a 0 in a TF shape means an empty dimension, never "copy this one" --
except where the shape is built from the input's own dimensions: see ``shape_values.py``, which
the shape ops here tell what each entry of a shape is.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from runtime import dtypes
from runtime.onnx import layout, shape_values, text_table
from runtime.onnx.converter import Builder, NotConvertible, TFNode, converter, onnx_type

_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min


def _int64(b: Builder, name: str) -> str:
    return shape_values.as_int64(b, name)


@converter("Identity", "StopGradient", "PreventGradient", "Snapshot", lists=True)
def identity(node: TFNode, b: Builder) -> str:
    (x,) = node.inputs
    if x in b.lists:  # a TensorList: the same list (it may have no tensor yet, see list_ops)
        return x
    const = node.const(0)
    if const is not None:  # keep constants visible to later converters (shapes, axes)
        return b.const(const, node.name)
    return x  # the same value: what is known of it (an NCHW twin, its shape entries) still holds


@converter("IdentityN", num_outputs=None)
def identity_n(node: TFNode, b: Builder) -> list[str]:
    """Each input forwarded: what an inlined function call leaves between its body and readers."""
    return list(node.inputs)


@converter("NoOp", num_outputs=None)
def no_op(node: TFNode, b: Builder) -> list[str]:
    """Nothing: inside a cluster a NoOp only orders members, which data edges already order."""
    return []


@converter("Reshape")
def reshape(node: TFNode, b: Builder) -> str:
    x, shape = node.inputs
    const = node.const(1)
    rank = int(const.size) if const is not None else None
    form = shape_values.reshape_form(b, x, shape)
    if form is not None and form[0] == "flatten":
        return b.op("Flatten", [x], axis=form[1], rank=2)
    target = form[1] if form is not None else const
    if target is not None and _to_image(b, x, np.asarray(target)):
        return layout.channels_to_image(b, x)
    if form is not None:
        return b.op("Reshape", [x, b.int64s(form[1], "shape")], allowzero=0, rank=len(form[1]))
    if const is not None:
        shape = b.int64s(const.reshape(-1), "shape")
        if 0 in const and -1 in const:
            raise NotConvertible("Reshape with both 0 and -1 in its shape")
    return b.op("Reshape", [x, _int64(b, shape)], allowzero=0 if const is None else 1, rank=rank)


def _to_image(b: Builder, x: str, shape: np.ndarray) -> bool:
    """Whether a Reshape makes [N, C] an NHWC [N, 1, 1, C] (Keras' squeeze-excite)."""
    known = b.tf_shapes.get(x)
    target = [int(d) for d in shape.reshape(-1)]
    return (
        b.rank(x) == 2
        and len(target) == 4
        and target[1:3] == [1, 1]
        and target[0] in (-1, 0)
        and known is not None
        and len(known) == 2
        and known[1] is not None
        and target[3] in (known[1], -1)
    )


@converter("Transpose", const_inputs=(1,))
def transpose(node: TFNode, b: Builder) -> str:
    perm = [int(p) for p in node.const_required(1).reshape(-1)]
    if perm == list(range(len(perm))):
        out = b.op("Identity", [node.inputs[0]])
        shape_values.record_same_shape(b, out, node.inputs[0])
        return out
    return b.op("Transpose", [node.inputs[0]], perm=perm, rank=len(perm))


@converter("ConcatV2", const_inputs=(-1,))
def concat_v2(node: TFNode, b: Builder) -> str:
    *values, _ = node.inputs
    axis = int(np.asarray(node.const_required(len(node.inputs) - 1)).reshape(()))
    twinned = layout.concat(b, values, axis)
    if twinned is not None:
        return twinned
    out = b.op("Concat", values, axis=axis)
    if axis in (0, -1) and all(b.rank(v) == 1 for v in values):
        shape_values.record_concat(b, out, values)
    return out


@converter("Pack")
def pack(node: TFNode, b: Builder) -> str:
    axis = int(node.attr("axis", 0))
    rank = b.rank(node.inputs[0])
    out_rank = None if rank is None else rank + 1
    axes = b.int64s([axis], "axes")
    parts = [b.op("Unsqueeze", [x, axes], rank=out_rank) for x in node.inputs]
    packed = parts[0] if len(parts) == 1 else b.op("Concat", parts, axis=axis, rank=out_rank)
    if rank == 0:
        shape_values.record_pack(b, packed, node.inputs)
    return packed


@converter("ExpandDims", const_inputs=(1,))
def expand_dims(node: TFNode, b: Builder) -> str:
    axis = np.asarray(node.const_required(1), np.int64).reshape(-1)
    rank = b.rank(node.inputs[0])
    return b.op(
        "Unsqueeze", [node.inputs[0], b.int64s(axis, "axes")], rank=None if rank is None else rank + 1
    )


@converter("Squeeze")
def squeeze(node: TFNode, b: Builder) -> str:
    axes = list(node.attr("squeeze_dims", None) or node.attr("axis", None) or [])
    if not axes:
        return b.op("Squeeze", [node.inputs[0]], rank=None)
    rank = b.rank(node.inputs[0])
    return b.op(
        "Squeeze",
        [node.inputs[0], b.int64s(axes, "axes")],
        rank=None if rank is None else rank - len(axes),
    )


@converter("Shape")
def shape(node: TFNode, b: Builder) -> str:
    x = node.inputs[0]
    found = b.op("Shape", [x], rank=1, elem_type=TensorProto.INT64)
    out = b.cast(found, onnx_type(node.attr("out_type", dtypes.DT_INT32)))
    shape_values.record_shape(b, out, x)
    return out


@converter("Size")
def size(node: TFNode, b: Builder) -> str:
    found = b.op("Size", [node.inputs[0]], rank=0, elem_type=TensorProto.INT64)
    return b.cast(found, onnx_type(node.attr("out_type", dtypes.DT_INT32)))


@converter("Fill")
def fill(node: TFNode, b: Builder) -> str:
    dims, value = node.inputs
    return b.op("Expand", [value, _int64(b, dims)], rank=None, elem_type=node.elem_type(1))


@converter("BroadcastTo")
def broadcast_to(node: TFNode, b: Builder) -> str:
    x, shape = node.inputs
    return b.op("Expand", [x, _int64(b, shape)], rank=None)


@converter("ZerosLike", "OnesLike")
def zeros_like(node: TFNode, b: Builder) -> str:
    from onnx import helper

    value = np.array(0 if node.type == "ZerosLike" else 1, helper.tensor_dtype_to_np_dtype(node.elem_type()))
    shape_of = b.op("Shape", [node.inputs[0]], rank=1, elem_type=TensorProto.INT64)
    return b.op("Expand", [b.const(value, "fill"), shape_of], rank=b.rank(node.inputs[0]))


@converter("Tile")
def tile(node: TFNode, b: Builder) -> str:
    x, multiples = node.inputs
    return b.op("Tile", [x, _int64(b, multiples)])


@converter("GatherV2", const_inputs=(2,), strings=True)
def gather_v2(node: TFNode, b: Builder) -> str:
    params, indices, _ = node.inputs
    if node.attr("batch_dims", 0):
        raise NotConvertible("GatherV2 with batch_dims")
    axis = int(np.asarray(node.const_required(2)).reshape(()))
    ranks = (b.rank(params), b.rank(indices))
    rank = None if None in ranks else ranks[0] + ranks[1] - 1
    table = b.values[params].const
    if table is not None and -table.ndim <= axis < table.ndim:
        b.guard_in_range(indices, int(table.shape[axis]), gathered=True)
    elif axis == 0 and params in b.dim_lists:  # a shape: as long as its tensor's rank
        b.guard_in_range(indices, len(b.dim_lists[params]), gathered=True)
    else:
        shape = b.op("Shape", [params], rank=1, elem_type=TensorProto.INT64)  # unread (pruned) on CPU
        size = b.op("Gather", [shape, b.int64s(axis % ranks[0] if ranks[0] else axis)], rank=0)
        b.guard_in_range(indices, size, gathered=True)
    if b.values[params].elem_type == TensorProto.STRING:  # a table of text: its positions here
        return text_table.gather_positions(b, table, indices, axis)
    out = b.op("Gather", [params, indices], axis=axis, rank=rank, elem_type=node.elem_type(0))
    known = b.values[indices].const
    if known is not None and axis == 0 and known.ndim <= 1:  # entries of a shape
        shape_values.record_pick(b, out, params, known, scalar=known.ndim == 0)
    return out


@converter("Slice", const_inputs=(1, 2))
def slice_(node: TFNode, b: Builder) -> str:
    begin = np.asarray(node.const_required(1), np.int64).reshape(-1)
    size_ = np.asarray(node.const_required(2), np.int64).reshape(-1)
    end = np.where(size_ < 0, _INT64_MAX, begin + size_)
    axes = np.arange(begin.size, dtype=np.int64)
    inputs = [node.inputs[0], b.int64s(begin), b.int64s(end), b.int64s(axes)]
    return b.op("Slice", inputs)


@converter("Split", num_outputs=None, const_inputs=(0,))
def split(node: TFNode, b: Builder) -> list[str]:
    axis = int(np.asarray(node.const_required(0)).reshape(()))
    num = int(node.attr("num_split"))
    value = node.inputs[1]
    if num == 1:
        return [b.op("Identity", [value])]
    return b.op("Split", [value], axis=axis, num_outputs=num, outputs=num)


@converter("Pad", "PadV2", const_inputs=(1,))
def pad(node: TFNode, b: Builder) -> str:
    paddings = np.asarray(node.const_required(1), np.int64)
    if paddings.shape[0] == 0:
        raise NotConvertible("Pad of a scalar")
    extra = [node.inputs[2]] if node.type == "PadV2" else []
    twinned = layout.pad(b, node.inputs[0], paddings, extra)
    if twinned is not None:
        return twinned
    pads = np.concatenate([paddings[:, 0], paddings[:, 1]])
    return b.op("Pad", [node.inputs[0], b.int64s(pads, "pads"), *extra], mode="constant")


@converter("StridedSlice", const_inputs=(1, 2, 3))
def strided_slice(node: TFNode, b: Builder) -> str:
    """Slice on the input's axes, then Squeeze the shrunk ones and Unsqueeze the new ones."""
    begin, end, strides = (np.asarray(node.const_required(i), np.int64).reshape(-1) for i in (1, 2, 3))
    masks = {k: node.attr(k, 0) for k in ("begin_mask", "end_mask", "shrink_axis_mask", "new_axis_mask")}
    ellipsis = node.attr("ellipsis_mask", 0)
    rank = node.rank(0) if ellipsis else b.rank(node.inputs[0])
    spans = {"starts": [], "ends": [], "axes": [], "steps": []}
    squeeze_axes, new_axes = [], []
    dim = out = 0
    for i in range(begin.size):
        bit = 1 << i
        if ellipsis & bit:
            covered = rank - sum(
                1 for j in range(begin.size) if not (masks["new_axis_mask"] | ellipsis) & (1 << j)
            )
            dim, out = dim + covered, out + covered
            continue
        if masks["new_axis_mask"] & bit:
            new_axes.append(out)
            out += 1
            continue
        start, stop, step = _slice_bounds(int(begin[i]), int(end[i]), int(strides[i]), bit, masks)
        for key, value in zip(("starts", "ends", "axes", "steps"), (start, stop, dim, step)):
            spans[key].append(value)
        if masks["shrink_axis_mask"] & bit:
            squeeze_axes.append(dim)
        else:
            out += 1
        dim += 1
    x = node.inputs[0]
    if spans["axes"] and not squeeze_axes and not new_axes:
        twinned = layout.slice_(b, x, spans)
        if twinned is not None:
            return twinned
    if spans["axes"]:
        x = b.op(
            "Slice", [x, *(b.int64s(spans[k], k) for k in ("starts", "ends", "axes", "steps"))], rank=rank
        )
    if squeeze_axes:
        x = b.op(
            "Squeeze",
            [x, b.int64s(squeeze_axes, "axes")],
            rank=None if rank is None else rank - len(squeeze_axes),
        )
    if new_axes:
        x = b.op(
            "Unsqueeze", [x, b.int64s(new_axes, "axes")], rank=None if rank is None else out + rank - dim
        )
    result = x if x != node.inputs[0] else b.op("Identity", [x])
    if begin.size == 1 and masks["shrink_axis_mask"] == 1 and not ellipsis and not masks["new_axis_mask"]:
        shape_values.record_pick(b, result, node.inputs[0], begin, scalar=True)  # one entry of a shape
    return result


def _slice_bounds(start: int, stop: int, step: int, bit: int, masks: dict) -> tuple[int, int, int]:
    if masks["shrink_axis_mask"] & bit:
        return start, (_INT64_MAX if start == -1 else start + 1), 1
    if masks["begin_mask"] & bit:
        start = 0 if step > 0 else _INT64_MAX
    if masks["end_mask"] & bit:
        stop = _INT64_MAX if step > 0 else _INT64_MIN
    return start, stop, step


@converter("ReverseV2", const_inputs=(1,))
def reverse_v2(node: TFNode, b: Builder) -> str:
    axes = np.asarray(node.const_required(1), np.int64).reshape(-1)
    if axes.size == 0:
        return b.op("Identity", [node.inputs[0]])
    ones = np.full(axes.size, -1, np.int64)
    inputs = [b.int64s(np.full(axes.size, -1)), b.int64s(np.full(axes.size, _INT64_MIN)), b.int64s(axes)]
    return b.op("Slice", [node.inputs[0], *inputs, b.int64s(ones)])


@converter("Range", dtypes=(dtypes.DT_INT32, dtypes.DT_INT64, dtypes.DT_FLOAT, dtypes.DT_DOUBLE))
def range_(node: TFNode, b: Builder) -> str:
    return b.op("Range", node.inputs, rank=1)


@converter("Unpack", num_outputs=None)
def unpack(node: TFNode, b: Builder) -> list[str]:
    axis, num = int(node.attr("axis", 0)), int(node.attr("num"))
    rank = node.rank(0)
    parts = (
        b.op("Split", [node.inputs[0]], axis=axis, num_outputs=num, outputs=num)
        if num > 1
        else [node.inputs[0]]
    )
    axes = b.int64s([axis], "axes")
    return [b.op("Squeeze", [p, axes], rank=rank - 1) for p in parts]


@converter("Unique", num_outputs=2)
def unique(node: TFNode, b: Builder) -> list[str]:
    """ONNX ``Unique`` unsorted keeps first occurrences in order, as TF's does."""
    if node.rank(0) != 1:
        raise NotConvertible("Unique of a tensor not known to be 1-D")
    x, elem = node.inputs[0], node.elem_type(0)
    if elem not in _UNIQUE_TYPES:  # onnxruntime's Unique has no kernel for it: exact in int64
        if elem not in _WIDENS_TO_INT64:
            raise NotConvertible(f"Unique of ONNX type {elem}")
        x = b.cast(x, TensorProto.INT64)
    y, _, inverse, _ = b.op("Unique", [x], sorted=0, outputs=4, rank=1)
    b.values[inverse].elem_type = TensorProto.INT64
    return [b.cast(y, elem), b.cast(inverse, onnx_type(node.attr("out_idx", dtypes.DT_INT32)))]


_UNIQUE_TYPES = frozenset({TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64, TensorProto.INT8})
_WIDENS_TO_INT64 = frozenset(
    {TensorProto.INT32, TensorProto.INT16, TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32}
)


@converter("Where")
def where(node: TFNode, b: Builder) -> str:
    """TF's coordinates of true (non-zero) elements, one row each: ONNX ``NonZero`` transposed."""
    if len(node.inputs) != 1:
        raise NotConvertible("Where with three inputs is Select")
    coordinates = b.op("NonZero", [node.inputs[0]], rank=2, elem_type=TensorProto.INT64)
    return b.op("Transpose", [coordinates], perm=[1, 0], rank=2)
