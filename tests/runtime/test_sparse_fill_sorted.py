"""SparseFillEmptyRows' row-sorted path against a per-row reference (TF's documented semantics)."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.kernels.sparse_ops import sparse_fill_empty_rows


def _reference(indices, values, rows_total, default):
    """Rows in order; a row's entries in input order; an empty row gets (row, 0, ...) = default."""
    out_indices, out_values, reverse = [], [], [0] * len(indices)
    for row in range(rows_total):
        mine = [i for i in range(len(indices)) if indices[i][0] == row]
        if not mine:
            out_indices.append([row] + [0] * (len(indices[0]) - 1 if len(indices) else 1))
            out_values.append(default)
        for i in mine:
            reverse[i] = len(out_indices)
            out_indices.append(list(indices[i]))
            out_values.append(values[i])
    empty = [not any(ind[0] == r for ind in indices) for r in range(rows_total)]
    return out_indices, out_values, empty, reverse


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("rows_total", [1, 5, 40])
def test_sorted_rows_match_reference(seed, rows_total):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3 * rows_total + 2))
    rows = np.sort(rng.integers(0, rows_total, n))
    indices = np.stack([rows, rng.integers(0, 4, n)], axis=1).astype(np.int64)
    values = rng.integers(-50, 50, n).astype(np.int64)
    got = sparse_fill_empty_rows(indices, values, np.array([rows_total, 4]), np.int64(-7))
    want = _reference(indices.tolist(), values.tolist(), rows_total, -7)
    assert got[0].tolist() == want[0]
    assert got[1].tolist() == want[1]
    assert got[2].tolist() == want[2]
    assert got[3].tolist() == want[3]
    assert got[0].dtype == np.int64 and got[1].dtype == values.dtype and got[2].dtype == np.bool_


def test_sorted_path_matches_unsorted_path():
    """The same entries shuffled take the general path; sorted they take the fast one."""
    rows = np.array([0, 0, 2, 5, 5, 5, 9, 11, 11, 30, 31] * 4)
    rows.sort()
    indices = np.stack([rows, np.arange(len(rows)) % 3], axis=1).astype(np.int64)
    values = np.array([f"v{i}".encode() for i in range(len(rows))], dtype=object)
    shape = np.array([40, 3])
    fast = sparse_fill_empty_rows(indices, values, shape, np.array(b"", dtype=object))
    row_key = np.random.default_rng(0).permutation(40)  # rows shuffled, a row's entries kept in order
    order = np.lexsort((np.arange(len(rows)), row_key[rows]))
    slow = sparse_fill_empty_rows(indices[order], values[order], shape, np.array(b"", dtype=object))
    assert fast[0].tolist() == slow[0].tolist() and fast[1].tolist() == slow[1].tolist()
    assert fast[2].tolist() == slow[2].tolist()
    assert fast[3][order].tolist() == slow[3].tolist()
