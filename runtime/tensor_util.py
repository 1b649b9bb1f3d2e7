"""``TensorProto`` <-> numpy, with TensorFlow's semantics and without per-element Python loops.

``make_ndarray`` reads ``tensor_content`` when present, else the typed ``*_val`` field
(``half_val`` carries float16 and bfloat16 as their 16-bit patterns, complex fields carry
(real, imag) pairs, ``string_val`` becomes an object array of ``bytes``). As in TF's
``Tensor::FromProto``, fewer values than elements repeat the last value and no values mean zeros.
That expansion is the only allocation not paid for by the proto's own bytes, so it is bounded:
``max_bytes`` (default ``MAX_EXPANDED_BYTES``) caps what a small proto can claim.

``make_tensor_proto`` is ``tf.make_tensor_proto``'s core: numpy conversion with TF's default
dtypes (Python floats -> float32, ints -> int32 or int64), a single value broadcast to ``shape``,
numeric data in ``tensor_content`` (or in ``*_val`` fields when ``use_tensor_content=False``, as
TF Serving's ``AsProtoField`` writes responses).

Both are pure functions, safe to call from any thread; serving calls them on the request path.
"""

from __future__ import annotations

import math

import numpy as np

from apis.tensorflow.core.framework import tensor_pb2, tensor_shape_pb2
from runtime import dtypes, errors

MAX_EXPANDED_BYTES = 1 << 31  # what a proto may expand to beyond the values it carries

# dtype enum -> the repeated field holding its values (when not in tensor_content).
_VAL_FIELD = {
    dtypes.DT_FLOAT: "float_val",
    dtypes.DT_DOUBLE: "double_val",
    dtypes.DT_INT32: "int_val",
    dtypes.DT_UINT8: "int_val",
    dtypes.DT_INT16: "int_val",
    dtypes.DT_INT8: "int_val",
    dtypes.DT_QINT8: "int_val",
    dtypes.DT_QUINT8: "int_val",
    dtypes.DT_QINT16: "int_val",
    dtypes.DT_QUINT16: "int_val",
    dtypes.DT_QINT32: "int_val",
    dtypes.DT_UINT16: "int_val",
    dtypes.DT_INT64: "int64_val",
    dtypes.DT_UINT32: "uint32_val",
    dtypes.DT_UINT64: "uint64_val",
    dtypes.DT_BOOL: "bool_val",
    dtypes.DT_HALF: "half_val",
    dtypes.DT_BFLOAT16: "half_val",
    dtypes.DT_COMPLEX64: "scomplex_val",
    dtypes.DT_COMPLEX128: "dcomplex_val",
    dtypes.DT_STRING: "string_val",
    dtypes.DT_RESOURCE: "resource_handle_val",
    dtypes.DT_VARIANT: "variant_val",
}
_COMPLEX_PART = {dtypes.DT_COMPLEX64: np.float32, dtypes.DT_COMPLEX128: np.float64}
_OBJECT_TYPES = (dtypes.DT_STRING, dtypes.DT_RESOURCE, dtypes.DT_VARIANT)
# What tf.make_tensor_proto packs into tensor_content (not bool, complex, uint16, strings).
_TENSOR_CONTENT_TYPES = frozenset(
    {
        dtypes.DT_FLOAT, dtypes.DT_DOUBLE, dtypes.DT_HALF, dtypes.DT_BFLOAT16,
        dtypes.DT_INT8, dtypes.DT_INT16, dtypes.DT_INT32, dtypes.DT_INT64,
        dtypes.DT_UINT8, dtypes.DT_UINT32, dtypes.DT_UINT64,
        dtypes.DT_QINT8, dtypes.DT_QUINT8, dtypes.DT_QINT16, dtypes.DT_QUINT16, dtypes.DT_QINT32,
    }
)  # fmt: skip


def shape_from_proto(shape: tensor_shape_pb2.TensorShapeProto) -> tuple[int | None, ...] | None:
    """A TensorShapeProto as a tuple (None for an unknown dim), or None for an unknown rank."""
    if shape.unknown_rank:
        return None
    return tuple(d.size if d.size >= 0 else None for d in shape.dim)


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
    values = _field_values(tensor, dtype, np_dtype)
    return _fill(values, dims, count, dtype, max_bytes)


