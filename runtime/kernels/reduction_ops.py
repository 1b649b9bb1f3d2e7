"""Reductions, scans and segment reductions: Sum/Mean/Max/Min/Prod/All/Any/EuclideanNorm, ArgMax/
ArgMin, Cumsum/Cumprod, Segment*/UnsortedSegment*, Bucketize, Bincount.

Empty reductions give TF's identities (0, 1, the lowest and highest value); integer Mean divides with
truncation like TF's ``MeanReducer``; half and bfloat16 accumulate in float32.
"""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

from runtime import dtypes
from runtime.kernels.math_ops import _LOW_PRECISION, _trunc_div, invalid, out, shape_str
from runtime.kernels.registry import kernel


def reduction_axes(axis, ndim: int) -> tuple[int, ...]:
    """TF's reduction indices -> normalised axes, with TF's error for an out-of-range one."""
    axes = []
    for a in np.asarray(axis).reshape(-1).tolist():
        if not -ndim <= a < ndim:
            raise invalid(f"Invalid reduction dimension ({a} for input with {ndim} dimension(s)")
        a = a % ndim if ndim else a
        if a in axes:
            raise invalid(f"Invalid reduction arguments: Axes contains duplicate dimension: {a}")
        axes.append(a)
    return tuple(sorted(axes))


def _lowest(dtype: np.dtype):
    if dtype.kind == "f" or dtype == dtypes.as_numpy_dtype(dtypes.DT_BFLOAT16):
        return -np.inf
    if dtype.kind == "b":
        return False
    return np.iinfo(dtype).min


def _finite_lowest(dtype: np.dtype):
    """Eigen's ``NumTraits::lowest()``: the identity of TF's segment max (finite, unlike -inf)."""
    if dtype.kind == "f" or dtype == dtypes.as_numpy_dtype(dtypes.DT_BFLOAT16):
        return np.finfo(dtype).min if dtype.kind == "f" else float(ml_dtypes.finfo(dtype).min)
    return _lowest(dtype)


def _finite_highest(dtype: np.dtype):
    if dtype.kind == "f" or dtype == dtypes.as_numpy_dtype(dtypes.DT_BFLOAT16):
        return np.finfo(dtype).max if dtype.kind == "f" else float(ml_dtypes.finfo(dtype).max)
    return _highest(dtype)


def _highest(dtype: np.dtype):
    if dtype.kind == "f" or dtype == dtypes.as_numpy_dtype(dtypes.DT_BFLOAT16):
        return np.inf
    if dtype.kind == "b":
        return True
    return np.iinfo(dtype).max


def _accumulate_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if dtype in _LOW_PRECISION else dtype


def _reduce(fn):
    def compute(input, axis, *, keep_dims=False):  # noqa: A002
        input = np.asarray(input)
        axes = reduction_axes(axis, input.ndim)
        # No np.errstate of its own (1 us a call): Session runs every non-quiet plan under one.
        result = fn(input, axes, keep_dims)
        return (
            result if type(result) is np.ndarray and result.dtype == input.dtype else out(result, input.dtype)
        )

    return compute


# The ufuncs' reduce: what np.sum and np.prod call for an ndarray, less their dispatch cost.
def _sum(x, axes, keep):
    return np.add.reduce(x, axis=axes, keepdims=keep, dtype=_accumulate_dtype(x.dtype))


def _prod(x, axes, keep):
    return np.multiply.reduce(x, axis=axes, keepdims=keep, dtype=_accumulate_dtype(x.dtype))


def _mean(x, axes, keep):
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    if x.dtype.kind in "iu":
        # Summed without overflow (TF's MeanReducer divides a wide sum), then truncated.
        wide = np.uint64 if x.dtype.kind == "u" else np.int64
        total = np.sum(x, axis=axes, keepdims=keep, dtype=wide)
        if count == 0:
            return np.zeros_like(total)
        return _trunc_div(total, np.asarray(count, wide))
    total = _sum(x, axes, keep)
    return total / count if count else total * np.nan


def _max(x, axes, keep):
    if x.size == 0:
        return np.max(x, axis=axes, keepdims=keep, initial=_lowest(x.dtype))
    return np.max(x, axis=axes, keepdims=keep)


def _min(x, axes, keep):
    if x.size == 0:
        return np.min(x, axis=axes, keepdims=keep, initial=_highest(x.dtype))
    return np.min(x, axis=axes, keepdims=keep)


def _euclidean_norm(x, axes, keep):
    acc = _accumulate_dtype(x.dtype)
    if x.dtype.kind == "c":
        return np.sqrt(np.sum(x * np.conj(x), axis=axes, keepdims=keep))
    squares = np.square(x.astype(acc))
    result = np.sqrt(np.sum(squares, axis=axes, keepdims=keep))
    return np.trunc(result) if x.dtype.kind in "iu" else result


