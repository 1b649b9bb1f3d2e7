"""TensorList kernels: values, immutability, TF's errors.

TF-made expectations for these ops come through whole models: the Keras LSTM/GRU exports and
``cf_tf2_functional`` (tf.TensorArray in tf.function: Reserve, FromTensor, SetItem with resize,
Stack, Gather, ScatterIntoExistingList, Split, ConcatV2, Length), checked in
``test_control_flow.py``. Here: each kernel alone, edge cases and error texts.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from runtime import errors
from runtime.kernels import list_ops as L

F32 = 1
UNKNOWN = np.int32(-1)


def shape(*dims) -> np.ndarray:
    return np.array(dims, np.int32)


def test_reserve_set_get_stack_length():
    lst = L.tensor_list_reserve(shape(2), np.int32(3), element_dtype=F32)
    assert L.tensor_list_length(lst) == 3
    lst2 = L.tensor_list_set_item(lst, np.int32(1), np.array([1.0, 2.0], np.float32), element_dtype=F32)
    assert lst.items == (None, None, None)  # the input list is unchanged
    np.testing.assert_array_equal(L.tensor_list_get_item(lst2, 1, UNKNOWN, element_dtype=F32), [1.0, 2.0])
    np.testing.assert_array_equal(L.tensor_list_get_item(lst2, 0, UNKNOWN, element_dtype=F32), [0.0, 0.0])
    stacked = L.tensor_list_stack(lst2, UNKNOWN, element_dtype=F32)
    np.testing.assert_array_equal(stacked, [[0, 0], [1, 2], [0, 0]])
    assert stacked.dtype == np.float32


def test_from_tensor_gather_element_shape():
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    lst = L.tensor_list_from_tensor(x, UNKNOWN, element_dtype=F32)
    np.testing.assert_array_equal(
        L.tensor_list_gather(lst, np.array([2, 0]), UNKNOWN, element_dtype=F32), x[[2, 0]]
    )
    assert L.tensor_list_element_shape(lst, shape_type=3) == -1  # the element_shape input, as in TF
    known = L.tensor_list_from_tensor(x, shape(-1), element_dtype=F32)
    np.testing.assert_array_equal(L.tensor_list_element_shape(known, shape_type=3), [-1])
    unknown = L.empty_tensor_list(UNKNOWN, np.int32(-1), element_dtype=F32)
    assert L.tensor_list_element_shape(unknown, shape_type=9) == -1
    partial = L.empty_tensor_list(shape(-1, 3), np.int32(-1), element_dtype=F32)
    np.testing.assert_array_equal(L.tensor_list_element_shape(partial, shape_type=3), [-1, 3])


def test_push_pop_resize():
    lst = L.empty_tensor_list(shape(), np.int32(-1), element_dtype=F32)
    lst = L.tensor_list_push_back(lst, np.float32(1), element_dtype=F32)
    lst = L.tensor_list_push_back(lst, np.float32(2), element_dtype=F32)
    rest, last = L.tensor_list_pop_back(lst, UNKNOWN, element_dtype=F32)
    assert last == 2 and L.tensor_list_length(rest) == 1 and L.tensor_list_length(lst) == 2
    grown = L.tensor_list_resize(lst, np.int32(4))
    np.testing.assert_array_equal(L.tensor_list_stack(grown, UNKNOWN, element_dtype=F32), [1, 2, 0, 0])
    assert L.tensor_list_length(L.tensor_list_resize(grown, np.int32(1))) == 1


def test_set_item_resizes_when_asked():
    lst = L.empty_tensor_list(shape(), np.int32(-1), element_dtype=F32)
    lst = L.tensor_list_set_item(lst, 2, np.float32(5), element_dtype=F32, resize_if_index_out_of_bounds=True)
    np.testing.assert_array_equal(L.tensor_list_stack(lst, UNKNOWN, element_dtype=F32), [0, 0, 5])
    with pytest.raises(
        errors.InvalidArgumentError, match="Trying to modify element 3 in a list with 3 elements"
    ):
        L.tensor_list_set_item(lst, 3, np.float32(1), element_dtype=F32)


def test_split_concat_scatter():
    x = np.arange(5, dtype=np.float32)
    lst = L.tensor_list_split(x, UNKNOWN, np.array([2, 0, 3], np.int64), element_dtype=F32)
    assert [item.tolist() for item in lst.items] == [[0, 1], [], [2, 3, 4]]
    values, lengths = L.tensor_list_concat_v2(lst, UNKNOWN, np.zeros([0], np.int64), element_dtype=F32)
    np.testing.assert_array_equal(values, x)
    np.testing.assert_array_equal(lengths, [2, 0, 3])
    assert lengths.dtype == np.int64
    scattered = L.tensor_list_scatter_v2(
        np.array([[1.0], [2.0]], np.float32), np.array([3, 0]), UNKNOWN, np.int32(5), element_dtype=F32
    )
    assert L.tensor_list_length(scattered) == 5
    into = L.tensor_list_scatter_into_existing_list(
        scattered, np.array([[7.0]], np.float32), np.array([1]), element_dtype=F32
    )
    np.testing.assert_array_equal(
        L.tensor_list_gather(into, np.array([0, 1, 3]), UNKNOWN, element_dtype=F32), [[2], [7], [1]]
    )


def test_empty_stack_needs_a_known_shape():
    empty = L.empty_tensor_list(shape(2), np.int32(-1), element_dtype=F32)
    assert L.tensor_list_stack(empty, UNKNOWN, element_dtype=F32).shape == (0, 2)
    unknown = L.empty_tensor_list(UNKNOWN, np.int32(-1), element_dtype=F32)
    with pytest.raises(errors.InvalidArgumentError, match="non-fully-defined element_shape"):
        L.tensor_list_stack(unknown, UNKNOWN, element_dtype=F32)


def _unset():
    return L.tensor_list_reserve(UNKNOWN, np.int32(1), element_dtype=F32)


@pytest.mark.parametrize(
    ("call", "text"),
    [
        (
            lambda lst: L.tensor_list_get_item(lst, 5, UNKNOWN, element_dtype=F32),
            "Trying to access element 5 in a list with 2 elements.",
        ),
        (
            lambda lst: L.tensor_list_get_item(lst, 0, UNKNOWN, element_dtype=3),
            "Invalid data types; op elements int32 but list elements float",
        ),
        (
            lambda lst: L.tensor_list_set_item(lst, 0, np.zeros(3, np.float32), element_dtype=F32),
            "Tried to set a tensor with incompatible shape at a list index. Item element shape: [3] list shape: [2]",
        ),
        (
            lambda lst: L.tensor_list_from_tensor(np.zeros((2, 2), np.float32), shape(3), element_dtype=F32),
            "Specified a list with shape [3] from a tensor with shape [2]",
        ),
        (
            lambda lst: L.tensor_list_get_item(np.zeros(2), 0, UNKNOWN, element_dtype=F32),
            "Input handle is not a list",
        ),
        (
            lambda lst: L.tensor_list_get_item(_unset(), 0, UNKNOWN, element_dtype=F32),
            "element_shape is not fully defined: <unknown> and no list element is set.",
        ),
        (
            lambda lst: L.tensor_list_split(
                np.zeros(5, np.float32), UNKNOWN, np.array([2, 2]), element_dtype=F32
            ),
            "Unused values in tensor. Length of tensor: 5 Values used: 4",
        ),
        (
            lambda lst: L.tensor_list_pop_back(
                L.empty_tensor_list(UNKNOWN, -1, element_dtype=F32), UNKNOWN, element_dtype=F32
            ),
            "Trying to pop from an empty list.",
        ),
    ],
)
def test_errors(call, text):
    """TF's texts, as TF 2.15 reports them."""
    lst = L.tensor_list_from_tensor(np.zeros((2, 2), np.float32), shape(2), element_dtype=F32)
    with pytest.raises(errors.InvalidArgumentError, match=re.escape(text)):
        call(lst)
