"""TensorProto <-> numpy, the way TF Serving's request path does it.

Decoding follows ``Tensor::FromProto``: ``tensor_content`` must hold exactly ``N * itemsize`` bytes;
otherwise the typed ``*_val`` field is read, values past ``N`` are ignored, and a field shorter than
``N`` is filled out with its last value (with zeros when it is empty). One deliberate difference: a
fill may not make more than ``max_fill_bytes`` (TF would try to allocate whatever the claimed shape
says), so a request with a huge claimed shape and no data costs nothing.

Encoding follows ``Tensor::AsProtoField`` (what TF Serving's Predict returns by default): dtype,
shape, and every element in the typed field, never ``tensor_content``. ``encode_content_into`` is
``AsProtoTensorContent``.

Both directions avoid per-element Python: repeated fields are read with ``np.array`` over the
container, and written by handing protobuf the packed wire bytes of the field, which numpy builds
(varints included) in a handful of vector operations. Byte order is the host's, which must be
little-endian like the wire format (checked at import).
"""

from __future__ import annotations

import functools
import math
import sys

import numpy as np

from apis.tensorflow.core.framework import tensor_pb2, tensor_shape_pb2
from runtime import dtypes

if sys.byteorder != "little":  # pragma: no cover
    raise ImportError("serving.tensor_codec assumes a little-endian host")

# A fill (fewer values sent than the shape claims) may allocate at most this much.
MAX_FILL_BYTES = 1 << 28


class TensorProtoError(ValueError):
    """The proto does not describe a tensor (TF's ``Tensor::FromProto`` returns false)."""


# dtype -> (name of the typed field, its field number)
_FIELD: dict[int, tuple[str, int]] = {
    dtypes.DT_FLOAT: ("float_val", 5),
    dtypes.DT_DOUBLE: ("double_val", 6),
    dtypes.DT_INT32: ("int_val", 7),
    dtypes.DT_INT16: ("int_val", 7),
    dtypes.DT_INT8: ("int_val", 7),
    dtypes.DT_UINT8: ("int_val", 7),
    dtypes.DT_UINT16: ("int_val", 7),
    dtypes.DT_QINT8: ("int_val", 7),
    dtypes.DT_QUINT8: ("int_val", 7),
    dtypes.DT_QINT16: ("int_val", 7),
    dtypes.DT_QUINT16: ("int_val", 7),
    dtypes.DT_QINT32: ("int_val", 7),
    dtypes.DT_STRING: ("string_val", 8),
    dtypes.DT_COMPLEX64: ("scomplex_val", 9),
    dtypes.DT_INT64: ("int64_val", 10),
    dtypes.DT_BOOL: ("bool_val", 11),
    dtypes.DT_COMPLEX128: ("dcomplex_val", 12),
    dtypes.DT_HALF: ("half_val", 13),
    dtypes.DT_BFLOAT16: ("half_val", 13),
    dtypes.DT_UINT32: ("uint32_val", 16),
    dtypes.DT_UINT64: ("uint64_val", 17),
}
# How the typed field holds a dtype's values when that differs from the dtype (int_val is int32).
_FIELD_DTYPE = {
    dtypes.DT_INT16: np.int32,
    dtypes.DT_INT8: np.int32,
    dtypes.DT_UINT8: np.int32,
    dtypes.DT_UINT16: np.int32,
    dtypes.DT_QINT8: np.int32,
    dtypes.DT_QUINT8: np.int32,
    dtypes.DT_QINT16: np.int32,
    dtypes.DT_QUINT16: np.int32,
}
_NUMPY_DTYPE = {dtype: dtypes.as_numpy_dtype(dtype) for dtype in _FIELD}
_MAX_DIMS = 254
_SHORT_FIELD = 256
_INT64_MAX = (1 << 63) - 1


# ---------------------------------------------------------------------------------------------
# decoding


