"""``_BucketizedSparseTensor``: a bucketized feature column's SparseTensor as one kernel.

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
"""

from __future__ import annotations

import functools

import numpy as np

from runtime import errors
from runtime.kernels.registry import kernel

OP_TYPE = "_BucketizedSparseTensor"


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
