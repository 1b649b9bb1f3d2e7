"""Array kernels: shapes, reshaping, filling, joining and splitting, permuting, selection, padding.

Slicing, gathering and scattering (the index-valued half of TF's array ops) live in
``indexing_ops.py``. Errors carry TF's texts where a client could see them.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from runtime import dtypes
from runtime.kernels.math_ops import broadcast, invalid, node_name, out, shape_str
from runtime.kernels.registry import kernel


def _ints(value) -> list[int]:
    value = np.asarray(value)
    listed = value.reshape(-1).tolist()
    return listed if value.dtype.kind in "iu" else [int(v) for v in listed]


def _axis(axis, ndim: int, what: str = "dim") -> int:
    axis = int(np.asarray(axis))
    if not -ndim <= axis < ndim:
        raise invalid(f"Expected {what} in the range [{-ndim}, {ndim}), but got {axis}")
    return axis % ndim


# --------------------------------------------------------------------------- shapes


def _shape_of(x, out_type):
    return out(np.asarray(x).shape, dtypes.as_numpy_dtype(out_type))


@kernel("Shape")
def shape(input, *, out_type=dtypes.DT_INT32):  # noqa: A002
    return _shape_of(input, out_type)


@kernel("ShapeN")
def shape_n(input, *, out_type=dtypes.DT_INT32):  # noqa: A002
    return tuple(_shape_of(x, out_type) for x in input)


@kernel("Size")
def size(input, *, out_type=dtypes.DT_INT32):  # noqa: A002
    return out(np.asarray(input).size, dtypes.as_numpy_dtype(out_type))


@kernel("Rank")
def rank(input):  # noqa: A002
    return out(np.asarray(input).ndim, np.int32)


@kernel("Reshape", const_inputs=(1,))
def reshape(tensor, shape):
    shape = np.asarray(shape)
    return tensor.reshape(_reshaped(tensor.shape, tuple(_ints(shape)), shape.shape))


@functools.lru_cache(maxsize=4096)  # a graph reshapes the same shapes run after run: check each once
def _reshaped(input_shape: tuple, dims: tuple, sizes_shape: tuple) -> tuple:
    """The output shape (its -1 inferred), or TF's error; errors are never cached."""
    if len(sizes_shape) > 1:
        raise invalid(f"sizes input must be 1-D, not {shape_str(sizes_shape)}")
    dims = list(dims)
    size = math.prod(input_shape)
    unknown = [i for i, d in enumerate(dims) if d == -1]
    if len(unknown) > 1:
        raise invalid(f"Only one input size may be -1, not both {unknown[0]} and {unknown[1]}")
    for i, d in enumerate(dims):
        if d < -1:
            raise invalid(f"Size {i} must be non-negative, not {d}")
    # As TF's ReshapeOp: zero-sized dims are left out of both products so that -1 still infers.
    product = math.prod(d for d in dims if d > 0)
    if unknown:
        has_zero = 0 in dims
        counted = [d for d in input_shape if d > 0 or not has_zero]
        input_has_zero = len(counted) != len(input_shape)
        elements = math.prod(counted)
        missing = elements // product if product else 0
        if not input_has_zero and elements != product * missing:
            raise invalid(
                f"Input to reshape is a tensor with {size} values, but the requested shape "
                f"requires a multiple of {product}"
            )
        dims[unknown[0]] = missing
    requested = math.prod(dims)
    if requested != size:
        raise invalid(
            f"Input to reshape is a tensor with {size} values, but the requested shape has {requested}"
        )
    return tuple(dims)


@kernel("Squeeze")
def squeeze(input, *, squeeze_dims=()):  # noqa: A002
    if not squeeze_dims:
        return input.reshape([d for d in input.shape if d != 1])
    axes = []
    for a in squeeze_dims:
        if not -input.ndim <= a < input.ndim:
            raise invalid(f"Tried to squeeze dim index {a} for tensor with {input.ndim} dimensions.")
        a %= input.ndim
        if input.shape[a] != 1:
            raise invalid(f"Can not squeeze dim[{a}], expected a dimension of 1, got {input.shape[a]}")
        axes.append(a)
    return np.squeeze(input, axis=tuple(set(axes)))


