"""serving.open_inference.datatypes: every V2 datatype in every form, and what bad data gets.

Properties over generated tensors: raw bytes, typed contents and JSON data each give back the
array they were made from (dtype, shape, values); nested JSON is the flat data; and fuzzed data
of any kind is either a tensor of the claimed shape or INVALID_ARGUMENT, nothing else.
"""

from __future__ import annotations

import itertools
import random

import ml_dtypes
import numpy as np
import pytest

from apis.inference import grpc_predict_v2_pb2 as v2
from apis.tensorflow.core.framework import types_pb2
from runtime import dtypes, errors
from serving.open_inference import datatypes

NUMERIC = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64"]
FLOATS = ["FP16", "FP32", "FP64", "BF16"]
ALL = [*NUMERIC, *FLOATS, "BYTES"]


def sample(datatype: str, shape, rng: np.random.Generator) -> np.ndarray:
    n = int(np.prod(shape))
    if datatype == "BYTES":
        out = np.empty(n, object)
        out[:] = [bytes(rng.integers(0, 256, rng.integers(0, 6)).astype(np.uint8)) for _ in range(n)]
        return out.reshape(shape)
    np_dtype = datatypes.numpy_dtype(datatype)
    if datatype == "BOOL":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if np_dtype.kind in "iu":
        info = np.iinfo(np_dtype)
        edges = np.array([info.min, info.max, 0], np_dtype)
        values = rng.integers(info.min, info.max, n, dtype=np_dtype, endpoint=True)
        values[: min(n, 3)] = edges[: min(n, 3)]
        return values.reshape(shape)
    return (rng.normal(size=n) * 1000).astype(np.float32).astype(np_dtype).reshape(shape)


def same(a: np.ndarray, b: np.ndarray) -> None:
    assert (a.dtype, a.shape) == (b.dtype, b.shape)
    if a.dtype == object:
        assert a.tolist() == b.tolist()
    else:
        assert a.tobytes() == b.tobytes()


SHAPES = [(), (0,), (1,), (3,), (2, 3), (2, 0, 4), (1, 1, 1, 5)]


@pytest.mark.parametrize("datatype", ALL)
def test_every_form_gives_back_the_tensor(datatype):
    rng = np.random.default_rng(7)
    for shape in SHAPES:
        array = sample(datatype, shape, rng)
        same(datatypes.from_raw(datatypes.to_raw(array, datatype), datatype, shape, "x"), array)
        data = datatypes.to_json(array, datatype)
        if datatype != "BYTES" or all(v.decode("utf-8", "replace").encode() == v for v in array.reshape(-1)):
            got = datatypes.from_json(data, datatype, shape, "x")
            if datatype in ("FP16", "BF16"):
                got = got.astype(array.dtype)
            same(got, array)
        nested = array.astype(np.float32).tolist() if datatype in ("FP16", "BF16") else None
        if shape and datatype not in ("BYTES",) and nested is None:
            same(datatypes.from_json(array.tolist(), datatype, shape, "x"), array)  # nested, row-major
        if datatype in datatypes.CONTENTS_FIELD:
            contents = v2.InferTensorContents()
            datatypes.fill_contents(contents, array, datatype)
            same(datatypes.from_contents(contents, datatype, shape, "x"), array)


def test_the_table_is_tfs_dtypes_one_to_one():
    assert {datatypes.tf_dtype(d) for d in ALL} == {
        dtypes.DT_BOOL, dtypes.DT_UINT8, dtypes.DT_UINT16, dtypes.DT_UINT32, dtypes.DT_UINT64,
        dtypes.DT_INT8, dtypes.DT_INT16, dtypes.DT_INT32, dtypes.DT_INT64, dtypes.DT_HALF,
        dtypes.DT_FLOAT, dtypes.DT_DOUBLE, dtypes.DT_BFLOAT16, dtypes.DT_STRING,
    }  # fmt: skip
    for datatype in ALL:
        assert datatypes.datatype_of(datatypes.tf_dtype(datatype)) == datatype
    assert datatypes.numpy_dtype("BF16") == np.dtype(ml_dtypes.bfloat16)
    for dtype in (dtypes.DT_COMPLEX64, dtypes.DT_QINT8, dtypes.DT_RESOURCE, dtypes.DT_VARIANT):
        with pytest.raises(errors.InvalidArgumentError, match="has no Open Inference Protocol datatype"):
            datatypes.datatype_of(dtype)
        assert datatypes.metadata_datatype(dtype) == types_pb2.DataType.Name(dtype)
    for bad in ("FLOAT32", "fp32", "", "COMPLEX64"):
        with pytest.raises(errors.InvalidArgumentError, match="invalid datatype"):
            datatypes.tf_dtype(bad)


