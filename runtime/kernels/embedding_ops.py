"""``_SafeEmbeddingLookupSparse``: TF's ``safe_embedding_lookup_sparse`` as one kernel.

Feature columns' embeddings and the linear model's weighted sums are each about 35 graph ops
(``SparseReshape``, pruning ids < 0 with ``GreaterEqual``/``Where``/``GatherV2``,
``SparseFillEmptyRows``, ``Unique``, a row gather, ``SparseSegmentSum``/``Mean``/``SqrtN``, then
``Tile``/``Select`` zeroing the empty rows and a ``Reshape`` back), each a few microseconds at
serving sizes. Delegation (``runtime/onnx/embedding_fusion.py``) replaces a matched instance with
this op, over the same SparseTensor and the (frozen) table; it has no TF op definition.

The result, for ids (``indices``, ``values``, ``dense_shape``) of rank r and ``params`` [V, d]:
shape ``dense_shape[:-1] + [d]``; each position the sum (``combiner`` "sum"), mean ("mean") or
sum over the square root of the count ("sqrtn") of ``params[id]`` over its ids >= 0; zeros
where it has none. Errors are those the subgraph raises: a row outside ``dense_shape``
(``SparseFillEmptyRows``), an id >= V (the gather).
"""

from __future__ import annotations

import math

import numpy as np

from runtime import errors
from runtime.kernels.bounds import in_range
from runtime.kernels.registry import kernel

OP_TYPE = "_SafeEmbeddingLookupSparse"
COMBINERS = ("sum", "mean", "sqrtn")


def _invalid(text: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, text)


@kernel(OP_TYPE)
def safe_embedding_lookup_sparse(indices, values, dense_shape, params, *, combiner="mean"):
    """See the module docstring; the sums run in input order within a row, as the segment sum."""
    indices = np.asarray(indices, dtype=np.int64)
    values = np.asarray(values).reshape(-1)
    shape = np.asarray(dense_shape, dtype=np.int64).reshape(-1).tolist()
    params = np.asarray(params)
    if combiner not in COMBINERS:
        raise _invalid(f"combiner must be one of {COMBINERS}, saw: {combiner!r}")
    if indices.ndim != 2 or indices.shape[1] != len(shape) or len(shape) < 2:
        raise _invalid(f"indices must be a matrix of rank-{len(shape)} indices, saw: {list(indices.shape)}")
    rows_total = math.prod(shape[:-1])
    rows = _rows(indices, shape)
    vocabulary = params.shape[0]
    valid = in_range(values, vocabulary)
    if not valid:
        keep = values >= 0  # TF prunes invalid ids before filling empty rows
        rows, values = rows[keep], values[keep]
    if not in_range(rows, rows_total):
        i = int(np.flatnonzero((rows < 0) | (rows >= rows_total))[0])
        row = int(rows[i])
        raise _invalid(f"indices({i}, 0) is invalid: {row} >= {rows_total}" if row >= 0 else
                       f"indices({i}, 0) is invalid: {row} < 0")  # fmt: skip
    if not valid and not in_range(values, vocabulary):
        i = int(np.flatnonzero(values >= vocabulary)[0])
        raise _invalid(f"indices[{i}] = {int(values[i])} is not in [0, {vocabulary})")
    if not vocabulary and rows_total:  # an empty row looks up id 0 before it is zeroed
        raise _invalid("indices[0] = 0 is not in [0, 0)")
    gathered = params.take(values, axis=0)
    if len(rows) == rows_total and (rows_total < 2 or bool((rows[1:] > rows[:-1]).all())):
        out = gathered  # rows 0, 1, ... one id each (the common case): each its own sum and mean
    else:
        out = _combine(rows, gathered, rows_total, combiner)
    return out.reshape(*shape[:-1], *params.shape[1:])


def _combine(rows: np.ndarray, gathered: np.ndarray, rows_total: int, combiner: str) -> np.ndarray:
    """Each row's sum, mean or sqrt-n of its gathered embeddings; zeros for a row with none."""
    out = np.zeros((rows_total, *gathered.shape[1:]), dtype=gathered.dtype)
    np.add.at(out, rows, gathered)
    if combiner != "sum" and rows.size:
        counts = np.bincount(rows, minlength=rows_total).astype(np.float64)
        scale = np.sqrt(counts) if combiner == "sqrtn" else counts
        scale = np.maximum(scale, 1).astype(gathered.dtype).reshape((-1,) + (1,) * (gathered.ndim - 1))
        out = (out / scale).astype(gathered.dtype, copy=False)
    return out


def _rows(indices: np.ndarray, shape: list[int]) -> np.ndarray:
    """Each entry's row of the ids reshaped to [prod(shape[:-1]), shape[-1]] (``SparseReshape``)."""
    if len(shape) == 2 or not len(indices):
        return indices[:, 0]
    if not math.prod(shape):
        return np.zeros(len(indices), np.int64)
    return np.ravel_multi_index(indices.T, shape) // shape[-1]
