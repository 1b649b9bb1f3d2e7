"""TensorProto <-> numpy the way TF Serving's request path does it, on the runtime's codec.

Decoding follows ``Tensor::FromProto``: ``tensor_content`` must hold exactly ``N * itemsize`` bytes;
otherwise the typed ``*_val`` field is read, values past ``N`` are ignored, and a field shorter than
``N`` is filled out with its last value (with zeros when it is empty). One deliberate difference: a
fill may not make more than ``max_fill_bytes`` (TF would try to allocate whatever the claimed shape
says), so a request with a huge claimed shape and no data costs nothing.

Encoding follows ``Tensor::AsProtoField`` (what TF Serving's Predict returns by default): dtype,
shape, and every element in the typed field, never ``tensor_content``. ``encode_content_into`` is
``AsProtoTensorContent``. Both are ``runtime/tensor_util.py``'s, as are the field tables and readers.

What is the request path's own, because a server-level benchmark shows it (``benchmarks/predict_qps.py``):
a cache of the request shapes seen (requests repeat a few, and a lookup costs a third of reading
the dims), ``content_view`` (the common request tensor as a view of its bytes), and
``raw_values_prefix`` (a response tensor's bytes up to its values, for ``serving/inference/predict.py`` to
assemble responses as bytes).
"""

from __future__ import annotations

import math

import numpy as np

from apis.tensorflow.core.framework import tensor_pb2, tensor_shape_pb2
from runtime import dtypes, wire
from runtime.tensor_util import (
    CONTENT_KEY,
    RAW_FIELDS,
    VALUE_FIELDS,
    TensorProtoError,
    as_sent,
    content_bytes,
    dtype_of,
    encode_content_into,
    encode_into,
    field_bytes,
    field_values,
    fill,
    header_bytes,
    numpy_dtype,
    strings_from_content,
    values_key,
)

__all__ = [
    "MAX_FILL_BYTES",
    "TensorProtoError",
    "as_sent",
    "content_bytes",
    "content_view",
    "decode",
    "dtype_of",
    "encode_content_into",
    "encode_input_into",
    "input_bytes",
    "encode_into",
    "field_bytes",
    "make_tensor_proto",
    "numpy_dtype",
    "raw_values_prefix",
    "shape_of",
]

# A fill (fewer values sent than the shape claims) may allocate at most this much.
MAX_FILL_BYTES = 1 << 28

_FIELD = VALUE_FIELDS  # dtype -> (name of the typed field, its field number); the tests build on it
_MAX_DIMS = 64  # TF allows 254; numpy, which holds every tensor here, 64: more is "invalid tensor shape"
_INT64_MAX = (1 << 63) - 1


# ---------------------------------------------------------------------------------------------
# decoding


def shape_of(proto: tensor_pb2.TensorProto) -> tuple[int, ...]:
    """The fully defined shape of a request tensor; raises TensorProtoError like TensorShape::IsValid."""
    return _shape(proto.tensor_shape.SerializeToString())[0]


def _shape(wire_bytes: bytes) -> tuple[tuple[int, ...], int]:
    """The dims and element count of a serialized TensorShapeProto: requests repeat a few shapes,
    and a lookup costs a third of reading the dims. Only short ones are kept (a request's shape
    may carry dim names or unknown fields of any size), and only so many."""
    known = _SHAPES.get(wire_bytes)
    if known is None:
        known = _parse_shape(wire_bytes)  # errors are not kept
        if len(wire_bytes) <= _CACHED_SHAPE_BYTES and len(_SHAPES) < _MAX_SHAPES:
            _SHAPES[wire_bytes] = known
    return known


def _parse_shape(wire_bytes: bytes) -> tuple[tuple[int, ...], int]:
    shape = tensor_shape_pb2.TensorShapeProto.FromString(wire_bytes)
    dims = tuple(d.size for d in shape.dim)
    if shape.unknown_rank or len(dims) > _MAX_DIMS or (dims and min(dims) < 0):
        raise TensorProtoError("invalid tensor shape")
    n = math.prod(dims)
    if n > _INT64_MAX:
        raise TensorProtoError("too many elements")
    return dims, n