def _field_values(tensor: tensor_pb2.TensorProto, dtype: int, np_dtype: np.dtype) -> np.ndarray:
    field = getattr(tensor, _VAL_FIELD[dtypes.base_dtype(dtype)])
    if dtype in (dtypes.DT_HALF, dtypes.DT_BFLOAT16):
        return np.asarray(field, dtype=np.int32).astype(np.uint16).view(np_dtype)
    if dtype in _COMPLEX_PART:
        pairs = np.asarray(field, dtype=_COMPLEX_PART[dtype])
        if pairs.size % 2:
            raise errors.InvalidArgumentError(
                None, None, "TensorProto's complex values do not come in (real, imag) pairs"
            )
        return pairs.view(np_dtype)
    if np_dtype == np.dtype(object):
        values = np.empty(len(field), dtype=object)
        values[:] = list(field)
        return values
    if dtype in (dtypes.DT_INT8, dtypes.DT_UINT8, dtypes.DT_INT16, dtypes.DT_UINT16):
        # int_val is int32 on the wire; TF keeps the low bits.
        return np.asarray(field, dtype=np.int32).astype(np_dtype)
    return np.asarray(field, dtype=np_dtype)


def _fill(values: np.ndarray, dims: tuple[int, ...], count: int, dtype: int, max_bytes: int):
    have = values.size
    if have == count:
        return values.reshape(dims)
    if have > count:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"TensorProto holds {have} values, more than the {count} elements of shape {list(dims)}",
        )
    itemsize = dtypes.itemsize(dtype) or 8
    if count * itemsize > max_bytes:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"TensorProto of shape {list(dims)} ({dtypes.name(dtype)}) would expand {have} values "
            f"to {count * itemsize} bytes, over the limit of {max_bytes}",
        )
    if have == 0:
        if values.dtype == np.dtype(object):
            out = np.empty(count, dtype=object)
            out.fill(b"" if dtype == dtypes.DT_STRING else None)
            return out.reshape(dims)
        return np.zeros(dims, dtype=values.dtype)
    out = np.empty(count, dtype=values.dtype)
    out[:have] = values
    out[have:] = values[-1]
    return out.reshape(dims)


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
    if shape is not None and array.size == 1 and math.prod(dims) != 1:
        # One value broadcast to the whole shape: TF stores it once.
        _set_field(proto, dtype, array.reshape(-1))
        return proto
    flat = array.reshape(-1)
    if use_tensor_content is None:
        packed = flat.size > 1 and dtype in _TENSOR_CONTENT_TYPES
    else:
        packed = use_tensor_content and dtype not in _OBJECT_TYPES
    if packed:
        proto.tensor_content = flat.tobytes()
    else:
        _set_field(proto, dtype, flat)
    return proto


# Fixed-width fields whose packed wire form is the little-endian array itself: written by
# parsing those bytes (one memcpy in upb) instead of extending the field element by element.
_PACKED_AS = {
    dtypes.DT_FLOAT: np.dtype("<f4"),
    dtypes.DT_DOUBLE: np.dtype("<f8"),
    dtypes.DT_COMPLEX64: np.dtype("<f4"),
    dtypes.DT_COMPLEX128: np.dtype("<f8"),
    dtypes.DT_BOOL: np.dtype("u1"),  # varints of 0 and 1 are single bytes
}


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _set_field(proto: tensor_pb2.TensorProto, dtype: int, flat: np.ndarray) -> None:
    name = _VAL_FIELD[dtype]
    field = getattr(proto, name)
    if dtype in _PACKED_AS and flat.size:
        payload = flat.view(_COMPLEX_PART.get(dtype, flat.dtype)).astype(_PACKED_AS[dtype]).tobytes()
        number = tensor_pb2.TensorProto.DESCRIPTOR.fields_by_name[name].number
        proto.MergeFromString(_varint(number << 3 | 2) + _varint(len(payload)) + payload)
    elif dtype in (dtypes.DT_HALF, dtypes.DT_BFLOAT16):
        field.extend(flat.view(np.uint16).tolist())
    elif dtype == dtypes.DT_STRING:
        field.extend(v if isinstance(v, bytes) else str(v).encode() for v in flat.tolist())
    elif dtype in (dtypes.DT_RESOURCE, dtypes.DT_VARIANT):
        for item in flat.tolist():
            field.add().CopyFrom(item)
    else:
        field.extend(flat.tolist())
