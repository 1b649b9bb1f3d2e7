"""Batch forming as tables: sizes, merging, padding, splitting, slicing (no threads)."""

from __future__ import annotations

import numpy as np
import pytest

from runtime import errors
from serving.batching import batch_forming as bf


def rows(*values, dtype=np.float32) -> np.ndarray:
    return np.array(values, dtype=dtype)


@pytest.mark.parametrize(
    "shapes, size",
    [([(3,)], 3), ([(2, 4), (2,)], 2), ([(0, 5)], 0), ([(1, 2, 3, 4)], 1)],
)
def test_input_batch_size(shapes, size):
    assert bf.input_batch_size([np.zeros(s) for s in shapes]) == size


@pytest.mark.parametrize(
    "shapes, message",
    [
        ([], "Batching Run() must have at least one input tensor"),
        ([()], "Batching Run() input tensors must have at least one dimension"),
        ([(2,), ()], "Batching Run() input tensors must have at least one dimension"),
        ([(2, 3), (3, 2)], "Batching Run() input tensors must have equal 0th-dimension size"),
    ],
)
def test_input_batch_size_refused(shapes, message):
    with pytest.raises(errors.InvalidArgumentError) as raised:
        bf.input_batch_size([np.zeros(s) for s in shapes])
    assert raised.value.message == message


@pytest.mark.parametrize(
    "allowed, size, rounded",
    [
        ((), 5, 5),
        ((2, 4, 8), 1, 2),
        ((2, 4, 8), 4, 4),
        ((2, 4, 8), 5, 8),
        ((2, 4, 8), 9, 9),
        ((4, 2, 8), 3, 4),
    ],
)
def test_round_to_allowed_batch_size(allowed, size, rounded):
    assert bf.round_to_allowed_batch_size(allowed, size) == rounded


MERGES = [
    # (tasks' values of one input, allowed sizes, merged, padding rows)
    ([rows([1, 2])], (), rows([1, 2]), 0),
    ([rows([1, 2]), rows([3, 4], [5, 6])], (), rows([1, 2], [3, 4], [5, 6]), 0),
    # padding repeats the first row of the last task
    ([rows([1, 2]), rows([3, 4], [5, 6])], (2, 4), rows([1, 2], [3, 4], [5, 6], [3, 4]), 1),
    ([rows([1]), rows([2])], (4, 8), rows([1], [2], [2], [2]), 2),
    # no allowed size is large enough: no padding
    ([rows([1]), rows([2]), rows([3])], (2,), rows([1], [2], [3]), 0),
    # the last task has no rows: the one before gives the padding row
    ([rows([7]), np.zeros((0, 1), np.float32)], (4,), rows([7], [7], [7], [7]), 3),
    # no task has rows: nothing to pad with
    ([np.zeros((0, 1), np.float32)], (4,), np.zeros((0, 1), np.float32), 0),
    # strings
    (
        [np.array([b"a"], object), np.array([b"bc", b"d"], object)],
        (4,),
        np.array([b"a", b"bc", b"d", b"bc"], object),
        1,
    ),
]


@pytest.mark.parametrize("column, allowed, merged, padding", MERGES)
def test_merge_inputs(column, allowed, merged, padding):
    got, got_padding = bf.merge_inputs([[v] for v in column], ["x:0"], allowed)
    np.testing.assert_array_equal(got[0], merged)
    assert got[0].dtype == merged.dtype and got_padding == padding


def test_merge_inputs_keeps_input_order_and_one_task_as_it_is():
    a, b = rows([1], [2]), np.array([[10, 11], [12, 13]], np.int64)
    merged, padding = bf.merge_inputs([[a, b]], ["a:0", "b:0"])
    assert merged[0] is a and merged[1] is b and padding == 0
    merged, _ = bf.merge_inputs([[a, b], [a[:1], b[:1]]], ["a:0", "b:0"], (4,))
    np.testing.assert_array_equal(merged[0], rows([1], [2], [1], [1]))
    np.testing.assert_array_equal(merged[1], [[10, 11], [12, 13], [10, 11], [10, 11]])


@pytest.mark.parametrize("other", [np.zeros((1, 3), np.float32), np.zeros((1, 2, 1), np.float32)])
def test_unequal_shapes_without_padding_are_tf_serving_failed_precondition(other):
    with pytest.raises(errors.FailedPreconditionError) as raised:
        bf.merge_inputs([[np.zeros((2, 2), np.float32)], [other]], ["x:0"])
    assert raised.value.message == (
        "Tensors with name 'x:0' from different tasks have different shapes and padding is turned off. "
        "Set pad_variable_length_inputs to true, or ensure that all tensors with the same name have equal "
        "dimensions starting with the first dim."
    )


