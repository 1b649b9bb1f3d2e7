"""The kernels' small-input shortcuts agree with their general paths and with TF's semantics.

Serving runs feature-column kernels on a handful of values, where the kernels take shortcuts:
Python lists instead of numpy calls below a size threshold, TF's own pass-throughs (SparseReshape
to the same shape, SparseFillEmptyRows with nothing to fill, one row per segment), caches of
per-node constants (StridedSlice specs, Bucketize boundaries) and batched hashing. Each test here
runs random inputs on both sides of a threshold, or against a plain reference written from TF's
kernel; TF's own outputs for the shortcut cases are breadth records (``breadth_records.py``).
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from apis.tensorflow.core.example import example_pb2
from runtime import dtypes, errors
from runtime.example import parser as example_parser
from runtime.example.specs import SparseSpec
from runtime.kernels import bounds, hashing, load_all

KERNELS = load_all()  # the whole registry: these tests call kernels by op type

SMALL = bounds.SMALL


def _kernel(op: str):
    return KERNELS[op].fn


def _sorted_sparse(rng: random.Random, rows: int, cols: int, *, empty_rows: bool, shuffle: bool):
    entries = []
    for r in range(rows):
        count = rng.randrange(0 if empty_rows else 1, 4)
        entries += [[r, c] for c in rng.sample(range(cols), min(count, cols))]
    if shuffle:
        rng.shuffle(entries)
    return np.array(entries, np.int64).reshape(-1, 2)


def _fill_empty_rows_reference(indices, values, rows, default):
    """TF's SparseFillEmptyRows: rows in order, a row's entries in input order, (r, 0) = default."""
    by_row: list[list[int]] = [[] for _ in range(rows)]
    for i, r in enumerate(indices[:, 0].tolist()):
        by_row[r].append(i)
    out_indices, out_values, reverse = [], [], [0] * len(indices)
    for r, members in enumerate(by_row):
        if not members:
            out_indices.append([r] + [0] * (indices.shape[1] - 1))
            out_values.append(default)
        for i in members:
            reverse[i] = len(out_indices)
            out_indices.append(indices[i].tolist())
            out_values.append(values[i])
    empty = [not members for members in by_row]
    return out_indices, out_values, empty, reverse


@pytest.mark.parametrize("size", [3, SMALL - 1, SMALL + 40])
def test_fill_empty_rows_matches_tf_order(size) -> None:
    rng = random.Random(size)
    fill = _kernel("SparseFillEmptyRows")
    for trial in range(60):
        rows = max(1, size // 2)
        indices = _sorted_sparse(rng, rows, 4, empty_rows=trial % 2 == 0, shuffle=trial % 3 == 0)
        values = np.arange(len(indices), dtype=np.float32)
        got = fill(indices, values, np.array([rows, 4], np.int64), np.float32(-1))
        want = _fill_empty_rows_reference(indices, values.tolist(), rows, -1.0)
        assert got[0].tolist() == want[0] and got[1].tolist() == want[1]
        assert got[2].tolist() == want[2] and got[3].tolist() == want[3]
        assert got[0].dtype == np.int64 and got[3].dtype == np.int64 and got[2].dtype == np.bool_


def test_fill_empty_rows_reports_the_first_bad_row() -> None:
    fill = _kernel("SparseFillEmptyRows")
    indices = np.array([[0, 0], [7, 0], [-1, 0]], np.int64)
    with pytest.raises(errors.InvalidArgumentError, match=r"indices\(1, 0\) is invalid: 7 >= 3"):
        fill(indices, np.zeros(3, np.float32), np.array([3, 2], np.int64), np.float32(0))


def test_sparse_reshape_to_the_same_shape_forwards_its_indices() -> None:
    reshape = _kernel("SparseReshape")
    indices = np.array([[0, 1], [2, 3]], np.int64)
    out, shape = reshape(indices, np.array([3, 4], np.int64), np.array([-1, 4], np.int64))
    assert out is indices and shape.tolist() == [3, 4] and shape.dtype == np.int64
    out, shape = reshape(indices, np.array([3, 4], np.int64), np.array([2, 6], np.int64))
    assert out.tolist() == [[0, 1], [1, 5]] and shape.tolist() == [2, 6]


def _segment_reference(data, idx, seg, rows, mode):
    """TF's sparse segment reduction for segments of up to 9 rows: summed in order, then divided."""
    out = np.zeros((rows, *data.shape[1:]), data.dtype)
    counts = [0] * rows
    for i, s in zip(idx, seg):
        out[s] = out[s] + data[i]
        counts[s] += 1
    if mode == "sum":
        return out
    for s, n in enumerate(counts):
        if n:
            scale = np.sqrt(np.float64(n)) if mode == "sqrtn" else np.float64(n)
            out[s] = (out[s] / data.dtype.type(scale)).astype(data.dtype)
    return out


