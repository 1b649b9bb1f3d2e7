"""Sparse ops of feature columns: SparseTensor reshaping, reordering and filling, SparseToDense,
segment reductions over embeddings, SparseReduceSum and SparseTensorDenseMatMul. Crosses live in
``sparse_cross_ops.py``, ragged conversions and bincounts in ``ragged_ops.py``.

A SparseTensor arrives as its three tensors: ``indices`` (int64 [N, rank]), ``values`` ([N]) and
``dense_shape`` (int64 [rank]).

Serving runs these at batch 1 to 32 with a handful of entries, where numpy's fixed cost per call
dominates: the kernels check and compute small inputs with Python lists, and take TF's own
shortcuts (a reshape to the same shape forwards its indices; rows that need no filling pass
through).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from runtime import errors
from runtime.kernels.bounds import SMALL, in_range
from runtime.kernels.registry import kernel


def _invalid(text: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, text)


def _list(array) -> str:
    return "[" + ",".join(str(int(d)) for d in np.asarray(array).reshape(-1)) + "]"


# --------------------------------------------------------------------------------- reshaping


def _reshape_target(shape: list[int], target: list[int]) -> list[int]:
    """``new_shape`` with its -1 resolved, or TF's error (products in Python ints, no overflow)."""
    dense_size = math.prod(shape)
    unknown = [d for d, size in enumerate(target) if size == -1]
    if len(unknown) > 1:
        raise _invalid(f"only one output dimension may be -1, not both {unknown[0]} and {unknown[1]}")
    for d, size in enumerate(target):
        if size < -1:
            raise _invalid(f"size {d} must be non-negative, not {size}")
    known = math.prod(size for size in target if size != -1)
    target = list(target)
    if unknown:
        if known == 0 or dense_size % known:
            if known == 0 and dense_size == 0:
                target[unknown[0]] = 0
            else:
                shown = [1 if size == -1 else size for size in target]
                raise _invalid(
                    f"Input to reshape is a SparseTensor with {dense_size} dense values, but the requested "
                    f"shape requires a multiple of {known}. input_shape={_list(shape)} "
                    f"output_shape={_list(shown)}"
                )
        else:
            target[unknown[0]] = dense_size // known
    if math.prod(target) != dense_size:
        raise _invalid(
            f"Input to reshape is a tensor with {dense_size} dense values, but the requested shape has "
            f"{math.prod(target)}. input_shape={_list(shape)} output_shape={_list(target)}"
        )
    return target


@kernel("SparseReshape")
def sparse_reshape(input_indices, input_shape, new_shape):
    indices = np.asarray(input_indices, dtype=np.int64)
    shape = np.asarray(input_shape).reshape(-1).tolist()
    target = _reshape_target(shape, np.asarray(new_shape).reshape(-1).tolist())
    out_shape = np.array(target, np.int64)
    if target == shape:  # as TF's reshape_util: the input indices are forwarded
        return indices, out_shape
    if len(indices) == 0 or not shape:
        return np.zeros((len(indices), len(target)), np.int64), out_shape
    if not target:
        return np.zeros((len(indices), 0), np.int64), out_shape
    linear = np.ravel_multi_index(indices.T, shape) if math.prod(shape) else np.zeros(len(indices), np.int64)
    return np.stack(np.unravel_index(linear, target), axis=1).astype(np.int64), out_shape


@kernel("SparseReorder")
def sparse_reorder(input_indices, input_values, input_shape):
    indices = np.asarray(input_indices, dtype=np.int64)
    values = np.asarray(input_values)
    if indices.shape[0] == 0:
        return indices, values
    order = np.lexsort(indices.T[::-1])
    return indices[order], values[order]


def _rows_in_order_none_empty(rows: np.ndarray, rows_total: int) -> bool:
    """Whether ``rows`` runs 0, 1, ..., rows_total - 1 in order, each row at least once."""
    if rows.size == 0:
        return rows_total == 0
    if rows.size <= SMALL:
        listed = rows.tolist()
        if listed[0] != 0 or listed[-1] != rows_total - 1:
            return False
        return all(0 <= b - a <= 1 for a, b in zip(listed, listed[1:]))
    if rows[0] != 0 or rows[-1] != rows_total - 1:
        return False
    steps = np.diff(rows)
    return bool(steps.min() >= 0) and bool(steps.max() <= 1)


def _rows_sorted_in_range(rows: np.ndarray, rows_total: int) -> bool:
    """Whether ``rows`` is non-decreasing within [0, rows_total) (what ParseExample and
    SparseReshape give): then no entry moves past another, only fills go in between."""
    if rows.size == 0 or rows.size <= SMALL:
        listed = rows.tolist()
        return bool(listed) and listed[0] >= 0 and listed[-1] < rows_total and listed == sorted(listed)
    return bool(rows[0] >= 0) and bool(rows[-1] < rows_total) and not np.any(rows[1:] < rows[:-1])


