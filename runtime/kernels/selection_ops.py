"""Value-dependent array kernels: selecting by a condition (Select, SelectV2, Where), OneHot, unique
values (Unique, UniqueV2 and their WithCounts forms, ListDiff), sorted search (LowerBound,
UpperBound) and UnravelIndex.

Split out of ``array_ops.py`` (whose helpers they share) to keep modules small. Errors carry TF's
texts where a client could see them.
"""

from __future__ import annotations

import numpy as np

from runtime import dtypes
from runtime.kernels.array_ops import _ints
from runtime.kernels.math_ops import broadcast, invalid, node_name, out, shape_str
from runtime.kernels.registry import kernel

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


# --------------------------------------------------------------------------- one-hot, unique values, search


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


@kernel("ListDiff")
def list_diff(x, y, *, out_idx=dtypes.DT_INT32):
    keep = ~np.isin(x, y)
    return x[keep], out(np.flatnonzero(keep), dtypes.as_numpy_dtype(out_idx))


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