for _ops, _fn in (
    (("Sum",), _sum),
    (("Prod",), _prod),
    (("Mean",), _mean),
    (("Max",), _max),
    (("Min",), _min),
    (("EuclideanNorm",), _euclidean_norm),
    (("All",), lambda x, axes, keep: np.all(x, axis=axes, keepdims=keep)),
    (("Any",), lambda x, axes, keep: np.any(x, axis=axes, keepdims=keep)),
):
    kernel(*_ops, const_inputs=(1,))(_reduce(_fn))


def _arg_reduce(input, dimension, output_type, fn):
    input = np.asarray(input)
    axis = int(np.asarray(dimension))
    if not -input.ndim <= axis < max(input.ndim, 1):
        raise invalid(f"Expected dimension in the range [{-input.ndim}, {input.ndim}), but got {axis}")
    axis %= max(input.ndim, 1)
    if input.ndim == 0 or input.shape[axis] == 0:
        raise invalid(f"Reduction axis {axis} is empty in shape {shape_str(input.shape)}")
    return out(fn(input, axis=axis), dtypes.as_numpy_dtype(output_type))


@kernel("ArgMax", const_inputs=(1,))
def arg_max(input, dimension, *, output_type=dtypes.DT_INT64):  # noqa: A002
    return _arg_reduce(input, dimension, output_type, np.argmax)


@kernel("ArgMin", const_inputs=(1,))
def arg_min(input, dimension, *, output_type=dtypes.DT_INT64):  # noqa: A002
    return _arg_reduce(input, dimension, output_type, np.argmin)


def _scan(x, axis, exclusive, reverse, fn, identity):
    x = np.asarray(x)
    axis = int(np.asarray(axis))
    if not -x.ndim <= axis < x.ndim:
        raise invalid(f"ScanOp: Expected scan axis in the range [{-x.ndim}, {x.ndim}), but got {axis}")
    axis %= x.ndim
    work = np.flip(x, axis) if reverse else x
    with np.errstate(all="ignore"):
        result = fn(work, axis=axis, dtype=_accumulate_dtype(x.dtype))
    if exclusive:
        result = np.concatenate(
            [np.full_like(np.take(result, [0], axis=axis), identity), np.delete(result, -1, axis=axis)],
            axis=axis,
        )
    if reverse:
        result = np.flip(result, axis)
    return out(result, x.dtype)


@kernel("Cumsum", const_inputs=(1,))
def cumsum(x, axis, *, exclusive=False, reverse=False):
    return _scan(x, axis, exclusive, reverse, np.cumsum, 0)


@kernel("Cumprod", const_inputs=(1,))
def cumprod(x, axis, *, exclusive=False, reverse=False):
    return _scan(x, axis, exclusive, reverse, np.cumprod, 1)


# --------------------------------------------------------------------------- segments

_SEGMENT = {
    "Sum": (np.add, lambda dt: 0),
    "Prod": (np.multiply, lambda dt: 1),
    "Max": (np.maximum, _finite_lowest),
    "Min": (np.minimum, _finite_highest),
}


def _segment_reduce(data, ids, num_segments, kind, drop_negative):
    data, ids = np.asarray(data), np.asarray(ids)
    if data.shape[: ids.ndim] != ids.shape:
        raise invalid(
            f"data.shape = {shape_str(data.shape)} does not start with segment_ids.shape = {shape_str(ids.shape)}"
        )
    ufunc, identity = _SEGMENT[kind]
    flat_ids = ids.reshape(-1).astype(np.int64)
    rows = data.reshape((flat_ids.size,) + data.shape[ids.ndim :])
    if drop_negative:
        keep = flat_ids >= 0
        flat_ids, rows = flat_ids[keep], rows[keep]
    bad = flat_ids >= num_segments
    if np.any(bad):
        first = int(np.flatnonzero(bad)[0])
        raise invalid(f"segment_ids[{first}] = {int(flat_ids[first])} is out of range [0, {num_segments})")
    acc = _accumulate_dtype(data.dtype)
    result = np.full((num_segments,) + data.shape[ids.ndim :], identity(data.dtype), dtype=acc)
    with np.errstate(all="ignore"):
        ufunc.at(result, flat_ids, rows.astype(acc))
    return out(result, data.dtype)


def _unsorted(kind):
    def compute(data, segment_ids, num_segments):
        return _segment_reduce(data, segment_ids, int(np.asarray(num_segments)), kind, True)

    return compute


def _sorted(kind):
    def compute(data, segment_ids):
        ids = np.asarray(segment_ids)
        if ids.ndim != 1:
            raise invalid("segment_ids should be a vector.")
        if ids.size != (data.shape[0] if data.ndim else 0):
            raise invalid("segment_ids should be the same size as dimension 0 of input.")
        if ids.size and (np.any(np.diff(ids) < 0) or ids[0] < 0):
            raise invalid("segment ids are not increasing")
        num = int(ids[-1]) + 1 if ids.size else 0
        result = _segment_reduce(data, ids, num, kind, False)
        if kind in ("Max", "Min"):  # TF's sorted segment max/min leave empty segments at 0
            present = np.zeros(num, np.bool_)
            present[ids.astype(np.int64)] = True
            result[~present] = 0
        return result

    return compute


