"""TensorFlow's element types (``tf.DType``) without TensorFlow.

``savedmodel_client.float32`` and friends behave as ``tf.float32`` does where a TF Serving client
meets them: ``dtype=`` arguments, ``as_datatype_enum`` for a ``TensorProto``, ``as_numpy_dtype``
for an array, equality with enum ints, numpy types and names (``tf.float32 == "float"``), and
``as_dtype`` accepting all of those. Only the dtypes with a numpy meaning exist here (no
``resource``, ``variant``, reference or float8/int4 types).

bfloat16 needs ``ml_dtypes`` only to be an array element type (``bfloat16.as_numpy_dtype``):
this module never imports it, it only recognises its type once the user has imported it.
"""

from __future__ import annotations

import builtins
import sys
from typing import Any

import numpy as np

from savedmodel_client.tensorflow.core.framework import types_pb2

__all__ = [
    "DType",
    "as_dtype",
    "bfloat16",
    "bool",
    "complex64",
    "complex128",
    "double",
    "float16",
    "float32",
    "float64",
    "half",
    "int8",
    "int16",
    "int32",
    "int64",
    "qint8",
    "qint16",
    "qint32",
    "quint8",
    "quint16",
    "string",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
]

BFLOAT16_HINT = "pip install savedmodel-client[bfloat16]"

# enum -> (name, numpy type, size in bytes, kind); kind drives the is_* predicates as TF's C++ does.
_TYPES: dict[int, tuple[str, Any, int, str]] = {
    types_pb2.DT_HALF: ("float16", np.float16, 2, "float"),
    types_pb2.DT_BFLOAT16: ("bfloat16", None, 2, "float"),
    types_pb2.DT_FLOAT: ("float32", np.float32, 4, "float"),
    types_pb2.DT_DOUBLE: ("float64", np.float64, 8, "float"),
    types_pb2.DT_INT8: ("int8", np.int8, 1, "int"),
    types_pb2.DT_INT16: ("int16", np.int16, 2, "int"),
    types_pb2.DT_INT32: ("int32", np.int32, 4, "int"),
    types_pb2.DT_INT64: ("int64", np.int64, 8, "int"),
    types_pb2.DT_UINT8: ("uint8", np.uint8, 1, "uint"),
    types_pb2.DT_UINT16: ("uint16", np.uint16, 2, "uint"),
    types_pb2.DT_UINT32: ("uint32", np.uint32, 4, "uint"),
    types_pb2.DT_UINT64: ("uint64", np.uint64, 8, "uint"),
    types_pb2.DT_BOOL: ("bool", np.bool_, 1, "bool"),
    types_pb2.DT_STRING: ("string", object, 0, "string"),
    types_pb2.DT_COMPLEX64: ("complex64", np.complex64, 8, "complex"),
    types_pb2.DT_COMPLEX128: ("complex128", np.complex128, 16, "complex"),
    # TF represents quantized elements as one-field structured numpy dtypes.
    types_pb2.DT_QINT8: ("qint8", np.dtype([("qint8", np.int8)]), 1, "quantized"),
    types_pb2.DT_QUINT8: ("quint8", np.dtype([("quint8", np.uint8)]), 1, "quantized"),
    types_pb2.DT_QINT16: ("qint16", np.dtype([("qint16", np.int16)]), 2, "quantized"),
    types_pb2.DT_QUINT16: ("quint16", np.dtype([("quint16", np.uint16)]), 2, "quantized"),
    types_pb2.DT_QINT32: ("qint32", np.dtype([("qint32", np.int32)]), 4, "quantized"),
}


def bfloat16_numpy_type() -> type:
    """``ml_dtypes.bfloat16``, imported on first use; ImportError naming the extra without it."""
    try:
        import ml_dtypes
    except ImportError as e:
        raise ImportError(
            f"bfloat16 arrays need the ml_dtypes package (numpy has no bfloat16): {BFLOAT16_HINT}",
            name="ml_dtypes",
        ) from e
    return ml_dtypes.bfloat16


def loaded_bfloat16_type() -> type | None:
    """``ml_dtypes.bfloat16`` if the process already imported ml_dtypes, else None (no import)."""
    module = sys.modules.get("ml_dtypes")
    return getattr(module, "bfloat16", None)


class DType:
    """A TensorFlow element type, as ``tf.DType``: immutable, interned by ``as_dtype``, hashable.

    Equality follows TF: a DType equals anything ``as_dtype`` converts to it (an enum int, a numpy
    type or dtype, a name such as ``"float"``), and nothing else.
    """

    __slots__ = ("_type_enum",)

    def __init__(self, type_enum: int) -> None:
        if type_enum not in _TYPES:
            raise TypeError(f"Cannot convert the argument `type_value`: {type_enum!r} to a TensorFlow DType.")
        self._type_enum = type_enum

    @property
    def name(self) -> str:
        return _TYPES[self._type_enum][0]

    @property
    def as_datatype_enum(self) -> int:
        """The ``tensorflow.DataType`` enum value (a TensorProto's ``dtype``)."""
        return self._type_enum

    @property
    def as_numpy_dtype(self) -> Any:
        """The numpy type of an element (``object`` for string; ml_dtypes' type for bfloat16)."""
        if self._type_enum == types_pb2.DT_BFLOAT16:
            return bfloat16_numpy_type()
        return _TYPES[self._type_enum][1]

    @property
    def base_dtype(self) -> DType:
        return self

    @property
    def real_dtype(self) -> DType:
        return {types_pb2.DT_COMPLEX64: float32, types_pb2.DT_COMPLEX128: float64}.get(self._type_enum, self)

    @property
    def size(self) -> int:
        return _TYPES[self._type_enum][2]

    @property
    def is_bool(self) -> builtins.bool:
        return self._kind == "bool"

    @property
    def is_integer(self) -> builtins.bool:
        return self._kind in ("int", "uint")

    @property
    def is_unsigned(self) -> builtins.bool:
        return self._kind == "uint"

    @property
    def is_floating(self) -> builtins.bool:
        return self._kind == "float"

    @property
    def is_complex(self) -> builtins.bool:
        return self._kind == "complex"

    @property
    def is_quantized(self) -> builtins.bool:
        return self._kind == "quantized"

    @property
    def is_numpy_compatible(self) -> builtins.bool:
        return True

    @property
    def _kind(self) -> str:
        return _TYPES[self._type_enum][3]

    def is_compatible_with(self, other: Any) -> builtins.bool:
        return self._type_enum == as_dtype(other)._type_enum

    def __eq__(self, other: object) -> builtins.bool:
        if other is None:
            return False
        if not isinstance(other, DType):
            try:
                other = as_dtype(other)
            except TypeError:
                return False
        return self._type_enum == other._type_enum

    def __ne__(self, other: object) -> builtins.bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return self._type_enum

    def __repr__(self) -> str:
        return f"tf.{self.name}"

    def __str__(self) -> str:
        return f"<dtype: {self.name!r}>"

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return as_dtype, (self.name,)


