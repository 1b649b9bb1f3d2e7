"""Feature columns' subgraphs as one kernel each: ``_BucketizedSparseTensor`` and
``_IndicatorCounts``.

``_BucketizedSparseTensor``: a bucketized feature column's SparseTensor as one kernel.

When a linear model or a crossed column reads a ``bucketized_column``, TF's feature columns
turn the ``Bucketize`` output ``x`` [B, D] into a SparseTensor with about 20 ops of shape
plumbing (``Shape``/``StridedSlice`` for B, ``Range``/``ExpandDims``/``Tile``/``Reshape`` for the
row of each id, ``Range``/``Tile`` for its column, ``Pack``/``Transpose``/``Cast`` into indices,
``Mul``/``AddV2`` offsetting the ids of column j by j * num_buckets). Delegation
(``runtime/onnx/bucketized_fusion.py``) replaces a matched instance with this op; it has no TF
op definition.

The result for ``x`` of batch B (its first dimension), ``source_dimension`` D and
``num_buckets`` K: ``indices`` int64 [B*D, 2], row-major (b, j) pairs; ``values``
``x.reshape(-1) + K * j`` in x's dtype (wrapping as TF's AddV2 does); ``dense_shape`` int64
[B, D]. Errors are the subgraph's: x of rank 0 (the ``StridedSlice``), an x not of B*D elements
(the ``AddV2``'s broadcast).

``_IndicatorCounts``: an ``indicator_column``'s ``reduce_sum(one_hot(SparseToDense(...), depth,
1, 0), axis=-2)``, fused by ``runtime/onnx/indicator_fusion.py``. Its inputs are SparseToDense's
and ``depth`` an attr; the result is, for each row of the dense ids (default_value filling the
cells no index names), how many of its ids equal each of 0..depth-1, in ``T``: ids outside
[0, depth) count nowhere, as one_hot leaves their rows off. Counts are integers no larger than the
row width, so summing ones in any order gives them exactly; where they might not (a float32 row
wider than 2**24) and for a dense of rank 0 (the Sum's axis error), the kernel runs the three ops.
SparseToDense's errors come first, from SparseToDense's own kernel.
"""

from __future__ import annotations

import functools

import numpy as np

from runtime import dtypes, errors
from runtime.kernels.registry import kernel, lookup
from runtime.kernels.selection_ops import one_hot
from runtime.kernels.sparse_ops import sparse_to_dense

OP_TYPE = "_BucketizedSparseTensor"
INDICATOR_OP_TYPE = "_IndicatorCounts"


@kernel(OP_TYPE, quiet=True)
def bucketized_sparse_tensor(x, *, source_dimension: int, num_buckets: int):
    """See the module docstring: (indices, values, dense_shape)."""
    x = np.asarray(x)
    if x.ndim == 0:
        raise errors.InvalidArgumentError(None, None, "slice index 0 of dimension 0 out of bounds.")
    batch, width = x.shape[0], int(source_dimension)
    flat = x.reshape(-1)
    count = batch * width
    offsets = _offsets(width, int(num_buckets), flat.dtype)
    if flat.size == count:
        values = (flat.reshape(batch, width) + offsets).reshape(-1)
    elif flat.size == 1 or count == 1:  # AddV2 broadcasts a single element
        values = flat + np.tile(offsets, batch)
    else:
        raise errors.InvalidArgumentError(None, None, f"Incompatible shapes: [{flat.size}] vs. [{count}]")
    indices, dense_shape = _positions(batch, width)
    return indices, values, dense_shape


@functools.lru_cache(maxsize=64)
def _offsets(width: int, num_buckets: int, dtype: np.dtype) -> np.ndarray:
    """j * K for each column j, wrapping in x's dtype as TF's Mul does (numpy arrays wrap)."""
    return _frozen(np.arange(width, dtype=dtype) * np.asarray(num_buckets).astype(dtype))


@functools.lru_cache(maxsize=64)
def _positions(batch: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices, dense_shape): the same for every x of one shape, so built once (read-only; no
    kernel writes its inputs)."""
    indices = np.empty((batch, width, 2), dtype=np.int64)
    indices[:, :, 0] = np.arange(batch, dtype=np.int64)[:, None]
    indices[:, :, 1] = np.arange(width, dtype=np.int64)
    return _frozen(indices.reshape(batch * width, 2)), _frozen(np.array([batch, width], dtype=np.int64))


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


@kernel(INDICATOR_OP_TYPE, quiet=True)
def indicator_counts(
    sparse_indices, output_shape, sparse_values, default_value, *, depth: int, T: int, validate_indices=True
):
    """See the module docstring: counts [*dense.shape[:-1], depth] in ``T``."""
    dense = sparse_to_dense(
        sparse_indices, output_shape, sparse_values, default_value, validate_indices=validate_indices
    )
    dtype = dtypes.as_numpy_dtype(T)
    depth = int(depth)
    if dense.ndim == 0 or (dtype.kind == "f" and dense.shape[-1] > 2**24):
        hot = one_hot(dense, np.int32(depth), np.ones((), dtype), np.zeros((), dtype), axis=-1)
        return lookup("Sum").fn(hot, np.int32(-2))
    if dense.size * depth <= _COMPARE_LIMIT:  # small: one comparison against 0..depth-1
        return np.add.reduce(dense[..., None] == _ids(depth), axis=-2, dtype=dtype)
    rows = dense.reshape(-1, dense.shape[-1]).astype(np.int64, copy=False)
    outside = rows.shape[0] * depth  # one bin past the counts for ids outside [0, depth)
    keep = rows.view(np.uint64) < depth  # as unsigned, a negative id is above depth too
    cells = np.where(keep, rows + (np.arange(rows.shape[0], dtype=np.int64) * depth)[:, None], outside)
    counts = np.bincount(cells.reshape(-1), minlength=outside + 1)[:outside]
    return counts.astype(dtype).reshape(dense.shape[:-1] + (depth,))


_COMPARE_LIMIT = 1 << 16


@functools.lru_cache(maxsize=64)
def _ids(depth: int) -> np.ndarray:
    return _frozen(np.arange(depth, dtype=np.int64))
