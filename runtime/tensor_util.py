"""``TensorProto`` <-> numpy: the package's one tensor codec, without per-element Python loops.

Two callers, two sets of TF semantics over the same field tables and readers:

- TF's Python API (``tf.make_ndarray``, ``tf.make_tensor_proto``), for graphs, checkpoints, tests:
  ``make_ndarray`` reads ``tensor_content`` when present, else the typed ``*_val`` field (``half_val``
  carries float16 and bfloat16 as their 16-bit patterns, complex fields carry (real, imag) pairs,
  ``string_val`` becomes an object array of ``bytes``); more values than elements are an error.
  ``make_tensor_proto`` converts with TF's default dtypes (Python floats -> float32, ints -> int32
  or int64), broadcasts a single value to ``shape``, and packs numeric data in ``tensor_content``
  (or in ``*_val`` fields when ``use_tensor_content=False``).
- TF Serving's request path (``Tensor::FromProto``, ``Tensor::AsProtoField``), for
  ``serving/inference/tensor_codec.py``: ``field_values`` and ``strings_from_content`` read what a request
  holds (values past the element count are ignored there); ``field_bytes`` and ``content_bytes``
  write a TensorProto as wire bytes (``runtime/wire.py``) that protobuf parses in one call.

As in TF, fewer values than elements repeat the last value and no values mean zeros (``fill``);
callers bound that expansion, the only allocation not paid for by the proto's own bytes
(``max_bytes``, default ``MAX_EXPANDED_BYTES``). Byte order is the host's, which must be
little-endian like the wire format (checked at import).

Pure functions, safe to call from any thread; serving calls them on the request path.
"""

from __future__ import annotations

import functools
import math
import sys

import numpy as np

from apis.tensorflow.core.framework import tensor_pb2, tensor_shape_pb2
from runtime import dtypes, errors, wire

if sys.byteorder != "little":  # pragma: no cover
    raise ImportError("runtime.tensor_util assumes a little-endian host")

MAX_EXPANDED_BYTES = 1 << 31  # what a proto may expand to beyond the values it carries


class TensorProtoError(ValueError):
    """The proto does not describe a tensor (TF's ``Tensor::FromProto`` returns false)."""


# dtype -> (the repeated field holding its values when not in tensor_content, its field number)
VALUE_FIELDS: dict[int, tuple[str, int]] = {
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
    dtypes.DT_RESOURCE: ("resource_handle_val", 14),
    dtypes.DT_VARIANT: ("variant_val", 15),
    dtypes.DT_UINT32: ("uint32_val", 16),
    dtypes.DT_UINT64: ("uint64_val", 17),
}
_HANDLE_TYPES = (dtypes.DT_RESOURCE, dtypes.DT_VARIANT)  # messages, not arrays of values
_OBJECT_TYPES = (dtypes.DT_STRING, *_HANDLE_TYPES)
# dtypes whose values this codec reads and writes as numpy arrays (requests, responses)
_NUMPY_DTYPE = {dtype: dtypes.as_numpy_dtype(dtype) for dtype in VALUE_FIELDS if dtype not in _HANDLE_TYPES}
# How the typed field holds a dtype's values where that differs from the dtype (int_val is int32:
# TF keeps the low bits).
_FIELD_DTYPE = {
    dtype: np.int32
    for dtype in (
        dtypes.DT_INT16, dtypes.DT_INT8, dtypes.DT_UINT8, dtypes.DT_UINT16,
        dtypes.DT_QINT8, dtypes.DT_QUINT8, dtypes.DT_QINT16, dtypes.DT_QUINT16,
    )
}  # fmt: skip
_COMPLEX_PART = {dtypes.DT_COMPLEX64: np.float32, dtypes.DT_COMPLEX128: np.float64}
# What tf.make_tensor_proto packs into tensor_content (not bool, complex, uint16, strings).
_TENSOR_CONTENT_TYPES = frozenset(
    {
        dtypes.DT_FLOAT, dtypes.DT_DOUBLE, dtypes.DT_HALF, dtypes.DT_BFLOAT16,
        dtypes.DT_INT8, dtypes.DT_INT16, dtypes.DT_INT32, dtypes.DT_INT64,
        dtypes.DT_UINT8, dtypes.DT_UINT32, dtypes.DT_UINT64,
        dtypes.DT_QINT8, dtypes.DT_QUINT8, dtypes.DT_QINT16, dtypes.DT_QUINT16, dtypes.DT_QINT32,
    }
)  # fmt: skip
# Typed fields whose packed wire bytes are the values' own bytes (bool_val: varints of 0 and 1).
RAW_FIELDS = frozenset(
    (dtypes.DT_FLOAT, dtypes.DT_DOUBLE, dtypes.DT_COMPLEX64, dtypes.DT_COMPLEX128, dtypes.DT_BOOL)
)
_SHORT_FIELD = 256  # fields shorter than this convert faster through a list


