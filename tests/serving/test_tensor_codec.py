"""serving.inference.tensor_codec: TF's FromProto semantics in, AsProtoField encoding out, no unbounded fills."""

import sys
import time

import ml_dtypes
import numpy as np
import pytest

from apis.tensorflow.core.framework import tensor_pb2, types_pb2
from runtime import dtypes
from serving.inference import tensor_codec

ROUND_TRIP = {
    "float": np.float32([[1.5, -2], [3, 4e-7]]),
    "double": np.float64([1e300, -0.0]),
    "int32": np.int32([-1, 5, 1 << 30, -(1 << 31)]),
    "int64": np.arange(-300, 300, 7, dtype=np.int64),
    "int64 extremes": np.int64([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0]),
    "uint8": np.uint8([255, 0, 7]),
    "int8": np.int8([-128, 127]),
    "int16": np.int16([-32768, 300]),
    "uint16": np.uint16([65535, 1]),
    "uint32": np.uint32([4_000_000_000, 3]),
    "uint64": np.uint64([2**64 - 1, 0, 200]),
    "bool": np.bool_([[True, False, True]]),
    "half": np.float16([1.5, -2, 65504]),
    "bfloat16": np.array([1.5, -2, 3e38], ml_dtypes.bfloat16),
    "complex64": np.complex64([1 + 2j, -3j]),
    "complex128": np.complex128([1e100 + 2j]),
    "string": np.array([[b"a", b""], [b"\xff\x00", b"long" * 100]], object),
    "scalar": np.float32(3),
    "empty": np.zeros((0, 3), np.float32),
}


@pytest.mark.parametrize("array", ROUND_TRIP.values(), ids=ROUND_TRIP.keys())
def test_round_trip_through_typed_fields_and_tensor_content(array):
    array = np.asarray(array)
    for encode in (tensor_codec.encode_into, tensor_codec.encode_content_into):
        proto = tensor_pb2.TensorProto()
        encode(proto, array)
        decoded = tensor_codec.decode(tensor_pb2.TensorProto.FromString(proto.SerializeToString()))
        assert decoded.dtype == array.dtype and decoded.shape == array.shape
        np.testing.assert_array_equal(decoded, array)


@pytest.mark.parametrize("array", ROUND_TRIP.values(), ids=ROUND_TRIP.keys())
def test_encoding_is_what_protobuf_writes_for_the_same_field_values(array):
    """The packed bytes we build parse to exactly the values protobuf's own setters store."""
    array = np.asarray(array)
    ours = tensor_codec.make_tensor_proto(array)
    assert not ours.tensor_content
    expected = tensor_pb2.TensorProto(dtype=ours.dtype)
    expected.tensor_shape.SetInParent()
    for d in array.shape:
        expected.tensor_shape.dim.add().size = d
    flat = array.reshape(-1)
    dtype = ours.dtype
    if dtype in (dtypes.DT_HALF, dtypes.DT_BFLOAT16):
        expected.half_val.extend(flat.view(np.uint16).tolist())
    elif dtype == dtypes.DT_COMPLEX64:
        expected.scomplex_val.extend(flat.view(np.float32).tolist())
    elif dtype == dtypes.DT_COMPLEX128:
        expected.dcomplex_val.extend(flat.view(np.float64).tolist())
    else:
        getattr(expected, tensor_codec._FIELD[dtype][0]).extend(flat.tolist())
    assert ours == expected
    assert ours.SerializeToString(deterministic=True) == expected.SerializeToString(deterministic=True)


def test_scalar_float_is_encoded_like_tf_serving_predict_tests():
    # predict_util_test.cc: float_val: 3, dtype: DT_FLOAT, tensor_shape present and empty.
    proto = tensor_codec.make_tensor_proto(np.float32(3.0))
    assert proto.dtype == types_pb2.DT_FLOAT
    assert list(proto.float_val) == [3.0]
    assert proto.HasField("tensor_shape") and not proto.tensor_shape.dim