def _fill_sorted(indices, values, rows, rows_total: int, default_value) -> tuple:
    """SparseFillEmptyRows of row-sorted entries: an entry moves down by the empty rows before
    its row; the fill of empty row r goes where r would be inserted, after earlier fills."""
    empty = np.bincount(rows, minlength=rows_total) == 0
    empty_rows = np.flatnonzero(empty)
    reverse = np.arange(len(rows), dtype=np.int64) + np.cumsum(empty)[rows]
    fills = np.searchsorted(rows, empty_rows) + np.arange(len(empty_rows))
    out_indices = np.zeros((len(rows) + len(empty_rows), indices.shape[1]), np.int64)
    out_values = np.empty(len(out_indices), dtype=values.dtype)
    out_indices[reverse] = indices
    out_values[reverse] = values
    out_indices[fills, 0] = empty_rows
    out_values[fills] = np.asarray(default_value).reshape(-1)[0]
    return out_indices, out_values, empty, reverse


@kernel("SparseFillEmptyRows")
def sparse_fill_empty_rows(indices, values, dense_shape, default_value):
    """Every empty row gets one entry (row, 0, ...) = default; rows come out in order, entries of
    a row in their input order. Outputs: indices, values, empty_row_indicator, reverse_index_map."""
    indices = np.asarray(indices, dtype=np.int64)
    values = np.asarray(values)
    shape = np.asarray(dense_shape, dtype=np.int64)
    if np.asarray(default_value).size != 1:
        raise _invalid(f"default_value must be a scalar, saw: {list(np.shape(default_value))}")
    if indices.ndim != 2:
        raise _invalid(f"indices must be a matrix, saw: {list(indices.shape)}")
    if shape.ndim != 1:
        raise _invalid(f"dense_shape must be a vector, saw: {list(shape.shape)}")
    if values.ndim != 1 or values.shape[0] != indices.shape[0]:
        raise _invalid(f"values must be a vector, saw: {list(values.shape)}")
    if shape.size == 0:
        raise _invalid("Dense shape cannot be empty.")
    rows_total = int(shape[0])
    rows = indices[:, 0]
    if _rows_in_order_none_empty(rows, rows_total):  # nothing to fill, nothing moves
        return indices, values, np.zeros(rows_total, np.bool_), np.arange(len(rows), dtype=np.int64)
    if _rows_sorted_in_range(rows, rows_total):
        return _fill_sorted(indices, values, rows, rows_total, default_value)
    if not in_range(rows, rows_total):
        i = int(np.flatnonzero((rows < 0) | (rows >= rows_total))[0])
        row = int(rows[i])
        raise _invalid(f"indices({i}, 0) is invalid: {row} >= {rows_total}" if row >= 0 else
                       f"indices({i}, 0) is invalid: {row} < 0")  # fmt: skip
    counts = np.bincount(rows, minlength=rows_total) if rows_total else np.zeros(0, np.int64)
    empty = counts == 0
    slots = np.maximum(counts, 1)
    starts = np.cumsum(slots) - slots
    order = np.argsort(rows, kind="stable")
    rank_in_row = np.empty(len(rows), np.int64)
    sorted_rows = rows[order]
    row_starts = np.cumsum(counts) - counts
    rank_in_row[order] = np.arange(len(rows)) - row_starts[sorted_rows]
    reverse = (starts[rows] + rank_in_row).astype(np.int64) if len(rows) else np.zeros(0, np.int64)
    total = int(slots.sum()) if rows_total else 0
    out_indices = np.zeros((total, indices.shape[1]), np.int64)
    out_values = np.empty(total, dtype=values.dtype)
    out_indices[reverse] = indices
    out_values[reverse] = values
    empty_rows = np.flatnonzero(empty)
    out_indices[starts[empty_rows], 0] = empty_rows
    out_values[starts[empty_rows]] = np.asarray(default_value).reshape(-1)[0]
    return out_indices, out_values, empty, reverse


