"""Small serving batches: the sparse layouts of ``example_parser`` and the hashed SparseCross lanes
agree with plain references on random inputs, on every side of their thresholds.

A Classify/Regress request parses a few Examples of a handful of features and crosses a few
columns; those sizes take the shortcuts tested here (Python index lists, one-value-per-row layouts,
numpy lanes that grow crosses column by column). TF's own outputs for these ops are the records in
``test_parsing_ops.py`` and ``test_sparse_ops.py``; these tests pin each shortcut to the path it
replaces, so that a wrong branch fails here by name.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from runtime import dtypes, errors
from runtime.example import parser as example_parser
from runtime.example.specs import DenseSpec, SparseSpec
from runtime.kernels import hashing, load_all
from runtime.kernels import sparse_cross_ops as cross

KERNELS = load_all()  # the whole registry: these tests call kernels by op type


def _reference_indices(lengths: list[int]) -> list[list[int]]:
    return [[row, j] for row, count in enumerate(lengths) for j in range(count)]


@pytest.mark.parametrize("shape", ["few", "one_per_row", "as_many_as_rows", "many"])
def test_sparse_layouts_equal_the_reference(shape) -> None:
    rng = random.Random(shape)
    spec = SparseSpec("k", dtypes.DT_INT64)
    for _ in range(200):
        batch = rng.randrange(1, 12) if shape == "few" else rng.randrange(17, 70)
        if shape == "one_per_row":
            lengths = [1] * batch
        elif shape == "as_many_as_rows":  # as many values as rows, not one per row
            lengths = [1] * (batch - 2) + [2, 0]
            rng.shuffle(lengths)
        else:
            lengths = [rng.choice([0, 1, 1, 2, 3]) for _ in range(batch)]
        rows = [
            None if n == 0 and rng.random() < 0.5 else [rng.randrange(99) for _ in range(n)] for n in lengths
        ]
        indices, values, dense_shape = example_parser._sparse_output(spec, rows, False)
        assert indices.dtype == np.int64 and indices.shape == (sum(lengths), 2)
        assert indices.tolist() == _reference_indices(lengths)
        assert values.tolist() == [v for row in rows if row for v in row] and values.dtype == np.int64
        assert dense_shape.tolist() == [batch, max(lengths)]


def test_scalar_dense_rows_take_defaults_or_fail_as_tf() -> None:
    with_default = DenseSpec("age", dtypes.DT_FLOAT, (1,), np.array([30.0], np.float32))
    rows = [[1.5], None, [2.5]]
    out = example_parser._dense_output(with_default, rows, [], False)
    assert out.dtype == np.float32 and out.tolist() == [[1.5], [30.0], [2.5]]
    full = example_parser._dense_output(with_default, [[1.5], [2.5]], [], False)
    assert full.tolist() == [[1.5], [2.5]] and full.shape == (2, 1)
    required = DenseSpec("age", dtypes.DT_FLOAT, (), np.zeros(0, np.float32))
    with pytest.raises(
        errors.InvalidArgumentError, match=r"^Name: <unknown>, Feature: age \(data type: float\) is required"
    ):
        example_parser._dense_output(required, rows, [], False)


def _random_cross_inputs(rng: random.Random, batch: int) -> tuple:
    """Sparse columns of 0-3 features per row (some exactly one per row, some unsorted) and dense
    columns of width 0-2, strings or integers."""
    indices, values, shapes, dense = [], [], [], []
    for _ in range(rng.randrange(0, 4)):
        one_each = rng.random() < 0.4
        entries = [
            [r, j] for r in range(batch) for j in range(1 if one_each else rng.choice([0, 1, 1, 2, 3]))
        ]
        if rng.random() < 0.25:
            rng.shuffle(entries)
        indices.append(np.array(entries, np.int64).reshape(-1, 2))
        if rng.random() < 0.5:
            values.append(np.array([rng.randrange(-(2**63), 2**63) for _ in entries], np.int64))
        else:
            values.append(np.array([b"v%d" % rng.randrange(6) for _ in entries], dtype=object))
        shapes.append(np.array([batch, 3], np.int64))
    for _ in range(rng.randrange(0 if indices else 1, 3)):
        width = rng.choice([0, 1, 1, 2])
        if rng.random() < 0.5:
            dense.append(
                np.array(
                    [[b"d%d" % rng.randrange(4) for _ in range(width)] for _ in range(batch)], dtype=object
                ).reshape(batch, width)
            )
        else:
            dense.append(
                np.array(
                    [[rng.randrange(-9, 9) for _ in range(width)] for _ in range(batch)], np.int64
                ).reshape(batch, width)
            )
    return indices, values, shapes, dense


def test_hashed_cross_lanes_equal_the_per_feature_path() -> None:
    rng = random.Random(11)
    for _ in range(400):
        batch = rng.choice([1, 2, 3, 8, 9, 32, 33])
        indices, values, shapes, dense = _random_cross_inputs(rng, batch)
        buckets, key = rng.choice([0, 1, 13, 1000]), rng.choice([0, 956888297470, -3, 2**64 - 1])
        got = cross._hashed_cross_lanes(indices, values, shapes, dense, buckets, key)
        size, columns = cross._cross_columns(indices, values, shapes, dense)
        want = cross._crossed_output(size, columns, cross._hash_crosser(buckets, key), np.int64)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype == np.int64 and a.tolist() == b.tolist()


def test_hashed_cross_lanes_hash_as_tf_combines() -> None:
    """A row crossing two string features and one integer: FingerprintCat64 over the key, the
    features' FarmHash fingerprints and the integer's bits, in column order."""
    import farmhash

    indices = [np.array([[0, 0], [0, 1]], np.int64), np.array([[0, 0]], np.int64)]
    values = [np.array([b"red", b"blue"], dtype=object), np.array([7], np.int64)]
    shapes = [np.array([1, 2], np.int64), np.array([1, 1], np.int64)]
    got = cross._hashed_cross_lanes(indices, values, shapes, [], 0, 956888297470)
    want = []
    for color, number in itertools.product([b"red", b"blue"], [7]):
        hashed = hashing.fingerprint_cat64(956888297470, farmhash.fingerprint64(color))
        want.append(hashing.fingerprint_cat64(hashed, number) % (2**63 - 1))
    assert got[0].tolist() == [[0, 0], [0, 1]] and got[1].tolist() == want and got[2].tolist() == [1, 2]


def test_hashed_cross_lanes_leave_rows_outside_the_batch_to_the_python_path() -> None:
    for rows in ([[0, 0], [2, 0]], [[-1, 0]], [[0, 0], [2**40, 0]]):  # the last must not size an array
        indices = [np.array(rows, np.int64)]
        values = [np.array([b"a"] * len(rows), dtype=object)]
        assert cross._hashed_cross_lanes(indices, values, [np.array([2, 1], np.int64)], [], 5, 0) is None


def test_sparse_cross_kernel_is_the_same_on_both_sides_of_the_lanes_threshold(monkeypatch) -> None:
    rng = random.Random(5)
    kernel = KERNELS["SparseCross"].fn
    for _ in range(60):
        indices, values, shapes, dense = _random_cross_inputs(rng, rng.choice([1, 4, 8, 20]))
        attrs = dict(hashed_output=True, num_buckets=rng.choice([0, 50]), hash_key=956888297470)
        results = []
        for threshold in (1, 10**9):
            monkeypatch.setattr(cross, "_LANES_FROM", threshold)
            results.append(kernel(indices, values, shapes, dense, **attrs))
        for a, b in zip(*results):
            assert a.dtype == b.dtype and a.tolist() == b.tolist()