def test_signature_dtype_hint_picks_quantized_alias():
    proto = tensor_codec.make_tensor_proto(np.int8([1, 2]), dtypes.DT_QINT8)
    assert proto.dtype == dtypes.DT_QINT8 and list(proto.int_val) == [1, 2]
    # A hint that does not match the array is ignored: the array's own dtype is reported.
    assert tensor_codec.make_tensor_proto(np.float64([1]), dtypes.DT_FLOAT).dtype == dtypes.DT_DOUBLE


def test_str_outputs_are_utf8_bytes():
    proto = tensor_codec.make_tensor_proto(np.array(["é", b"x"], object))
    assert list(proto.string_val) == ["é".encode(), b"x"]


def _proto(dtype, shape, **fields):
    proto = tensor_pb2.TensorProto(dtype=dtype, **fields)
    for d in shape:
        proto.tensor_shape.dim.add().size = d
    return proto


def test_fewer_values_than_elements_repeat_the_last_value():
    decoded = tensor_codec.decode(_proto(types_pb2.DT_FLOAT, [2, 3], float_val=[1, 2]))
    np.testing.assert_array_equal(decoded, [[1, 2, 2], [2, 2, 2]])


def test_no_values_means_zeros_or_empty_strings():
    np.testing.assert_array_equal(tensor_codec.decode(_proto(types_pb2.DT_INT64, [3])), [0, 0, 0])
    assert tensor_codec.decode(_proto(types_pb2.DT_STRING, [2])).tolist() == [b"", b""]


def test_values_past_the_shape_are_ignored_as_tf_does():
    decoded = tensor_codec.decode(_proto(types_pb2.DT_INT32, [2], int_val=[1, 2, 3, 4]))
    np.testing.assert_array_equal(decoded, [1, 2])


def test_scalar_without_shape_reads_one_value():
    assert tensor_codec.decode(_proto(types_pb2.DT_FLOAT, [], float_val=[2.0])) == 2.0


def test_tensor_content_is_zero_copy_and_read_only():
    proto = tensor_pb2.TensorProto()
    tensor_codec.encode_content_into(proto, np.arange(6, dtype=np.float32).reshape(2, 3))
    decoded = tensor_codec.decode(proto)
    assert not decoded.flags.writeable
    np.testing.assert_array_equal(decoded, np.arange(6).reshape(2, 3))


def test_shapes_are_parsed_once_each_but_long_ones_are_not_kept(monkeypatch):
    """Requests repeat a few shapes; a shape carrying long dim names is read, never kept."""
    monkeypatch.setattr(tensor_codec, "_SHAPES", {})
    parsed = []
    parse = tensor_codec._parse_shape
    monkeypatch.setattr(tensor_codec, "_parse_shape", lambda wire: parsed.append(wire) or parse(wire))
    proto = _proto(types_pb2.DT_FLOAT, [2, 1, 1], float_val=[1, 2])
    first = tensor_codec.decode(proto)
    np.testing.assert_array_equal(tensor_codec.decode(proto), first)
    assert len(parsed) == 1
    named = _proto(types_pb2.DT_FLOAT, [2, 1], float_val=[1, 2])
    named.tensor_shape.dim[0].name = "n" * 10_000
    kept = len(tensor_codec._SHAPES)
    np.testing.assert_array_equal(tensor_codec.decode(named), first.reshape(2, 1))
    np.testing.assert_array_equal(tensor_codec.decode(named), first.reshape(2, 1))
    assert len(parsed) == 3 and len(tensor_codec._SHAPES) == kept


def test_content_view_reads_known_shapes_and_leaves_the_rest_to_decode(monkeypatch):
    monkeypatch.setattr(tensor_codec, "_SHAPES", {})
    f32 = np.dtype(np.float32)
    proto = _proto(types_pb2.DT_FLOAT, [2, 3, 1], tensor_content=np.arange(6, dtype=np.float32).tobytes())
    assert tensor_codec.content_view(proto, f32, 4) is None
    expected = tensor_codec.decode(proto)  # now a known shape
    view = tensor_codec.content_view(proto, f32, 4)
    assert view.shape == (2, 3, 1) and not view.flags.writeable
    np.testing.assert_array_equal(view, expected)
    short = _proto(types_pb2.DT_FLOAT, [2, 3, 1], tensor_content=b"\0" * 20)
    assert tensor_codec.content_view(short, f32, 4) is None  # decode reports the size error
    values = _proto(types_pb2.DT_FLOAT, [2, 3, 1], float_val=[1.0])
    assert tensor_codec.content_view(values, f32, 4) is None  # the typed field: decode fills it


