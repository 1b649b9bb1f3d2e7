"""TensorArrayV3 kernels: per-run arrays, reads and writes, TF's errors.

TF-made expectations come through ``cf_v1_tensor_array``, ``cf_v1_map_fn`` and
``cf_v1_dynamic_rnn`` (checked in ``test_control_flow.py``); here each kernel alone.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from runtime import errors
from runtime.kernels import tensor_array_ops as T

F32 = 1


class _Ctx:
    name = "ta"


def make(size=3, **attrs):
    handle, flow = T.tensor_array_v3(np.int32(size), dtype=F32, ctx=_Ctx(), **attrs)
    assert flow == 0
    return handle


def test_write_read_gather_size():
    ta = make(element_shape=(2,))
    T.tensor_array_write_v3(ta, 1, np.array([1, 2], np.float32), 0.0)
    np.testing.assert_array_equal(T.tensor_array_read_v3(ta, 1, 0.0, dtype=F32), [1, 2])
    ta = make(element_shape=(2,), clear_after_read=False)
    T.tensor_array_scatter_v3(ta, np.array([2, 0]), np.array([[1, 1], [3, 3]], np.float32), 0.0)
    gathered = T.tensor_array_gather_v3(ta, np.array([0, 1, 2]), 0.0, dtype=F32)
    np.testing.assert_array_equal(gathered, [[3, 3], [0, 0], [1, 1]])  # unwritten: zeros of a known shape
    assert T.tensor_array_size_v3(ta, 0.0) == 3


def test_split_concat():
    ta = make(size=2)
    T.tensor_array_split_v3(ta, np.arange(5, dtype=np.float32), np.array([3, 2], np.int64), 0.0)
    values, lengths = T.tensor_array_concat_v3(ta, 0.0, dtype=F32)
    np.testing.assert_array_equal(values, np.arange(5))
    np.testing.assert_array_equal(lengths, [3, 2])
    assert lengths.dtype == np.int64


def test_dynamic_size_grows():
    ta = make(size=0, dynamic_size=True)
    T.tensor_array_write_v3(ta, 2, np.float32(5), 0.0)
    assert T.tensor_array_size_v3(ta, 0.0) == 3


def test_empty_gather_uses_the_element_shape():
    assert T.tensor_array_gather_v3(
        make(size=0, element_shape=(3,)), np.zeros([0], np.int32), 0.0, dtype=F32
    ).shape == (0, 3)
    with pytest.raises(errors.InvalidArgumentError, match="TensorArray has size zero"):
        T.tensor_array_gather_v3(make(size=0), np.zeros([0], np.int32), 0.0, dtype=F32)


@pytest.mark.parametrize(
    ("steps", "text"),
    [
        ([("w", 3, 1.0)], "Tried to write to index 3 but array is not resizeable and size is: 3"),
        (
            [("w", 0, 1.0), ("w", 0, 2.0)],
            "Could not write to TensorArray index 0 because it has already been written to.",
        ),
        (
            [("r", 0)],
            "Could not read from TensorArray index 0.  Furthermore, the element shape is not fully defined",
        ),
        (
            [("w", 0, 1.0), ("r", 0), ("r", 0)],
            "Could not read index 0 twice because it was cleared after a previous read",
        ),
    ],
)
def test_errors(steps, text):
    """TF's texts, recorded from TF 2.15 (the array's name ends in a process-wide counter)."""
    ta = make()
    with pytest.raises(errors.InvalidArgumentError, match=rf"^TensorArray ta_\d+: {re.escape(text)}"):
        for step in steps:
            if step[0] == "w":
                T.tensor_array_write_v3(ta, step[1], np.float32(step[2]), 0.0)
            else:
                T.tensor_array_read_v3(ta, step[1], 0.0, dtype=F32)


def test_read_past_the_end():
    with pytest.raises(
        errors.InvalidArgumentError, match=r"^Tried to read from index 7 but array size is: 3$"
    ):
        T.tensor_array_read_v3(make(), 7, 0.0, dtype=F32)


def test_incompatible_write_shape():
    ta = make(element_shape=(2,))
    with pytest.raises(errors.InvalidArgumentError, match=r"value shape is \[3\] which is incompatible"):
        T.tensor_array_write_v3(ta, 0, np.zeros(3, np.float32), 0.0)
