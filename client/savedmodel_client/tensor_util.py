"""``tf.make_tensor_proto`` and ``tf.make_ndarray`` without TensorFlow.

The semantics are TensorFlow 2.21's (tensorflow/python/framework/tensor_util.py), down to the
serialized bytes: the same dtype inference (Python floats -> float32, ints -> int32 unless a value
needs int64, complex -> complex128), the same choice between ``tensor_content`` (for numeric
dtypes with more than one element, when the values fill the shape) and the typed ``*_val``
fields, one stored value for a broadcast scalar, and the same exception types and messages.

Deliberate differences: an array in non-native byte order is converted to native order first
(TensorFlow copies its bytes unswapped into ``tensor_content``, or raises for one element);
bfloat16 is rounded by this module (correctly rounded to nearest even from any source precision,
as ml_dtypes' casts are) so that ``make_tensor_proto`` needs no ml_dtypes; ``make_ndarray`` of a
bfloat16 tensor does, as its array's element type. A falsy ``dtype`` (``0``, ``""``) is a
TypeError from ``as_dtype`` (TensorFlow skips it, then fails with an AttributeError). Only the
dtypes of ``savedmodel_client.dtypes`` exist: resource, variant, float8, int4/int2 and reference
dtypes are a TypeError.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from savedmodel_client import dtypes
from savedmodel_client.tensorflow.core.framework import tensor_pb2, tensor_shape_pb2

__all__ = ["make_ndarray", "make_tensor_proto"]

# The dtypes whose multi-element tensors TF packs into `tensor_content` (uint16, bool, complex and
# string never are).
_TENSOR_CONTENT_TYPES = frozenset(
    [
        dtypes.float16,
        dtypes.bfloat16,
        dtypes.float32,
        dtypes.float64,
        dtypes.int8,
        dtypes.int16,
        dtypes.int32,
        dtypes.int64,
        dtypes.uint8,
        dtypes.uint32,
        dtypes.uint64,
        dtypes.qint8,
        dtypes.quint8,
        dtypes.qint16,
        dtypes.quint16,
        dtypes.qint32,
    ]
)
_INT_VAL_TYPES = frozenset([dtypes.int8, dtypes.int16, dtypes.int32, dtypes.uint8, dtypes.uint16])
_MAX_TENSOR_CONTENT = 1 << 31
_DTYPES_URL = "https://www.tensorflow.org/api_docs/python/tf/dtypes"

_INTEGRAL_TYPES = (numbers.Integral, np.integer)
_REAL_TYPES = (numbers.Real, np.integer, np.floating)
_COMPLEX_TYPES = (numbers.Complex, np.number)
_TEXT_TYPES = (bytes, str)


def make_tensor_proto(
    values: Any,
    dtype: Any = None,
    shape: Any = None,
    verify_shape: bool = False,
    allow_broadcast: bool = False,
) -> tensor_pb2.TensorProto:
    """Creates a ``TensorProto`` from a Python scalar or (nested) list, or a numpy array or scalar.

    As ``tf.make_tensor_proto``: ``dtype`` (a DType, enum, numpy type or name) converts the values;
    ``shape`` may hold more elements than ``values`` (the last value repeats when read back);
    ``verify_shape`` demands that the shapes are equal; ``allow_broadcast`` accepts a scalar or
    one-element vector for any shape. A ``TensorProto`` is returned as is.

    Raises:
      TypeError: values that do not fit ``dtype``, or that no dtype represents.
      ValueError: None values, a ragged list, more values than ``shape`` holds.
    """
    if allow_broadcast and verify_shape:
        raise ValueError("allow_broadcast and verify_shape are not both allowed.")
    if isinstance(values, tensor_pb2.TensorProto):
        return values
    if dtype is not None:
        # TF skips a falsy dtype here (0, "") and then fails with an AttributeError.
        dtype = dtypes.as_dtype(dtype)
    is_quantized = dtype in dtypes.QUANTIZED_DTYPES
    if _is_array_like(values):
        values = np.asarray(values)
    if isinstance(values, (np.ndarray, np.generic)):
        nparray, numpy_dtype = _convert_numpy(values, dtype)
    else:
        nparray, numpy_dtype = _convert_python(values, dtype, shape, is_quantized)
    if is_quantized:
        numpy_dtype = dtype
    if dtype is not None and dtype != numpy_dtype:
        raise TypeError(f"`dtype` {dtype} is not compatible with {values} of dtype {nparray.dtype}.")

    shape, shape_size, is_same_size = _resolve_shape(nparray, shape, verify_shape, allow_broadcast)
    tensor_proto = tensor_pb2.TensorProto(
        dtype=numpy_dtype.as_datatype_enum, tensor_shape=_shape_proto(shape)
    )
    if is_same_size and numpy_dtype in _TENSOR_CONTENT_TYPES and shape_size > 1:
        if nparray.size * nparray.itemsize >= _MAX_TENSOR_CONTENT:
            raise ValueError("Cannot create a tensor proto whose content is larger than 2GB.")
        tensor_proto.tensor_content = nparray.tobytes()
    elif numpy_dtype == dtypes.string and not isinstance(values, np.ndarray):
        # From the values themselves, not from numpy's fixed-width copy that drops trailing NULs.
        tensor_proto.string_val.extend(_python_strings(values))
    else:
        _append_values(tensor_proto, numpy_dtype, nparray.ravel())
    return tensor_proto


def make_ndarray(tensor: tensor_pb2.TensorProto) -> np.ndarray:
    """Creates a numpy array with the shape and values of a ``TensorProto``, as ``tf.make_ndarray``.

    Reads ``tensor_content`` or the typed field; fewer typed values than elements repeat the last
    one, none give zeros (empty strings). Strings come back as an object array of bytes, quantized
    types as TF's one-field structured dtypes, bfloat16 as ``ml_dtypes.bfloat16``.

    Raises:
      TypeError: a dtype this package does not know.
      ImportError: a bfloat16 tensor without ml_dtypes installed.
    """
    shape = [d.size for d in tensor.tensor_shape.dim]
    num_elements = np.prod(shape, dtype=np.int64)
    tensor_dtype = dtypes.as_dtype(tensor.dtype)
    dtype = tensor_dtype.as_numpy_dtype
    if tensor.tensor_content:
        return np.frombuffer(tensor.tensor_content, dtype=dtype).copy().reshape(shape)
    if tensor_dtype == dtypes.string:
        values = list(tensor.string_val)
        padding = num_elements - len(values)
        if padding > 0:
            last = values[-1] if values else ""
            values.extend([last] * padding)
        return np.array(values, dtype=dtype).reshape(shape)
    values = _typed_values(tensor, tensor_dtype, dtype)
    if values.size == 0:
        return np.zeros(shape, dtype)
    if values.size != num_elements:
        values = np.pad(values, (0, num_elements - values.size), "edge")
    return values.reshape(shape)


def _typed_values(tensor: tensor_pb2.TensorProto, tensor_dtype: dtypes.DType, dtype: Any) -> np.ndarray:
    if tensor_dtype in (dtypes.float16, dtypes.bfloat16):
        # half_val holds the 16-bit patterns.
        return np.fromiter(tensor.half_val, dtype=np.uint16).view(dtype)
    if tensor_dtype in (dtypes.complex64, dtypes.complex128):
        field = tensor.scomplex_val if tensor_dtype == dtypes.complex64 else tensor.dcomplex_val
        parts = np.fromiter(field, dtype=tensor_dtype.real_dtype.as_numpy_dtype)
        return parts[: parts.size // 2 * 2].view(dtype)
    if tensor_dtype in _INT_VAL_TYPES or tensor_dtype.is_quantized:
        field = tensor.int_val
    else:
        field = {
            dtypes.float32: tensor.float_val,
            dtypes.float64: tensor.double_val,
            dtypes.int64: tensor.int64_val,
            dtypes.uint32: tensor.uint32_val,
            dtypes.uint64: tensor.uint64_val,
            dtypes.bool: tensor.bool_val,
        }[tensor_dtype]
    return np.fromiter(field, dtype=dtype)


def _convert_numpy(
    values: np.ndarray | np.generic, dtype: dtypes.DType | None
) -> tuple[np.ndarray, dtypes.DType]:
    if dtype == dtypes.bfloat16:
        return _bfloat16_bits(values), dtypes.bfloat16
    if dtype is not None:
        values = values.astype(dtype.as_numpy_dtype)
    return _canonical(values)


def _convert_python(
    values: Any, dtype: dtypes.DType | None, shape: Any, is_quantized: bool
) -> tuple[np.ndarray, dtypes.DType]:
    if values is None:
        raise ValueError("None values not supported.")
    is_bfloat16 = dtype == dtypes.bfloat16
    np_dt = None if dtype is None or is_bfloat16 else dtype.as_numpy_dtype
    if shape is not None and np.prod(shape, dtype=np.int64) == 0:
        nparray = np.empty(shape, dtype=np.uint16 if is_bfloat16 else np_dt)
    else:
        _assert_compatible(values, dtype)
        if is_bfloat16:
            nparray = _bfloat16_bits(np.array(values))
        elif np_dt is not None and np.issubdtype(np_dt, np.number):
            # TF's numpy_compat.np_array: wrap around out-of-range ints rather than raise.
            nparray = np.array(values).astype(np_dt)
        else:
            nparray = np.array(values, dtype=np_dt)
        if list(nparray.shape) != _dense_dimensions(values) and not is_quantized:
            raise ValueError(
                f"Expected values {values} to be a dense tensor with shape {_dense_dimensions(values)}, "
                f"but got shape {list(nparray.shape)}."
            )
    if is_bfloat16:
        return nparray, dtypes.bfloat16
    if dtype is None:
        # numpy's defaults are 64-bit; TF prefers float32, and int32 where no value needs more.
        if nparray.dtype == np.float64:
            nparray = nparray.astype(np.float32)
        elif nparray.dtype == np.int64:
            downcast = nparray.astype(np.int32)
            if np.array_equal(downcast, nparray):
                nparray = downcast
    return _canonical(nparray)


def _canonical(nparray: np.ndarray | np.generic) -> tuple[np.ndarray, dtypes.DType]:
    """The array in native byte order (bfloat16 as its bit patterns) and its DType."""
    if _is_bfloat16_array(nparray):
        return np.asarray(nparray).view(np.uint16), dtypes.bfloat16
    if not nparray.dtype.isnative:
        nparray = nparray.astype(nparray.dtype.newbyteorder("="))
    return nparray, dtypes.as_dtype(nparray.dtype)


def _resolve_shape(
    nparray: np.ndarray, shape: Any, verify_shape: bool, allow_broadcast: bool
) -> tuple[Any, int, bool]:
    if shape is None:
        return nparray.shape, nparray.size, True
    shape = [int(dim) for dim in shape]
    shape_size = np.prod(shape, dtype=np.int64)
    if allow_broadcast:
        if nparray.shape not in ((1,), ()) and nparray.size != shape_size:
            raise TypeError(f"Expected Tensor's shape: {tuple(shape)}, but got {nparray.shape}.")
    else:
        if verify_shape and nparray.shape != tuple(shape):
            raise TypeError(f"Expected Tensor's shape: {tuple(shape)}, but got {nparray.shape}.")
        if nparray.size > shape_size:
            raise ValueError(
                f"Too many elements provided. Takes at most {shape_size:d}, but got {nparray.size:d}."
            )
    return shape, shape_size, shape_size == nparray.size


def _shape_proto(shape: Any) -> tensor_shape_pb2.TensorShapeProto:
    for size in shape:
        if size < 0:
            raise ValueError(f"Dimension {size} must be >= 0")
    return tensor_shape_pb2.TensorShapeProto(
        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=s) for s in shape]
    )


def _python_strings(values: Any) -> list[bytes]:
    try:
        return [_as_bytes(x) for x in _flatten_lists(values)]
    except TypeError:
        raise TypeError(
            f"Failed to convert elements of {values} to Tensor. Consider casting elements to a "
            f"supported type. See {_DTYPES_URL} for supported TF dtypes."
        ) from None


def _append_values(tensor_proto: tensor_pb2.TensorProto, dtype: dtypes.DType, flat: np.ndarray) -> None:
    """Fills the typed field of ``dtype`` from a flat array (TF's Append*ArrayToTensorProto)."""
    if dtype == dtypes.float16:
        tensor_proto.half_val.extend(flat.view(np.uint16).tolist())
    elif dtype == dtypes.bfloat16:
        tensor_proto.half_val.extend(flat.tolist())
    elif dtype == dtypes.float32:
        tensor_proto.float_val.extend(flat.tolist())
    elif dtype == dtypes.float64:
        tensor_proto.double_val.extend(flat.tolist())
    elif dtype in _INT_VAL_TYPES:
        tensor_proto.int_val.extend(flat.tolist())
    elif dtype.is_quantized:
        tensor_proto.int_val.extend(flat[flat.dtype.names[0]].tolist())
    elif dtype == dtypes.int64:
        tensor_proto.int64_val.extend(flat.tolist())
    elif dtype == dtypes.uint32:
        tensor_proto.uint32_val.extend(flat.tolist())
    elif dtype == dtypes.uint64:
        tensor_proto.uint64_val.extend(flat.tolist())
    elif dtype == dtypes.complex64:
        tensor_proto.scomplex_val.extend(flat.view(np.float32).tolist())
    elif dtype == dtypes.complex128:
        tensor_proto.dcomplex_val.extend(flat.view(np.float64).tolist())
    elif dtype == dtypes.bool:
        tensor_proto.bool_val.extend(flat.tolist())
    else:
        tensor_proto.string_val.extend([_as_bytes(x) for x in flat])


# Type checks of Python values against a requested dtype (TF's _AssertCompatible).


def _assert_compatible(values: Any, dtype: dtypes.DType | None) -> None:
    if dtype is None:
        return
    if dtype.is_quantized:
        _check_quantized(values, dtype)
    elif dtype == dtypes.string:
        _check_types(values, _TEXT_TYPES, dtype)
    elif dtype == dtypes.bool:
        _check_types(values, (bool,), dtype)
    elif dtype.is_integer:
        _check_types(values, _INTEGRAL_TYPES, dtype)
    elif dtype.is_floating:
        _check_types(values, _REAL_TYPES, dtype)
    else:
        _check_types(values, _COMPLEX_TYPES, dtype)


def _check_types(values: Any, expected: tuple[type, ...], dtype: dtypes.DType) -> None:
    for v in _flatten_nest(values):
        if not (
            isinstance(v, expected) or (isinstance(v, np.ndarray) and issubclass(v.dtype.type, expected))
        ):
            _mismatch(v, dtype)


def _check_quantized(values: Any, dtype: dtypes.DType) -> None:
    # Quantized values are written as tuples, e.g. [(1,), (2,)], so a tuple is a leaf here.
    if not isinstance(values, (list, tuple)):
        _mismatch(values, dtype)
    for v in values:
        if isinstance(values, tuple):
            _check_types(v, _INTEGRAL_TYPES, dtype)
        else:
            _check_quantized(v, dtype)


def _mismatch(value: Any, dtype: dtypes.DType) -> None:
    raise TypeError(f"Expected {dtype.name}, but got {value} of type '{type(value).__name__}'.")


def _flatten_nest(values: Any) -> Iterator[Any]:
    """Leaves in ``tf.nest.flatten``'s order: lists and tuples in order, mappings by sorted key."""
    if isinstance(values, Mapping):
        for key in sorted(values):
            yield from _flatten_nest(values[key])
    elif isinstance(values, (list, tuple)):
        for value in values:
            yield from _flatten_nest(value)
    else:
        yield values


def _flatten_lists(values: Any) -> Iterator[Any]:
    if isinstance(values, (list, tuple)):
        for value in values:
            yield from _flatten_lists(value)
    else:
        yield values


def _dense_dimensions(values: Any) -> list[int]:
    if not isinstance(values, (list, tuple)):
        return []
    if not values:
        return [0]
    return [len(values), *_dense_dimensions(values[0])]


def _is_array_like(obj: Any) -> bool:
    if callable(getattr(obj, "__array__", None)) or isinstance(
        getattr(obj, "__array_interface__", None), dict
    ):
        return True
    try:
        memoryview(obj)
    except TypeError:
        return False
    return not isinstance(obj, bytes)


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytes):
        return value
    raise TypeError(f"Expected binary or unicode string, got {value!r}")