BAD = {
    "content size": _proto(types_pb2.DT_FLOAT, [3], tensor_content=b"\0" * 8),
    "negative dim": _proto(types_pb2.DT_FLOAT, [-1], float_val=[1]),
    "unknown rank": tensor_pb2.TensorProto(
        dtype=types_pb2.DT_FLOAT, tensor_shape={"unknown_rank": True}, float_val=[1]
    ),
    "invalid dtype": _proto(types_pb2.DT_INVALID, [1]),
    "ref dtype": _proto(types_pb2.DT_FLOAT_REF, [1], float_val=[1]),
    "resource": _proto(types_pb2.DT_RESOURCE, [1]),
    "element count overflows int64": _proto(types_pb2.DT_FLOAT, [1 << 40, 1 << 40], float_val=[1]),
    "truncated string content": _proto(types_pb2.DT_STRING, [1], tensor_content=b"\x05ab"),
}


@pytest.mark.parametrize("proto", BAD.values(), ids=BAD.keys())
def test_protos_tf_cannot_parse_are_refused(proto):
    with pytest.raises(tensor_codec.TensorProtoError):
        tensor_codec.decode(proto)


def test_huge_claimed_shape_without_data_is_refused_without_allocating():
    proto = _proto(types_pb2.DT_FLOAT, [1 << 20, 1 << 20], float_val=[1.0])  # 4 TiB claimed
    start = time.perf_counter()
    with pytest.raises(tensor_codec.TensorProtoError):
        tensor_codec.decode(proto)
    with pytest.raises(tensor_codec.TensorProtoError):
        tensor_codec.decode(_proto(types_pb2.DT_STRING, [1 << 40]))
    assert time.perf_counter() - start < 0.5


def test_fill_limit_is_a_parameter():
    proto = _proto(types_pb2.DT_FLOAT, [100], float_val=[1.0])
    with pytest.raises(tensor_codec.TensorProtoError):
        tensor_codec.decode(proto, max_fill_bytes=399)
    assert tensor_codec.decode(proto, max_fill_bytes=400).shape == (100,)


def test_string_tensor_content_uses_tf_encoding():
    proto = _proto(types_pb2.DT_STRING, [3], tensor_content=b"\x01\x00\x02" + b"x" + b"" + b"ab")
    assert tensor_codec.decode(proto).tolist() == [b"x", b"", b"ab"]


def test_large_tensors_encode_and_decode_without_per_element_python():
    """A 4M-float and a 1M-int64 tensor both ways make a few hundred Python-level calls at
    most, not one per element: counted with a profiler (every Python call and every builtin
    call), so the check holds however busy the machine is."""
    array = np.random.default_rng(0).random(4_000_000, dtype=np.float32)
    ints = np.random.default_rng(0).integers(-(1 << 40), 1 << 40, 1_000_000)
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        proto = tensor_codec.make_tensor_proto(array)
        int_proto = tensor_codec.make_tensor_proto(ints)
        wire = tensor_pb2.TensorProto.FromString(proto.SerializeToString())
        decoded, decoded_ints = tensor_codec.decode(wire), tensor_codec.decode(int_proto)
    finally:
        sys.setprofile(None)
    np.testing.assert_array_equal(decoded, array)
    np.testing.assert_array_equal(decoded_ints, ints)
    assert calls < 1_000, calls


def test_more_dimensions_than_numpy_holds_is_a_shape_error():
    """TF allows 254 dimensions, numpy 64: a tensor of 65 is refused as a bad shape (a
    request's INVALID_ARGUMENT), not a ValueError from numpy."""
    for rank, ok in ((64, True), (65, False), (254, False)):
        proto = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[1.0])
        for _ in range(rank):
            proto.tensor_shape.dim.add().size = 1
        if ok:
            assert tensor_codec.decode(proto).shape == (1,) * rank
        else:
            with pytest.raises(tensor_codec.TensorProtoError, match="invalid tensor shape"):
                tensor_codec.decode(proto)