@kernel("ExpandDims", const_inputs=(1,))
def expand_dims(input, axis):  # noqa: A002
    a = int(np.asarray(axis).reshape(-1)[0]) if np.asarray(axis).size == 1 else None
    if a is None:
        raise invalid(f"'dim' must be a tensor with a single value, but got {np.asarray(axis).size}")
    if not -input.ndim - 1 <= a <= input.ndim:
        raise invalid(f"Tried to expand dim index {a} for tensor with {input.ndim} dimensions.")
    return np.expand_dims(input, a if a >= 0 else a + input.ndim + 1)


@kernel("BroadcastTo", const_inputs=(1,))
def broadcast_to(input, shape):  # noqa: A002
    target = tuple(_ints(shape))
    try:
        if np.broadcast_shapes(input.shape, target) != target:
            raise ValueError
    except ValueError:
        raise invalid(f"Incompatible shapes: {shape_str(input.shape)} vs. {shape_str(target)}") from None
    return np.array(np.broadcast_to(input, target))


@kernel("BroadcastArgs", const_inputs=(0, 1))
def broadcast_args(s0, s1):
    a, b = np.zeros(_ints(s0), np.bool_), np.zeros(_ints(s1), np.bool_)
    return out(broadcast(a, b), s0.dtype)


@kernel("BroadcastGradientArgs")
def broadcast_gradient_args(s0, s1):
    a, b = _ints(s0), _ints(s1)
    shape = broadcast(np.empty(a, np.bool_), np.empty(b, np.bool_))
    n = len(shape)

    def reduced(dims):
        padded = [1] * (n - len(dims)) + dims
        return out([i for i in range(n) if padded[i] == 1 and shape[i] != 1], s0.dtype)

    return reduced(a), reduced(b)


# --------------------------------------------------------------------------- fill and like


@kernel("Fill", const_inputs=(0,))
def fill(dims, value):
    if np.asarray(value).ndim:
        raise invalid(f"value must be a scalar, got shape {shape_str(np.asarray(value).shape)}")
    shape = _ints(dims)
    if any(d < 0 for d in shape):
        raise invalid(f"Dimension {min(shape)} must be >= 0")
    return np.full(shape, value, dtype=value.dtype)


@kernel("ZerosLike")
def zeros_like(x):
    if x.dtype == object:
        return np.full(x.shape, b"", dtype=object)
    return np.zeros_like(x)


@kernel("OnesLike")
def ones_like(x):
    return np.ones_like(x)


def _num(value) -> str:
    """A number as TF's StrCat writes it: integers in full, floats with 6 significant digits."""
    return str(value) if isinstance(value, int) else f"{value:g}"


@kernel("Range")
def range_(start, limit, delta, *, Tidx=dtypes.DT_INT32):
    start, limit, delta = (np.asarray(v).item() for v in (start, limit, delta))
    if delta == 0:
        raise invalid(f"Requires delta != 0: {delta}")
    if delta > 0 and start > limit:
        raise invalid(f"Requires start <= limit when delta > 0: {_num(start)}/{_num(limit)}")
    if delta < 0 and start < limit:
        raise invalid(f"Requires start >= limit when delta < 0: {_num(start)}/{_num(limit)}")
    dtype = dtypes.as_numpy_dtype(Tidx)
    if dtype.kind in "iu":
        count = (abs(limit - start) + abs(delta) - 1) // abs(delta)
    else:
        count = int(np.ceil(abs((limit - start) / delta)))
    return out(start + np.arange(count, dtype=np.int64 if dtype.kind in "iu" else np.float64) * delta, dtype)


@kernel("LinSpace", const_inputs=(2,))
def lin_space(start, stop, num):
    n = int(np.asarray(num))
    if n <= 0:
        raise invalid(f"Requires num > 0: {n}")
    return out(np.linspace(start, stop, n), start.dtype)


# --------------------------------------------------------------------------- join and split


