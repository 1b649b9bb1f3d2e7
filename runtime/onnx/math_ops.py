"""Converters for TF's math ops: elementwise arithmetic, comparisons, matrix products, reductions.

Elementwise ops broadcast as numpy does in both TF and ONNX, so most are one ONNX node. Integer
division and float modulo round differently in the two (TF floors, ONNX truncates) and are not
converted.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from runtime import dtypes
from runtime.onnx import layout, shape_values
from runtime.onnx.converter import FLOAT_TYPES, Builder, NotConvertible, TFNode, converter, onnx_type

FLOATS = tuple(FLOAT_TYPES)
NUMBERS = (*FLOATS, dtypes.DT_INT32, dtypes.DT_INT64)
INTS = (dtypes.DT_INT32, dtypes.DT_INT64)

_BINARY = {
    "Add": "Add",
    "AddV2": "Add",
    "Sub": "Sub",
    "Mul": "Mul",
    "Maximum": "Max",
    "Minimum": "Min",
    "Pow": "Pow",
}
_FLOAT_UNARY = {
    "Sigmoid": "Sigmoid",
    "Tanh": "Tanh",
    "Exp": "Exp",
    "Log": "Log",
    "Sqrt": "Sqrt",
    "Erf": "Erf",
    "Floor": "Floor",
    "Ceil": "Ceil",
    "Round": "Round",
    "Reciprocal": "Reciprocal",
    "Inv": "Reciprocal",
    "Sin": "Sin",
    "Cos": "Cos",
}
_NUMBER_UNARY = {"Neg": "Neg", "Abs": "Abs", "Sign": "Sign"}
_COMPARE = {
    "Less": "Less",
    "LessEqual": "LessOrEqual",
    "Greater": "Greater",
    "GreaterEqual": "GreaterOrEqual",
    "Equal": "Equal",
}
_REDUCE = {
    "Sum": "ReduceSum",
    "Mean": "ReduceMean",
    "Max": "ReduceMax",
    "Min": "ReduceMin",
    "Prod": "ReduceProd",
}


def _binary(node: TFNode, b: Builder) -> str:
    op_type = _BINARY[node.type]
    if op_type == "Mul":
        hard = _hard_sigmoid(b, *node.inputs, 1 / 6) or _hard_sigmoid(b, *node.inputs[::-1], 1 / 6)
        if hard is not None:
            return hard
    return layout.channelwise(b, op_type, *node.inputs) or b.op(op_type, node.inputs)


def _hard_sigmoid(b: Builder, clipped: str, scale: str, expected: float) -> str | None:
    """Keras' hard sigmoid, ``relu6(x + 3) * (1 / 6)`` (or ``/ 6``: ``expected`` is the constant
    the clipped value meets), as one ONNX ``HardSigmoid`` of x, on x's NCHW twin where it
    has one: onnxruntime folds it into the Conv before it, which four elementwise ops it cannot
    (MobileNetV3 runs twice as fast). None where the values are not that pattern."""
    value = b.values[scale].const
    if value is None or value.size != 1 or not np.isclose(float(value.reshape(())), expected, rtol=1e-6):
        return None
    twin = b.nchw.get(clipped)
    clip = b.producers.get(twin if twin is not None else clipped)
    if clip is None or clip.op_type != "Clip" or len(clip.input) != 3:
        return None
    if not (_is_scalar(b, clip.input[1], 0.0) and _is_scalar(b, clip.input[2], 6.0)):
        return None
    add = b.producers.get(clip.input[0])
    if add is None or add.op_type != "Add":
        return None
    x, three = add.input if _is_scalar(b, add.input[1], 3.0) else add.input[::-1]
    if not _is_scalar(b, three, 3.0):
        return None
    hard = b.op("HardSigmoid", [x], alpha=1 / 6, beta=0.5)
    return layout.from_nchw(b, hard) if twin is not None else hard


def _is_scalar(b: Builder, name: str, number: float) -> bool:
    value = b.values[name].const
    return value is not None and value.size == 1 and float(value.reshape(())) == number


for _op in _BINARY:
    converter(_op, dtypes=NUMBERS)(_binary)


@converter("RealDiv", "Div", dtypes=FLOATS)
def real_div(node: TFNode, b: Builder) -> str:
    hard = _hard_sigmoid(b, *node.inputs, 6.0)
    if hard is not None:
        return hard
    return layout.elementwise(b, "Div", node.inputs) or b.op("Div", node.inputs)


@converter("SquaredDifference", dtypes=NUMBERS)
def squared_difference(node: TFNode, b: Builder) -> str:
    diff = b.op("Sub", node.inputs)
    return b.op("Mul", [diff, diff])


@converter("FloorDiv", dtypes=FLOATS)
def floor_div(node: TFNode, b: Builder) -> str:
    return b.op("Floor", [b.op("Div", node.inputs)])


@converter("FloorMod", dtypes=INTS)
def floor_mod(node: TFNode, b: Builder) -> str:
    return b.op("Mod", node.inputs, fmod=0)  # fmod=0: the result takes the divisor's sign, as TF's


def _float_unary(node: TFNode, b: Builder) -> str:
    op_type = _FLOAT_UNARY[node.type]
    return layout.unary(b, op_type, node.inputs[0]) or b.op(op_type, node.inputs)


for _op in _FLOAT_UNARY:
    converter(_op, dtypes=FLOATS)(_float_unary)


def _number_unary(node: TFNode, b: Builder) -> str:
    return b.op(_NUMBER_UNARY[node.type], node.inputs)


for _op in _NUMBER_UNARY:
    converter(_op, dtypes=NUMBERS)(_number_unary)


@converter("Rsqrt", dtypes=FLOATS)
def rsqrt(node: TFNode, b: Builder) -> str:
    return b.op("Reciprocal", [b.op("Sqrt", node.inputs)])


@converter("Square", dtypes=NUMBERS)
def square(node: TFNode, b: Builder) -> str:
    (x,) = node.inputs
    return b.op("Mul", [x, x])


@converter("Erfc", dtypes=FLOATS)
def erfc(node: TFNode, b: Builder) -> str:
    one = b.const(np.ones((), _np(node)), "one")
    return b.op("Sub", [one, b.op("Erf", node.inputs)])


def _np(node: TFNode, index: int = 0):
    from onnx import helper

    return helper.tensor_dtype_to_np_dtype(node.elem_type(index))


def _compare(node: TFNode, b: Builder) -> str:
    if not node.attr("incompatible_shape_error", True):
        raise NotConvertible(f"{node.type} with incompatible_shape_error=False")
    return b.op(_COMPARE[node.type], node.inputs, elem_type=TensorProto.BOOL)


for _op in _COMPARE:
    converter(_op, dtypes=(*NUMBERS, dtypes.DT_BOOL))(_compare)


@converter("NotEqual", dtypes=(*NUMBERS, dtypes.DT_BOOL))
def not_equal(node: TFNode, b: Builder) -> str:
    if not node.attr("incompatible_shape_error", True):
        raise NotConvertible("NotEqual with incompatible_shape_error=False")
    return b.op("Not", [b.op("Equal", node.inputs, elem_type=TensorProto.BOOL)])


@converter("LogicalAnd", "LogicalOr", dtypes=(dtypes.DT_BOOL,))
def logical_binary(node: TFNode, b: Builder) -> str:
    return b.op("And" if node.type == "LogicalAnd" else "Or", node.inputs)


@converter("LogicalNot", dtypes=(dtypes.DT_BOOL,))
def logical_not(node: TFNode, b: Builder) -> str:
    return b.op("Not", node.inputs)


@converter("AddN", dtypes=NUMBERS)
def add_n(node: TFNode, b: Builder) -> str:
    return b.op("Sum", node.inputs) if len(node.inputs) > 1 else b.op("Identity", node.inputs)


@converter("Cast")
def cast(node: TFNode, b: Builder) -> str:
    to = onnx_type(node.attr("DstT"))
    return b.op("Cast", node.inputs, to=to, elem_type=to)


@converter("MatMul", dtypes=FLOATS)
def mat_mul(node: TFNode, b: Builder) -> str:
    a, c = node.inputs
    if node.attr("transpose_a", False):
        a = b.op("Transpose", [a], perm=[1, 0])
    if node.attr("transpose_b", False):
        c = b.op("Transpose", [c], perm=[1, 0])
    return b.op("MatMul", [a, c], rank=2)


def _swap_last(b: Builder, x: str, rank: int) -> str:
    perm = list(range(rank))
    perm[-2:] = perm[-1], perm[-2]
    return b.op("Transpose", [x], perm=perm)


@converter("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", dtypes=FLOATS)
def batch_mat_mul(node: TFNode, b: Builder) -> str:
    x, y = node.inputs
    if node.type == "BatchMatMulV3" and node.attr("Tout") not in (None, node.attr("Ta")):
        raise NotConvertible("BatchMatMulV3 with Tout != Ta")
    if node.attr("adj_x", False):
        x = _swap_last(b, x, node.rank(0))
    if node.attr("adj_y", False):
        y = _swap_last(b, y, node.rank(1))
    return b.op("MatMul", [x, y])


@converter("Einsum", dtypes=FLOATS)
def einsum(node: TFNode, b: Builder) -> str:
    equation = node.attr("equation")
    equation = equation.decode() if isinstance(equation, bytes) else equation
    if "." in equation:
        raise NotConvertible("Einsum with an ellipsis (broadcasting rules differ)")
    output = equation.split("->")[-1] if "->" in equation else None
    rank = None if output is None or "." in output else len(output)
    return b.op("Einsum", node.inputs, equation=equation, rank=rank)


def _reduce(node: TFNode, b: Builder, x: str | None = None, onnx_op: str | None = None) -> str:
    axes = node.inputs[1]
    x = x or node.inputs[0]
    keep = int(bool(node.attr("keep_dims", False)))
    rank, const = b.rank(x), node.const(1)
    if const is None:  # axes computed in the graph (e.g. Range(Rank(x))): ONNX takes them as input
        axes_input = b.op("Reshape", [b.cast(axes, TensorProto.INT64), b.int64s([-1])], rank=1)
        out_rank = rank if keep or rank == 0 else None  # a scalar stays a scalar (Keras' Max(steps))
    else:
        axes_value = np.asarray(const, np.int64).reshape(-1)
        axes_input = b.int64s(axes_value, "axes")
        count = len(set(axes_value.tolist()))
        out_rank = None if rank is None else (rank if keep or count == 0 else rank - count)
    onnx_op = onnx_op or _REDUCE[node.type]
    pooled = layout.global_pool(b, onnx_op, x, const, keep)
    if pooled is not None:
        return pooled
    out = b.op(onnx_op, [x, axes_input], keepdims=keep, noop_with_empty_axes=1, rank=out_rank)
    if node.type == "Prod" and rank == 1 and not keep and const is not None:  # a shape's product
        shape_values.record_product(b, out, x)
    return out


for _op in _REDUCE:
    converter(_op, dtypes=NUMBERS)(_reduce)


@converter("All", "Any", dtypes=(dtypes.DT_BOOL,))
def all_any(node: TFNode, b: Builder) -> str:
    """A Min (All) or Max (Any) over 0/1 as uint8 (ONNX reduces no booleans). An empty All is
    the type's max, so true; an empty Any its min, so false: TF's answers."""
    x, axes = node.inputs
    flags = b.op("Cast", [x], to=TensorProto.UINT8, elem_type=TensorProto.UINT8)
    reduced = _reduce(node, b, flags, "ReduceMin" if node.type == "All" else "ReduceMax")
    return b.op("Cast", [reduced], to=TensorProto.BOOL, elem_type=TensorProto.BOOL)


@converter("ArgMax", "ArgMin", const_inputs=(1,), dtypes=NUMBERS)
def arg_max(node: TFNode, b: Builder) -> str:
    axis = int(np.asarray(node.const_required(1)).reshape(()))
    out = onnx_type(node.attr("output_type", dtypes.DT_INT64))
    rank = b.rank(node.inputs[0])
    found = b.op(
        node.type,
        [node.inputs[0]],
        axis=axis,
        keepdims=0,
        elem_type=TensorProto.INT64,
        rank=rank and rank - 1,
    )
    result = b.cast(found, out)
    b.non_negative.add(result)  # an index along the axis: a Gather at it needs no lower guard
    return result


@converter("SelectV2")
def select_v2(node: TFNode, b: Builder) -> str:
    return b.op("Where", node.inputs, elem_type=node.elem_type(1))


@converter("Select")
def select(node: TFNode, b: Builder) -> str:
    cond, x, y = node.inputs
    cond_rank, x_rank = node.rank(0), node.rank(1)
    if cond_rank == 1 and x_rank > 1:  # TF1 Select: a vector picks whole rows
        cond = b.op("Reshape", [cond, b.int64s([-1] + [1] * (x_rank - 1), "shape")], rank=x_rank)
    elif cond_rank != x_rank:
        raise NotConvertible("Select with a condition of another rank")
    return b.op("Where", [cond, x, y], elem_type=node.elem_type(1))


def _guard_sorted_ids(b: Builder, ids: str) -> None:
    """TF's checks of segment ids: none negative, none smaller than the one before."""
    b.margins.append(b.op("ReduceMin", [ids], keepdims=0, rank=0))  # empty: INT64_MAX, it holds
    after = b.op("Slice", [ids, b.int64s([1]), b.int64s([np.iinfo(np.int64).max])], rank=1)
    before = b.op("Slice", [ids, b.int64s([0]), b.int64s([-1])], rank=1)
    b.margins.append(b.op("ReduceMin", [b.op("Sub", [after, before], rank=1)], keepdims=0, rank=0))