# ---------------------------------------------------------------------------------------------
# decoding


def numpy_dtype(dtype: int) -> np.dtype | None:
    """The numpy dtype of a TensorProto dtype this codec reads and writes as arrays (None: unsupported)."""
    return _NUMPY_DTYPE.get(dtype)


def shape_from_proto(shape: tensor_shape_pb2.TensorShapeProto) -> tuple[int | None, ...] | None:
    """A TensorShapeProto as a tuple (None for an unknown dim), or None for an unknown rank."""
    if shape.unknown_rank:
        return None
    return tuple(d.size if d.size >= 0 else None for d in shape.dim)


def conforms(static: tuple | None, shape: tuple) -> bool:
    """Whether a value of ``shape`` satisfies the static shape ``static`` (a tuple with None for
    unknown dims, or None for an unknown rank)."""
    if static is None:
        return True
    return len(static) == len(shape) and all(d is None or d == n for d, n in zip(static, shape))


def make_ndarray(tensor: tensor_pb2.TensorProto, *, max_bytes: int = MAX_EXPANDED_BYTES) -> np.ndarray:
    """The numpy value of a TensorProto; InvalidArgumentError when the proto is inconsistent."""
    dtype = tensor.dtype
    if not dtypes.is_supported(dtype) or dtype == dtypes.DT_INVALID:
        raise errors.InvalidArgumentError(None, None, f"Unsupported TensorProto dtype {dtype}")
    dims = tuple(d.size for d in tensor.tensor_shape.dim)
    if tensor.tensor_shape.unknown_rank or any(d < 0 for d in dims):
        shown = "<unknown>" if tensor.tensor_shape.unknown_rank else list(dims)
        raise errors.InvalidArgumentError(
            None, None, f"TensorProto has a shape that is not fully defined: {shown}"
        )
    count = math.prod(dims)
    np_dtype = dtypes.as_numpy_dtype(dtype)
    if tensor.tensor_content and dtype not in _OBJECT_TYPES:
        content = tensor.tensor_content
        if len(content) != count * np_dtype.itemsize:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"TensorProto's tensor_content holds {len(content)} bytes, but shape "
                f"{list(dims)} of {dtypes.name(dtype)} needs {count * np_dtype.itemsize}",
            )
        return np.frombuffer(content, dtype=np_dtype).copy().reshape(dims)
    base = dtypes.base_dtype(dtype)
    if base in _COMPLEX_PART and len(getattr(tensor, VALUE_FIELDS[base][0])) % 2:
        raise errors.InvalidArgumentError(
            None, None, "TensorProto's complex values do not come in (real, imag) pairs"
        )
    values = field_values(tensor, base, np_dtype)
    have = values.size
    if have > count:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"TensorProto holds {have} values, more than the {count} elements of shape {list(dims)}",
        )
    itemsize = dtypes.itemsize(dtype) or 8
    if have < count and count * itemsize > max_bytes:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"TensorProto of shape {list(dims)} ({dtypes.name(dtype)}) would expand {have} values "
            f"to {count * itemsize} bytes, over the limit of {max_bytes}",
        )
    return fill(values, count, base).reshape(dims)