def _concat(values, axis):
    first = values[0]
    if first.ndim == 0:
        raise invalid(f"Can't concatenate scalars (use tf.stack instead) for 'concat' : {first.ndim} ")
    axis_i = int(np.asarray(axis))
    if not -first.ndim <= axis_i < first.ndim:
        raise invalid(
            f"ConcatOp : Expected concatenating dimensions in the range [{-first.ndim}, {first.ndim}), "
            f"but got {axis_i}"
        )
    axis_i %= first.ndim
    for i, v in enumerate(values[1:], 1):
        if v.ndim != first.ndim:
            raise invalid(
                f"ConcatOp : Ranks of all input tensors should match: shape[0] = {shape_str(first.shape)} "
                f"vs. shape[{i}] = {shape_str(v.shape)}"
            )
        for d in range(first.ndim):
            if d != axis_i and v.shape[d] != first.shape[d]:
                raise invalid(
                    f"ConcatOp : Dimension {d} in both shapes must be equal: shape[0] = "
                    f"{shape_str(first.shape)} vs. shape[{i}] = {shape_str(v.shape)}"
                )
    return np.concatenate(values, axis=axis_i)


@kernel("ConcatV2", const_inputs=(1,))
def concat_v2(values, axis):
    return _concat(values, axis)


@kernel("Concat", const_inputs=(0,))
def concat(concat_dim, values):
    return _concat(values, concat_dim)


@kernel("Pack")
def pack(values, *, axis=0):
    first = values[0]
    if not -first.ndim - 1 <= axis <= first.ndim:
        raise invalid(f"axis = {axis} not in [{-first.ndim - 1}, {first.ndim + 1})")
    for i, v in enumerate(values[1:], 1):
        if v.shape != first.shape:
            raise invalid(
                f"Shapes of all inputs must match: values[0].shape = {shape_str(first.shape)} != "
                f"values[{i}].shape = {shape_str(v.shape)}"
            )
    axis = axis if axis >= 0 else axis + first.ndim + 1
    if axis == 0 and first.dtype.kind in "biufc":  # np.array is np.stack's axis 0, at a tenth of its cost
        return np.array(values, dtype=first.dtype)
    return np.stack(values, axis=axis)


@kernel("Unpack")
def unpack(value, *, num=None, axis=0):
    if not -value.ndim <= axis < value.ndim:
        raise invalid(f"axis = {axis} not in [{-value.ndim}, {value.ndim})")
    axis %= value.ndim
    return tuple(np.take(value, i, axis=axis) for i in range(value.shape[axis]))


@kernel("Split", const_inputs=(0,))
def split(axis, value, *, num_split):
    a = _axis(axis, value.ndim, "dimension")
    if value.shape[a] % num_split:
        raise invalid(
            f"Number of ways to split should evenly divide the split dimension, but got split_dim {a} "
            f"(size = {value.shape[a]}) and num_split {num_split}"
        )
    return tuple(np.split(value, num_split, axis=a))


@kernel("SplitV", const_inputs=(1, 2))
def split_v(value, size_splits, axis, *, num_split):
    a = _axis(axis, value.ndim, "dimension")
    sizes = _ints(size_splits)
    unknown = [i for i, s in enumerate(sizes) if s == -1]
    if len(unknown) > 1:
        raise invalid("There can only be one -1 in the input.")
    known = sum(s for s in sizes if s != -1)
    if unknown:
        sizes[unknown[0]] = value.shape[a] - known
    if sum(sizes) != value.shape[a] or any(s < 0 for s in sizes):
        raise invalid(
            "Determined shape must either match input shape along split_dim exactly if fully specified, "
            f"or be less than the size of the input along split_dim if not fully specified.  Got: {known}"
        )
    return tuple(np.split(value, np.cumsum(sizes)[:-1], axis=a))


# --------------------------------------------------------------------------- permuting


@kernel("Tile", const_inputs=(1,))
def tile(input, multiples):  # noqa: A002
    reps = _ints(multiples)
    if len(reps) != input.ndim:
        raise invalid(
            f"Expected multiples argument to be a vector of length {input.ndim} but got length {len(reps)}"
        )
    if any(r < 0 for r in reps):
        raise invalid(f"Expected multiples[{min(range(len(reps)), key=lambda i: reps[i])}] >= 0")
    return np.tile(input, reps) if input.ndim else input.copy()


