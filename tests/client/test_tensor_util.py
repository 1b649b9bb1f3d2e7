"""savedmodel_client.dtypes and tensor_util without TensorFlow.

TensorFlow's own answers are checked in test_tensor_util_oracle.py; these tests cover what the
oracle cannot: the DType table, bfloat16 rounding against ml_dtypes over many bit patterns, life
without ml_dtypes, the cheap import, and the deliberate differences from TensorFlow.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import savedmodel_client as tf
from savedmodel_client import dtypes, tensor_util
from savedmodel_client.tensorflow.core.framework import tensor_pb2, types_pb2

CLIENT = Path(__file__).resolve().parents[2] / "client"

# name, enum, numpy type, size, kind (which is_* predicate holds)
DTYPES = [
    ("float16", types_pb2.DT_HALF, np.float16, 2, "float"),
    ("bfloat16", types_pb2.DT_BFLOAT16, ml_dtypes.bfloat16, 2, "float"),
    ("float32", types_pb2.DT_FLOAT, np.float32, 4, "float"),
    ("float64", types_pb2.DT_DOUBLE, np.float64, 8, "float"),
    ("int8", types_pb2.DT_INT8, np.int8, 1, "int"),
    ("int16", types_pb2.DT_INT16, np.int16, 2, "int"),
    ("int32", types_pb2.DT_INT32, np.int32, 4, "int"),
    ("int64", types_pb2.DT_INT64, np.int64, 8, "int"),
    ("uint8", types_pb2.DT_UINT8, np.uint8, 1, "uint"),
    ("uint16", types_pb2.DT_UINT16, np.uint16, 2, "uint"),
    ("uint32", types_pb2.DT_UINT32, np.uint32, 4, "uint"),
    ("uint64", types_pb2.DT_UINT64, np.uint64, 8, "uint"),
    ("bool", types_pb2.DT_BOOL, np.bool_, 1, "bool"),
    ("string", types_pb2.DT_STRING, object, 0, "string"),
    ("complex64", types_pb2.DT_COMPLEX64, np.complex64, 8, "complex"),
    ("complex128", types_pb2.DT_COMPLEX128, np.complex128, 16, "complex"),
    ("qint8", types_pb2.DT_QINT8, np.dtype([("qint8", np.int8)]), 1, "quantized"),
    ("quint8", types_pb2.DT_QUINT8, np.dtype([("quint8", np.uint8)]), 1, "quantized"),
    ("qint16", types_pb2.DT_QINT16, np.dtype([("qint16", np.int16)]), 2, "quantized"),
    ("quint16", types_pb2.DT_QUINT16, np.dtype([("quint16", np.uint16)]), 2, "quantized"),
    ("qint32", types_pb2.DT_QINT32, np.dtype([("qint32", np.int32)]), 4, "quantized"),
]


@pytest.mark.parametrize(("name", "enum", "numpy_type", "size", "kind"), DTYPES, ids=[d[0] for d in DTYPES])
def test_dtype_table(name, enum, numpy_type, size, kind) -> None:
    dtype = getattr(tf, name)
    assert isinstance(dtype, tf.DType)
    assert (dtype.name, dtype.as_datatype_enum, dtype.size) == (name, enum, size)
    assert dtype.as_numpy_dtype == numpy_type
    assert repr(dtype) == f"tf.{name}" and str(dtype) == f"<dtype: '{name}'>"
    assert hash(dtype) == enum
    for spelling in (dtype, enum, name, numpy_type):
        assert tf.as_dtype(spelling) is dtype
        assert dtype == spelling and not dtype != spelling
    if numpy_type is not object:
        assert tf.as_dtype(np.dtype(numpy_type)) is dtype
    if kind not in ("string", "quantized"):  # TF finds neither from an array either
        assert tf.as_dtype(np.zeros(1, numpy_type)) is dtype
    assert pickle.loads(pickle.dumps(dtype)) is dtype
    assert dtype.base_dtype is dtype and dtype.is_numpy_compatible
    flags = (dtype.is_bool, dtype.is_integer, dtype.is_unsigned, dtype.is_floating, dtype.is_complex)
    expected = (kind == "bool", kind in ("int", "uint"), kind == "uint", kind == "float", kind == "complex")
    assert flags == expected and dtype.is_quantized == (kind == "quantized")


def test_dtype_aliases_and_tensorflow_quirks() -> None:
    assert tf.half is tf.float16 and tf.double is tf.float64
    assert tf.as_dtype("float") is tf.float32 and tf.as_dtype("half") is tf.float16
    assert tf.as_dtype("double") is tf.float64
    assert (
        tf.as_dtype(float) is tf.float32 and tf.as_dtype(bool) is tf.bool and tf.as_dtype(object) is tf.string
    )
    assert tf.as_dtype(np.str_) is tf.string and tf.as_dtype(np.bytes_) is tf.string
    assert tf.as_dtype(np.dtype("U3")) is tf.string and tf.as_dtype(np.dtype(">f4")) is tf.float32
    assert tf.as_dtype(np.longlong) is tf.int64 and tf.as_dtype(np.intc) is tf.int32
    # TensorFlow looks values up in one dict, so True and 1.0 are enum 1.
    assert tf.as_dtype(True) is tf.float32 and tf.as_dtype(np.float64(1.0)) is tf.float32
    assert tf.complex64.real_dtype is tf.float32 and tf.complex128.real_dtype is tf.float64
    assert tf.float32.real_dtype is tf.float32
    assert tf.float32 != "foo" and tf.float32 != None and tf.float32 != 0  # noqa: E711
    assert {tf.float32: 1}[tf.as_dtype("float")] == 1
    assert tf.int32.is_compatible_with("int32") and not tf.int32.is_compatible_with(tf.int64)


@pytest.mark.parametrize(
    "value", [0, 20, 21, 24, 101, "float32_ref", "resource", "foo", int, str, np.longdouble, None]
)
def test_as_dtype_refuses_what_it_does_not_know(value) -> None:
    with pytest.raises(
        TypeError, match=r"Cannot convert the argument `type_value`: .* to a TensorFlow DType\."
    ):
        tf.as_dtype(value)


def test_import_is_cheap() -> None:
    script = (
        "import sys, savedmodel_client as tf\n"
        "tf.make_tensor_proto([1.5, 2.5], dtype=tf.bfloat16, shape=[3])\n"
        "tf.make_ndarray(tf.make_tensor_proto([[b'a'], ['b']]))\n"
        "bad = sorted(m for m in ('grpc', 'ml_dtypes', 'tensorflow', 'apis', 'runtime', 'serving', 'loader')"
        " if m in sys.modules)\n"
        "print(bad)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(CLIENT)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_public_names() -> None:
    names = (
        {"DType", "as_dtype", "make_tensor_proto", "make_ndarray"}
        | {d[0] for d in DTYPES}
        | {"half", "double"}
    )
    assert names <= set(dir(tf))
    assert set(dtypes.__all__) == names - {"make_tensor_proto", "make_ndarray"}


# bfloat16 rounding: ml_dtypes' casts are the reference (TensorFlow uses them).


def _reference(values: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return values.astype(ml_dtypes.bfloat16).view(np.uint16)


def test_bfloat16_from_float32_bit_patterns() -> None:
    patterns = np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32)
    edges = [
        0,
        0x00800000,
        0x7F7F0000,
        0x7F800000,
        0x7FC00000,
        0x80800000,
        0xFF7F0000,
        0xFF800000,
        0xFFFF0000,
    ]
    around = np.concatenate([np.arange(e - 40000, e + 40000, dtype=np.int64) for e in edges]) % (1 << 32)
    for bits in (patterns, around.astype(np.uint32)):
        values = bits.view(np.float32)
        np.testing.assert_array_equal(tensor_util._bfloat16_bits(values), _reference(values))


def test_bfloat16_from_float16_every_value() -> None:
    values = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    np.testing.assert_array_equal(tensor_util._bfloat16_bits(values), _reference(values))


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")
def test_bfloat16_from_float64_rounds_once() -> None:
    rng = np.random.default_rng(7)
    random_bits = rng.integers(0, 1 << 64, 200_000, dtype=np.uint64, endpoint=False).view(np.float64)
    halfway = (
        (rng.integers(0, 1 << 16, 200_000).astype(np.uint32) << 16 | 0x8000)
        .view(np.float32)
        .astype(np.float64)
    )
    nudged = halfway * (
        1 + rng.choice([-1.0, 1.0], halfway.size) * 2.0 ** rng.integers(-60, -20, halfway.size)
    )
    specials = np.array(
        [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, 1e-40, 1e300, 3.3961e38, 1 + 2**-8 + 2**-30]
    )
    for values in (random_bits, halfway, nudged, specials):
        np.testing.assert_array_equal(tensor_util._bfloat16_bits(values), _reference(values))


@pytest.mark.parametrize(
    "dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
)
def test_bfloat16_from_integers_rounds_once(dtype) -> None:
    info = np.iinfo(dtype)
    rng = np.random.default_rng(11)
    values = rng.integers(info.min, info.max, 100_000, dtype=dtype, endpoint=True)
    values = values >> rng.integers(0, info.bits - 1, values.size).astype(dtype)
    candidates = [info.min, info.max, 0, 1, 255, 256, 257, 2**53 + 1, 2**60 + 2**52, 2**60 + 2**52 + 1]
    edges = np.array([c for c in candidates if info.min <= c <= info.max], dtype=dtype)
    for v in (values, edges):
        np.testing.assert_array_equal(tensor_util._bfloat16_bits(v), _reference(v))


@pytest.mark.filterwarnings("ignore:Casting complex values to real:numpy.exceptions.ComplexWarning")
def test_bfloat16_other_sources() -> None:
    for values in (np.array([True, False]), np.array([1.5 + 2j]), np.array([1.5, 2**60 + 1.0], dtype=object)):
        np.testing.assert_array_equal(tensor_util._bfloat16_bits(values), _reference(values))
    assert tensor_util._bfloat16_bits(np.float64(1.5)).shape == ()
    with pytest.raises(TypeError, match=r"Cannot cast array data from dtype\('<U3'\) to dtype\(bfloat16\)"):
        tensor_util._bfloat16_bits(np.array(["1.5"]))


# Without ml_dtypes: make_tensor_proto still rounds bfloat16; make_ndarray names the extra.


@pytest.fixture
def no_ml_dtypes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # `import ml_dtypes` raises ImportError


@pytest.mark.parametrize(
    "values",
    [[1.1, -2.5, 3e38], 1 + 2**-8 + 2**-30, np.arange(6.0).reshape(2, 3) / 7, np.array([2**60 + 2**52 + 1])],
)
def test_bfloat16_protos_without_ml_dtypes(values, monkeypatch: pytest.MonkeyPatch) -> None:
    with_ml_dtypes = tf.make_tensor_proto(values, dtype=tf.bfloat16).SerializeToString()
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)
    assert tf.make_tensor_proto(values, dtype="bfloat16").SerializeToString() == with_ml_dtypes


def test_bfloat16_arrays_need_ml_dtypes(no_ml_dtypes: None) -> None:
    proto = tf.make_tensor_proto([1.5, 2.5], dtype=tf.bfloat16)
    assert proto.tensor_content == b"\xc0\x3f\x20\x40"
    assert tf.as_dtype("bfloat16") is tf.bfloat16 and tf.as_dtype(14) is tf.bfloat16
    with pytest.raises(ImportError, match=r"pip install savedmodel-client\[bfloat16\]"):
        tf.make_ndarray(proto)
    with pytest.raises(ImportError, match=r"pip install savedmodel-client\[bfloat16\]"):
        _ = tf.bfloat16.as_numpy_dtype
    # Other dtypes do not care.
    np.testing.assert_array_equal(tf.make_ndarray(tf.make_tensor_proto([1.5, 2.5])), [1.5, 2.5])


def test_bfloat16_round_trip_with_ml_dtypes() -> None:
    array = np.array([[1.0, -2.5], [np.inf, 3.0e38]], dtype=ml_dtypes.bfloat16)
    for proto in (tf.make_tensor_proto(array), tf.make_tensor_proto(array[:1, :1])):
        back = tf.make_ndarray(proto)
        assert back.dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(
            back.view(np.uint16), array[: back.shape[0], : back.shape[1]].view(np.uint16)
        )


# Round trips of every dtype.


@pytest.mark.parametrize("name", [d[0] for d in DTYPES])
def test_round_trip(name) -> None:
    dtype = tf.as_dtype(name)
    rng = np.random.default_rng(3)
    if name == "string":
        array = np.array([[b"a", b"\x00"], [b"", "\u00e9".encode()]], dtype=object)
    elif dtype.is_quantized:
        array = rng.integers(0, 100, (2, 3)).astype(dtype.as_numpy_dtype)
    else:
        array = (rng.standard_normal((2, 3)) * 100).astype(dtype.as_numpy_dtype)
    for values in (array, array[:1, :1], array[:0]):
        proto = tf.make_tensor_proto(values)
        assert proto.dtype == dtype.as_datatype_enum
        back = tf.make_ndarray(proto)
        assert back.dtype == values.dtype and back.shape == values.shape
        if name == "string":
            assert back.tolist() == values.tolist()
        else:
            assert back.tobytes() == values.tobytes()


# Deliberate differences from TensorFlow.


@pytest.mark.parametrize(
    "values", [np.array([1.0, 2.0], dtype=">f4"), np.array([1.0], dtype=">f4"), np.array([7], ">i8")]
)
def test_non_native_byte_order_is_converted(values) -> None:
    """TensorFlow copies big-endian bytes into tensor_content unswapped (and raises for one element)."""
    native = values.astype(values.dtype.newbyteorder("="))
    assert (
        tf.make_tensor_proto(values).SerializeToString() == tf.make_tensor_proto(native).SerializeToString()
    )


@pytest.mark.parametrize("dtype", [0, ""])
def test_falsy_dtype_is_refused(dtype) -> None:
    """TensorFlow skips a falsy dtype and then fails with an AttributeError."""
    with pytest.raises(TypeError, match="to a TensorFlow DType"):
        tf.make_tensor_proto([1.0], dtype=dtype)


@pytest.mark.parametrize("enum", [types_pb2.DT_RESOURCE, types_pb2.DT_VARIANT, types_pb2.DT_FLOAT8_E5M2, 101])
def test_dtypes_without_a_numpy_meaning_are_refused(enum) -> None:
    """TensorFlow raises KeyError for resource and variant and reads float8 with ml_dtypes."""
    with pytest.raises(TypeError, match="to a TensorFlow DType"):
        tf.make_ndarray(tensor_pb2.TensorProto(dtype=enum))


def test_content_larger_than_2gb_is_refused() -> None:
    huge = np.broadcast_to(np.float32(0), (1 << 29,))  # 2 GiB of float32 without allocating it
    with pytest.raises(ValueError, match="Cannot create a tensor proto whose content is larger than 2GB."):
        tf.make_tensor_proto(huge)


def test_broadcast_stores_one_value() -> None:
    proto = tf.make_tensor_proto(2.5, shape=[1000, 1000])
    assert list(proto.float_val) == [2.5] and not proto.tensor_content
    assert tf.make_ndarray(proto).shape == (1000, 1000)