def field_values(proto: tensor_pb2.TensorProto, dtype: int, np_dtype: np.dtype) -> np.ndarray:
    """The values of ``proto``'s typed field for ``dtype`` (a base dtype) as a new array of
    ``np_dtype``, as many as the field holds (complex: whole (real, imag) pairs)."""
    field = getattr(proto, VALUE_FIELDS[dtype][0])
    if dtype in _OBJECT_TYPES:
        values = np.empty(len(field), object)
        values[:] = list(field)
        return values
    if dtype in (dtypes.DT_HALF, dtypes.DT_BFLOAT16):
        return np.array(field, np.int32).astype(np.uint16).view(np_dtype)
    if dtype in _COMPLEX_PART:
        parts = np.array(field, _COMPLEX_PART[dtype])
        return parts[: len(parts) // 2 * 2].view(np_dtype)
    source = list(field) if len(field) < _SHORT_FIELD else field
    return np.array(source, _FIELD_DTYPE.get(dtype, np_dtype)).astype(np_dtype, copy=False)


def fill(values: np.ndarray, count: int, dtype: int) -> np.ndarray:
    """``values`` (at most ``count``, flat) as ``count`` elements, as TF's ``FromProto`` fills a
    short field: its last value repeated, or zeros (empty strings, None handles) when it is empty."""
    have = values.size
    if have == count:
        return values
    if have == 0:
        if values.dtype == np.dtype(object):
            out = np.empty(count, dtype=object)
            out.fill(b"" if dtype == dtypes.DT_STRING else None)
            return out
        return np.zeros(count, dtype=values.dtype)
    out = np.empty(count, dtype=values.dtype)
    out[:have] = values
    out[have:] = values[-1]
    return out


def strings_from_content(content: bytes, count: int) -> np.ndarray:
    """A string tensor's ``tensor_content`` (TF's encoding: ``count`` varint lengths, then the
    bytes back to back) as an object array of ``bytes``; TensorProtoError where it is truncated."""
    try:
        lengths, pos = wire.read_varints(content, 0, count)
    except wire.WireError:
        raise TensorProtoError("truncated string tensor_content") from None
    if pos + sum(lengths) > len(content):
        raise TensorProtoError("truncated string tensor_content")
    out = np.empty(count, object)
    for i, length in enumerate(lengths):
        out[i] = content[pos : pos + length]
        pos += length
    return out


# ---------------------------------------------------------------------------------------------
# encoding


def _convert(values, dtype: int | None) -> np.ndarray:
    """numpy conversion with TF's defaults for Python values (float32, int32 unless too big)."""
    if isinstance(values, np.ndarray):
        array = values
    elif isinstance(values, (np.generic,)):
        array = np.asarray(values)
    elif dtype is not None:
        return _to_dtype(np.asarray(values), dtype, values)
    else:
        array = np.asarray(values)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        elif array.dtype == np.int64:
            info = np.iinfo(np.int32)
            if array.size == 0 or (array.min() >= info.min and array.max() <= info.max):
                array = array.astype(np.int32)
        elif array.dtype == np.complex128:
            array = array.astype(np.complex64)
    if dtype is None:
        if array.dtype.kind in ("U", "S"):
            return as_bytes_array(array)
        return array
    return _to_dtype(array, dtype, values)


def as_bytes_array(array: np.ndarray) -> np.ndarray:
    """An object array of ``bytes`` (str items utf-8 encoded), as TF's string kernels see them;
    ``array`` itself when it already is one."""
    items = array.reshape(-1).tolist()
    if array.dtype == np.dtype(object) and not any(isinstance(v, str) for v in items):
        return array
    out = np.empty(array.shape, dtype=object)
    out.reshape(-1)[:] = [v.encode() if isinstance(v, str) else v for v in items]
    return out


def _to_dtype(array: np.ndarray, dtype: int, original) -> np.ndarray:
    target = dtypes.as_numpy_dtype(dtype)
    if dtypes.base_dtype(dtype) == dtypes.DT_STRING:
        if array.dtype.kind not in ("U", "S", "O"):
            raise TypeError(f"Expected string, but got {original!r} of type '{type(original).__name__}'.")
        return as_bytes_array(array)
    if array.dtype == target:
        return array
    if array.dtype.kind in ("U", "S", "O") or (array.dtype.kind in "fc" and target.kind in "iub"):
        raise TypeError(
            f"Expected {dtypes.name(dtype)}, but got {original!r} of type '{type(original).__name__}'."
        )
    return array.astype(target)


def make_tensor_proto(
    values, dtype: int | None = None, shape=None, *, use_tensor_content: bool | None = None
) -> tensor_pb2.TensorProto:
    """A TensorProto of ``values`` (array-like), optionally cast to ``dtype`` and shaped.

    ``use_tensor_content``: None packs tensors of more than one element into ``tensor_content``
    for the dtypes ``tf.make_tensor_proto`` packs; True every non-string dtype, False none.
    """
    array = _convert(values, dtype)
    dtype = dtypes.from_numpy(array.dtype) if dtype is None else dtypes.base_dtype(dtype)
    proto = tensor_pb2.TensorProto(dtype=dtype)
    if shape is None:
        dims = array.shape
    else:
        dims = tuple(int(d) for d in shape)
        count = math.prod(dims)
        if array.size != count and array.size != 1:
            raise ValueError(
                f"Expected Tensor's shape: {dims}, but got {array.shape}."
                if array.size < count
                else f"Too many elements provided. Takes at most {count}, but got {array.size}."
            )
    proto.tensor_shape.dim.extend(tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in dims)
    flat = array.reshape(-1)
    if shape is not None and array.size == 1 and math.prod(dims) != 1:
        packed = False  # one value broadcast to the whole shape: TF stores it once
    elif use_tensor_content is None:
        packed = flat.size > 1 and dtype in _TENSOR_CONTENT_TYPES
    else:
        packed = use_tensor_content and dtype not in _OBJECT_TYPES
    if packed:
        proto.tensor_content = flat.tobytes()
    elif dtype in _HANDLE_TYPES:
        field = getattr(proto, VALUE_FIELDS[dtype][0])
        for item in flat.tolist():
            field.add().CopyFrom(item)
    elif flat.size:
        proto.MergeFromString(_field_bytes(dtype, flat))
    return proto


def dtype_of(array: np.ndarray, hint: int | None = None) -> int:
    """The TF dtype for an output array; ``hint`` (the signature's dtype) picks among aliases (qint8)."""
    return _dtype_of(array.dtype, hint)


@functools.lru_cache(maxsize=1024)  # keyed by (numpy dtype, hint): a handful of pairs per server
def _dtype_of(np_dtype: np.dtype, hint: int | None) -> int:
    if hint is not None and dtypes.is_supported(hint) and not dtypes.is_ref(hint):
        if dtypes.as_numpy_dtype(hint) == np_dtype and hint in _NUMPY_DTYPE:
            return hint
    return dtypes.from_numpy(np_dtype)


def as_sent(array, dtype: int | None = None) -> tuple[np.ndarray, int]:
    """An output as the TensorProto ``encode_into`` makes holds it, without making one: its
    TF dtype and the array ``decode`` would read back (strings as bytes). REST and V2 write
    their answers from it."""
    array = np.asarray(array)
    dtype = dtype_of(array, dtype)
    if dtype == dtypes.DT_STRING and array.size:
        flat = array.reshape(-1).tolist()
        if array.dtype != np.dtype(object) or any(type(v) is not bytes for v in flat):
            strings = np.empty(len(flat), object)
            strings[:] = [_as_bytes(v) for v in flat]
            array = strings.reshape(array.shape)
    return array, dtype


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
    wire_bytes = header_bytes(dtype, array.shape)
    if array.size:
        wire_bytes += _field_bytes(dtype, array)
    return wire_bytes


def content_bytes(array, dtype: int | None = None) -> bytes:
    """The wire bytes of the TensorProto ``encode_content_into`` makes."""
    array = np.asarray(array)
    dtype = dtype_of(array, dtype)
    wire_bytes = header_bytes(dtype, array.shape)
    if not array.size:
        return wire_bytes
    if dtype == dtypes.DT_STRING:
        items = [_as_bytes(v) for v in array.reshape(-1).tolist()]
        content = wire.varints(np.array([len(v) for v in items], np.uint64)) + b"".join(items)
    else:
        content = np.ascontiguousarray(array).tobytes()
    return wire_bytes + CONTENT_KEY + wire.varint(len(content)) + content


def values_key(dtype: int) -> bytes:
    """The key of the typed field holding ``dtype``'s values (length-delimited: packed or strings)."""
    return _FIELD_KEY[VALUE_FIELDS[dtype][1]]


@functools.lru_cache(maxsize=4096)  # responses repeat a few (dtype, shape) pairs
def header_bytes(dtype: int, shape: tuple[int, ...]) -> bytes:
    """Wire bytes of ``dtype`` (field 1) and ``tensor_shape`` (field 2, present even when empty,
    as TF writes it): each dim is ``Dim{size}`` in ``TensorShapeProto.dim`` (field 2)."""
    varint = wire.varint
    dims = b"".join(_DIM_KEY + varint(len(size)) + size for size in (_SIZE_KEY + varint(d) for d in shape))
    return _DTYPE_KEY + varint(dtype) + _SHAPE_KEY + varint(len(dims)) + dims


def _as_bytes(value) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value) if isinstance(value, (bytearray, memoryview)) else str(value).encode()