@kernel("Transpose", const_inputs=(1,))
def transpose(x, perm):
    p = _ints(perm)
    if len(p) != x.ndim:
        raise invalid(
            f"transpose expects a vector of size {x.ndim}. But input(1) is a vector of size {len(p)}"
        )
    if sorted(p) != list(range(x.ndim)):
        bad = next((v for v in p if not 0 <= v < x.ndim), None)
        if bad is not None:
            raise invalid(f"{bad} is out of range [0 .. {x.ndim})")
        missing = next(i for i in range(x.ndim) if i not in p)
        raise invalid(f"{missing} is missing from {{{','.join(str(v) for v in p)}}}.")
    return np.ascontiguousarray(np.transpose(x, p))


@kernel("ConjugateTranspose", const_inputs=(1,))
def conjugate_transpose(x, perm):
    return np.conj(transpose(x, perm))


@kernel("InvertPermutation")
def invert_permutation(x):
    p = np.asarray(x)
    if p.ndim != 1:
        raise invalid("invert_permutation expects a 1D vector.")
    n = p.size
    if np.any((p < 0) | (p >= n)):
        bad = int(p[(p < 0) | (p >= n)][0])
        raise invalid(f"{bad} is not between 0 and {n}")
    result = np.full(n, -1, p.dtype)
    result[p] = np.arange(n, dtype=p.dtype)
    if np.any(result < 0):
        raise invalid(
            f"{int(np.flatnonzero(np.bincount(p, minlength=n) > 1)[0])} is duplicated in the input."
        )
    return result


@kernel("ReverseV2", const_inputs=(1,))
def reverse_v2(tensor, axis):
    axes = []
    for a in _ints(axis):
        if not -tensor.ndim <= a < tensor.ndim:
            raise invalid(f"'axis'[0] = {a} is out of valid range [0, {tensor.ndim - 1}")
        axes.append(a % tensor.ndim)
    if len(set(axes)) != len(axes):
        raise invalid(f"axis {axes[0]} specified more than once.")
    return np.array(np.flip(tensor, axis=tuple(axes))) if axes else tensor.copy()


@kernel("ReverseSequence")
def reverse_sequence(input, seq_lengths, *, seq_dim, batch_dim=0):  # noqa: A002
    lengths = np.asarray(seq_lengths).astype(np.int64)
    if np.any(lengths > input.shape[seq_dim]):
        bad = int(np.flatnonzero(lengths > input.shape[seq_dim])[0])
        raise invalid(f"seq_lens({bad}) > input.dims({seq_dim})")
    n = input.shape[seq_dim]
    pos = np.arange(n)
    shape = [1] * input.ndim
    shape[seq_dim] = n
    lshape = [1] * input.ndim
    lshape[batch_dim] = input.shape[batch_dim]
    pos_b = pos.reshape(shape)
    len_b = lengths.reshape(lshape)
    source = np.where(pos_b < len_b, len_b - 1 - pos_b, pos_b)
    source = np.broadcast_to(source, input.shape)
    return np.take_along_axis(input, source, axis=seq_dim)


# --------------------------------------------------------------------------- selection


@kernel("Select")
def select(condition, t, e, *, ctx=None):
    if t.shape != e.shape:
        raise invalid(
            f"Inputs to operation {node_name(ctx)} of type Select must have the same size and shape.  "
            f"Input 0: {shape_str(t.shape)} != input 2: {shape_str(e.shape)}"
        )
    if condition.ndim == 1 and t.ndim > 1:
        if condition.shape[0] != t.shape[0]:
            raise invalid(
                f"Number of batches of 'then' must match size of 'cond', but saw: {t.shape[0]} vs. {condition.shape[0]}"
            )
        condition = condition.reshape((-1,) + (1,) * (t.ndim - 1))
    elif condition.ndim and condition.shape != t.shape:
        raise invalid(
            f"'cond' and 'then' must have the same size.  but received: {shape_str(condition.shape)} vs. "
            f"{shape_str(t.shape)}"
        )
    return out(np.where(condition, t, e), t.dtype)


