"""Sparse and feature-column ops: SparseTensor reshaping and filling, segment reductions over
embeddings, feature crosses (TF's FingerprintCat64 hashing), and the ragged conversions that
Keras preprocessing layers emit.

A SparseTensor arrives as its three tensors: ``indices`` (int64 [N, rank]), ``values`` ([N]) and
``dense_shape`` (int64 [rank]).
"""

from __future__ import annotations

import itertools

import farmhash
import numpy as np

from runtime import dtypes, errors
from runtime.hashing import fingerprint_cat64, siphash24
from runtime.kernels.registry import kernel


def _invalid(text: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, text)


def _list(array) -> str:
    return "[" + ",".join(str(int(d)) for d in np.asarray(array).reshape(-1)) + "]"


# --------------------------------------------------------------------------------- reshaping


@kernel("SparseReshape")
def sparse_reshape(input_indices, input_shape, new_shape):
    indices = np.asarray(input_indices, dtype=np.int64)
    shape = np.asarray(input_shape, dtype=np.int64)
    target = np.asarray(new_shape, dtype=np.int64).copy()
    dense_size = int(np.prod(shape))
    unknown = np.flatnonzero(target == -1)
    if len(unknown) > 1:
        raise _invalid(f"only one output dimension may be -1, not both {unknown[0]} and {unknown[1]}")
    for d, size in enumerate(target):
        if size < -1:
            raise _invalid(f"size {d} must be non-negative, not {size}")
    known = int(np.prod(target[target != -1]))
    if len(unknown):
        if known == 0 or dense_size % known:
            if known == 0 and dense_size == 0:
                target[unknown[0]] = 0
            else:
                shown = np.where(target == -1, 1, target)
                raise _invalid(
                    f"Input to reshape is a SparseTensor with {dense_size} dense values, but the requested "
                    f"shape requires a multiple of {known}. input_shape={_list(shape)} "
                    f"output_shape={_list(shown)}"
                )
        else:
            target[unknown[0]] = dense_size // known
    if int(np.prod(target)) != dense_size:
        raise _invalid(
            f"Input to reshape is a tensor with {dense_size} dense values, but the requested shape has "
            f"{int(np.prod(target))}. input_shape={_list(shape)} output_shape={_list(target)}"
        )
    if len(indices) == 0 or shape.size == 0:
        return np.zeros((len(indices), len(target)), np.int64), target
    linear = np.ravel_multi_index(indices.T, shape) if dense_size else np.zeros(len(indices), np.int64)
    out = np.stack(np.unravel_index(linear, target), axis=1).astype(np.int64) if target.size else None
    if out is None:
        out = np.zeros((len(indices), 0), np.int64)
    return out, target


@kernel("SparseReorder")
def sparse_reorder(input_indices, input_values, input_shape):
    indices = np.asarray(input_indices, dtype=np.int64)
    values = np.asarray(input_values)
    if indices.shape[0] == 0:
        return indices, values
    order = np.lexsort(indices.T[::-1])
    return indices[order], values[order]


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
    rows = indices[:, 0] if len(indices) else np.zeros(0, np.int64)
    for i, row in enumerate(rows.tolist()):
        if row < 0 or row >= rows_total:
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
    shape = tuple(int(d) for d in np.asarray(output_shape).reshape(-1))
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
    if count:
        out[tuple(indices.T)] = values
    return out


def _validate_sorted(indices: np.ndarray, shape: tuple) -> None:
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


def _segment_reduce(data, indices, segment_ids, num_segments, mode: str):
    data = np.asarray(data)
    idx = np.asarray(indices).reshape(-1).astype(np.int64)
    seg = np.asarray(segment_ids).reshape(-1).astype(np.int64)
    if idx.shape != seg.shape:
        raise _invalid(f"segment_ids and indices should have same size. segment_ids.shape = "
                       f"{_list(np.shape(segment_ids))} indices.shape = {_list(np.shape(indices))}")  # fmt: skip
    if num_segments is not None:
        rows = int(np.asarray(num_segments))
    else:
        rows = int(seg[-1]) + 1 if seg.size else 0
    if seg.size:
        if np.any(np.diff(seg) < 0):
            raise _invalid("segment ids are not increasing")
        if seg[-1] >= rows:
            raise _invalid("segment ids must be < num_segments")
        if seg[0] < 0:
            raise _invalid("segment ids must be >= 0")
    bad = np.flatnonzero((idx < 0) | (idx >= data.shape[0]))
    if bad.size:
        i = int(bad[0])
        raise _invalid(f"Bad: indices[{i}] == {idx[i]} out of range [0, {data.shape[0]})")
    out = np.zeros((rows, *data.shape[1:]), dtype=data.dtype)
    np.add.at(out, seg, data[idx])
    if mode != "sum":
        counts = np.bincount(seg, minlength=rows).astype(np.float64)
        counts = np.sqrt(counts) if mode == "sqrtn" else counts
        scale = np.where(counts > 0, counts, 1).reshape((rows,) + (1,) * (data.ndim - 1))
        out = (out / scale.astype(data.dtype)).astype(data.dtype)
    return out


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


# --------------------------------------------------------------------------------- crosses


