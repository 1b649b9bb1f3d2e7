"""TensorFlow's ``DataType`` enum and its numpy counterparts: the one dtype table of the project.

Values are those of ``tensorflow.DataType`` (types.proto); reference types are the base value + 100.
Strings are numpy object arrays of ``bytes`` (as TF returns them); resources and variants are object
arrays holding Python objects. bfloat16 comes from ``ml_dtypes`` (a dependency of onnx).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

DT_INVALID = 0
DT_FLOAT = 1
DT_DOUBLE = 2
DT_INT32 = 3
DT_UINT8 = 4
DT_INT16 = 5
DT_INT8 = 6
DT_STRING = 7
DT_COMPLEX64 = 8
DT_INT64 = 9
DT_BOOL = 10
DT_QINT8 = 11
DT_QUINT8 = 12
DT_QINT32 = 13
DT_BFLOAT16 = 14
DT_QINT16 = 15
DT_QUINT16 = 16
DT_UINT16 = 17
DT_COMPLEX128 = 18
DT_HALF = 19
DT_RESOURCE = 20
DT_VARIANT = 21
DT_UINT32 = 22
DT_UINT64 = 23

REF_OFFSET = 100

# enum -> (TF name, numpy dtype). Quantized types keep their storage dtype.
_TABLE: dict[int, tuple[str, np.dtype]] = {
    DT_FLOAT: ("float", np.dtype(np.float32)),
    DT_DOUBLE: ("double", np.dtype(np.float64)),
    DT_INT32: ("int32", np.dtype(np.int32)),
    DT_UINT8: ("uint8", np.dtype(np.uint8)),
    DT_INT16: ("int16", np.dtype(np.int16)),
    DT_INT8: ("int8", np.dtype(np.int8)),
    DT_STRING: ("string", np.dtype(object)),
    DT_COMPLEX64: ("complex64", np.dtype(np.complex64)),
    DT_INT64: ("int64", np.dtype(np.int64)),
    DT_BOOL: ("bool", np.dtype(np.bool_)),
    DT_QINT8: ("qint8", np.dtype(np.int8)),
    DT_QUINT8: ("quint8", np.dtype(np.uint8)),
    DT_QINT32: ("qint32", np.dtype(np.int32)),
    DT_BFLOAT16: ("bfloat16", np.dtype(ml_dtypes.bfloat16)),
    DT_QINT16: ("qint16", np.dtype(np.int16)),
    DT_QUINT16: ("quint16", np.dtype(np.uint16)),
    DT_UINT16: ("uint16", np.dtype(np.uint16)),
    DT_COMPLEX128: ("complex128", np.dtype(np.complex128)),
    DT_HALF: ("half", np.dtype(np.float16)),
    DT_RESOURCE: ("resource", np.dtype(object)),
    DT_VARIANT: ("variant", np.dtype(object)),
    DT_UINT32: ("uint32", np.dtype(np.uint32)),
    DT_UINT64: ("uint64", np.dtype(np.uint64)),
}

# numpy dtype -> enum, for the unambiguous (non-object, non-quantized) types.
_FROM_NUMPY: dict[np.dtype, int] = {
    dt: enum
    for enum, (_, dt) in _TABLE.items()
    if enum not in (DT_QINT8, DT_QUINT8, DT_QINT32, DT_QINT16, DT_QUINT16, DT_RESOURCE, DT_VARIANT)
    and dt != np.dtype(object)
}


def base_dtype(dtype: int) -> int:
    """Strip the reference bit: DT_FLOAT_REF -> DT_FLOAT."""
    return dtype - REF_OFFSET if dtype > REF_OFFSET else dtype


def is_ref(dtype: int) -> bool:
    return dtype > REF_OFFSET


def as_numpy_dtype(dtype: int) -> np.dtype:
    """The numpy dtype that holds values of a TF ``DataType``; raises KeyError if none does."""
    return _TABLE[base_dtype(dtype)][1]


def name(dtype: int) -> str:
    """TF's name for a dtype as it appears in error texts: 'float', 'int64', 'float_ref'."""
    base = base_dtype(dtype)
    text = _TABLE[base][0] if base in _TABLE else f"dtype({base})"
    return text + "_ref" if is_ref(dtype) else text


def from_numpy(dtype: np.dtype | type) -> int:
    """The TF ``DataType`` of a numpy dtype; object arrays are strings."""
    dtype = np.dtype(dtype)
    if dtype == np.dtype(object) or dtype.kind in ("S", "U"):
        return DT_STRING
    try:
        return _FROM_NUMPY[dtype]
    except KeyError:
        raise TypeError(f"Unsupported numpy dtype {dtype}") from None


def is_supported(dtype: int) -> bool:
    return base_dtype(dtype) in _TABLE


def is_floating(dtype: int) -> bool:
    return base_dtype(dtype) in (DT_FLOAT, DT_DOUBLE, DT_HALF, DT_BFLOAT16)


def is_integer(dtype: int) -> bool:
    return base_dtype(dtype) in (
        DT_INT8,
        DT_INT16,
        DT_INT32,
        DT_INT64,
        DT_UINT8,
        DT_UINT16,
        DT_UINT32,
        DT_UINT64,
    )


def is_complex(dtype: int) -> bool:
    return base_dtype(dtype) in (DT_COMPLEX64, DT_COMPLEX128)


# Element size in bytes where a dtype has a fixed one (used to bound allocations before making them).
def itemsize(dtype: int) -> int | None:
    dt = as_numpy_dtype(dtype)
    return None if dt == np.dtype(object) else dt.itemsize