@kernel("SelectV2")
def select_v2(condition, t, e):
    shape = broadcast(t, e)
    try:
        np.broadcast_shapes(condition.shape, shape)
    except ValueError:
        raise invalid(
            f"condition {shape_str(condition.shape)}, then {shape_str(t.shape)}, and else "
            f"{shape_str(e.shape)} must be broadcastable"
        ) from None
    return out(np.where(condition, t, e), t.dtype)


@kernel("Where")
def where(input):  # noqa: A002
    if input.ndim == 0:
        raise invalid("WhereOp : Unhandled input dimensions: 0")
    if input.ndim == 1 and input.dtype.kind in "biufc":  # nonzero: argwhere's core, minus its reshuffling
        return input.nonzero()[0].astype(np.int64, copy=False).reshape(-1, 1)
    return np.argwhere(input != 0 if input.dtype != np.bool_ else input).astype(np.int64)


# --------------------------------------------------------------------------- padding


def _paddings(paddings, ndim, input_shape=""):
    pads = np.asarray(paddings).astype(np.int64)
    if pads.shape != (ndim, 2):
        raise invalid(
            f"The first dimension of paddings must be the rank of inputs{shape_str(pads.shape)} {input_shape}"
        )
    if np.any(pads < 0):
        before, after = pads[np.flatnonzero(np.any(pads < 0, axis=1))[0]]
        raise invalid(f"Paddings must be non-negative: {before} {after}")
    return [tuple(row) for row in pads.tolist()]


@kernel("Pad", const_inputs=(1,))
def pad(input, paddings):  # noqa: A002
    if input.ndim == 0:
        _paddings(paddings, 0, shape_str(input.shape))
        return input.copy()
    fill_value = b"" if input.dtype == object else 0
    return np.pad(input, _paddings(paddings, input.ndim, shape_str(input.shape)), constant_values=fill_value)


@kernel("PadV2", const_inputs=(1,))
def pad_v2(input, paddings, constant_values):  # noqa: A002
    if input.ndim == 0:
        _paddings(paddings, 0, shape_str(input.shape))
        return input.copy()
    return np.pad(
        input, _paddings(paddings, input.ndim, shape_str(input.shape)), constant_values=constant_values.item()
    )


@kernel("MirrorPad", const_inputs=(1,))
def mirror_pad(input, paddings, *, mode):  # noqa: A002
    pads = _paddings(paddings, input.ndim, shape_str(input.shape))
    offset = 0 if mode == "SYMMETRIC" else 1
    for d, (before, after) in enumerate(pads):
        if before > input.shape[d] - offset or after > input.shape[d] - offset:
            raise invalid(
                f"paddings must be less than the dimension size: {before}, {after} not less than "
                f"{input.shape[d]}"
                if offset
                else f"paddings must be no greater than the dimension size: {before}, {after} greater than "
                f"{input.shape[d]}"
            )
    return np.pad(input, pads, mode="symmetric" if mode == "SYMMETRIC" else "reflect")


# --------------------------------------------------------------------------- misc


@kernel("OneHot", const_inputs=(1,))
def one_hot(indices, depth, on_value, off_value, *, axis=-1):
    d = int(np.asarray(depth))
    if d < 0:
        raise invalid(f"depth must be non-negative, got: {d}")
    if not -1 <= axis <= indices.ndim:
        raise invalid(f"Expected axis to be -1 or between [0, {indices.ndim + 1}).  But received: {axis}")
    hot = indices[..., None] == np.arange(d, dtype=np.int64)
    result = np.where(hot, on_value, off_value).astype(on_value.dtype)
    if axis != -1:
        result = np.moveaxis(result, -1, axis)
    return np.ascontiguousarray(result)