def numpy_dtype(dtype: int) -> np.dtype | None:
    """The numpy dtype of a TensorProto dtype this codec reads and writes (None: unsupported)."""
    return _NUMPY_DTYPE.get(dtype)


def shape_of(proto: tensor_pb2.TensorProto) -> tuple[int, ...]:
    """The fully defined shape of a request tensor; raises TensorProtoError like TensorShape::IsValid."""
    return _shape(proto.tensor_shape.SerializeToString())[0]


def _shape(wire: bytes) -> tuple[tuple[int, ...], int]:
    """The dims and element count of a serialized TensorShapeProto: requests repeat a few shapes,
    and a lookup costs a third of reading the dims. Only short ones are kept (a request's shape
    may carry dim names or unknown fields of any size), and only so many."""
    known = _SHAPES.get(wire)
    if known is None:
        known = _parse_shape(wire)  # errors are not kept
        if len(wire) <= _CACHED_SHAPE_BYTES and len(_SHAPES) < _MAX_SHAPES:
            _SHAPES[wire] = known
    return known


def _parse_shape(wire: bytes) -> tuple[tuple[int, ...], int]:
    shape = tensor_shape_pb2.TensorShapeProto.FromString(wire)
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
    np_dtype = _NUMPY_DTYPE.get(dtype)
    if np_dtype is None:
        raise TensorProtoError(f"unsupported dtype {dtype}")
    shape, n = _shape(proto.tensor_shape.SerializeToString())
    if n == 0:
        return np.empty(shape, np_dtype)
    content = proto.tensor_content
    if not content:
        return _from_field(proto, dtype, np_dtype, n, max_fill_bytes).reshape(shape)
    if dtype == dtypes.DT_STRING:
        return _strings_from_content(content, n).reshape(shape)
    if len(content) != n * np_dtype.itemsize:
        raise TensorProtoError("tensor_content size does not match the shape")
    return np.ndarray(shape, np_dtype, content)  # one call: frombuffer, then reshape, is two