@pytest.mark.parametrize("mode", ["Sum", "Mean", "SqrtN"])
@pytest.mark.parametrize("size", [1, 5, SMALL + 20])
def test_segment_reductions_match_the_reference(mode, size) -> None:
    rng = random.Random(size)
    data = (np.arange(40 * 3, dtype=np.float32).reshape(40, 3) / 7).astype(np.float32)
    for trial in range(40):
        idx = np.array([rng.randrange(40) for _ in range(size)], np.int32)
        if trial % 2:  # one row per segment: the shortcut
            seg = np.arange(size, dtype=np.int64)
        else:
            seg = np.array(sorted(rng.randrange(size) for _ in range(size)), np.int64)
        rows = int(seg[-1]) + 1 + trial % 3
        got = _kernel(f"SparseSegment{mode}WithNumSegments")(data, idx, seg, np.int32(rows))
        want = _segment_reference(data, idx.tolist(), seg.tolist(), rows, mode.lower())
        np.testing.assert_array_equal(got, want)
        assert got.dtype == data.dtype and got.shape == want.shape


def test_segment_ids_are_checked_before_the_shortcut() -> None:
    data = np.ones((3, 2), np.float32)
    with pytest.raises(errors.InvalidArgumentError, match="segment ids are not increasing"):
        _kernel("SparseSegmentSum")(data, np.array([0, 1], np.int32), np.array([1, 0], np.int32))
    with pytest.raises(errors.InvalidArgumentError, match=r"Bad: indices\[1\] == 3 out of range"):
        _kernel("SparseSegmentSum")(data, np.array([0, 3], np.int32), np.array([0, 1], np.int32))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.bool_, object])
def test_unique_small_path_equals_the_numpy_path(dtype) -> None:
    unique = _kernel("Unique")
    rng = random.Random(0)
    for size in (0, 1, 5, 64):
        raw = [rng.randrange(6) for _ in range(size)]
        x = np.array([b"k%d" % v for v in raw] if dtype is object else raw, dtype=dtype)
        y, idx = unique(x, out_idx=dtypes.DT_INT64)
        # The general path, on the same values made long enough to take it.
        y_big, idx_big = unique(np.concatenate([x] * 70), out_idx=dtypes.DT_INT64)
        assert y.tolist() == y_big.tolist() and idx.tolist() == idx_big[:size].tolist()
        assert y.dtype == x.dtype and idx.dtype == np.int64 and y.shape == (len(set(x.tolist())),)


def test_gather_with_a_scalar_index_gives_a_0d_tensor() -> None:
    for params in (np.array([3, 4, 5], np.int64), np.array([b"a", b"b"], object)):
        got = _kernel("GatherV2")(params, np.array(1, np.int32), np.array(0, np.int32))
        assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == params.dtype
    with pytest.raises(errors.InvalidArgumentError, match=r"indices\[1\] = -1 is not in \[0, 3\)"):
        _kernel("GatherV2")(np.zeros(3), np.array([0, -1], np.int64), np.array(0, np.int32))


