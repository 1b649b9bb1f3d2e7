"""Feature crosses: SparseCross (TF's FingerprintCat64 chain over FarmHash fingerprints),
SparseCrossV2 (string joins) and SparseCrossHashed (FarmHash or keyed SipHash).

Each input SparseTensor arrives as its three tensors; dense inputs are [batch, k] tensors. A row's
crossed features are the cartesian product of its features, in column order. Small batches cross
feature by feature in Python; from ``_LANES_FROM`` rows on, the hashed SparseCross computes every
crossed feature of the batch at once in numpy uint64 lanes (same hashes, same order).
"""

from __future__ import annotations

import itertools

import farmhash
import numpy as np

from runtime import dtypes, errors
from runtime.kernels.bounds import in_range
from runtime.kernels.hashing import fingerprint_cat64, fingerprint_cat64_many, siphash24
from runtime.kernels.registry import kernel


def _invalid(text: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, text)


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


def _batch_size(shapes, dense_inputs) -> int:
    if len(shapes):
        return int(np.asarray(shapes[0]).reshape(-1)[0])
    return np.asarray(dense_inputs[0]).shape[0] if len(dense_inputs) else 0


def _feature_hashes(values: np.ndarray) -> np.ndarray:
    """Each feature's hash as the cross takes it: FarmHash of a string, an integer's bits."""
    if values.dtype == object:
        return np.fromiter(map(farmhash.fingerprint64, values.tolist()), np.uint64, values.size)
    return values.astype(np.int64).view(np.uint64)


def _lane_columns(indices, values, dense_inputs, batch: int) -> list | None:
    """Per column: (feature count per row, or None for one each; the features' hashes, grouped
    by row); None if a row id is outside the batch."""
    columns = []
    for ind, val in zip(indices, values):
        rows = np.asarray(ind, dtype=np.int64)[:, 0]
        if not in_range(rows, batch):  # before bincount, which would size its output by the largest
            return None
        counts = np.bincount(rows, minlength=batch)
        hashes = _feature_hashes(np.asarray(val).reshape(-1))
        if rows.size > 1 and (rows[1:] < rows[:-1]).any():
            hashes = hashes[np.argsort(rows, kind="stable")]
        columns.append((None if rows.size == batch and counts.max(initial=0) == 1 else counts, hashes))
    for dense in dense_inputs:
        dense = np.asarray(dense)
        if dense.shape[0] != batch:
            return None
        flat = dense.reshape(batch, -1)
        width = flat.shape[1]
        counts = None if width == 1 else np.full(batch, width, np.int64)
        columns.append((counts, _feature_hashes(flat.reshape(-1))))
    return columns


def _hashed_cross_lanes(indices, values, shapes, dense_inputs, num_buckets: int, hash_key: int):
    """The hashed cross of a batch in numpy: every crossed feature of every row at once, in
    ``itertools.product`` order (the last column varies fastest); None where the Python path
    must decide (an empty batch, row ids outside it, no columns).

    The crosses grow column by column: each so far is repeated once per feature of its row in
    the next column (a column of one feature per row repeats nothing), so the rows stay sorted.
    """
    batch = _batch_size(shapes, dense_inputs)
    columns = _lane_columns(indices, values, dense_inputs, batch) if batch > 0 else None
    if not columns:
        return None
    row_of, hashed = None, np.uint64(hash_key & 0xFFFFFFFFFFFFFFFF)  # row_of None: one cross per row
    for counts, hashes in columns:
        if counts is None:  # one feature per row: the row's feature for each cross so far
            hashed = fingerprint_cat64_many(hashed, hashes if row_of is None else hashes[row_of])
        elif row_of is None:  # each row's crosses so far are one: its features, in order
            hashed = fingerprint_cat64_many(np.repeat(hashed, counts) if hashed.ndim else hashed, hashes)
            row_of = np.repeat(np.arange(batch, dtype=np.int64), counts)
        else:
            repeat = counts[row_of]
            before = np.cumsum(repeat) - repeat  # where each cross so far starts among the grown
            first = (np.cumsum(counts) - counts)[row_of]  # its row's first feature
            chosen = np.repeat(first - before, repeat) + np.arange(int(repeat.sum()), dtype=np.int64)
            hashed = fingerprint_cat64_many(np.repeat(hashed, repeat), hashes[chosen])
            row_of = np.repeat(row_of, repeat)
    if row_of is None:
        row_of = np.arange(batch, dtype=np.int64)
    hashed %= np.uint64(num_buckets if num_buckets > 0 else 2**63 - 1)
    per_row = np.bincount(row_of, minlength=batch)
    out_indices = np.empty((len(row_of), 2), np.int64)
    out_indices[:, 0] = row_of
    np.subtract(np.arange(len(row_of)), np.searchsorted(row_of, row_of), out=out_indices[:, 1])
    shape = np.array([batch, int(per_row.max())], dtype=np.int64)
    return out_indices, hashed.view(np.int64), shape


# From this batch size on, the hashed cross runs in numpy lanes; below, feature by feature.
_LANES_FROM = 8


@kernel("SparseCross")
def sparse_cross(
    indices, values, shapes, dense_inputs, *, hashed_output, num_buckets, hash_key, out_type=None,
    internal_type=None
):  # fmt: skip
    if internal_type == dtypes.DT_STRING:
        _check_internal_type(values, dense_inputs)
    if hashed_output and _batch_size(shapes, dense_inputs) >= _LANES_FROM:
        crossed = _hashed_cross_lanes(indices, values, shapes, dense_inputs, num_buckets, hash_key)
        if crossed is not None:
            return crossed
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