_INTERN_TABLE: dict[int, DType] = {enum: DType(enum) for enum in _TYPES}

float16 = _INTERN_TABLE[types_pb2.DT_HALF]
half = float16
bfloat16 = _INTERN_TABLE[types_pb2.DT_BFLOAT16]
float32 = _INTERN_TABLE[types_pb2.DT_FLOAT]
float64 = _INTERN_TABLE[types_pb2.DT_DOUBLE]
double = float64
int8 = _INTERN_TABLE[types_pb2.DT_INT8]
int16 = _INTERN_TABLE[types_pb2.DT_INT16]
int32 = _INTERN_TABLE[types_pb2.DT_INT32]
int64 = _INTERN_TABLE[types_pb2.DT_INT64]
uint8 = _INTERN_TABLE[types_pb2.DT_UINT8]
uint16 = _INTERN_TABLE[types_pb2.DT_UINT16]
uint32 = _INTERN_TABLE[types_pb2.DT_UINT32]
uint64 = _INTERN_TABLE[types_pb2.DT_UINT64]
bool = _INTERN_TABLE[types_pb2.DT_BOOL]  # shadows the builtin in this module, as TF does
string = _INTERN_TABLE[types_pb2.DT_STRING]
complex64 = _INTERN_TABLE[types_pb2.DT_COMPLEX64]
complex128 = _INTERN_TABLE[types_pb2.DT_COMPLEX128]
qint8 = _INTERN_TABLE[types_pb2.DT_QINT8]
quint8 = _INTERN_TABLE[types_pb2.DT_QUINT8]
qint16 = _INTERN_TABLE[types_pb2.DT_QINT16]
quint16 = _INTERN_TABLE[types_pb2.DT_QUINT16]
qint32 = _INTERN_TABLE[types_pb2.DT_QINT32]

QUANTIZED_DTYPES = frozenset([qint8, quint8, qint16, quint16, qint32])

_STRING_TO_TF: dict[str, DType] = {d.name: d for d in _INTERN_TABLE.values()}
_STRING_TO_TF.update(half=float16, float=float32, double=float64)

# numpy scalar types (and the quantized structured dtypes) -> DType; keyed as TF keys them.
_NP_TO_TF: dict[Any, DType] = {
    info[1]: _INTERN_TABLE[enum] for enum, info in _TYPES.items() if info[1] not in (None, object)
}
_NP_TO_TF.update({np.object_: string, np.bytes_: string, np.str_: string})
for _alias in (np.intc, np.uintc, np.int_, np.uint, np.longlong, np.ulonglong):
    _NP_TO_TF.setdefault(
        _alias, _NP_TO_TF[np.dtype(f"{np.dtype(_alias).kind}{np.dtype(_alias).itemsize}").type]
    )

_PYTHON_TO_TF = {builtins.float: float32, builtins.bool: bool, builtins.object: string}

# One dict for every hashable spelling, as TF's _ANY_TO_TF: note that a lookup by value makes
# `True` and `1.0` mean enum 1 (float32), as they do in TensorFlow.
_ANY_TO_TF: dict[Any, DType] = {**_INTERN_TABLE, **_STRING_TO_TF, **_PYTHON_TO_TF, **_NP_TO_TF}


def _from_numpy_type(numpy_type: Any) -> DType | None:
    found = _NP_TO_TF.get(numpy_type)
    if found is None and numpy_type is not None and numpy_type is loaded_bfloat16_type():
        return bfloat16
    return found


def as_dtype(type_value: Any) -> DType:
    """Converts ``type_value`` (a DType, enum int, numpy type or dtype, or name) to a ``DType``.

    Raises:
      TypeError: ``type_value`` names no dtype this package knows.
    """
    if isinstance(type_value, DType):
        return _INTERN_TABLE[type_value.as_datatype_enum]
    if isinstance(type_value, np.dtype):
        found = _from_numpy_type(type_value.type)
        if found is not None:
            return found
    try:
        return _ANY_TO_TF[type_value]
    except (KeyError, TypeError):
        pass
    try:
        found = _from_numpy_type(type_value)
    except TypeError:
        found = None
    if found is not None:
        return found
    if hasattr(type_value, "dtype"):
        try:
            found = _from_numpy_type(np.dtype(type_value.dtype).type)
        except (TypeError, ValueError):
            found = None
        if found is not None:
            return found
    raise TypeError(f"Cannot convert the argument `type_value`: {type_value!r} to a TensorFlow DType.")