for _kind in _SEGMENT:
    kernel(f"UnsortedSegment{_kind}", const_inputs=(2,))(_unsorted(_kind))
    kernel(f"Segment{_kind}")(_sorted(_kind))


@kernel("SegmentMean")
def segment_mean(data, segment_ids):
    total = _sorted("Sum")(data, segment_ids)
    counts = np.bincount(np.asarray(segment_ids).astype(np.int64), minlength=total.shape[0])
    counts = counts.reshape((-1,) + (1,) * (total.ndim - 1))
    with np.errstate(all="ignore"):
        if data.dtype.kind in "iu":
            return out(_trunc_div(total, np.maximum(counts, 1).astype(data.dtype)), data.dtype)
        return out(total / np.maximum(counts, 1), data.dtype)


# --------------------------------------------------------------------------- bucketing and counting


@kernel("Bucketize")
def bucketize(input, *, boundaries):  # noqa: A002
    bounds = _sorted_bounds(tuple(boundaries))
    return out(bounds.searchsorted(np.asarray(input, np.float64), side="right"), np.int32)


@functools.lru_cache(maxsize=256)  # a node's boundaries are the same on every run: check them once
def _sorted_bounds(boundaries: tuple) -> np.ndarray:
    bounds = np.asarray(boundaries, np.float64)
    if np.any(np.diff(bounds) < 0):
        raise invalid("Expected sorted boundaries")
    bounds.flags.writeable = False
    return bounds


def _count(arr, size, weights, binary_output):
    arr = np.asarray(arr)
    size = int(np.asarray(size))
    if size < 0:
        raise invalid(f"Input size should be non-negative but got {size}.")
    if arr.size and np.min(arr) < 0:
        raise invalid("Input arr must be non-negative!")
    weights = np.asarray(weights)
    has_weights = weights.size > 0
    out_dtype = weights.dtype
    if arr.ndim == 2:
        rows = [
            _count(arr[i], size, weights[i] if has_weights else weights, binary_output)
            for i in range(arr.shape[0])
        ]
        return out(np.stack(rows) if rows else np.zeros((0, size), out_dtype), out_dtype)
    flat = arr.reshape(-1).astype(np.int64)
    keep = flat < size
    if binary_output:
        result = np.zeros(size, out_dtype)
        result[flat[keep]] = 1
        return result
    w = weights.reshape(-1)[keep] if has_weights else None
    return out(np.bincount(flat[keep], weights=w, minlength=size)[:size], out_dtype)


@kernel("Bincount", const_inputs=(1,))
def bincount(arr, size, weights):
    weights = np.asarray(weights)
    return out(_count(arr, size, weights, False), weights.dtype)


@kernel("DenseBincount", const_inputs=(1,))
def dense_bincount(input, size, weights, *, binary_output=False):  # noqa: A002
    if np.asarray(input).ndim > 2:
        raise invalid("Shape must be at most rank 2 but is rank 3")
    return _count(input, size, weights, binary_output)


@kernel("L2Loss")
def l2_loss(t):
    acc = _accumulate_dtype(t.dtype)
    return out(np.sum(np.square(t.astype(acc))) / 2, t.dtype)


@kernel("CumulativeLogsumexp", const_inputs=(1,))
def cumulative_logsumexp(x, axis, *, exclusive=False, reverse=False):
    acc = _accumulate_dtype(x.dtype)
    work = x.astype(acc)
    a = int(np.asarray(axis)) % max(x.ndim, 1)
    if reverse:
        work = np.flip(work, a)
    with np.errstate(all="ignore"):
        result = np.logaddexp.accumulate(work, axis=a)
        if exclusive:
            first = np.full_like(np.take(result, [0], axis=a), -np.inf)
            result = np.concatenate([first, np.delete(result, -1, axis=a)], axis=a)
    if reverse:
        result = np.flip(result, a)
    return out(result, x.dtype)


@kernel("HistogramFixedWidth")
def histogram_fixed_width(values, value_range, nbins, *, dtype=dtypes.DT_INT32):
    n = int(np.asarray(nbins))
    if n <= 0:
        raise invalid(f"nbins should be a positive number, but got '{n}'")
    lo, hi = (float(v) for v in np.asarray(value_range).reshape(-1))
    if lo >= hi:
        raise invalid(
            f"value_range should satisfy value_range[0] < value_range[1], but got '[{lo:g}, {hi:g}]'"
        )
    v = np.asarray(values, np.float64).reshape(-1)
    index = np.clip(np.floor((v - lo) / (hi - lo) * n), 0, n - 1).astype(np.int64)
    return out(np.bincount(index, minlength=n), dtypes.as_numpy_dtype(dtype))