PADDED = [
    # (tasks' values, merged with pad_variable_length_inputs)
    ([rows([1, 2]), rows([3, 4, 5])], rows([1, 2, 1], [3, 4, 5])),
    (
        [np.array([[[1]]], np.int32), np.array([[[2, 3], [4, 5]]], np.int32)],
        np.array([[[1, 1], [1, 1]], [[2, 3], [4, 5]]], np.int32),
    ),
    (
        [np.array([[b"x"]], object), np.array([[b"y", b"z"]], object)],
        np.array([[b"x", b"x"], [b"y", b"z"]], object),
    ),
    # a task of 0 rows takes the other tasks' shape
    ([np.zeros((0, 1), np.float32), rows([1, 2])], rows([1, 2])),
]


@pytest.mark.parametrize("column, merged", PADDED)
def test_pad_variable_length_inputs(column, merged):
    got, padding = bf.merge_inputs([[v] for v in column], ["x:0"], pad_variable_length_inputs=True)
    np.testing.assert_array_equal(got[0], merged)
    assert got[0].dtype == merged.dtype and padding == 0


def test_padding_then_allowed_batch_size_pads_with_the_padded_first_row():
    got, padding = bf.merge_inputs([[rows([1, 2, 3])], [rows([4])]], ["x:0"], (4,), True)
    np.testing.assert_array_equal(got[0], rows([1, 2, 3], [4, 4, 4], [4, 4, 4], [4, 4, 4]))
    assert padding == 2


@pytest.mark.parametrize(
    "column, message",
    [
        ([np.zeros((1, 0), np.float32), rows([1, 2])], "Got empty tensor in batch of non-empty tensors."),
        ([np.zeros((1,) * 7, np.float32)], "Only tensors with rank from 1 to 6 can be padded."),
    ],
)
def test_padding_refused(column, message):
    with pytest.raises(errors.InvalidArgumentError) as raised:
        bf.merge_inputs([[v] for v in column], ["x:0"], pad_variable_length_inputs=True)
    assert raised.value.message == message


SPLITS = [
    # (batched output, task sizes, padding, each task's rows)
    (rows([1], [2], [3]), [1, 2], 0, [rows([1]), rows([2], [3])]),
    (rows([1], [2], [3], [9]), [1, 2], 1, [rows([1]), rows([2], [3])]),
    (rows(1, 2, 3, 9, 9), [3], 2, [rows(1, 2, 3)]),
    (rows([1], [2]), [0, 2], 0, [np.zeros((0, 1), np.float32), rows([1], [2])]),
]


@pytest.mark.parametrize("output, sizes, padding, expected", SPLITS)
def test_split_outputs(output, sizes, padding, expected):
    got = bf.split_outputs([output, output * 2], sizes, padding)
    assert len(got) == len(expected)
    for task_outputs, rows_ in zip(got, expected):
        np.testing.assert_array_equal(task_outputs[0], rows_)
        np.testing.assert_array_equal(task_outputs[1], rows_ * 2)


@pytest.mark.parametrize(
    "output, message",
    [
        (np.float32(3), "Batched output tensor has 0 dimensions"),
        (
            rows(1, 2),
            "Batched output tensor's 0th dimension does not equal the sum of the 0th dimension sizes of the "
            "input tensors",
        ),
    ],
)
def test_split_outputs_refused(output, message):
    with pytest.raises(errors.FailedPreconditionError) as raised:
        bf.split_outputs([output], [1, 2], 0)
    assert raised.value.message == message


SPLIT_SIZES = [
    # (input size, room left in the open batch, max execution batch size, sizes): TF's
    # InputSplitMetadata; the first five are input_split_metadata_test.cc's cases
    (5, 1, 1, [1, 1, 1, 1, 1]),
    (10, 3, 4, [3, 4, 3]),
    (20, 5, 6, [5, 6, 6, 3]),
    (30, 0, 11, [11, 11, 8]),
    (5, 6, 8, [5]),
    (5, 8, 8, [5]),
    (8, 8, 8, [8]),
    (11, 3, 4, [3, 4, 4]),
    (12, 3, 4, [3, 4, 4, 1]),
    (5, 0, 4, [4, 1]),
    (8, 0, 4, [4, 4]),
    (3, 0, 4, [3]),
    (20, 1, 8, [1, 8, 8, 3]),
]


@pytest.mark.parametrize("size, room, limit, sizes", SPLIT_SIZES)
def test_split_task_sizes(size, room, limit, sizes):
    assert bf.split_task_sizes(size, room, limit) == sizes
    assert sum(sizes) == size


def test_slice_inputs_then_concat_outputs_reassemble_a_task():
    a, b = np.arange(10, dtype=np.float32).reshape(5, 2), np.array([b"p", b"q", b"r", b"s", b"t"], object)
    pieces = bf.slice_inputs([a, b], [2, 1, 2])
    assert [p[0].shape[0] for p in pieces] == [2, 1, 2]
    np.testing.assert_array_equal(pieces[1][0], a[2:3])
    np.testing.assert_array_equal(pieces[2][1], b[3:])
    a_back, b_back = bf.concat_outputs(pieces)
    np.testing.assert_array_equal(a_back, a)
    np.testing.assert_array_equal(b_back, b)
    one = bf.concat_outputs([[a, b]])
    assert one[0] is a and one[1] is b
