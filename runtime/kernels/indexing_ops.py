"""Indexing kernels: Slice, StridedSlice (every mask), StridedSliceGrad, TensorStridedSliceUpdate,
Gather/GatherV2 (batch_dims), GatherNd, ScatterNd and the TensorScatter ops.

Indices are validated as TF's CPU kernels do: an out-of-range gather or scatter index is an
InvalidArgumentError naming it, never wrapped or clipped.
"""

from __future__ import annotations

import functools

import numpy as np

from runtime.kernels.array_ops import _ints
from runtime.kernels.bounds import in_range
from runtime.kernels.math_ops import invalid, node_name, shape_str
from runtime.kernels.registry import kernel

# --------------------------------------------------------------------------- slicing


@kernel("Slice", const_inputs=(1, 2))
def slice_(input, begin, size):  # noqa: A002
    return np.array(input[_slice_index(input.shape, tuple(_ints(begin)), tuple(_ints(size)))])


@functools.lru_cache(maxsize=4096)  # a graph's slices repeat run after run: check each once
def _slice_index(shape: tuple, begin: tuple, sizes: tuple) -> tuple:
    ndim = len(shape)
    if len(begin) != ndim or len(sizes) != ndim:
        raise invalid(
            f"Expected begin and size arguments to be 1-D tensors of size {ndim}, but got shapes "
            f"{shape_str([len(begin)])} and {shape_str([len(sizes)])} instead."
        )
    index = []
    for d, (b, s) in enumerate(zip(begin, sizes)):
        s = shape[d] - b if s == -1 else s
        if not (0 <= b <= shape[d] and 0 <= s and b + s <= shape[d]):
            raise invalid(
                f"Expected size[{d}] in [0, {shape[d] - b}], but got {s}"
                if 0 <= b <= shape[d]
                else f"Expected begin[{d}] in [0, {shape[d]}], but got {b}"
            )
        index.append(slice(b, b + s))
    return tuple(index)


# --------------------------------------------------------------------------- gathering


def _check_indices(indices, limit):
    if in_range(indices, limit):
        return
    bad = (indices < 0) | (indices >= limit)
    pos = np.unravel_index(int(np.flatnonzero(bad.reshape(-1))[0]), indices.shape)
    where = f"[{','.join(str(int(p)) for p in pos)}]" if pos else ""  # a scalar: "indices = -1"
    raise invalid(f"indices{where} = {int(indices[pos])} is not in [0, {limit})")


@kernel("GatherV2", const_inputs=(2,))
def gather_v2(params, indices, axis, *, batch_dims=0):
    indices = np.asarray(indices)
    a = int(np.asarray(axis))
    if not -params.ndim <= a < params.ndim:
        if a >= params.ndim:  # TF's shape check fires before the kernel's range check
            raise invalid(f"Shape must be at least rank {a + 1} but is rank {params.ndim}")
        raise invalid(f"Expected axis in the range [{-params.ndim}, {params.ndim}), but got {a}")
    a %= params.ndim
    if batch_dims < 0:
        batch_dims += indices.ndim
    if batch_dims > a:
        raise invalid(f"batch_dims ({batch_dims}) must be less than or equal to axis ({a}).")
    if params.shape[:batch_dims] != indices.shape[:batch_dims]:
        raise invalid(
            f"params.shape[{batch_dims - 1}]: {params.shape[batch_dims - 1]} should be equal to "
            f"indices.shape[{batch_dims - 1}]: {indices.shape[batch_dims - 1]}"
        )
    _check_indices(indices, params.shape[a])
    if batch_dims == 0:
        taken = params.take(indices if indices.dtype.kind == "i" else indices.astype(np.int64), axis=a)
        return taken if indices.ndim else np.asarray(taken, params.dtype)  # a 0-d tensor, not a scalar
    batch = params.shape[:batch_dims]
    nb = int(np.prod(batch, dtype=np.int64))
    outer = params.shape[batch_dims:a]
    inner = params.shape[a + 1 :]
    p = params.reshape((nb, int(np.prod(outer, dtype=np.int64)), params.shape[a], -1))
    idx = indices.reshape((nb, -1)).astype(np.int64)
    taken = p[np.arange(nb)[:, None], :, idx]  # (nb, I, outer, inner)
    taken = np.moveaxis(taken, 1, 2)
    return taken.reshape(batch + outer + indices.shape[batch_dims:] + inner)