def test_pack_on_axis_zero_equals_stack() -> None:
    pack = _kernel("Pack")
    for values in ([np.array(3, np.int64), np.int64(4)], [np.ones((2, 3), np.float32)] * 3):
        got = pack(values)
        assert got.dtype == np.asarray(values[0]).dtype and np.array_equal(got, np.stack(values))
    strings = [np.array(b"a", object), np.array(b"b", object)]
    assert pack(strings).tolist() == [b"a", b"b"]


def test_strided_slice_specs_are_cached_but_still_checked() -> None:
    strided_slice = _kernel("StridedSlice")
    x = np.arange(12).reshape(3, 4)
    begin, end, strides = np.array([1, 0], np.int32), np.array([3, 4], np.int32), np.array([1, 2], np.int32)
    for _ in range(2):
        assert strided_slice(x, begin, end, strides).tolist() == x[1:3, 0:4:2].tolist()
    for _ in range(2):  # errors are never cached
        with pytest.raises(errors.InvalidArgumentError, match=r"strides\[1\] must be non-zero"):
            strided_slice(x, begin, end, np.array([1, 0], np.int32))


def test_siphash_batches_equal_one_at_a_time() -> None:
    # SipHash-2-4's reference vector: key 00..0f, message 00..0e.
    key = (int.from_bytes(bytes(range(8)), "little"), int.from_bytes(bytes(range(8, 16)), "little"))
    assert hashing.siphash24(*key, bytes(range(15))) == 0xA129CA6149BE45E5
    rng = random.Random(3)
    items = [bytes(rng.randrange(256) for _ in range(rng.randrange(40))) for _ in range(100)]
    items += [b"", b"x" * 8, b"y" * 16, b"z" * 255, b"w" * 256]
    for k0, k1 in ((0, 0), key, (2**64 - 1, 12345)):
        want = [hashing.siphash24(k0, k1, item) for item in items]
        assert hashing.siphash24_many(k0, k1, items) == want
        assert hashing.siphash24_many(k0, k1, items[:3]) == want[:3]


def test_split_on_whitespace_equals_the_byte_scanner() -> None:
    from runtime.kernels.string_ops import _split_whitespace

    rng = random.Random(4)
    alphabet = b" \t\n\v\f\rab\x1c\x1f\x85\xa0"  # \x1c-\x1f and \x85 are not TF's whitespace
    for _ in range(3000):
        row = bytes(rng.choice(alphabet) for _ in range(rng.randrange(12)))
        assert row.split() == _split_whitespace(row, -1)


def _ngrams_reference(tokens, splits, widths, sep, left, right, pad_width, preserve_short):
    """TF's StringNGrams, n-gram by n-gram (``string_ngrams_op.cc``)."""

    def grams(row, width, number):
        pad = min(width - 1 if pad_width < 0 else pad_width, width - 1)
        for k in range(number):
            left_n, right_n = max(0, pad - k), max(0, pad - (number - (k + 1)))
            begin = 0 if left_n > 0 else k - pad
            middle = row[begin : begin + width - left_n - right_n]
            out.append(sep.join([left] * left_n + middle + [right] * right_n))

    out, out_splits = [], [0]
    for start, stop in itertools.pairwise(splits):
        row = tokens[start:stop]
        produced = len(out)
        for width in widths:
            pad = min(width - 1 if pad_width < 0 else pad_width, width - 1)
            grams(row, width, max(0, len(row) + 2 * pad - width + 1))
        if preserve_short and len(out) == produced and row:
            grams(row, len(row) + 2 * pad_width, 1)
        out_splits.append(len(out))
    return out, out_splits