_SHAPES: dict[bytes, tuple[tuple[int, ...], int]] = {}  # serialized shape -> (dims, count)
_MAX_SHAPES = 1024
_CACHED_SHAPE_BYTES = 64  # (8 dims of sizes below 2**28)


def content_view(proto: tensor_pb2.TensorProto, np_dtype: np.dtype, itemsize: int) -> np.ndarray | None:
    """``decode`` of the common request tensor, a numeric one whose values fill
    ``tensor_content`` in a shape seen before: a read-only view of the bytes. None for any
    other, which ``decode`` reads (or rejects)."""
    known = _SHAPES.get(proto.tensor_shape.SerializeToString())
    if known is None:
        return None
    content = proto.tensor_content
    if not content or len(content) != known[1] * itemsize:
        return None
    return np.ndarray(known[0], np_dtype, content)


def decode(proto: tensor_pb2.TensorProto, *, max_fill_bytes: int = MAX_FILL_BYTES) -> np.ndarray:
    """The ndarray a TensorProto holds (strings as an object array of bytes).

    Arrays decoded from ``tensor_content`` are read-only views of the proto's bytes: feeds are
    immutable in TF too.
    """
    dtype = proto.dtype
    np_dtype = numpy_dtype(dtype)
    if np_dtype is None:
        raise TensorProtoError(f"unsupported dtype {dtype}")
    shape, n = _shape(proto.tensor_shape.SerializeToString())
    if n == 0:
        return np.empty(shape, np_dtype)
    content = proto.tensor_content
    if not content:
        return _from_field(proto, dtype, np_dtype, n, max_fill_bytes).reshape(shape)
    if dtype == dtypes.DT_STRING:
        return strings_from_content(content, n).reshape(shape)
    if len(content) != n * np_dtype.itemsize:
        raise TensorProtoError("tensor_content size does not match the shape")
    return np.ndarray(shape, np_dtype, content)  # one call: frombuffer, then reshape, is two


def _from_field(proto, dtype: int, np_dtype: np.dtype, n: int, max_fill_bytes: int) -> np.ndarray:
    values = field_values(proto, dtype, np_dtype)
    if len(values) >= n:
        return values[:n]
    itemsize = 8 if np_dtype == np.dtype(object) else np_dtype.itemsize
    if n * itemsize > max_fill_bytes:
        raise TensorProtoError(f"{len(values)} values cannot fill a tensor of {n} elements")
    return fill(values, n, dtype)


# ---------------------------------------------------------------------------------------------
# encoding


def make_tensor_proto(array, dtype: int | None = None) -> tensor_pb2.TensorProto:
    """``array`` as TF Serving returns it (``AsProtoField``); ``dtype``: the signature's, a hint."""
    proto = tensor_pb2.TensorProto()
    encode_into(proto, array, dtype)
    return proto


def encode_input_into(proto: tensor_pb2.TensorProto, array: np.ndarray, dtype: int) -> None:
    """A request input built from an array (REST's JSON, V2's tensors): numbers as
    ``tensor_content``, the form Predict reads as a view without a copy; strings and empty
    tensors in their typed field."""
    proto.MergeFromString(input_bytes(array, dtype))


def input_bytes(array: np.ndarray, dtype: int) -> bytes:
    """The wire bytes of the TensorProto ``encode_input_into`` makes."""
    if dtype == dtypes.DT_STRING or not array.size:
        return field_bytes(array, dtype)
    return content_bytes(array, dtype)


def raw_values_prefix(dtype: int, shape: tuple[int, ...], as_content: bool) -> bytes | None:
    """The bytes ``field_bytes`` (``content_bytes`` if ``as_content``) makes for an array of
    ``dtype`` and ``shape`` up to its values, where the values follow as the array's own
    ``tobytes()`` (fixed-width fields, and any content but strings); None where they do not."""
    if (
        dtype == dtypes.DT_STRING
        or (dtype not in RAW_FIELDS and not as_content)
        or numpy_dtype(dtype) is None
    ):
        return None
    header = header_bytes(dtype, shape)
    n = math.prod(shape)
    if not n:
        return header
    key = CONTENT_KEY if as_content else values_key(dtype)
    return header + key + wire.varint(n * numpy_dtype(dtype).itemsize)