@kernel("SparseToDense")
def sparse_to_dense(sparse_indices, output_shape, sparse_values, default_value, *, validate_indices=True):
    indices = np.asarray(sparse_indices)
    shape = tuple(np.asarray(output_shape).reshape(-1).tolist())
    values = np.asarray(sparse_values)
    if indices.ndim == 0:
        indices = indices.reshape(1, 1)
    elif indices.ndim == 1:
        indices = indices.reshape(-1, 1) if len(shape) == 1 else indices.reshape(1, -1)
    count = indices.shape[0]
    if values.ndim and values.shape[0] != count:
        raise _invalid(f"sparse_values has incorrect shape {_list(values.shape)}, should be [] or [{count}]")
    if indices.shape[1] != len(shape):
        raise _invalid(
            f"sparse_indices should be a scalar, vector, or matrix, got shape {_list(np.shape(sparse_indices))}"
        )
    out = np.full(shape, np.asarray(default_value).reshape(()), dtype=values.dtype)
    if validate_indices and count:
        _validate_sorted(indices, shape)
        if values.ndim and count == out.size:  # sorted, unique, in bounds: every cell, in order
            return values.reshape(shape)
    if count:
        out[tuple(indices.T)] = values
    return out


def _validate_sorted(indices: np.ndarray, shape: tuple) -> None:
    if len(indices) > 1 and 0 < math.prod(shape) < 2**62:
        # In bounds and strictly increasing row-major positions: sorted and unique, TF's checks
        # pass. As unsigned, a negative index is above every bound: one comparison checks both.
        bounds, strides = _layout(shape)
        wide = indices.astype(np.int64, copy=False)
        if (wide.view(np.uint64) < bounds).all():
            positions = wide @ strides
            if (positions[1:] > positions[:-1]).all():
                return
    _first_invalid(indices, shape)


@functools.lru_cache(maxsize=256)
def _layout(shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(bounds as uint64, row-major strides as int64) of a dense shape; read-only, built once."""
    bounds = np.asarray(shape, np.uint64)
    strides = np.asarray([math.prod(shape[d + 1 :]) for d in range(len(shape))], np.int64)
    bounds.flags.writeable = strides.flags.writeable = False
    return bounds, strides


def _first_invalid(indices: np.ndarray, shape: tuple) -> None:
    """TF's error for the first index out of bounds, repeated or out of order, in order."""
    previous = None
    for n, index in enumerate(indices.tolist()):
        if any(i < 0 or i >= d for i, d in zip(index, shape)):
            raise _invalid(
                f"indices[{n}] = {_list(index)} is out of bounds: need 0 <= index < {_list(shape)}"
            )
        if previous is not None:
            if index == previous:
                raise _invalid(f"indices[{n}] = {_list(index)} is repeated")
            if index < previous:
                raise _invalid(
                    f"indices[{n}] = {_list(index)} is out of order. Many sparse ops require sorted "
                    "indices.\n    Use `tf.sparse.reorder` to create a correctly ordered copy."
                )
        previous = index


# --------------------------------------------------------------------------------- reductions


def _check_segments(seg: np.ndarray, rows: int) -> bool:
    """TF's checks of sorted segment ids below ``rows``; True when they are exactly 0..rows-1."""
    if not seg.size:
        return rows == 0
    if seg.size <= SMALL:
        listed = seg.tolist()
        steps = [b - a for a, b in zip(listed, listed[1:])]
        first, last = listed[0], listed[-1]
        increasing = all(step >= 0 for step in steps)
        one_each = all(step == 1 for step in steps)
    else:
        steps = np.diff(seg)
        first, last = int(seg[0]), int(seg[-1])
        increasing = not steps.size or bool(steps.min() >= 0)
        one_each = not steps.size or bool(steps.min() == 1 == steps.max())
    if not increasing:
        raise _invalid("segment ids are not increasing")
    if last >= rows:
        raise _invalid("segment ids must be < num_segments")
    if first < 0:
        raise _invalid("segment ids must be >= 0")
    return one_each and first == 0 and last == rows - 1


def _segment_reduce(data, indices, segment_ids, num_segments, mode: str):
    data = np.asarray(data)
    idx = np.asarray(indices).reshape(-1)
    seg = np.asarray(segment_ids).reshape(-1)
    if idx.shape != seg.shape:
        raise _invalid(f"segment_ids and indices should have same size. segment_ids.shape = "
                       f"{_list(np.shape(segment_ids))} indices.shape = {_list(np.shape(indices))}")  # fmt: skip
    if num_segments is not None:
        rows = int(np.asarray(num_segments))
    else:
        rows = int(seg[-1]) + 1 if seg.size else 0
    one_each = _check_segments(seg, rows)
    if not in_range(idx, data.shape[0]):
        i = int(np.flatnonzero((idx < 0) | (idx >= data.shape[0]))[0])
        raise _invalid(f"Bad: indices[{i}] == {idx[i]} out of range [0, {data.shape[0]})")
    gathered = data.take(idx, axis=0)
    if one_each:  # one row per segment: its sum, mean and sqrt-n are the row itself
        return gathered
    out = np.zeros((rows, *data.shape[1:]), dtype=data.dtype)
    np.add.at(out, seg, gathered)  # in order, as TF adds the rows of a segment (up to 9 of them)
    if mode == "sum":
        return out
    present, counts = _runs(seg)
    scale = np.asarray(counts, np.float64)
    scale = (np.sqrt(scale) if mode == "sqrtn" else scale).astype(data.dtype)
    scale = scale.reshape((-1,) + (1,) * (data.ndim - 1))
    if len(present) == rows:  # no empty segment
        return (out / scale).astype(data.dtype, copy=False)
    out[present] = (out[present] / scale).astype(data.dtype, copy=False)
    return out


def _runs(seg: np.ndarray) -> tuple:
    """Each run of equal (sorted) segment ids: its id and its length."""
    if seg.size <= SMALL:
        listed = seg.tolist()
        starts = [0] + [i for i in range(1, len(listed)) if listed[i] != listed[i - 1]]
        ends = starts[1:] + [len(listed)]
        return [listed[i] for i in starts], [b - a for a, b in zip(starts, ends)]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(seg)) + 1))
    return seg[starts], np.diff(np.append(starts, seg.size))