# bfloat16 in plain numpy. ml_dtypes rounds every source type directly to bfloat16 (no double
# rounding through float32), so float64 and 64-bit integers are first narrowed with round-to-odd,
# which keeps the final round-to-nearest-even exact.


def _is_bfloat16_array(array: np.ndarray | np.generic) -> bool:
    bfloat16_type = dtypes.loaded_bfloat16_type()
    return bfloat16_type is not None and array.dtype.type is bfloat16_type


def _bfloat16_bits(values: Any) -> np.ndarray:
    """The bfloat16 bit patterns (uint16, same shape) of numeric values, rounded as ml_dtypes does."""
    array = np.asarray(values)
    if _is_bfloat16_array(array):
        return array.view(np.uint16)
    flat = array.reshape(-1)
    kind = array.dtype.kind
    if kind == "b" or (kind == "f" and array.dtype.itemsize <= 4):
        bits = _float32_to_bfloat16(flat.astype(np.float32))
    elif kind in "iu":
        bits = _float64_to_bfloat16(_int_to_float64_sticky(flat))
    elif kind in "fcO":
        bits = _float64_to_bfloat16(flat.astype(np.float64))
    else:
        raise TypeError(
            f"Cannot cast array data from {array.dtype!r} to dtype(bfloat16) according to the rule 'unsafe'"
        )
    return bits.reshape(array.shape)


