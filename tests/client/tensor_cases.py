"""The make_tensor_proto / make_ndarray cases that TensorFlow and savedmodel_client both run.

One table, two runners: ``oracle_scripts/tensor_protos.py`` loads this file by path in the
oracle's TensorFlow venv and records what TensorFlow does; ``test_tensor_util_oracle.py`` runs the
same table through savedmodel_client and demands the same record. This module imports nothing
but numpy (and ml_dtypes inside the bfloat16 builders, both venvs have it), and never a library
under test: ``run_case`` takes the library as a ``Library``.

A case builds its values with a callable (so both sides build equal, fresh inputs) and names its
dtype in one of the spellings users write: ``DT("float32")`` for the library's DType object,
``NP("float32")`` for ``as_dtype(name).as_numpy_dtype``, or a plain name string or enum int. A
case with ``proto`` instead reads a TensorProto built from those fields with make_ndarray.

The record of a case (JSON): ``{"proto": hex of the deterministic serialization, "ndarray":
{dtype, shape, data}}`` (make_ndarray's result on that proto, or ``"ndarray_error"``), or
``{"error": {"type", "message"}}``.
"""

from __future__ import annotations

import re
import warnings
from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np


class Library(NamedTuple):
    """What a runner needs from TensorFlow or from savedmodel_client."""

    make_tensor_proto: Callable[..., Any]
    make_ndarray: Callable[[Any], Any]
    as_dtype: Callable[[Any], Any]
    TensorProto: type


@dataclass(frozen=True)
class DT:
    """The library's DType object of this name (``tf.float32``)."""

    name: str

    def resolve(self, lib: Library) -> Any:
        return lib.as_dtype(self.name)


@dataclass(frozen=True)
class NP:
    """The numpy type the library gives for this dtype (``tf.float32.as_numpy_dtype``)."""

    name: str

    def resolve(self, lib: Library) -> Any:
        return lib.as_dtype(self.name).as_numpy_dtype


@dataclass(frozen=True)
class Case:
    name: str
    values: Callable[[], Any] | None = None
    dtype: Any = None
    shape: Any = None
    verify_shape: bool = False
    allow_broadcast: bool = False
    # make_ndarray of a TensorProto with these fields ("shape" as a list of sizes).
    proto: dict[str, Any] | None = None
    # make_tensor_proto of a TensorProto with these fields: returned as is.
    proto_values: dict[str, Any] | None = None
    # False where the message holds something run-specific beyond an address.
    message: bool = True


def bf16_array(values: Any) -> np.ndarray:
    import ml_dtypes

    return np.array(values, dtype=ml_dtypes.bfloat16)


def build_proto(fields: dict[str, Any], lib: Library) -> Any:
    fields = dict(fields)
    shape = fields.pop("shape", [])
    proto = lib.TensorProto(**fields)
    for size in shape:
        proto.tensor_shape.dim.add(size=size)
    return proto


def describe_array(array: Any) -> dict[str, Any]:
    out = {"type": type(array).__name__, "dtype": str(array.dtype), "shape": list(array.shape)}
    if array.dtype == object:
        out["items"] = [repr(x) for x in array.ravel().tolist()]
    else:
        out["data"] = array.tobytes().hex()
    return out


def describe_error(error: BaseException) -> dict[str, str]:
    return {"type": type(error).__name__, "message": re.sub(r" at 0x[0-9a-fA-F]+", " at 0x?", str(error))}