def _strings_from_content(content: bytes, n: int) -> np.ndarray:
    # TF's string encoding: n varint lengths, then the bytes back to back. Rare in requests
    # (clients use string_val), so a plain loop over the lengths is fine.
    lengths, pos = [], 0
    for _ in range(n):
        value, shift = 0, 0
        while True:
            if pos >= len(content):
                raise TensorProtoError("truncated string tensor_content")
            byte = content[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        lengths.append(value)
    if pos + sum(lengths) > len(content):
        raise TensorProtoError("truncated string tensor_content")
    out = np.empty(n, object)
    for i, length in enumerate(lengths):
        out[i] = content[pos : pos + length]
        pos += length
    return out


def _from_field(proto, dtype: int, np_dtype: np.dtype, n: int, max_fill_bytes: int) -> np.ndarray:
    field = getattr(proto, _FIELD[dtype][0])
    if dtype == dtypes.DT_STRING:
        values = np.empty(len(field), object)
        values[:] = list(field)
    elif dtype in (dtypes.DT_HALF, dtypes.DT_BFLOAT16):
        values = np.array(field, np.int32).astype(np.uint16).view(np_dtype)
    elif dtype in (dtypes.DT_COMPLEX64, dtypes.DT_COMPLEX128):
        parts = np.array(field, np.float32 if dtype == dtypes.DT_COMPLEX64 else np.float64)
        values = parts[: len(parts) // 2 * 2].view(np_dtype)
    else:
        # Short fields convert faster through a list; long ones through the container's buffer.
        source = list(field) if len(field) < _SHORT_FIELD else field
        values = np.array(source, _FIELD_DTYPE.get(dtype, np_dtype)).astype(np_dtype, copy=False)
    if len(values) >= n:
        return values[:n]
    itemsize = 8 if np_dtype == np.dtype(object) else np_dtype.itemsize
    if n * itemsize > max_fill_bytes:
        raise TensorProtoError(f"{len(values)} values cannot fill a tensor of {n} elements")
    if len(values) == 0:
        return np.full(n, b"", object) if dtype == dtypes.DT_STRING else np.zeros(n, np_dtype)
    out = np.empty(n, np_dtype)
    out[: len(values)] = values
    out[len(values) :] = values[-1]
    return out


# ---------------------------------------------------------------------------------------------
# encoding


def dtype_of(array: np.ndarray, hint: int | None = None) -> int:
    """The TF dtype for an output array; ``hint`` (the signature's dtype) picks among aliases (qint8)."""
    return _dtype_of(array.dtype, hint)


@functools.lru_cache(maxsize=1024)  # keyed by (numpy dtype, hint): a handful of pairs per server
def _dtype_of(np_dtype: np.dtype, hint: int | None) -> int:
    if hint is not None and dtypes.is_supported(hint) and not dtypes.is_ref(hint):
        if dtypes.as_numpy_dtype(hint) == np_dtype and hint in _FIELD:
            return hint
    return dtypes.from_numpy(np_dtype)


def encode_into(proto: tensor_pb2.TensorProto, array, dtype: int | None = None) -> None:
    """Fill an empty TensorProto the way ``Tensor::AsProtoField`` does (one parse of built bytes)."""
    proto.MergeFromString(field_bytes(array, dtype))


def encode_content_into(proto: tensor_pb2.TensorProto, array, dtype: int | None = None) -> None:
    """Fill an empty TensorProto the way ``Tensor::AsProtoTensorContent`` does."""
    proto.MergeFromString(content_bytes(array, dtype))


def field_bytes(array, dtype: int | None = None) -> bytes:
    """The wire bytes of the TensorProto ``encode_into`` makes: a response can be assembled as
    bytes and parsed once."""
    array = np.asarray(array)
    dtype = dtype_of(array, dtype)
    wire = _header(dtype, array.shape)
    if array.size:
        wire += _field_bytes(dtype, array)
    return wire


def content_bytes(array, dtype: int | None = None) -> bytes:
    """The wire bytes of the TensorProto ``encode_content_into`` makes."""
    array = np.asarray(array)
    dtype = dtype_of(array, dtype)
    wire = _header(dtype, array.shape)
    if not array.size:
        return wire
    if dtype == dtypes.DT_STRING:
        items = [_as_bytes(v) for v in array.reshape(-1).tolist()]
        lengths = np.array([len(v) for v in items], np.uint64)
        content = _varints(lengths) + b"".join(items)
    else:
        content = np.ascontiguousarray(array).tobytes()
    return wire + _CONTENT_KEY + varint(len(content)) + content


def raw_values_prefix(dtype: int, shape: tuple[int, ...], as_content: bool) -> bytes | None:
    """The bytes ``field_bytes`` (``content_bytes`` if ``as_content``) makes for an array of
    ``dtype`` and ``shape`` up to its values, where the values follow as the array's own
    ``tobytes()`` (fixed-width fields, and any content but strings); None where they do not."""
    if dtype == dtypes.DT_STRING or (dtype not in _RAW_FIELDS and not as_content) or dtype not in _FIELD:
        return None
    header = _header(dtype, shape)
    n = math.prod(shape)
    if not n:
        return header
    key = _CONTENT_KEY if as_content else _FIELD_KEY[_FIELD[dtype][1]]
    return header + key + _varint(n * _NUMPY_DTYPE[dtype].itemsize)


# Typed fields whose packed wire bytes are the values' own bytes (bool_val: varints of 0 and 1).
_RAW_FIELDS = frozenset(
    (dtypes.DT_FLOAT, dtypes.DT_DOUBLE, dtypes.DT_COMPLEX64, dtypes.DT_COMPLEX128, dtypes.DT_BOOL)
)


def make_tensor_proto(array, dtype: int | None = None) -> tensor_pb2.TensorProto:
    proto = tensor_pb2.TensorProto()
    encode_into(proto, array, dtype)
    return proto


@functools.lru_cache(maxsize=4096)  # responses repeat a few (dtype, shape) pairs
def _header(dtype: int, shape: tuple[int, ...]) -> bytes:
    """Wire bytes of ``dtype`` (field 1) and ``tensor_shape`` (field 2, present even when empty,
    as TF writes it): each dim is ``Dim{size}`` in ``TensorShapeProto.dim`` (field 2)."""
    dims = b"".join(_DIM_KEY + _varint(len(size)) + size for size in (_SIZE_KEY + _varint(d) for d in shape))
    return _DTYPE_KEY + _varint(dtype) + _SHAPE_KEY + _varint(len(dims)) + dims


def _as_bytes(value) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def _field_bytes(dtype: int, array: np.ndarray) -> bytes:
    """The wire bytes of the typed field holding ``array``'s values in C order (packed, except
    string_val)."""
    name, number = _FIELD[dtype]
    if dtype in (dtypes.DT_FLOAT, dtypes.DT_DOUBLE, dtypes.DT_COMPLEX64, dtypes.DT_COMPLEX128):
        payload = array.tobytes()  # (C order whatever the strides)
        return _FIELD_KEY[number] + _varint(len(payload)) + payload
    flat = array.reshape(-1)
    if dtype == dtypes.DT_STRING:
        return _strings_field(number, flat)
    if dtype in (dtypes.DT_HALF, dtypes.DT_BFLOAT16):
        payload = _varints(flat.view(np.uint16).astype(np.uint64))
    elif dtype == dtypes.DT_BOOL:
        payload = flat.astype(np.uint8).tobytes()
    elif flat.dtype.kind == "u":
        payload = _varints(flat.astype(np.uint64))
    else:  # signed: two's complement over 64 bits, as protobuf encodes int32 and int64
        payload = _varints(flat.astype(np.int64).view(np.uint64))
    return _FIELD_KEY[number] + _varint(len(payload)) + payload


def _strings_field(number: int, flat: np.ndarray) -> bytes:
    items = [_as_bytes(v) for v in flat.tolist()]
    key = _FIELD_KEY[number]
    lengths = _varint_list([len(v) for v in items])
    return b"".join(key + length + item for length, item in zip(lengths, items, strict=True))


def _key(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _varint(value: int) -> bytes:
    if value < 0x80:
        return _SMALL_VARINTS[value]
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varint_list(values: list[int]) -> list[bytes]:
    return [_SMALL_VARINTS[v] if v < 0x80 else _varint(v) for v in values]


_SMALL_VARINTS = [bytes((v,)) for v in range(0x80)]
_FIELD_KEY = {number: _key(number, 2) for _, number in _FIELD.values()}
_DTYPE_KEY = _key(1, 0)  # TensorProto.dtype
_SHAPE_KEY = _key(2, 2)  # TensorProto.tensor_shape
_DIM_KEY = _key(2, 2)  # TensorShapeProto.dim
_SIZE_KEY = _key(1, 0)  # TensorShapeProto.Dim.size
_CONTENT_KEY = _key(4, 2)  # TensorProto.tensor_content


def varint(value: int) -> bytes:
    """A non-negative int as a protobuf varint (lengths, for callers assembling messages)."""
    return _varint(value)


def _varints(values: np.ndarray) -> bytes:
    """Concatenated protobuf varints of uint64 values, built with vector operations."""
    if values.size == 0:
        return b""
    if int(values.max()) < 0x80:
        return values.astype(np.uint8).tobytes()
    nbytes = np.ones(values.size, np.int64)
    for k in range(1, 10):
        nbytes += (values >> np.uint64(7 * k)) != 0
    starts = np.cumsum(nbytes) - nbytes
    out = np.empty(int(nbytes.sum()), np.uint8)
    for k in range(10):
        idx = np.flatnonzero(nbytes > k)
        if not idx.size:
            break
        byte = ((values[idx] >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        byte[nbytes[idx] > k + 1] |= 0x80
        out[starts[idx] + k] = byte
    return out.tobytes()