def _field_bytes(dtype: int, array: np.ndarray) -> bytes:
    """The wire bytes of the typed field holding ``array``'s values in C order (packed, except
    string_val)."""
    number = VALUE_FIELDS[dtype][1]
    if dtype in (dtypes.DT_FLOAT, dtypes.DT_DOUBLE, dtypes.DT_COMPLEX64, dtypes.DT_COMPLEX128):
        payload = array.tobytes()  # (C order whatever the strides)
        return _FIELD_KEY[number] + wire.varint(len(payload)) + payload
    flat = array.reshape(-1)
    if dtype == dtypes.DT_STRING:
        return _strings_field(number, flat)
    if dtype in (dtypes.DT_HALF, dtypes.DT_BFLOAT16):
        payload = wire.varints(flat.view(np.uint16).astype(np.uint64))
    elif dtype == dtypes.DT_BOOL:
        payload = flat.astype(np.uint8).tobytes()
    elif flat.dtype.kind == "u":
        payload = wire.varints(flat.astype(np.uint64))
    else:  # signed: two's complement over 64 bits, as protobuf encodes int32 and int64
        payload = wire.varints(flat.astype(np.int64).view(np.uint64))
    return _FIELD_KEY[number] + wire.varint(len(payload)) + payload


def _strings_field(number: int, flat: np.ndarray) -> bytes:
    items = [_as_bytes(v) for v in flat.tolist()]
    key = _FIELD_KEY[number]
    lengths = wire.varint_list([len(v) for v in items])
    return b"".join(key + length + item for length, item in zip(lengths, items, strict=True))


_FIELD_KEY = {number: wire.key(number, wire.LENGTH_DELIMITED) for _, number in VALUE_FIELDS.values()}
_DTYPE_KEY = wire.key(1, wire.VARINT)  # TensorProto.dtype
_SHAPE_KEY = wire.key(2, wire.LENGTH_DELIMITED)  # TensorProto.tensor_shape
_DIM_KEY = wire.key(2, wire.LENGTH_DELIMITED)  # TensorShapeProto.dim
_SIZE_KEY = wire.key(1, wire.VARINT)  # TensorShapeProto.Dim.size
CONTENT_KEY = wire.key(4, wire.LENGTH_DELIMITED)  # TensorProto.tensor_content
