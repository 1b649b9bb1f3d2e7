"""Array kernels: shapes, reshaping and broadcasting, filling and ranges, the identities that check
(CheckNumerics, EnsureShape), Bitcast and Diag/DiagPart.

TF's array ops are split by what they do to the elements: joining, splitting, tiling and padding live
in ``concat_ops.py``, reordering (transposes, reverses, Roll) in ``permute_ops.py``, the ops that
depend on the values (Select, Where, Unique, ...) in ``selection_ops.py`` and slicing, gathering and
scattering in ``indexing_ops.py``. The shared helpers ``_ints`` and ``_axis`` are here. Errors carry
TF's texts where a client could see them.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from runtime import dtypes
from runtime.kernels.math_ops import broadcast, invalid, out, shape_str
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


@kernel("Empty", const_inputs=(0,))
def empty(shape, *, dtype, init=False):
    return np.zeros(_ints(shape), dtypes.as_numpy_dtype(dtype))


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


# --------------------------------------------------------------------------- checks


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


# --------------------------------------------------------------------------- bits and diagonals


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