def run_case(case: Case, lib: Library) -> dict[str, Any]:
    """The record of one case through one library."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if case.proto is not None:
                proto = build_proto(case.proto, lib)
            else:
                dtype = case.dtype.resolve(lib) if isinstance(case.dtype, (DT, NP)) else case.dtype
                if case.proto_values is not None:
                    values = build_proto(case.proto_values, lib)
                else:
                    values = case.values()
                proto = lib.make_tensor_proto(
                    values,
                    dtype=dtype,
                    shape=case.shape,
                    verify_shape=case.verify_shape,
                    allow_broadcast=case.allow_broadcast,
                )
                if case.proto_values is not None and proto is not values:
                    return {
                        "error": {"type": "AssertionError", "message": "a TensorProto was not returned as is"}
                    }
        except Exception as e:
            return {"error": describe_error(e)}
        out: dict[str, Any] = {"proto": proto.SerializeToString(deterministic=True).hex()}
        try:
            out["ndarray"] = describe_array(lib.make_ndarray(proto))
        except Exception as e:
            out["ndarray_error"] = describe_error(e)
    return out


# Six sample values of every dtype, in the form TF's make_tensor_proto takes from Python.
SAMPLES: dict[str, list[Any]] = {
    "float16": [1.5, -2.25, 65504.0, 1e-7, float("inf"), 0.1],
    "bfloat16": [1.1, -2.5, 3.0e38, 1 + 2**-8 + 2**-30, 1e-40, float("nan")],
    "float32": [1.1, -2.5, 3.4e38, 1e-45, float("nan"), -0.0],
    "float64": [1.1, -2.5, 1e300, 5e-324, float("-inf"), 0.1],
    "int8": [1, -128, 127, 0, -5, 9],
    "int16": [1, -32768, 32767, 0, 300, -9],
    "int32": [1, -(2**31), 2**31 - 1, 0, 7, -9],
    "int64": [1, -(2**63), 2**63 - 1, 2**40, -7, 0],
    "uint8": [1, 255, 0, 128, 7, 9],
    "uint16": [1, 65535, 0, 300, 7, 9],
    "uint32": [1, 2**32 - 1, 0, 2**31, 7, 9],
    "uint64": [1, 2**64 - 1, 0, 2**63, 7, 9],
    "bool": [True, False, True, True, False, False],
    "string": [b"a", "\u00e9t\u00e9", b"\x00b\x00", "", b"\xff", "z"],
    "complex64": [1 + 2j, -3.5j, 2.0, 1e30 + 1j, 0j, 5],
    "complex128": [1 + 2j, -3.5j, 2.0, 1e300 + 1j, 0j, 5],
    "qint8": [(1,), (-128,), (127,), (0,), (5,), (-3,)],
    "quint8": [(1,), (255,), (0,), (128,), (5,), (3,)],
    "qint16": [(1,), (-32768,), (32767,), (0,), (5,), (-3,)],
    "quint16": [(1,), (65535,), (0,), (300,), (5,), (3,)],
    "qint32": [(1,), (-(2**31),), (2**31 - 1,), (0,), (5,), (-3,)],
}
ENUMS = {
    "float16": 19,
    "bfloat16": 14,
    "float32": 1,
    "float64": 2,
    "int8": 6,
    "int16": 5,
    "int32": 3,
    "int64": 9,
    "uint8": 4,
    "uint16": 17,
    "uint32": 22,
    "uint64": 23,
    "bool": 10,
    "string": 7,
    "complex64": 8,
    "complex128": 18,
    "qint8": 11,
    "quint8": 12,
    "qint16": 15,
    "quint16": 16,
    "qint32": 13,
}


def _numpy_source(name: str, values: list[Any]) -> np.ndarray:
    """A numpy array of the samples that make_tensor_proto(dtype=name) casts from."""
    if name == "string":
        return np.array(values, dtype=object)
    if name.startswith(("qint", "quint")):
        return np.array([v[0] for v in values])
    if name == "bfloat16":
        return np.array(values, dtype=np.float64)
    return np.array(values, dtype=name)


def _const(value: Any) -> Callable[[], Any]:
    return lambda: value


def _builder(value: Any) -> Callable[[], Any]:
    """A fresh copy of a numpy array each time; a callable as is; anything else as a constant."""
    if isinstance(value, np.ndarray):
        return lambda: value.copy()
    if callable(value):
        return value
    return _const(value)


def _bf16_samples() -> np.ndarray:
    return bf16_array([1.0, 1.0078125, -3.5, 65280.0])


def _generator() -> Any:
    return (x for x in [1])


def _dtype_cases(name: str) -> list[Case]:
    s = SAMPLES[name]
    src = _numpy_source(name, s)
    shaped = src.reshape(2, 3)
    return [
        Case(f"{name}/scalar", _const(s[0]), DT(name)),
        Case(f"{name}/scalar-by-enum", _const(s[1]), ENUMS[name]),
        Case(f"{name}/list1", _const([s[2]]), DT(name)),
        Case(f"{name}/list", _const(list(s)), name),
        Case(f"{name}/nested", _const([list(s[:3]), list(s[3:])]), DT(name)),
        Case(f"{name}/numpy", lambda: src.copy(), DT(name)),
        Case(f"{name}/numpy-nd", lambda: shaped.copy(), NP(name)),
        Case(f"{name}/numpy-1", lambda: src[:1].copy(), DT(name)),
        Case(f"{name}/numpy-0d", lambda: np.array(src[3], dtype=src.dtype), DT(name)),
        Case(f"{name}/empty-list", _const([]), DT(name)),
        Case(f"{name}/empty-shape", _const([]), DT(name), shape=[2, 0]),
        Case(f"{name}/empty-numpy", lambda: np.zeros((0, 3), dtype=src.dtype), DT(name)),
        Case(f"{name}/broadcast", _const(s[1]), DT(name), shape=[2, 3]),
        Case(f"{name}/fewer", _const(list(s[:2])), DT(name), shape=[4]),
        Case(f"{name}/allow-broadcast", _const([s[4]]), DT(name), shape=[3], allow_broadcast=True),
        Case(f"{name}/verify-shape", _const([list(s[:2])]), DT(name), shape=[1, 2], verify_shape=True),
        Case(f"{name}/many", lambda: np.resize(src, 1000), DT(name)),
    ]


def _inference_cases() -> list[Case]:
    """dtype=None: what TF infers from Python and numpy values."""
    Point = namedtuple("Point", "x y")
    table = {
        "float": 1.5,
        "int": 7,
        "int-big": 2**40,
        "int-neg-big": -(2**40),
        "int-2**63": 2**63,
        "uint64-max": 2**64 - 1,
        "bool": True,
        "complex": 1 + 2j,
        "str": "h\u00e9llo",
        "str-nul": "a\x00",
        "bytes": b"\x00\xffz\x00",
        "list-float": [1.0, 2.5, -3.25],
        "list-int": [1, 2, 3],
        "list-mixed-num": [1, 2.5],
        "list-int-big": [1, 2**40],
        "list-int-uint64": [1, 2**63],
        "list-neg-uint64": [-1, 2**63],
        "list-int32-edge": [2**31 - 1, -(2**31)],
        "list-int32-over": [2**31],
        "list-bool": [True, False],
        "list-complex": [1 + 2j, 3],
        "list-bytes": [b"a", b"bc"],
        "list-str-bytes": [b"a", "\u00e9"],
        "nested-str": [[b"a", "b"], ["c", b"d"]],
        "nested-3d": [[[1.0], [2.0]], [[3.0], [4.0]]],
        "tuple": (1, 2),
        "namedtuple": Point(1, 2),
        "empty": [],
        "empty-nested": [[], []],
        "empty-inner": [[]],
        "list-np-int64": [np.int64(5)],
        "list-np-float64": [np.float64(5.5)],
        "list-np-float32": [np.float32(1.1)],
        "list-np-arrays-ragged-dims": [np.array([1, 2]), np.array([3, 4])],
        "bytearray": bytearray(b"ab"),
        "memoryview": memoryview(b"xyz"),
    }
    cases = [Case(f"infer/{key}", _const(value)) for key, value in table.items()]
    numpy_table = {
        "np-float64": lambda: np.array([1.0, 2.0]),
        "np-float64-1": lambda: np.array([1.1]),
        "np-int64": lambda: np.array([1, 2]),
        "np-int64-scalar": lambda: np.int64(5),
        "np-float64-scalar": lambda: np.float64(2.5),
        "np-float16-scalar": lambda: np.float16(1.5),
        "np-bool-scalar": lambda: np.bool_(True),
        "np-str-scalar": lambda: np.str_("x"),
        "np-bytes-scalar": lambda: np.bytes_(b"x"),
        "np-U": lambda: np.array(["\u00e9", "bc"]),
        "np-S": lambda: np.array([b"a\x00", b"bc"]),
        "np-S-nul-inside": lambda: np.array([b"a\x00b\x00"]),
        "np-object-bytes": lambda: np.array([b"a", "b", bytearray(b"c")], dtype=object),
        "np-intc": lambda: np.array([1, 2], dtype=np.intc),
        "np-longlong": lambda: np.array([1, 2], dtype=np.longlong),
        "np-ulonglong-1": lambda: np.array([3], dtype=np.ulonglong),
        "np-fortran": lambda: np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)),
        "np-strided": lambda: np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2],
        "np-complex64": lambda: np.array([1 + 2j, 3], dtype=np.complex64),
        "np-uint16": lambda: np.array([1, 2, 3], dtype=np.uint16),
        "np-bool": lambda: np.array([[True], [False]]),
        "np-quantized": lambda: np.array([(1,), (2,)], dtype=[("qint8", "i1")]),
        "np-quantized-1": lambda: np.array([(7,)], dtype=[("quint16", "<u2")]),
        "np-0d": lambda: np.array(3.5, dtype=np.float32),
        "bf16": lambda: bf16_array([1.0, 2.5, -3.0]),
        "bf16-1": lambda: bf16_array([1.5]),
        "bf16-0d": lambda: bf16_array(1.5)[()],
        "bf16-nd": lambda: bf16_array([[1.0, 2.0], [3.0, 4.0]]),
    }
    cases += [Case(f"infer/{key}", build) for key, build in numpy_table.items()]
    return cases


def _conversion_cases() -> list[Case]:
    """A dtype that converts values of another type (or refuses to)."""
    rows = [
        ("int-to-float32", [1, 2], DT("float32")),
        ("bool-to-float32", [True], DT("float32")),
        ("int-to-complex64", [1, 2], DT("complex64")),
        ("np-float32-to-complex64", [np.float32(1.5)], DT("complex64")),
        ("np-int8-to-float32", [np.int8(1)], DT("float32")),
        ("bool-to-int32", [True, False], DT("int32")),
        ("int-to-float16-overflow", [1, 70000], DT("float16")),
        ("int32-wraps", 2**40, DT("int32")),
        ("uint8-negative", [-1], DT("uint8")),
        ("uint8-wraps", [-1, 300], DT("uint8")),
        ("uint16-negative", [-1], DT("uint16")),
        ("float-to-float64", [1.1, 2.2], DT("float64")),
        ("int-to-bfloat16", [1, 2, 3], DT("bfloat16")),
        ("bool-to-bfloat16", [True, False], DT("bfloat16")),
        (
            "np-int64-to-bfloat16",
            np.array([2**60 + 2**52 + 1, -(2**60 + 2**52 + 1), 2**53 + 1]),
            DT("bfloat16"),
        ),
        ("np-uint64-to-bfloat16", np.array([2**64 - 1, 2**63 + 2**55 + 1], dtype=np.uint64), DT("bfloat16")),
        (
            "np-float32-to-bfloat16",
            np.array([1.00390625, 1.01171875, 3.4e38, 1e-40], dtype=np.float32),
            DT("bfloat16"),
        ),
        ("np-float16-to-bfloat16", np.array([1.5, 6e-8, 65504], dtype=np.float16), DT("bfloat16")),
        ("np-complex-to-bfloat16", np.array([1.5 + 2j]), DT("bfloat16")),
        (
            "np-float64-to-bfloat16-specials",
            np.array([np.inf, -np.inf, -np.nan, 1e300, -0.0]),
            DT("bfloat16"),
        ),
        ("bf16-to-float32", _bf16_samples, DT("float32")),
        ("bf16-to-bfloat16", _bf16_samples, DT("bfloat16")),
        ("bf16-to-float16", _bf16_samples, DT("float16")),
        ("np-float-to-int32", np.array([1.5, 2.7, -1.5]), DT("int32")),
        ("np-float-to-uint8", np.array([1.7, -1.2]), DT("uint8")),
        ("np-nan-to-int32", np.array([np.nan, 1.0]), DT("int32")),
        ("np-complex-to-float32", np.array([1 + 2j, 3]), DT("float32")),
        ("np-str-to-int32", np.array(["1", "2"]), DT("int32")),
        ("np-str-to-float32", np.array(["1.5"]), DT("float32")),
        ("np-str-to-bool", np.array(["True"]), DT("bool")),
        ("np-int-to-bool", np.array([1, 0, 2]), DT("bool")),
        ("np-U-to-string", np.array(["a"]), DT("string")),
        ("np-S-to-string", np.array([b"a"]), DT("string")),
        ("np-object-to-float32", np.array([1, 2.5], dtype=object), DT("float32")),
        ("np-int-to-qint32", np.array([[1, -2], [3, 4]]), DT("qint32")),
        ("np-float-to-quint8", np.array([1.7, 255.0]), DT("quint8")),
        ("quantized-nested", [[(1,), (2,)]], DT("qint32")),
        ("quantized-scalar-tuple", (3,), DT("qint8")),
        ("quantized-np-int", [(np.int8(1),)], DT("qint8")),
        ("dtype-np-type", [1], np.int64),
        ("dtype-np-dtype", [1.0], np.dtype("float32")),
        ("dtype-np-dtype-quantized", [(1,)], np.dtype([("qint8", "i1")])),
        ("dtype-np-object", ["a"], object),
        ("dtype-python-float", [1], float),
        ("dtype-python-bool", [True], bool),
        ("dtype-name-float", [1], "float"),
        ("dtype-name-half", [1], "half"),
        ("dtype-name-double", [1], "double"),
        ("dtype-enum", [1], 9),
    ]
    return [Case(f"convert/{key}", _builder(value), dtype) for key, value, dtype in rows]


def _shape_cases() -> list[Case]:
    return [
        Case("shape/tuple", _const([1.0, 2.0, 3.0, 4.0]), shape=(2, 2)),
        Case("shape/reshape-list", _const([1, 2, 3, 4, 5, 6]), shape=[3, 2]),
        Case("shape/floats", _const(1), shape=[2.7]),
        Case("shape/np-ints", _const(1), shape=np.array([2, 2])),
        Case("shape/scalar-shape", _const([5]), shape=[]),
        Case("shape/string-broadcast", _const("ab"), shape=[3]),
        Case("shape/string-fewer", _const(["a", "b"]), shape=[3]),
        Case("shape/string-zero", _const("abc"), shape=[0]),
        Case("shape/numpy-fewer", lambda: np.array([1, 2], np.float16), shape=[3]),
        Case("shape/numpy-reshaped", lambda: np.arange(6, dtype=np.int64), shape=[2, 3]),
        Case("shape/numpy-broadcast-1", lambda: np.array([7], np.int32), shape=[2, 2], allow_broadcast=True),
        Case("shape/broadcast-equal", _const([1, 2, 3]), shape=[3], allow_broadcast=True),
        Case("shape/broadcast-reshape", _const([[1, 2, 3]]), shape=[3], allow_broadcast=True),
        Case("shape/broadcast-scalar", _const(2.5), shape=[2, 2], allow_broadcast=True),
        Case("shape/verify-ok", _const([[1], [2]]), shape=[2, 1], verify_shape=True),
        Case("shape/empty-dtype-none", _const([]), shape=[0, 4]),
        Case("shape/big-broadcast", _const(1.0), shape=[1000, 1000]),
    ]


def _error_cases() -> list[Case]:
    rows = [
        ("generator", _generator, None, {}),
        ("object", object, None, {}),
        ("none", None, None, {}),
        ("list-none", [1, None], None, {}),
        ("list-none-float32", [1, None], DT("float32"), {}),
        ("ragged", [[1, 2], [3]], None, {}),
        ("ragged-bytes", [[b"a"], [b"b", b"c"]], None, {}),
        ("ragged-string-dtype", [["a"], ["b", "c"]], DT("string"), {}),
        ("np-arrays-in-list", [np.array([1, 2]), np.array([3, 4])], DT("float32"), {}),
        ("np-array-in-list-int32", [np.array([1.5])], DT("int32"), {}),
        ("np-bool-array-in-list", [np.array([True])], DT("bool"), {}),
        ("dict", {"a": 1}, None, {}),
        ("dict-int32-sorted", {"b": 2, "a": "x"}, DT("int32"), {}),
        ("dict-int32-ok", {"b": 2, "a": 1}, DT("int32"), {}),
        ("nested-dict", [{"b": 2}], DT("int32"), {}),
        ("set", {1, 2}, None, {}),
        ("set-int32", {1, 2}, DT("int32"), {}),
        ("mixed-str-int", [1, "a"], None, {}),
        ("int-2**64", 2**64, None, {}),
        ("int-below-int64", -(2**63) - 1, None, {}),
        ("str-to-int32", "abc", DT("int32"), {}),
        ("float-to-int32", [1.5], DT("int32"), {}),
        ("float-to-string", [1.0], DT("string"), {}),
        ("int-to-string", [1], DT("string"), {}),
        ("str-to-float32", ["1.0"], DT("float32"), {}),
        ("int-to-bool", [1], DT("bool"), {}),
        ("np-bool-scalar-in-list", [np.bool_(True)], DT("bool"), {}),
        ("np-bool-to-int32-in-list", [np.bool_(True)], DT("int32"), {}),
        ("complex-to-float32", [1 + 2j], DT("float32"), {}),
        ("str-to-bfloat16", ["a"], DT("bfloat16"), {}),
        ("complex-to-bfloat16", [1j], DT("bfloat16"), {}),
        ("np-str-to-bfloat16", np.array(["1.5"]), DT("bfloat16"), {}),
        ("quantized-ints", [1, 2], DT("qint8"), {}),
        ("quantized-scalar", 1, DT("qint8"), {}),
        ("quantized-list-of-lists", [[1]], DT("qint8"), {}),
        ("quantized-bytes", [(b"a",)], DT("qint8"), {}),
        ("quantized-nested-tuple", [((1,),)], DT("qint8"), {}),
        ("quantized-pair", [(1, 2)], DT("qint8"), {}),
        ("np-int-to-string", np.array([1, 2]), DT("string"), {}),
        ("np-bool-to-string", np.array([True]), DT("string"), {}),
        ("np-object-ints", np.array([1, "a"], dtype=object), None, {}),
        ("np-datetime", np.array(["2020-01-01"], dtype="datetime64[D]"), None, {}),
        ("np-longdouble", np.array([1.0], dtype=np.longdouble), None, {}),
        ("np-struct-unknown", np.array([(1,)], dtype=[("x", "i1")]), None, {}),
        ("dtype-unknown-name", [1], "foo", {}),
        ("dtype-python-int", [1], int, {}),
        ("dtype-python-str", [1], str, {}),
        ("too-many", [1, 2, 3], None, {"shape": [2]}),
        ("too-many-numpy", np.array([1]), None, {"shape": [0]}),
        ("verify-shape", [1, 2], None, {"shape": [2, 1], "verify_shape": True}),
        ("verify-shape-numpy", np.zeros((2, 2)), None, {"shape": [4], "verify_shape": True}),
        ("verify-and-broadcast", [1, 2], None, {"verify_shape": True, "allow_broadcast": True}),
        ("broadcast-mismatch", [1, 2], None, {"shape": [3], "allow_broadcast": True}),
        ("shape-negative", 1, None, {"shape": [-1]}),
        ("shape-negative-pair", 1, None, {"shape": [-1, -1]}),
        ("shape-none-dim", 1, None, {"shape": [None]}),
        ("shape-int", 1, None, {"shape": 3}),
        ("shape-negative-zero", [], None, {"shape": [-1, 0]}),
    ]
    return [Case(f"error/{key}", _builder(value), dtype, **kwargs) for key, value, dtype, kwargs in rows]


def _proto_cases() -> list[Case]:
    """make_ndarray of hand-made TensorProtos: typed fields, tensor_content, padding, errors."""
    rows = {
        "float-pad": {"dtype": 1, "shape": [3], "float_val": [1.0, 2.0]},
        "float-none": {"dtype": 1, "shape": [3]},
        "float-too-many": {"dtype": 1, "shape": [1], "float_val": [1.0, 2.0]},
        "float-scalar": {"dtype": 1, "float_val": [2.5]},
        "double-nd-pad": {"dtype": 2, "shape": [2, 1], "double_val": [1.5]},
        "string-none": {"dtype": 7, "shape": [2]},
        "string-pad": {"dtype": 7, "shape": [3], "string_val": [b"a", b"b"]},
        "string-too-many": {"dtype": 7, "shape": [1], "string_val": [b"a", b"b"]},
        "string-scalar": {"dtype": 7, "string_val": [b"\xff\x00"]},
        "string-content": {"dtype": 7, "shape": [1], "tensor_content": b"ab"},
        "half-pad": {"dtype": 19, "shape": [3], "half_val": [15360]},
        "half-out-of-range": {"dtype": 19, "shape": [1], "half_val": [70000]},
        "bfloat16-vals": {"dtype": 14, "shape": [2], "half_val": [16256, 16320]},
        "bfloat16-content": {"dtype": 14, "shape": [2], "tensor_content": b"\x80\x3f\xc0\x3f"},
        "bfloat16-none": {"dtype": 14, "shape": [2]},
        "bfloat16-pad": {"dtype": 14, "shape": [2, 2], "half_val": [16256]},
        "qint8-pad": {"dtype": 11, "shape": [3], "int_val": [1, 2]},
        "qint8-content": {"dtype": 11, "shape": [2], "tensor_content": b"\x01\xff"},
        "qint8-none": {"dtype": 11, "shape": [2]},
        "qint32-vals": {"dtype": 13, "shape": [2], "int_val": [1, -2]},
        "quint16-vals": {"dtype": 16, "shape": [1], "int_val": [65535]},
        "int8-out-of-range": {"dtype": 6, "shape": [1], "int_val": [300]},
        "uint8-negative": {"dtype": 4, "shape": [1], "int_val": [-1]},
        "uint16-vals": {"dtype": 17, "shape": [2], "int_val": [1, 65535]},
        "int16-vals": {"dtype": 5, "shape": [2], "int_val": [-32768, 7]},
        "int32-pad": {"dtype": 3, "shape": [2, 2], "int_val": [4, 5]},
        "complex64-odd": {"dtype": 8, "shape": [2], "scomplex_val": [1, 2, 3]},
        "complex64-pad": {"dtype": 8, "shape": [2], "scomplex_val": [1, 2]},
        "complex64-none": {"dtype": 8, "shape": [2]},
        "complex128-vals": {"dtype": 18, "shape": [1], "dcomplex_val": [1, 2]},
        "bool-pad": {"dtype": 10, "shape": [3], "bool_val": [True]},
        "bool-content": {"dtype": 10, "shape": [2], "tensor_content": b"\x01\x00"},
        "uint32-vals": {"dtype": 22, "shape": [2], "uint32_val": [1, 4294967295]},
        "uint64-vals": {"dtype": 23, "shape": [2], "uint64_val": [1, 2**64 - 1]},
        "int64-vals": {"dtype": 9, "shape": [2], "int64_val": [1, -(2**63)]},
        "content-bad-size": {"dtype": 1, "shape": [2], "tensor_content": b"\x00\x00\x80"},
        "content-reshape": {"dtype": 1, "shape": [2], "tensor_content": b"\x00" * 4},
        "content-over-typed": {
            "dtype": 3,
            "shape": [1],
            "tensor_content": b"\x01\x00\x00\x00",
            "int_val": [9],
        },
        "content-complex64": {
            "dtype": 8,
            "shape": [1],
            "tensor_content": b"\x00\x00\x80\x3f\x00\x00\x00\x40",
        },
        "dtype-invalid": {"dtype": 0},
        "dtype-unknown": {"dtype": 99},
        "empty-shape": {"dtype": 1, "shape": [0, 3]},
        "empty-shape-string": {"dtype": 7, "shape": [0, 3]},
        "empty-shape-with-values": {"dtype": 1, "shape": [0], "float_val": [1.0]},
        "unknown-dim": {"dtype": 1, "shape": [-1], "float_val": [1.0]},
    }
    cases = [Case(f"proto/{key}", proto=fields) for key, fields in rows.items()]
    cases.append(Case("proto/returned-as-is", proto_values={"dtype": 1, "shape": [1], "float_val": [1.0]}))
    cases.append(
        Case("proto/returned-as-is-ignores-args", proto_values={"dtype": 3}, dtype=DT("float32"), shape=[5])
    )
    return cases


def all_cases() -> list[Case]:
    cases = [c for name in SAMPLES for c in _dtype_cases(name)]
    cases += _inference_cases() + _conversion_cases() + _shape_cases() + _error_cases() + _proto_cases()
    names = [c.name for c in cases]
    duplicates = {n for n in names if names.count(n) > 1}
    assert not duplicates, duplicates
    return cases


CASES = all_cases()