def test_ngram_windows_equal_the_reference() -> None:
    ngrams = _kernel("StringNGrams")
    rng = random.Random(5)
    for _ in range(1500):
        lengths = [rng.randrange(6) for _ in range(rng.randrange(4))]
        tokens = [b"t%d" % i for i in range(sum(lengths))]
        splits = [0, *itertools.accumulate(lengths)]
        widths = rng.sample([1, 2, 3, 4, 5], rng.randrange(1, 3))
        sep, left, right = rng.choice([b" ", b""]), rng.choice([b"<s>", b""]), rng.choice([b"</s>", b""])
        pad_width, preserve = rng.choice([-1, 0, 1, 2]), rng.random() < 0.5
        values, out_splits = ngrams(
            np.array(tokens, dtype=object), np.array(splits, np.int64), separator=sep, ngram_widths=widths,
            left_pad=left, right_pad=right, pad_width=pad_width, preserve_short_sequences=preserve,
        )  # fmt: skip
        want = _ngrams_reference(tokens, splits, widths, sep, left, right, pad_width, preserve)
        assert (values.tolist(), out_splits.tolist()) == want


def _ragged_to_tensor_reference(splits, values, out_shape, default):
    out = np.full(out_shape, default, values.dtype)
    prefixes = [(i,) for i in range(len(splits[0]) - 1)]
    for level in splits:
        prefixes = [p + (j,) for p, (a, b) in zip(prefixes, itertools.pairwise(level)) for j in range(b - a)]
    for position, prefix in enumerate(prefixes):
        if all(p < d for p, d in zip(prefix, out_shape)):
            inner = tuple(slice(0, min(a, b)) for a, b in zip(values.shape[1:], out_shape[len(prefix) :]))
            out[prefix + inner] = values[position][inner]
    return out


def test_ragged_to_tensor_equals_the_reference() -> None:
    to_tensor = _kernel("RaggedTensorToTensor")
    rng = random.Random(6)
    for _ in range(800):
        levels, parent, splits = rng.randrange(1, 3), rng.randrange(5), []
        rows = parent
        for _ in range(levels):
            lengths = [rng.randrange(4) for _ in range(parent)]
            splits.append([0, *itertools.accumulate(lengths)])
            parent = sum(lengths)
        inner = rng.choice([(), (2,), (3, 2)])
        values = np.arange(parent * int(np.prod(inner)), dtype=np.float32).reshape((parent, *inner))
        bounding = [rows] + [max((b - a for a, b in itertools.pairwise(s)), default=0) for s in splits]
        bounding += list(inner)
        out_shape = [rng.choice([b, max(b - 1, 0), b + 1]) for b in bounding]
        got = to_tensor(
            np.array(out_shape, np.int64), values, np.float32(-1), [np.array(s, np.int64) for s in splits],
            row_partition_types=["ROW_SPLITS"] * levels,
        )  # fmt: skip
        np.testing.assert_array_equal(got, _ragged_to_tensor_reference(splits, values, out_shape, -1))


def test_example_sparse_layout_is_the_same_on_both_sides_of_the_threshold() -> None:
    example = example_pb2.Example()
    feature = example.features.feature
    feature["a"].bytes_list.value.extend([b"x", b"y", b"z"])
    feature["b"].bytes_list.value.append(b"w")
    rows = [feature["a"].bytes_list.value, None, feature["b"].bytes_list.value, ()]
    spec = SparseSpec("a", dtypes.DT_STRING)
    small = example_parser._sparse_output(spec, rows, False)
    large = example_parser._sparse_output(spec, rows * 40, False)  # past _FEW_VALUES
    assert small[0].tolist() == [[0, 0], [0, 1], [0, 2], [2, 0]]
    assert small[1].tolist() == [b"x", b"y", b"z", b"w"] and small[2].tolist() == [4, 3]
    assert large[0][:4].tolist() == small[0].tolist() and large[0][4].tolist() == [4, 0]
    assert large[2].tolist() == [160, 3] and large[0].dtype == small[0].dtype == np.int64


def test_dynamic_partition_small_path_equals_the_mask_path() -> None:
    partition = _kernel("DynamicPartition")
    rng = random.Random(7)
    for size in (0, 1, 7, SMALL + 9):
        parts = np.array([rng.randrange(3) for _ in range(size)], np.int32)
        data = np.arange(size * 2, dtype=np.float32).reshape(size, 2)
        got = partition(data, parts, num_partitions=3)
        for p, piece in enumerate(got):
            np.testing.assert_array_equal(piece, data[parts == p])
            assert piece.shape == (int((parts == p).sum()), 2) and piece.dtype == data.dtype


