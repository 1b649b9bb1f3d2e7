"""``_SafeEmbeddingLookupSparse`` gives what TF's ``safe_embedding_lookup_sparse`` subgraph gives,
composed here from our kernels of its ops, on many ids: empty rows, repeated and unordered ids,
ids < 0 (pruned) and >= the vocabulary (an error in both), batch 0, 1 and 32, rank 2 and 3, each
combiner."""

from __future__ import annotations

import math

import numpy as np
import pytest

from runtime import dtypes, errors
from runtime.kernels import load_all
from runtime.kernels.embedding_ops import OP_TYPE, safe_embedding_lookup_sparse

KERNELS = load_all()  # the whole registry: these tests call kernels by op type

SEGMENT_OPS = {"sum": "SparseSegmentSum", "mean": "SparseSegmentMean", "sqrtn": "SparseSegmentSqrtN"}


def _run(op: str, *inputs, **attrs):
    return KERNELS[op].fn(*inputs, **attrs)


def unfused(indices, values, dense_shape, params, combiner):
    """The ops ``safe_embedding_lookup_sparse`` builds (default_id None, no weights), in order."""
    shape = np.asarray(dense_shape, np.int64)
    new_shape = np.array([math.prod(shape[:-1].tolist()), shape[-1]], np.int64)
    sr_indices, sr_shape = _run("SparseReshape", indices, shape, new_shape)
    keep = np.reshape(_run("Where", _run("GreaterEqual", values, np.int64(0))), [-1])
    kept_indices = _run("GatherV2", sr_indices, keep, np.int32(0))
    kept_values = _run("GatherV2", values, keep, np.int32(0))
    filled, ids, empty, _ = _run("SparseFillEmptyRows", kept_indices, kept_values, sr_shape, np.int64(0))
    unique, idx = _run("Unique", ids, out_idx=dtypes.DT_INT32)
    rows = _run("GatherV2", params, unique, np.int32(0))
    result = _run(SEGMENT_OPS[combiner], rows, idx, filled[:, 0])
    result = np.where(np.tile(empty.reshape(-1, 1), [1, result.shape[1]]), np.zeros_like(result), result)
    return result.reshape(*shape[:-1].tolist(), *result.shape[1:])


def random_ids(rng, leading: list[int], width: int, vocabulary: int, shuffle: bool):
    """Sparse ids of shape leading + [width]: each position 0..width ids in [-2, vocabulary)."""
    indices, values = [], []
    for position in np.ndindex(*leading):
        count = int(rng.integers(0, width + 1))
        for column in range(count):
            indices.append([*position, column])
            values.append(int(rng.integers(-2, vocabulary)))
    indices = np.array(indices, np.int64).reshape(-1, len(leading) + 1)
    values = np.array(values, np.int64)
    if shuffle and len(values):
        order = rng.permutation(len(values))
        indices, values = indices[order], values[order]
    return indices, values, np.array([*leading, width], np.int64)


CASES = [([0], 3), ([1], 1), ([1], 4), ([32], 3), ([32], 1), ([4, 3], 2), ([0, 2], 2), ([3, 0], 2)]


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
@pytest.mark.parametrize("leading,width", CASES)
@pytest.mark.parametrize("shuffle", [False, True])
def test_matches_the_unfused_subgraph(combiner, leading, width, shuffle):
    rng = np.random.default_rng(len(leading) * 100 + width + 7 * shuffle)
    params = rng.standard_normal((5, 3)).astype(np.float32)
    for _ in range(20):
        indices, values, shape = random_ids(rng, leading, width, 5, shuffle)
        want = unfused(indices, values, shape, params, combiner)
        got = safe_embedding_lookup_sparse(indices, values, shape, params, combiner=combiner)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_repeated_ids_empty_rows_and_pruned_ids_by_hand():
    params = np.array([[1, 10], [2, 20], [4, 40]], np.float64)
    indices = np.array([[0, 0], [0, 1], [0, 2], [2, 0], [3, 0]], np.int64)
    values = np.array([1, 1, 2, 0, -1], np.int64)  # row 1 empty; row 3 only a pruned id
    shape = np.array([4, 3], np.int64)
    got = safe_embedding_lookup_sparse(indices, values, shape, params, combiner="mean")
    np.testing.assert_array_equal(got, [[8 / 3, 80 / 3], [0, 0], [1, 10], [0, 0]])
    got = safe_embedding_lookup_sparse(indices, values, shape, params, combiner="sqrtn")
    np.testing.assert_allclose(got, [[8 / np.sqrt(3), 80 / np.sqrt(3)], [0, 0], [1, 10], [0, 0]])


@pytest.mark.parametrize(
    "indices,values,shape",
    [
        ([[0, 0], [1, 0]], [1, 5], [2, 2]),  # an id past the vocabulary
        ([[0, 0], [2, 0]], [1, 1], [2, 2]),  # a row past the dense shape
        ([[0, 0], [-1, 0]], [1, 1], [2, 2]),  # a negative row
    ],
)
@pytest.mark.parametrize("combiner", ["sum", "mean"])
def test_fails_where_the_subgraph_fails(indices, values, shape, combiner):
    args = (np.array(indices, np.int64), np.array(values, np.int64), np.array(shape, np.int64))
    params = np.ones((5, 2), np.float32)
    with pytest.raises(errors.InvalidArgumentError):
        unfused(*args, params, combiner)
    with pytest.raises(errors.InvalidArgumentError):
        safe_embedding_lookup_sparse(*args, params, combiner=combiner)


def test_pruned_ids_out_of_the_vocabulary_are_not_an_error():
    args = (np.array([[0, 0]], np.int64), np.array([-7], np.int64), np.array([2, 1], np.int64))
    params = np.ones((3, 2), np.float32)
    want = unfused(*args, params, "mean")
    np.testing.assert_array_equal(safe_embedding_lookup_sparse(*args, params, combiner="mean"), want)
    np.testing.assert_array_equal(want, np.zeros((2, 2), np.float32))


def test_registered_as_an_internal_op():
    assert OP_TYPE.startswith("_") and KERNELS[OP_TYPE].fn is safe_embedding_lookup_sparse


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
@pytest.mark.parametrize("batch", [1, 2, 32])
def test_one_id_per_row_matches_the_unfused_subgraph(combiner, batch):
    """The shortcut for rows 0, 1, ... with one id each (a bucketized or one-valued column)."""
    rng = np.random.default_rng(batch)
    params = rng.standard_normal((7, 4)).astype(np.float32)
    indices = np.stack([np.arange(batch), rng.integers(0, 3, batch)], axis=1).astype(np.int64)
    values = rng.integers(0, 7, batch).astype(np.int64)
    shape = np.array([batch, 3], np.int64)
    want = unfused(indices, values, shape, params, combiner)
    np.testing.assert_array_equal(
        safe_embedding_lookup_sparse(indices, values, shape, params, combiner=combiner), want
    )
