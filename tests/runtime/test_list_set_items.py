"""A map loop's list reads and writes at once against one kernel call per step: ``set_items``
against ``TensorListSetItem`` (the same list, the same stack, the first failing write's error) and
``get_items`` against ``TensorListGetItem`` (the same items, the first failing read's error)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from runtime import errors
from runtime.execution import map_batching
from runtime.kernels import list_ops as L
from runtime.kernels import load_all
from tests.runtime.test_map_batching import plan_of

KERNELS = load_all()  # the whole registry: these tests call kernels by op type

F32, I32 = 1, 3
UNKNOWN = np.int32(-1)


def one_by_one(lst, indices, items, element_dtype=F32):
    for index, item in zip(indices, items):
        lst = L.tensor_list_set_item(lst, index, item, element_dtype=element_dtype)
    return lst


def outcome(write, lst, indices, items, element_dtype=F32):
    try:
        return write(lst, indices, items, element_dtype=element_dtype)
    except errors.OpError as e:
        return type(e), e.message


def failed(result) -> bool:
    """An (error class, message) outcome, not a list (a TensorList is a tuple too)."""
    return isinstance(result, tuple) and not isinstance(result, L.TensorList)


def assert_same_list(got, want):
    assert isinstance(got, L.TensorList) and (got.element_dtype, got.element_shape) == (
        want.element_dtype,
        want.element_shape,
    )
    assert len(got.items) == len(want.items)
    for a, b in zip(got.items, want.items):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def stack_or_error(lst, element_shape=UNKNOWN, element_dtype=F32):
    try:
        return L.tensor_list_stack(lst, element_shape, element_dtype=element_dtype)
    except errors.OpError as e:
        return type(e), e.message


def assert_same_stack(got, want):
    if isinstance(want, tuple):
        assert got == want
    else:
        assert got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes()


rng = np.random.default_rng(7)
CASES = {
    "uniform, every item": (L.tensor_list_reserve(np.array([2, 3], np.int32), 4, element_dtype=F32), [0, 1, 2, 3], [rng.random((2, 3), np.float32) for _ in range(4)]),
    "uniform, out of order": (L.tensor_list_reserve(UNKNOWN, 3, element_dtype=F32), [2, 0, 1], [rng.random((5,), np.float32) for _ in range(3)]),
    "some items unset": (L.tensor_list_reserve(np.array([2], np.int32), 4, element_dtype=F32), [1, 3], [rng.random(2, np.float32) for _ in range(2)]),
    "mixed shapes": (L.tensor_list_reserve(UNKNOWN, 3, element_dtype=F32), [0, 1, 2], [np.ones((2, 2), np.float32), np.ones((3, 2), np.float32), np.zeros((2, 2), np.float32)]),
    "items of another dtype": (L.tensor_list_reserve(UNKNOWN, 2, element_dtype=F32), [0, 1], [np.arange(3), np.arange(3) + 7]),
    "scalars": (L.tensor_list_reserve(np.array([], np.int32), 3, element_dtype=F32), [0, 1, 2], [np.float32(v) for v in (1.5, -2, 3)]),
    "an index written twice": (L.tensor_list_reserve(UNKNOWN, 2, element_dtype=F32), [0, 1, 0], [np.full(2, v, np.float32) for v in (1, 2, 3)]),
    "written over a set list": (L.tensor_list_from_tensor(np.ones((3, 2), np.float32), UNKNOWN, element_dtype=F32), [1], [np.zeros(2, np.float32)]),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("counter_dtype", [np.int32, np.int64])
def test_set_items_equals_one_set_item_per_item(case, counter_dtype):
    lst, indices, items = CASES[case]
    indices = np.array(indices, counter_dtype)
    got, want = L.set_items(lst, indices, items, element_dtype=F32), one_by_one(lst, indices, items)
    assert_same_list(got, want)
    for shape in (
        UNKNOWN,
        np.array([-1] * np.ndim(items[0]), np.int32),
        np.array([9] * max(1, np.ndim(items[0])), np.int32),
    ):
        assert_same_stack(stack_or_error(got, shape), stack_or_error(want, shape))  # fmt: skip
    # A later write changes what the list stacks to, held stack or not.
    again = [L.tensor_list_set_item(x, 0, np.asarray(items[-1]) * 2, element_dtype=F32) for x in (got, want)]
    assert_same_stack(stack_or_error(again[0]), stack_or_error(again[1]))
    assert_same_list(L.tensor_list_resize(got, 1), L.tensor_list_resize(want, 1))


def test_a_uniform_write_is_held_stacked_and_stacks_without_a_copy():
    lst = L.tensor_list_reserve(np.array([4], np.int32), 3, element_dtype=F32)
    got = L.set_items(lst, np.arange(3), [np.full(4, v, np.float32) for v in range(3)], element_dtype=F32)
    stacked = L.tensor_list_stack(got, UNKNOWN, element_dtype=F32, num_elements=3)
    assert stacked is L.tensor_list_stack(got, np.array([3, -1], np.int32)[1:], element_dtype=F32)
    np.testing.assert_array_equal(stacked, np.repeat(np.arange(3, dtype=np.float32)[:, None], 4, 1))
    with pytest.raises(errors.InvalidArgumentError, match="expected a list with 2 elements"):
        L.tensor_list_stack(got, UNKNOWN, element_dtype=F32, num_elements=2)


ERRORS = {
    "index out of range first": ([0, 5, 1, 2], [np.ones(2, np.float32), np.ones(2, np.float32), np.ones(3, np.float32), np.ones(2, np.float32)]),
    "bad shape first": ([0, 1, 7], [np.ones(2, np.float32), np.ones((2, 1), np.float32), np.ones(2, np.float32)]),
    "negative index": ([1, -1], [np.ones(2, np.float32), np.ones(2, np.float32)]),
    "last write fails": ([0, 1, 2, 3], [np.ones(2, np.float32)] * 4),
    "every item the wrong shape": ([0, 1], [np.ones(3, np.float32)] * 2),
}  # fmt: skip


@pytest.mark.parametrize("case", list(ERRORS))
def test_the_first_failing_write_raises_as_set_item_does(case):
    lst = L.tensor_list_reserve(np.array([2], np.int32), 3, element_dtype=F32)
    indices, items = ERRORS[case]
    got = outcome(L.set_items, lst, np.array(indices, np.int32), items)
    assert failed(got) and got == outcome(one_by_one, lst, np.array(indices, np.int32), items)


def test_list_errors_and_no_items():
    lst = L.tensor_list_reserve(UNKNOWN, 2, element_dtype=F32)
    items = [np.ones(2, np.float32)] * 2
    for handle, dtype in ((lst, I32), (np.zeros(2), F32)):
        got = outcome(L.set_items, handle, np.arange(2), items, dtype)
        assert failed(got) and got == outcome(one_by_one, handle, np.arange(2), items, dtype)
    handle = np.zeros(2)
    assert L.set_items(handle, np.arange(0), [], element_dtype=I32) is handle  # as zero writes


def get_one_by_one(get_item, handle, indices, element_shape):
    return [get_item(handle, index, element_shape) for index in indices]


def read_outcome(read, handle, indices, element_shape, element_dtype=F32):
    def get_item(lst, index, shape):
        return L.tensor_list_get_item(lst, index, shape, element_dtype=element_dtype)

    try:
        return read(get_item, handle, indices, element_shape)
    except errors.OpError as e:
        return type(e), e.message


PARTLY_SET = L.set_items(
    L.tensor_list_reserve(np.array([2], np.int32), 4, element_dtype=F32),
    np.array([0, 2]),
    [np.ones(2, np.float32), np.full(2, 3, np.float32)],
    element_dtype=F32,
)
READS = {
    "every item, in order": (PARTLY_SET, [0, 2, 0, 2], UNKNOWN, F32),
    "unset items read as zeros": (PARTLY_SET, [1, 0, 3, 2], UNKNOWN, F32),
    "unset with a shape given": (PARTLY_SET, [3, 1], np.array([2], np.int32), F32),
    "out of range at step 2": (PARTLY_SET, [0, 1, 4, -1], UNKNOWN, F32),
    "negative at step 1": (PARTLY_SET, [2, -1], UNKNOWN, F32),
    "out of range first": (PARTLY_SET, [9, 0], UNKNOWN, F32),
    "wrong dtype": (PARTLY_SET, [0, 2], UNKNOWN, I32),
    "unknown shape, unset": (L.tensor_list_reserve(UNKNOWN, 2, element_dtype=F32), [0, 1], UNKNOWN, F32),
    "not a list": (np.zeros(3, np.float32), [0, 1], UNKNOWN, F32),
    "a list from a tensor": (L.tensor_list_from_tensor(np.arange(6.0).reshape(3, 2), UNKNOWN, element_dtype=F32), [2, 1, 0], UNKNOWN, F32),
}  # fmt: skip


@pytest.mark.parametrize("case", list(READS))
@pytest.mark.parametrize("counter_dtype", [np.int32, np.int64])
def test_get_items_equals_one_get_item_per_step(case, counter_dtype):
    handle, indices, element_shape, dtype = READS[case]
    indices = np.array(indices, counter_dtype)
    got = read_outcome(L.get_items, handle, indices, element_shape, dtype)
    want = read_outcome(get_one_by_one, handle, indices, element_shape, dtype)
    if isinstance(want, tuple):
        assert got == want
        return
    assert len(got) == len(want)
    for a, b in zip(got, want):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def rows_of(stacked: np.ndarray) -> list:
    rows = map_batching.Rows(stacked)
    rows.stacked = stacked
    return rows


STACKED = {
    "every index, in order": (L.tensor_list_reserve(np.array([-1, 3], np.int32), 3, element_dtype=F32), [0, 1, 2], F32),
    "indices reversed": (L.tensor_list_reserve(UNKNOWN, 3, element_dtype=F32), [2, 1, 0], F32),
    "a longer list": (L.tensor_list_reserve(UNKNOWN, 4, element_dtype=F32), [0, 1, 2], F32),
    "an index out of range": (L.tensor_list_reserve(UNKNOWN, 3, element_dtype=F32), [1, 2, 3], F32),
    "another element shape": (L.tensor_list_reserve(np.array([2, 4], np.int32), 3, element_dtype=F32), [0, 1, 2], F32),
    "another dtype": (L.tensor_list_reserve(UNKNOWN, 3, element_dtype=I32), [0, 1, 2], I32),
    "a list of another dtype": (L.tensor_list_reserve(UNKNOWN, 3, element_dtype=I32), [0, 1, 2], F32),
}  # fmt: skip


@pytest.mark.parametrize("case", list(STACKED))
def test_rows_of_one_array_write_as_their_items_do(case):
    lst, indices, dtype = STACKED[case]
    stacked = rng.random((3, 2, 3), np.float32)
    indices = np.array(indices, np.int32)
    got = outcome(L.set_items, lst, indices, rows_of(stacked), dtype)
    want = outcome(one_by_one, lst, indices, list(stacked.copy()), dtype)
    if failed(want):
        assert got == want
        return
    assert_same_list(got, want)
    assert_same_stack(stack_or_error(got, element_dtype=dtype), stack_or_error(want, element_dtype=dtype))
    held = L.tensor_list_stack(got, UNKNOWN, element_dtype=dtype) is stacked
    assert held == (case == "every index, in order")  # the array itself, where it is the list


RESIZE = functools.partial(KERNELS["ResizeBilinear"].fn, half_pixel_centers=True)


@pytest.mark.parametrize(
    ("heights", "rows"),
    [((4, 6, 4, 6, 6), True), ((5, 5, 5), True), ((4, 4, 7), True), ((3, 4, 5), False)],
)
def test_run_columns_gives_rows_of_one_array_in_step_order(heights, rows):
    """Items batched in groups by size, resized to one shape: the rows of one array, each equal
    to its step's own resize (all sizes different: run per item, a plain list)."""
    images = [rng.random((1, h, 5, 3), np.float32) for h in heights]
    size = np.array([2, 2], np.int32)
    plan = plan_of(("ResizeBilinear", RESIZE, (1, 2), 3))
    (got,) = map_batching.run_columns(plan, [images, map_batching.shared(size)], len(images))
    assert isinstance(got, map_batching.Rows) == rows
    if rows:
        assert got.stacked.shape == (len(images), 1, 2, 2, 3)
        assert all(row.base is not None and np.shares_memory(row, got.stacked) for row in got)
    for row, image in zip(got, images):
        want = RESIZE(image, size)
        assert row.shape == want.shape and row.tobytes() == want.tobytes()