@kernel("SparseSegmentSum")
def sparse_segment_sum(data, indices, segment_ids):
    return _segment_reduce(data, indices, segment_ids, None, "sum")


@kernel("SparseSegmentSumWithNumSegments")
def sparse_segment_sum_with_num_segments(data, indices, segment_ids, num_segments):
    return _segment_reduce(data, indices, segment_ids, num_segments, "sum")


@kernel("SparseSegmentMean")
def sparse_segment_mean(data, indices, segment_ids):
    return _segment_reduce(data, indices, segment_ids, None, "mean")


@kernel("SparseSegmentMeanWithNumSegments")
def sparse_segment_mean_with_num_segments(data, indices, segment_ids, num_segments):
    return _segment_reduce(data, indices, segment_ids, num_segments, "mean")


@kernel("SparseSegmentSqrtN")
def sparse_segment_sqrt_n(data, indices, segment_ids):
    return _segment_reduce(data, indices, segment_ids, None, "sqrtn")


@kernel("SparseSegmentSqrtNWithNumSegments")
def sparse_segment_sqrt_n_with_num_segments(data, indices, segment_ids, num_segments):
    return _segment_reduce(data, indices, segment_ids, num_segments, "sqrtn")


def _densify(indices, values, shape) -> np.ndarray:
    indices = np.asarray(indices, dtype=np.int64)
    values = np.asarray(values)
    out = np.zeros(tuple(int(d) for d in np.asarray(shape).reshape(-1)), dtype=values.dtype)
    if len(indices):
        np.add.at(out, tuple(indices.T), values)
    return out


@kernel("SparseReduceSum")
def sparse_reduce_sum(input_indices, input_values, input_shape, reduction_axes, *, keep_dims=False):
    dense = _densify(input_indices, input_values, input_shape)
    axes = np.asarray(reduction_axes).reshape(-1).tolist()
    rank = dense.ndim
    for axis in axes:
        if not -rank <= axis < rank:
            raise _invalid(f"Invalid reduction dimension {axis}, for input with {rank} dimensions.")
    axes = tuple(sorted({a % rank for a in axes}))
    return np.sum(dense, axis=axes, keepdims=keep_dims, dtype=dense.dtype)


@kernel("SparseTensorDenseMatMul")
def sparse_tensor_dense_mat_mul(a_indices, a_values, a_shape, b, *, adjoint_a=False, adjoint_b=False):
    indices = np.asarray(a_indices, dtype=np.int64)
    values = np.asarray(a_values)
    shape = [int(d) for d in np.asarray(a_shape).reshape(-1)]
    b = np.asarray(b)
    if adjoint_b:
        b = np.conj(b.T)
    rows, inner = (shape[1], shape[0]) if adjoint_a else (shape[0], shape[1])
    if b.shape[0] != inner:
        raise _invalid(
            f"Cannot multiply A and B because inner dimension does not match: {inner} vs. {b.shape[0]}.  "
            "Did you forget a transpose?  Dimensions of A: "
            f"[{shape[0]}, {shape[1]}).  Dimensions of B: {_list(np.asarray(b).shape)}"
        )
    out = np.zeros((rows, b.shape[1]), dtype=b.dtype)
    if len(indices):
        r, c = (indices[:, 1], indices[:, 0]) if adjoint_a else (indices[:, 0], indices[:, 1])
        v = np.conj(values) if adjoint_a else values
        for k in range(len(indices)):  # TF's accumulation order: one nonzero at a time
            out[r[k]] += v[k] * b[c[k]]
    return out
