"""Ragged conversions and bincounts that Keras preprocessing layers emit: RaggedTensorToSparse,
RaggedRange, RaggedTensorToTensor, RaggedBincount, SparseBincount.
"""

from __future__ import annotations

import numpy as np

from runtime import dtypes, errors
from runtime.kernels.registry import kernel


def _invalid(text: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, text)


# --------------------------------------------------------------------------------- ragged


@kernel("RaggedTensorToSparse")
def ragged_tensor_to_sparse(rt_nested_splits, rt_dense_values):
    values = np.asarray(rt_dense_values)
    splits = [np.asarray(s, dtype=np.int64) for s in rt_nested_splits]
    inner = values.shape[1:]
    index_rows = [
        list(prefix) + list(position)
        for prefix in _ragged_rows(splits)
        for position in (np.ndindex(*inner) if inner else [()])
    ]
    rank = len(splits) + values.ndim
    indices = np.array(index_rows, dtype=np.int64).reshape(-1, rank)
    shape = [len(splits[0]) - 1] + [_longest(level) for level in splits] + list(inner)
    return indices, values.reshape(-1), np.array(shape, dtype=np.int64)


def _longest(splits: np.ndarray) -> int:
    return int(np.max(np.diff(splits))) if len(splits) > 1 else 0


def _ragged_rows(splits: list) -> list[tuple]:
    """The ragged index prefix of every innermost value, in order."""
    prefixes = [(i,) for i in range(len(splits[0]) - 1)]
    for level in splits:
        nxt = []
        for prefix, (start, stop) in zip(prefixes, zip(level[:-1].tolist(), level[1:].tolist())):
            nxt += [prefix + (j,) for j in range(stop - start)]
        prefixes = nxt
    return prefixes


@kernel("RaggedRange")
def ragged_range(starts, limits, deltas, *, Tsplits=dtypes.DT_INT64):
    starts, limits, deltas = np.broadcast_arrays(np.asarray(starts), np.asarray(limits), np.asarray(deltas))
    rows, splits = [], [0]
    for s, lim, d in zip(
        starts.reshape(-1).tolist(), limits.reshape(-1).tolist(), deltas.reshape(-1).tolist()
    ):
        if d == 0:
            raise _invalid("Requires delta != 0")
        row = np.arange(s, lim, d, dtype=np.asarray(starts).dtype) if (lim - s) * d > 0 else []
        rows.append(np.asarray(row, dtype=starts.dtype))
        splits.append(splits[-1] + len(row))
    split_dtype = np.int32 if Tsplits == dtypes.DT_INT32 else np.int64
    values = np.concatenate(rows) if rows else np.zeros(0, starts.dtype)
    return np.array(splits, dtype=split_dtype), values.astype(starts.dtype)


@kernel("RaggedTensorToTensor")
def ragged_tensor_to_tensor(shape, values, default_value, row_partition_tensors, *, row_partition_types):
    """A ragged tensor padded to a dense one of ``shape`` (-1 / unknown rank: the bounding box)."""
    values = np.asarray(values)
    types = [t.decode() if isinstance(t, bytes) else t for t in row_partition_types]
    partitions = [np.asarray(p, dtype=np.int64) for p in row_partition_tensors]
    if types and types[0] == "FIRST_DIM_SIZE":
        nrows = int(partitions[0])
        splits = []
        parent = nrows
        for kind, part in zip(types[1:], partitions[1:]):
            if kind != "VALUE_ROWIDS":
                raise errors.UnimplementedError(None, None, f"Unsupported row partition type {kind}")
            counts = np.bincount(part, minlength=parent) if part.size else np.zeros(parent, np.int64)
            splits.append(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))
            parent = int(splits[-1][-1])
    else:
        if any(t != "ROW_SPLITS" for t in types):
            raise errors.UnimplementedError(None, None, f"Unsupported row partition types {types}")
        splits = partitions
    bounding = [len(splits[0]) - 1] + [_longest(level) for level in splits] + list(values.shape[1:])
    requested = np.asarray(shape).reshape(-1).tolist()
    if np.ndim(shape) == 0 or not requested:
        requested = [-1] * len(bounding)
    out_shape = [b if r == -1 else int(r) for r, b in zip(requested, bounding)]
    out = np.empty(out_shape, dtype=values.dtype)
    out[...] = np.asarray(default_value, dtype=values.dtype)
    coords = _ragged_coords(splits)
    count = coords[0].size
    if not count:
        return out
    keep = coords[0] < out_shape[0]
    for c, d in zip(coords[1:], out_shape[1:]):
        keep &= c < d
    rows = values[:count]
    if not keep.all():  # cropped to the requested shape
        coords, rows = [c[keep] for c in coords], rows[keep]
    region = tuple(slice(0, min(a, b)) for a, b in zip(values.shape[1:], out_shape[len(coords) :]))
    out[(*coords, *region)] = rows[(slice(None), *region)]
    return out


def _ragged_coords(splits: list) -> list[np.ndarray]:
    """The ragged index prefix of every innermost value, in order, one array per ragged dim."""
    coords = [np.arange(len(splits[0]) - 1, dtype=np.int64)]
    for level in splits:
        level = np.asarray(level, dtype=np.int64)
        lengths = np.diff(level)
        coords = [np.repeat(c, lengths) for c in coords]
        starts = np.repeat(level[:-1] - level[0], lengths)
        coords.append(np.arange(starts.size, dtype=np.int64) - starts)
    return coords


# --------------------------------------------------------------------------------- bincounts


def _bincount(rows: np.ndarray, nrows: int, values: np.ndarray, size, weights, binary_output: bool):
    size = int(np.asarray(size))
    if size < 0:
        raise _invalid(f"size ({size}) must be non-negative")
    weights = np.asarray(weights)
    if values.size and values.min() < 0:
        raise _invalid("Input must be non-negative")
    out = np.zeros((nrows, size), dtype=weights.dtype)
    keep = values < size
    rows, columns = rows[keep], values[keep].astype(np.int64)
    if binary_output:
        out[rows, columns] = 1
    elif weights.size:
        np.add.at(out, (rows, columns), weights.reshape(-1)[keep])
    else:
        np.add.at(out, (rows, columns), 1)
    return out


@kernel("RaggedBincount")
def ragged_bincount(splits, values, size, weights, *, binary_output=False):
    """Per ragged row, counts (or summed weights, or presence) of each value below ``size``."""
    splits = np.asarray(splits, dtype=np.int64)
    values = np.asarray(values).reshape(-1)
    nrows = len(splits) - 1
    rows = np.repeat(np.arange(nrows, dtype=np.int64), np.diff(splits))
    return _bincount(rows, nrows, values, size, weights, binary_output)


@kernel("SparseBincount")
def sparse_bincount(indices, values, dense_shape, size, weights, *, binary_output=False):
    """Counts per row of a rank-2 SparseTensor (one row of counts for rank 1)."""
    indices = np.asarray(indices, dtype=np.int64)
    values = np.asarray(values).reshape(-1)
    shape = np.asarray(dense_shape).reshape(-1)
    if len(shape) == 1:
        out = _bincount(np.zeros(len(values), np.int64), 1, values, size, weights, binary_output)
        return out.reshape(-1)
    return _bincount(indices[:, 0], int(shape[0]), values, size, weights, binary_output)
