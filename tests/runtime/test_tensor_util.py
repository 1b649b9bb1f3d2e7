"""TensorProto <-> numpy against ``tf.make_tensor_proto``'s own protos, and the size guards."""

from __future__ import annotations

import time

import ml_dtypes
import numpy as np
import pytest

from apis.tensorflow.core.framework import tensor_pb2
from runtime import dtypes, errors
from runtime.tensor_util import make_ndarray, make_tensor_proto
from tests.oracle.builders.session_graphs import read_case, tensor_value


def _numpy_dtype(name: str):
    if name == "string":
        return np.dtype(object)
    if name == "bfloat16":
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def test_tf_made_protos_read_back_and_are_made_byte_for_byte():
    out, case = read_case("tensor_protos")
    assert len(case["runs"]) >= 40
    for record in case["runs"]:
        raw = (out / record["file"]).read_bytes()
        proto = tensor_pb2.TensorProto.FromString(raw)
        expected = tensor_value(np, record["dtype"], tuple(record["shape"]))
        got = make_ndarray(proto)
        assert got.dtype == _numpy_dtype(record["dtype"]), record
        assert got.shape == expected.shape and (got == expected).all(), record
        ours = make_tensor_proto(expected, dtype=proto.dtype)
        assert ours == proto, record


def test_python_values_get_tf_default_dtypes():
    assert make_tensor_proto(1.5).dtype == dtypes.DT_FLOAT
    assert make_tensor_proto([1, 2]).dtype == dtypes.DT_INT32
    assert make_tensor_proto([1, 2**40]).dtype == dtypes.DT_INT64
    assert make_tensor_proto("abc").string_val == [b"abc"]
    assert make_tensor_proto(True).bool_val == [True]
    with pytest.raises(TypeError):
        make_tensor_proto(np.array([1.5]), dtype=dtypes.DT_INT32)


def test_single_value_broadcasts_to_shape_and_fields_on_request():
    proto = make_tensor_proto(7, dtype=dtypes.DT_INT64, shape=[2, 3])
    assert list(proto.int64_val) == [7] and not proto.tensor_content
    assert (make_ndarray(proto) == np.full((2, 3), 7)).all()
    half = make_tensor_proto(np.array([1.5, -2], np.float16), use_tensor_content=False)
    assert list(half.half_val) == np.array([1.5, -2], np.float16).view(np.uint16).tolist()
    with pytest.raises(ValueError):
        make_tensor_proto([1, 2, 3], shape=[2])


def test_fewer_values_repeat_the_last_and_none_mean_zeros():
    proto = tensor_pb2.TensorProto(dtype=dtypes.DT_FLOAT, float_val=[1, 2])
    proto.tensor_shape.dim.add(size=4)
    assert make_ndarray(proto).tolist() == [1, 2, 2, 2]
    del proto.float_val[:]
    assert make_ndarray(proto).tolist() == [0, 0, 0, 0]
    strings = tensor_pb2.TensorProto(dtype=dtypes.DT_STRING)
    strings.tensor_shape.dim.add(size=2)
    assert make_ndarray(strings).tolist() == [b"", b""]


def test_inconsistent_or_huge_protos_are_invalid_arguments():
    huge = tensor_pb2.TensorProto(dtype=dtypes.DT_FLOAT, float_val=[1])
    huge.tensor_shape.dim.add(size=1 << 40)
    with pytest.raises(errors.InvalidArgumentError, match="over the limit"):
        make_ndarray(huge)
    short = tensor_pb2.TensorProto(dtype=dtypes.DT_INT32, tensor_content=b"\x00" * 6)
    short.tensor_shape.dim.add(size=2)
    with pytest.raises(errors.InvalidArgumentError, match="tensor_content holds 6 bytes"):
        make_ndarray(short)
    many = tensor_pb2.TensorProto(dtype=dtypes.DT_INT32, int_val=[1, 2, 3])
    many.tensor_shape.dim.add(size=2)
    with pytest.raises(errors.InvalidArgumentError, match="more than the 2 elements"):
        make_ndarray(many)
    negative = tensor_pb2.TensorProto(dtype=dtypes.DT_INT32)
    negative.tensor_shape.dim.add(size=-1)
    with pytest.raises(errors.InvalidArgumentError, match="not fully defined"):
        make_ndarray(negative)


def test_large_tensors_convert_without_python_loops():
    value = np.random.default_rng(0).standard_normal((1000, 1000)).astype(np.float32)
    start = time.perf_counter()
    proto = make_tensor_proto(value)
    back = make_ndarray(proto)
    fields = make_tensor_proto(value, use_tensor_content=False)
    from_fields = make_ndarray(fields)
    elapsed = time.perf_counter() - start
    assert (back == value).all() and (from_fields == value).all()
    assert back.flags.writeable
    assert elapsed < 2.0, elapsed