@kernel("Gather")
def gather(params, indices, *, validate_indices=True):
    return gather_v2(params, indices, 0)


def _gather_nd_flat(params, indices, what, suffix=""):
    depth = indices.shape[-1]
    if depth > params.ndim:
        raise invalid(
            f"index innermost dimension length must be <= params rank; saw: {depth} vs. {params.ndim}"
        )
    flat = indices.reshape(-1, depth).astype(np.int64)
    limits = np.asarray(params.shape[:depth], np.int64)
    bad = np.any((flat < 0) | (flat >= limits), axis=1)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        pos = (
            ",".join(str(int(p)) for p in np.unravel_index(i, indices.shape[:-1])) if indices.ndim > 1 else ""
        )
        raise invalid(
            f"indices[{pos}] = [{', '.join(str(int(v)) for v in flat[i])}] does not index into {what} "
            f"{shape_str(params.shape)}{suffix}"
        )
    return flat, depth


@kernel("GatherNd")
def gather_nd(params, indices, *, bad_indices_policy="", ctx=None):
    indices = np.asarray(indices)
    flat, depth = _gather_nd_flat(params, indices, "param shape", f", node name: {node_name(ctx)}")
    taken = params[tuple(flat.T)] if depth else np.broadcast_to(params, (flat.shape[0],) + params.shape)
    return np.array(taken.reshape(indices.shape[:-1] + params.shape[depth:]))


def _scatter_nd(target, indices, updates, mode, what):
    indices = np.asarray(indices)
    if indices.ndim == 0:
        raise invalid("Indices must be at least 1-D")
    flat, depth = _gather_nd_flat(target, indices, what)
    expected = indices.shape[:-1] + target.shape[depth:]
    if updates.shape != expected:
        raise invalid(
            f"Dimensions [0,{indices.ndim - 1}) of indices[shape={shape_str(indices.shape)}] = "
            f"{shape_str(indices.shape[:-1])} must match dimensions [0,{indices.ndim - 1}) of "
            f"updates[shape={shape_str(updates.shape)}]"
        )
    rows = updates.reshape((flat.shape[0],) + target.shape[depth:])
    key = tuple(flat.T)
    with np.errstate(all="ignore"):
        if mode == "update":
            target[key] = rows
        else:
            {"add": np.add, "sub": np.subtract, "max": np.maximum, "min": np.minimum}[mode].at(
                target, key, rows
            )
    return target


@kernel("ScatterNd", const_inputs=(2,))
def scatter_nd(indices, updates, shape, *, bad_indices_policy=""):
    target = np.zeros(_ints(shape), updates.dtype)
    return _scatter_nd(target, indices, updates, "add", "shape")


def _tensor_scatter(mode):
    def compute(tensor, indices, updates, *, bad_indices_policy=""):
        return _scatter_nd(np.array(tensor, copy=True), indices, updates, mode, "shape")

    return compute


for _mode in ("Update", "Add", "Sub", "Max", "Min"):
    kernel(f"TensorScatter{_mode}")(_tensor_scatter(_mode.lower()))


# --------------------------------------------------------------------------- StridedSlice


def _strided_index(
    shape, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask
):
    """TF's ValidateStridedSliceOp as a numpy index tuple (ints for shrunk dims, None for new axes)."""
    return _strided_index_of(
        tuple(shape),
        tuple(_ints(begin)),
        tuple(_ints(end)),
        tuple(_ints(strides)),
        begin_mask,
        end_mask,
        ellipsis_mask,
        new_axis_mask,
        shrink_axis_mask,
    )