@converter("SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN")
def sparse_segment_reduction(node: TFNode, b: Builder) -> str:
    """Rows ``data[indices]`` summed into ``segment_ids[-1] + 1`` segments by ``ScatterND``'s
    add; Mean and SqrtN divide by the count (or its root), at least 1: empty segments stay 0."""
    data, indices, segment_ids = node.inputs
    rank = b.rank(data) if b.rank(data) is not None else b.infer_rank(data)
    if rank is None or rank < 1:
        raise NotConvertible("segment reduction of unknown rank")
    if node.type != "SparseSegmentSum" and node.elem_type(0) not in FLOAT_TYPES:
        raise NotConvertible(f"{node.type} of integers")
    rows_of_data = b.op("Shape", [data], start=0, end=1, rank=1, elem_type=TensorProto.INT64)
    b.guard_in_range(indices, b.op("Squeeze", [rows_of_data, b.int64s([0])], rank=0), gathered=True)
    rows = b.op("Gather", [data, indices], axis=0, rank=rank)
    ids = b.cast(segment_ids, TensorProto.INT64)
    _guard_sorted_ids(b, ids)
    last = b.op("Gather", [ids, b.int64s([-1], "last")], axis=0, rank=1)
    count = b.op("Add", [last, b.int64s([1], "one")], rank=1)
    inner = b.op("Slice", [b.op("Shape", [data], rank=1), b.int64s([1]), b.int64s([rank])], rank=1)
    shape = b.op("Concat", [count, inner], axis=0, rank=1)
    zero = b.const(np.zeros((), _np(node)), "zero")
    positions = b.op("Unsqueeze", [ids, b.int64s([1], "axes")], rank=2)
    summed = b.op("ScatterND", [b.op("Expand", [zero, shape], rank=rank), positions, rows], reduction="add")
    if node.type == "SparseSegmentSum":
        return summed
    ones = b.op("Expand", [b.const(np.ones((), _np(node)), "one"), b.op("Shape", [ids], rank=1)])
    counts = b.op("ScatterND", [b.op("Expand", [zero, count], rank=1), positions, ones], reduction="add")
    counts = b.op("Max", [counts, b.const(np.ones((), _np(node)), "one")], rank=1)
    if node.type == "SparseSegmentSqrtN":
        counts = b.op("Sqrt", [counts], rank=1)
    if rank > 1:
        counts = b.op("Unsqueeze", [counts, b.int64s(list(range(1, rank)), "axes")], rank=rank)
    return b.op("Div", [summed, counts], rank=rank)