def _cross_columns(indices, values, shapes, dense_inputs) -> tuple[int, list]:
    """(batch size, per column: per row the list of its features), sparse columns first."""
    batch = None
    for shape in shapes:
        batch = int(np.asarray(shape).reshape(-1)[0])
        break
    for dense in dense_inputs:
        if batch is None:
            batch = np.asarray(dense).shape[0]
    batch = batch or 0
    columns = []
    for ind, val in zip(indices, values):
        ind = np.asarray(ind, dtype=np.int64)
        rows = [[] for _ in range(batch)]
        for row, value in zip(ind[:, 0].tolist() if len(ind) else [], np.asarray(val).tolist()):
            rows[row].append(value)
        columns.append(rows)
    for dense in dense_inputs:
        dense = np.asarray(dense)
        columns.append([list(r) for r in dense.reshape(dense.shape[0], -1).tolist()])
    return batch, columns


def _crossed_output(batch: int, columns: list, combine, out_dtype) -> tuple:
    out_indices, out_values, longest = [], [], 0
    for b in range(batch):
        features = [column[b] for column in columns]
        count = 0
        if columns and all(features):
            for combo in itertools.product(*features):
                out_indices.append((b, count))
                out_values.append(combine(combo))
                count += 1
        longest = max(longest, count)
    indices = np.array(out_indices, dtype=np.int64).reshape(-1, 2)
    values = np.empty(len(out_values), dtype=out_dtype)
    values[:] = out_values
    return indices, values, np.array([batch, longest], dtype=np.int64)


def _as_text(value) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def _hash_crosser(num_buckets: int, hash_key: int):
    def feature_hash(value) -> int:
        if isinstance(value, bytes):
            return farmhash.fingerprint64(value)
        return int(value) & 0xFFFFFFFFFFFFFFFF

    def combine(combo) -> int:
        hashed = hash_key
        for value in combo:
            hashed = fingerprint_cat64(hashed, feature_hash(value))
        return hashed % num_buckets if num_buckets > 0 else hashed % (2**63 - 1)

    return combine


def _check_internal_type(values, dense_inputs) -> None:
    """A string cross takes string inputs only (``tf.sparse.cross`` casts ints to strings first)."""
    for what, inputs in (("Input values", values), ("Dense inputs", dense_inputs)):
        for value in inputs:
            dtype = dtypes.from_numpy(np.asarray(value).dtype)
            if dtype != dtypes.DT_STRING:
                raise _invalid(f"{what} should be of internal type {dtypes.DT_STRING} but received {dtype}")


@kernel("SparseCross")
def sparse_cross(
    indices, values, shapes, dense_inputs, *, hashed_output, num_buckets, hash_key, out_type=None,
    internal_type=None
):  # fmt: skip
    if internal_type == dtypes.DT_STRING:
        _check_internal_type(values, dense_inputs)
    batch, columns = _cross_columns(indices, values, shapes, dense_inputs)
    if hashed_output:
        return _crossed_output(batch, columns, _hash_crosser(num_buckets, hash_key), np.int64)
    return _crossed_output(batch, columns, lambda combo: b"_X_".join(_as_text(v) for v in combo), object)


@kernel("SparseCrossV2")
def sparse_cross_v2(indices, values, shapes, dense_inputs, sep):
    batch, columns = _cross_columns(indices, values, shapes, dense_inputs)
    separator = np.asarray(sep, dtype=object).item()
    return _crossed_output(batch, columns, lambda combo: separator.join(_as_text(v) for v in combo), object)


@kernel("SparseCrossHashed")
def sparse_cross_hashed(indices, values, shapes, dense_inputs, num_buckets, strong_hash, salt):
    """TF's V2 hashed cross: the first feature's hash seeds the chain (no hash key); strings hash
    with FarmHash, or SipHash keyed by ``salt`` when ``strong_hash``. Integer inputs are refused:
    their hashing is not reproduced yet."""
    for value in list(values) + list(dense_inputs):
        if np.asarray(value).dtype != object:
            raise errors.UnimplementedError(
                None, None, "SparseCrossHashed over integer features is not supported; cast them to strings"
            )
    batch, columns = _cross_columns(indices, values, shapes, dense_inputs)
    k0, k1 = (int(s) & 0xFFFFFFFFFFFFFFFF for s in np.asarray(salt).reshape(-1)[:2])
    strong = bool(np.asarray(strong_hash))
    buckets = int(np.asarray(num_buckets))

    def combine(combo) -> int:
        hashes = [siphash24(k0, k1, v) if strong else farmhash.fingerprint64(v) for v in combo]
        hashed = hashes[0]
        for value in hashes[1:]:
            hashed = fingerprint_cat64(hashed, value)
        return hashed % buckets if buckets > 0 else hashed % (2**63 - 1)

    return _crossed_output(batch, columns, combine, np.int64)


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
    prefixes = _ragged_rows(splits)
    for position, prefix in enumerate(prefixes):
        if all(p < d for p, d in zip(prefix, out_shape)):
            inner = np.asarray(values[position])
            target = out[prefix]
            if inner.ndim:
                region = tuple(slice(0, min(a, b)) for a, b in zip(inner.shape, target.shape))
                target[region] = inner[region]
            else:
                out[prefix] = inner
    return out


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