def test_hashed_cross_lanes_equal_the_per_feature_path() -> None:
    from runtime.kernels import sparse_cross_ops as cross

    rng = random.Random(8)
    for trial in range(300):
        batch = rng.randrange(1, 12)
        indices, values, shapes, dense = [], [], [], []
        for column in range(rng.randrange(1, 3)):
            entries = [[r, j] for r in range(batch) for j in range(rng.randrange(0, 3))]
            if trial % 4 == 0:
                rng.shuffle(entries)
            indices.append(np.array(entries, np.int64).reshape(-1, 2))
            if column % 2:
                values.append(np.array([rng.randrange(-5, 5) for _ in entries], np.int64))
            else:
                values.append(np.array([b"v%d" % rng.randrange(5) for _ in entries], dtype=object))
            shapes.append(np.array([batch, 3], np.int64))
        if trial % 3 == 0:
            dense.append(np.array([[b"d%d" % rng.randrange(3)] * 2 for _ in range(batch)], dtype=object))
        buckets, key = rng.choice([0, 1, 1000]), rng.choice([0, 956888297470, -3])
        got = cross._hashed_cross_lanes(indices, values, shapes, dense, buckets, key)
        size, columns = cross._cross_columns(indices, values, shapes, dense)
        want = cross._crossed_output(size, columns, cross._hash_crosser(buckets, key), np.int64)
        for a, b in zip(got, want):
            assert a.tolist() == b.tolist() and a.dtype == b.dtype == np.int64


def test_sparse_to_dense_checks_what_the_loop_checks() -> None:
    to_dense = _kernel("SparseToDense")
    shape = np.array([3, 4], np.int64)
    ok = np.array([[0, 1], [0, 3], [2, 0]], np.int64)
    got = to_dense(ok, shape, np.array([1, 2, 3], np.int32), np.int32(0))
    assert got.tolist() == [[0, 1, 0, 2], [0, 0, 0, 0], [3, 0, 0, 0]]
    for bad, text in (
        ([[0, 1], [0, 1], [2, 0]], r"indices\[1\] = \[0,1\] is repeated"),
        ([[0, 3], [0, 1], [2, 0]], r"indices\[1\] = \[0,1\] is out of order"),
        ([[0, 1], [0, 4], [2, 0]], r"indices\[1\] = \[0,4\] is out of bounds"),
        ([[0, 1], [1, -1], [2, 0]], r"indices\[1\] = \[1,-1\] is out of bounds"),
    ):
        with pytest.raises(errors.InvalidArgumentError, match=text):
            to_dense(np.array(bad, np.int64), shape, np.array([1, 2, 3], np.int32), np.int32(0))


def test_dynamic_stitch_small_path_equals_the_numpy_path() -> None:
    stitch = _kernel("DynamicStitch")
    rng = random.Random(9)
    for size in (1, 6, SMALL + 10):
        positions = list(range(size))
        rng.shuffle(positions)
        cut = rng.randrange(size + 1)
        pieces = [
            np.array(positions[:cut], np.int32),
            np.array([], np.int32),
            np.array(positions[cut:], np.int32),
        ]
        pieces.append(np.array(positions[:2], np.int32))  # repeated positions: the later piece wins
        data = [np.full((len(p), 2), k, np.float32) for k, p in enumerate(pieces)]
        got = stitch(pieces, data)
        want = np.zeros((size, 2), np.float32)
        for p, d in zip(pieces, data):
            for row, position in enumerate(p.tolist()):
                want[position] = d[row]
        np.testing.assert_array_equal(got, want)
    with pytest.raises(errors.InvalidArgumentError, match=r"indices\[1\] = -2 is out of range"):
        stitch([np.array([0, -2], np.int32)], [np.zeros(2, np.float32)])