@kernel("Unique")
def unique(x, *, out_idx=dtypes.DT_INT32):
    if x.ndim != 1:
        raise invalid("unique expects a 1D vector.")
    idx_dtype = dtypes.as_numpy_dtype(out_idx)
    if x.size <= 64 and x.dtype.kind in "biuO":  # exact equality: a dict in first-seen order
        first_seen: dict = {}
        idx = [first_seen.setdefault(v, len(first_seen)) for v in x.tolist()]
        return np.array(list(first_seen), dtype=x.dtype), np.array(idx, dtype=idx_dtype)
    values, first, inverse = np.unique(x, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank_of = np.empty_like(order)
    rank_of[order] = np.arange(order.size)
    return out(x[first[order]], x.dtype), out(rank_of[inverse.reshape(-1)], idx_dtype)


@kernel("UniqueWithCounts")
def unique_with_counts(x, *, out_idx=dtypes.DT_INT32):
    y, idx = unique(x, out_idx=out_idx)
    return y, idx, out(np.bincount(idx.astype(np.int64), minlength=y.size), idx.dtype)


@kernel("CheckNumerics")
def check_numerics(tensor, *, message):
    if tensor.dtype.kind in "fc" or tensor.dtype == dtypes.as_numpy_dtype(dtypes.DT_BFLOAT16):
        values = tensor.astype(np.float32) if tensor.dtype.kind not in "fc" else tensor
        if np.any(np.isnan(values)) and np.any(np.isinf(values)):
            kind = "Inf and NaN"
        elif np.any(np.isnan(values)):
            kind = "NaN"
        elif np.any(np.isinf(values)):
            kind = "Inf"
        else:
            return tensor
        raise invalid(f"{message} : Tensor had {kind} values")
    return tensor


@kernel("Snapshot")
def snapshot(input):  # noqa: A002
    return np.array(input, copy=True)


@kernel("EnsureShape")
def ensure_shape(input, *, shape=None):  # noqa: A002
    if shape is not None and (
        len(shape) != input.ndim or any(d not in (-1, None) and d != s for d, s in zip(shape, input.shape))
    ):
        want = "[" + ",".join("?" if d in (-1, None) else str(d) for d in shape) + "]"
        raise invalid(
            f"Shape of tensor {shape_str(input.shape)} is not compatible with expected shape {want}."
        )
    return input


@kernel("LowerBound")
def lower_bound(sorted_inputs, values, *, out_type=dtypes.DT_INT32):
    return _bound(sorted_inputs, values, out_type, "left")


@kernel("UpperBound")
def upper_bound(sorted_inputs, values, *, out_type=dtypes.DT_INT32):
    return _bound(sorted_inputs, values, out_type, "right")


def _bound(sorted_inputs, values, out_type, side):
    rows = [np.searchsorted(s, v, side=side) for s, v in zip(sorted_inputs, values)]
    result = np.stack(rows) if rows else np.zeros(values.shape, np.int64)
    return out(result, dtypes.as_numpy_dtype(out_type))


@kernel("ConcatOffset")
def concat_offset(concat_dim, shape):
    axis = int(np.asarray(concat_dim))
    first = np.asarray(shape[0])
    rank = first.size
    if not -rank <= axis < rank:
        raise invalid(f"Concat dim is out of range: {axis} vs. {rank}")
    axis %= rank
    offsets, running = [], 0
    for i, s in enumerate(shape):
        s = np.asarray(s)
        if s.size != rank:
            raise invalid(f"input {i} should contain {rank} elements, but got {s.size}")
        offset = np.zeros(rank, s.dtype)
        offset[axis] = running
        offsets.append(offset)
        running += int(s[axis])
    return tuple(offsets)


@kernel("Diag")
def diag(diagonal):
    n = diagonal.size
    result = np.zeros((n, n), diagonal.dtype)
    result[np.arange(n), np.arange(n)] = diagonal.reshape(-1)
    return result.reshape(diagonal.shape * 2)


@kernel("DiagPart")
def diag_part(input):  # noqa: A002
    half = input.ndim // 2
    if input.ndim % 2 or input.ndim == 0:
        raise invalid(
            f"The rank of the tensor should be even and positive, got shape {shape_str(input.shape)}"
        )
    for i in range(half):
        if input.shape[i] != input.shape[i + half]:
            raise invalid(
                f"Invalid shape {shape_str(input.shape)}: dimensions {i} and {i + half} do not match."
            )
    n = int(np.prod(input.shape[:half], dtype=np.int64))
    return np.ascontiguousarray(input.reshape(n, n)[np.arange(n), np.arange(n)].reshape(input.shape[:half]))


@kernel("Empty", const_inputs=(0,))
def empty(shape, *, dtype, init=False):
    return np.zeros(_ints(shape), dtypes.as_numpy_dtype(dtype))


@kernel("Bitcast")
def bitcast(input, *, type):  # noqa: A002
    dst = dtypes.as_numpy_dtype(type)
    src = input.dtype
    if src.itemsize == dst.itemsize:
        return np.ascontiguousarray(input).view(dst)
    if src.itemsize > dst.itemsize:
        return np.ascontiguousarray(input).view(dst).reshape(input.shape + (src.itemsize // dst.itemsize,))
    ratio = dst.itemsize // src.itemsize
    if input.ndim == 0 or input.shape[-1] != ratio:
        raise invalid(f"Cannot bitcast from {src} to {dst}: shape {shape_str(input.shape)}")
    return np.ascontiguousarray(input).view(dst).reshape(input.shape[:-1])


@kernel("Roll", const_inputs=(1, 2))
def roll(input, shift, axis):  # noqa: A002
    shifts, axes = _ints(shift), _ints(axis)
    if len(shifts) != len(axes):
        raise invalid(f"shift and axis must have the same size, got {len(shifts)} and {len(axes)}")
    for a in axes:
        if not -input.ndim <= a < input.ndim:
            raise invalid(f"axis {a} is out of range")
    return np.roll(input, shifts, axes) if axes else input.copy()


@kernel("ListDiff")
def list_diff(x, y, *, out_idx=dtypes.DT_INT32):
    keep = ~np.isin(x, y)
    return x[keep], out(np.flatnonzero(keep), dtypes.as_numpy_dtype(out_idx))


@kernel("Reverse")
def reverse(tensor, dims):
    flags = np.asarray(dims).reshape(-1)
    if flags.size != tensor.ndim:
        raise invalid(
            f"'dims' must have the same number of values as 'input' has dimensions. 'input' has "
            f"{tensor.ndim}'dims' has {flags.size} values"
        )
    axes = tuple(int(a) for a in np.flatnonzero(flags))
    return np.array(np.flip(tensor, axes)) if axes else tensor.copy()


@kernel("UnravelIndex", const_inputs=(1,))
def unravel_index(indices, dims):
    shape = _ints(dims)
    if any(d <= 0 for d in shape) and shape:
        raise invalid("All dimensions must be positive")  # TF's check on dims
    total = int(np.prod(shape, dtype=np.int64))
    flat = np.asarray(indices)
    if np.any((flat < 0) | (flat >= total)):
        raise invalid("index is out of bound as with dims")
    return out(np.stack(np.unravel_index(flat.astype(np.int64), shape)), indices.dtype)


def _unique_along(x, axis_value, out_idx):
    axes = _ints(axis_value)
    if len(axes) > 1:
        raise invalid(f"Axis argument must be a scalar or a 1-D tensor of size 1, got {len(axes)} values")
    if not axes:
        if x.ndim != 1:
            raise invalid("unique expects a 1D vector.")
        axis = 0
    else:
        axis = axes[0]
        if not -x.ndim <= axis < x.ndim:
            raise invalid(f"axis has to be between [{-x.ndim}, {x.ndim}), got {axis}")
        axis %= x.ndim
    if x.dtype == object:
        _, first, inverse = np.unique(x, return_index=True, return_inverse=True)
    else:
        _, first, inverse = np.unique(x, axis=axis, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank_of = np.empty_like(order)
    rank_of[order] = np.arange(order.size)
    idx = out(rank_of[inverse.reshape(-1)], dtypes.as_numpy_dtype(out_idx))
    return np.ascontiguousarray(np.take(x, first[order], axis=axis)), idx


@kernel("UniqueV2", const_inputs=(1,))
def unique_v2(x, axis, *, out_idx=dtypes.DT_INT32):
    return _unique_along(x, axis, out_idx)


@kernel("UniqueWithCountsV2", const_inputs=(1,))
def unique_with_counts_v2(x, axis, *, out_idx=dtypes.DT_INT32):
    y, idx = _unique_along(x, axis, out_idx)
    counts = np.bincount(idx.astype(np.int64), minlength=len(np.unique(idx)) if idx.size else 0)
    return y, idx, out(counts, idx.dtype)