def _float32_to_bfloat16(values: np.ndarray) -> np.ndarray:
    bits = values.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    is_nan = (bits & 0x7FFFFFFF) > 0x7F800000
    return np.where(is_nan, ((bits >> 16) & 0x8000) | 0x7FC0, rounded).astype(np.uint16)


def _float64_to_bfloat16(values: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        narrowed = values.astype(np.float32)
    widened = narrowed.astype(np.float64)
    inexact = (widened != values) & ~np.isnan(values)
    bits = narrowed.view(np.uint32)
    # Round to odd: truncate toward zero, then set the last bit of every inexact result.
    bits -= (inexact & (np.abs(widened) > np.abs(values))).astype(np.uint32)
    bits |= inexact.astype(np.uint32)
    return _float32_to_bfloat16(narrowed)


def _int_to_float64_sticky(values: np.ndarray) -> np.ndarray:
    """float64 values whose rounding to 8 significant bits is that of the integers themselves."""
    if values.dtype.kind == "u":
        magnitude, negative = values.astype(np.uint64), None
    else:
        signed = values.astype(np.int64)
        negative = signed < 0
        magnitude = np.where(negative, ~signed.view(np.uint64) + np.uint64(1), signed.view(np.uint64))
    big = magnitude >= np.uint64(1 << 53)
    sticky = ((magnitude & np.uint64(0x7FF)) != 0).astype(np.uint64)
    magnitude = np.where(big, (magnitude >> np.uint64(11)) | sticky, magnitude)
    result = magnitude.astype(np.float64) * np.where(big, 2048.0, 1.0)
    return result if negative is None else np.where(negative, -result, result)