def test_raw_bytes_are_little_endian_and_bytes_elements_length_prefixed():
    assert datatypes.to_raw(np.int32([1, -2]), "INT32") == b"\x01\x00\x00\x00\xfe\xff\xff\xff"
    strings = np.array([b"ab", b""], object)
    assert datatypes.to_raw(strings, "BYTES") == b"\x02\x00\x00\x00ab\x00\x00\x00\x00"
    assert datatypes.from_raw(b"\x01\x00", "UINT16", (1,), "x").tolist() == [1]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: datatypes.from_raw(b"\x00" * 7, "FP32", (2,), "x"), "needs 8 bytes, got 7"),
        (lambda: datatypes.from_raw(b"\x05\x00\x00\x00ab", "BYTES", (1,), "x"), "runs past the data"),
        (lambda: datatypes.from_raw(b"\x00\x00\x00\x00", "BYTES", (2,), "x"), "fewer than 2 elements"),
        (lambda: datatypes.from_raw(b"\x00\x00\x00\x00!", "BYTES", (1,), "x"), "more than 1 elements"),
        (lambda: datatypes.from_raw(b"", "FP32", (-1,), "x"), "invalid shape"),
        (lambda: datatypes.from_raw(b"", "FP32", (1,) * 65, "x"), "invalid shape"),
        (lambda: datatypes.from_json([1, 2, 3], "FP32", (2,), "x"), "needs 2 elements, got 3"),
        (lambda: datatypes.from_json([1.5], "INT32", (1,), "x"), "must be integers"),
        (lambda: datatypes.from_json([300], "UINT8", (1,), "x"), "out of range"),
        (lambda: datatypes.from_json([2**64], "INT64", (1,), "x"), "out of range"),
        (lambda: datatypes.from_json([1], "BOOL", (1,), "x"), "true or false"),
        (lambda: datatypes.from_json(["a"], "FP32", (1,), "x"), "must be numbers"),
        (lambda: datatypes.from_json([True], "FP32", (1,), "x"), "must be numbers"),
        (lambda: datatypes.from_json([1], "BYTES", (1,), "x"), "must be strings"),
        (lambda: datatypes.from_json("abc", "BYTES", (1,), "x"), "must be an array"),
        (lambda: datatypes.from_contents(v2.InferTensorContents(), "FP16", (1,), "x"), "raw_input_contents"),
        (
            lambda: datatypes.from_contents(v2.InferTensorContents(int_contents=[200]), "INT8", (1,), "x"),
            "out of range",
        ),
        (
            lambda: datatypes.from_contents(v2.InferTensorContents(fp32_contents=[1]), "FP32", (2,), "x"),
            "needs 2 elements in fp32_contents, got 1",
        ),
    ],
)
def test_bad_data_is_invalid_argument_with_what_is_wrong(call, message):
    with pytest.raises(errors.InvalidArgumentError, match=message):
        call()


def test_a_huge_claimed_shape_allocates_nothing():
    """The count is checked against the data before anything of that size is made."""
    for datatype in ("FP32", "BYTES"):
        with pytest.raises(errors.InvalidArgumentError):
            datatypes.from_raw(b"\x00" * 16, datatype, (2**40, 2**20), "x")
    with pytest.raises(errors.InvalidArgumentError):
        datatypes.from_json([1.0], "FP32", (2**62,), "x")
    deep: list = [1.0]
    for _ in range(200):
        deep = [deep]
    with pytest.raises(errors.InvalidArgumentError):
        datatypes.from_json(deep, "FP32", (1,), "x")


def test_fuzzed_data_is_a_tensor_of_its_shape_or_invalid_argument():
    rng = random.Random(11)
    leaves = [0, 1, -1, 2**63, 1.5, float("inf"), True, None, "a", "", {}, []]
    for _ in range(3000):
        datatype = rng.choice(ALL + ["NOPE"])
        shape = tuple(rng.choice([0, 1, 2, 3, -1]) for _ in range(rng.randint(0, 3)))
        form = rng.choice(["raw", "json", "contents"])
        try:
            if form == "raw":
                data = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 24)))
                array = datatypes.from_raw(data, datatype, shape, "x")
            elif form == "json":
                data = [
                    rng.choice(leaves) if rng.random() < 0.8 else [rng.choice(leaves)]
                    for _ in range(rng.randint(0, 7))
                ]
                array = datatypes.from_json(data, datatype, shape, "x")
            else:
                contents = v2.InferTensorContents()
                field = rng.choice(list(set(datatypes.CONTENTS_FIELD.values())))
                values = {
                    "bool_contents": [True], "bytes_contents": [b"x"], "fp32_contents": [0.5],
                    "fp64_contents": [2.5],
                }.get(field, [rng.randint(0, 300)])  # fmt: skip
                getattr(contents, field).extend(values * rng.randint(0, 6))
                array = datatypes.from_contents(contents, datatype, shape, "x")
        except errors.InvalidArgumentError:
            continue
        assert array.shape == shape
        assert array.dtype == datatypes.numpy_dtype(datatype)


def test_json_output_data_is_flat_and_readable():
    assert datatypes.to_json(np.float16([[0.5, 2]]), "FP16") == [0.5, 2.0]
    assert datatypes.to_json(np.array([b"h\xc3\xa9", b"\xff"], object), "BYTES") == ["h\u00e9", "\ufffd"]
    assert datatypes.to_json(np.bool_([[True], [False]]), "BOOL") == [True, False]
    assert list(itertools.chain(datatypes.to_json(np.uint64([2**64 - 1]), "UINT64"))) == [2**64 - 1]