@functools.lru_cache(maxsize=4096)  # a graph's slices repeat run after run: validate each once
def _strided_index_of(
    shape, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask
):
    begin, end, strides = list(begin), list(end), list(strides)
    if not len(begin) == len(end) == len(strides):
        raise invalid(
            "Expected begin, end, and strides to be 1D equal size tensors, but got shapes "
            f"{shape_str([len(begin)])}, {shape_str([len(end)])}, and {shape_str([len(strides)])} instead."
        )
    if ellipsis_mask & (ellipsis_mask - 1):
        raise invalid("Multiple ellipses in slice spec not allowed")
    n = len(begin)
    if not ellipsis_mask:  # an implicit ellipsis at the end
        ellipsis_mask = 1 << n
        begin, end, strides = begin + [0], end + [0], strides + [1]
        n += 1
    ellipsis_at = ellipsis_mask.bit_length() - 1
    new_after = sum(1 for i in range(ellipsis_at + 1, n) if new_axis_mask >> i & 1)
    ndim = len(shape)
    index: list = []
    full = 0
    for i in range(n):
        bit = 1 << i
        if ellipsis_mask & bit:
            stop = min(ndim - (n - i) + 1 + new_after, ndim)
            while full < stop:
                index.append(slice(None))
                full += 1
        elif new_axis_mask & bit:
            index.append(None)
        else:
            if full >= ndim:
                raise invalid(f"Index out of range using input dim {full}; input has only {ndim} dims")
            index.append(
                _strided_dim(
                    shape[full],
                    full,
                    begin[i],
                    end[i],
                    strides[i],
                    begin_mask & bit,
                    end_mask & bit,
                    shrink_axis_mask & bit,
                )
            )
            full += 1
    return tuple(index)


def _strided_dim(dim, i, b, e, s, b_masked, e_masked, shrink):
    if s == 0:
        raise invalid(f"strides[{i}] must be non-zero")
    if shrink:
        fwd = dim + b if b < 0 else b
        if not 0 <= fwd < dim:
            raise invalid(f"slice index {fwd} of dimension {i} out of bounds.")
        return fwd
    low, high = (0, dim) if s > 0 else (-1, dim - 1)

    def canonical(x, masked, is_end):
        if masked:
            return (high if is_end else low) if s > 0 else (low if is_end else high)
        fwd = dim + x if x < 0 else x
        return min(max(fwd, low), high)

    b, e = canonical(b, b_masked, False), canonical(e, e_masked, True)
    if b < 0:  # negative stride starting before element 0: empty
        return slice(0, 0)
    return slice(b, None if e < 0 else e, s)


@kernel("StridedSlice", const_inputs=(1, 2, 3))
def strided_slice(
    input,  # noqa: A002
    begin,
    end,
    strides,
    *,
    begin_mask=0,
    end_mask=0,
    ellipsis_mask=0,
    new_axis_mask=0,
    shrink_axis_mask=0,
):
    index = _strided_index(
        input.shape, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask
    )
    return np.array(input[index])


@kernel("StridedSliceGrad", const_inputs=(0, 1, 2, 3))
def strided_slice_grad(
    shape,
    begin,
    end,
    strides,
    dy,
    *,
    begin_mask=0,
    end_mask=0,
    ellipsis_mask=0,
    new_axis_mask=0,
    shrink_axis_mask=0,
):
    dims = tuple(_ints(shape))
    index = _strided_index(
        dims, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask
    )
    result = np.zeros(dims, dy.dtype)
    if result[index].shape != dy.shape:
        raise invalid(f"shape of dy was {shape_str(dy.shape)} instead of {shape_str(result[index].shape)}")
    result[index] = dy
    return result


@kernel("TensorStridedSliceUpdate", const_inputs=(1, 2, 3))
def tensor_strided_slice_update(
    input,  # noqa: A002
    begin,
    end,
    strides,
    value,
    *,
    begin_mask=0,
    end_mask=0,
    ellipsis_mask=0,
    new_axis_mask=0,
    shrink_axis_mask=0,
):
    index = _strided_index(
        input.shape, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask
    )
    result = np.array(input, copy=True)
    target = result[index].shape
    if target != value.shape:
        raise invalid(
            f"Cannot update a slice of shape {shape_str(target)} with a value of shape {shape_str(value.shape)}"
        )
    result[index] = value
    return result
