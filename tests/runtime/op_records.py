"""Op records: one TF op applied to fixed inputs, as plain data (numpy and the stdlib only).

``tests/oracle/builders/op_records.py`` evaluates every record in TensorFlow (a one-node graph per
record: placeholders feeding the op) and stores TF's outputs, or the error TF raised, in the
oracle cache; ``tests/runtime/test_op_records.py`` runs our kernels on the same inputs and compares.

A record names the op, its inputs in TF's input order (a Python list for a list input such as
ConcatV2's ``values``) and its attrs by TF's names (``T`` and the other inferred type attrs are
left to TF; type-valued attrs are written ``dt("int64")``). ``rtol``/``atol`` default by output
dtype; ``compare`` limits the comparison to some outputs (FusedBatchNorm's reserve spaces are
TF-internal).
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np


class DType(str):
    """A type-valued attr, by TF's dtype name ("float", "int64", "bfloat16")."""


def dt(name: str) -> DType:
    return DType(name)


@dataclasses.dataclass(frozen=True)
class OpRecord:
    name: str
    op: str
    inputs: tuple
    attrs: dict
    rtol: float | None = None
    atol: float | None = None
    compare: tuple[int, ...] | None = None


RECORDS: list[OpRecord] = []
_counts: dict[str, int] = {}
_rng = np.random.default_rng(20240521)

BF16 = ml_dtypes.bfloat16
F16, F32, F64 = np.float16, np.float32, np.float64
I8, I16, I32, I64, U8, U16, U32, U64 = (
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
)


def rec(op: str, *inputs, rtol=None, atol=None, compare=None, **attrs) -> None:
    n = _counts.get(op, 0)
    _counts[op] = n + 1
    RECORDS.append(OpRecord(f"{op}.{n:03d}", op, tuple(inputs), attrs, rtol, atol, compare))


def a(values, dtype=F32) -> np.ndarray:
    return np.asarray(values, dtype=dtype)


def rnd(shape, dtype=F32, low=-3.0, high=3.0) -> np.ndarray:
    if np.dtype(dtype).kind in "iu":
        return _rng.integers(int(low), int(high), size=shape).astype(dtype)
    if np.dtype(dtype) == np.bool_:
        return _rng.random(shape) < 0.5
    return _rng.uniform(low, high, size=shape).astype(dtype)


def s(*values) -> np.ndarray:
    return np.array([v.encode() if isinstance(v, str) else v for v in values], dtype=object)


# --------------------------------------------------------------------------- elementwise unary

_SPECIAL = a([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e30])
for _op in ("Neg", "Abs", "Sign", "Square"):
    for _dt in (F32, F64, I32, I64, F16, BF16, I8):
        rec(_op, rnd((2, 3), _dt, -50, 50))
    rec(_op, a([], F32))
rec("Abs", a([-128, 127, 0], I8))
rec("Neg", a([-2147483648, 5], I32))
rec("Sign", _SPECIAL)
rec("Square", a([46341, -3], I32))

_POS = rnd((3, 4), F32, 0.01, 10)
for _op in ("Sqrt", "Rsqrt", "Log", "Reciprocal", "Inv", "Log1p"):
    rec(_op, _POS)
    rec(_op, rnd((5,), F64, 0.01, 100))
    rec(_op, rnd((5,), F16, 0.1, 10))
    rec(_op, _SPECIAL)
rec("Sqrt", a([-1.0, 4.0]))
rec("Log", a([-1.0, 0.0, 1.0]))
rec("Reciprocal", a([0.0, -0.0]))
rec("Rsqrt", rnd((4,), BF16, 0.1, 10))
for _op in ("Exp", "Expm1", "Sin", "Cos", "Tan", "Atan", "Sinh", "Cosh", "Tanh", "Asinh", "Sigmoid"):
    rec(_op, rnd((3, 4), F32, -5, 5))
    rec(_op, rnd((6,), F64, -5, 5))
    rec(_op, rnd((4,), F16, -3, 3))
    rec(_op, _SPECIAL)
rec("Exp", a([88.0, 89.0, -104.0, -200.0]))
rec("Sigmoid", a([-100.0, -20.0, 20.0, 100.0]))
rec("Sigmoid", rnd((4,), BF16, -3, 3))
rec("Tanh", rnd((4,), BF16, -3, 3))
for _op in ("Asin", "Acos", "Atanh"):
    rec(_op, rnd((3, 4), F32, -0.99, 0.99))
    rec(_op, a([-1.0, 1.0, 2.0, np.nan]))
    rec(_op, rnd((5,), F64, -0.99, 0.99))
rec("Acosh", rnd((3, 4), F32, 1, 10))
rec("Acosh", a([0.5, 1.0, np.inf]))
for _op in ("Floor", "Ceil", "Round", "Rint"):
    rec(_op, a([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.7, -3.7, np.nan, np.inf]))
    rec(_op, rnd((3, 3), F64, -10, 10))
    if _op != "Rint":  # TF has no half Rint kernel on CPU
        rec(_op, a([0.5, 1.5, 2.49], F16))
for _op in ("IsNan", "IsInf", "IsFinite"):
    rec(_op, _SPECIAL)
    rec(_op, a([np.nan, 1.0, np.inf], F64))
    rec(_op, a([np.nan, 1.0, -np.inf], F16))
for _op in ("Erf", "Erfc"):
    rec(_op, a(np.linspace(-6, 6, 49)))
    rec(_op, a(np.linspace(-6, 6, 49), F64), rtol=1e-11, atol=1e-15)
    rec(_op, a([0.0, -0.0, np.inf, -np.inf, np.nan]))
    rec(_op, a([-1.0, 0.3, 2.0], F16))
rec("Erfc", a(np.linspace(3, 26, 24), F64), rtol=1e-10, atol=0)
for _op in ("Lgamma", "Digamma"):
    rec(_op, a([0.1, 0.5, 1.0, 1.5, 2.0, 3.3, 10.0, 25.5, 100.0]), rtol=1e-5, atol=1e-5)
    rec(_op, a([-0.5, -1.5, -2.7, 0.25, 7.5], F64), rtol=1e-9, atol=1e-9)
rec("Lgamma", a([0.0, -1.0, -2.0, np.inf]))
rec("LogicalNot", a([True, False, True], np.bool_))
rec("Invert", a([0, 1, -1, 127], I8))
rec("Invert", a([0, 1, 255], U8))

# --------------------------------------------------------------------------- elementwise binary

_BCAST = [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1, 4), (3, 1)), ((), (4,)), ((0, 3), (3,)), ((1,), ())]
for _op in ("Add", "AddV2", "Sub", "Mul", "Maximum", "Minimum", "SquaredDifference"):
    for _xs, _ys in _BCAST:
        rec(_op, rnd(_xs), rnd(_ys))
    for _dt in (F64, I32, I64, F16, BF16) + ((I8, U8, I16) if _op != "SquaredDifference" else ()):
        rec(_op, rnd((2, 3), _dt, 0, 20), rnd((3,), _dt, 0, 20))
    rec(_op, rnd((2, 3)), rnd((4,)))  # incompatible shapes
rec("Add", s("ab", "c"), s("x", "yz"))
rec("Add", s("ab", "c"), s("!"))
rec("AddV2", a([2147483647, -2147483648], I32), a([1, -1], I32))
rec("Mul", a([65536, 3], I32), a([65536, 3], I32))
rec("Sub", a([0, 1], U8), a([1, 1], U8))
for _op in ("Maximum", "Minimum"):
    rec(_op, a([np.nan, 1.0, np.nan, -np.inf]), a([1.0, np.nan, np.nan, 0.0]))
    rec(_op, a([0.0, -0.0]), a([-0.0, 0.0]))
for _op in ("Div", "RealDiv", "DivNoNan"):
    rec(_op, rnd((2, 3)), rnd((3,), F32, 0.5, 3))
    rec(_op, a([1.0, -1.0, 0.0, 2.0]), a([0.0, 0.0, 0.0, -0.0]))
    rec(_op, rnd((3,), F64), a([2.0, -4.0, 0.0], F64))
    rec(_op, rnd((2, 2), F16), a([2.0, -4.0], F16))
for _op in ("Div", "FloorDiv", "FloorMod", "TruncateDiv", "TruncateMod", "Mod"):
    _x = a([7, -7, 7, -7, 0, 6, -6, 1], I32)
    _y = a([2, 2, -2, -2, 3, 3, 3, -5], I32)
    rec(_op, _x, _y)
    rec(_op, _x.astype(I64), _y.astype(I64))
    rec(_op, a([5, 3], I32), a([0, 1], I32))  # integer division by zero
    rec(_op, rnd((2, 3), I32, -20, 20), a([3, -4, 5], I32))
for _op in ("FloorDiv", "FloorMod", "TruncateDiv", "TruncateMod", "Mod", "RealDiv", "Div"):
    rec(_op, a([7.5, -7.5, 7.5, -7.5, 0.0, -0.0, 5.0]), a([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 0.0]))
    rec(_op, rnd((3, 2), F64, -10, 10), a([1.5, -2.5], F64))
rec("FloorDiv", a([7, 200], U8), a([2, 3], U8))
rec("FloorMod", a([7, 200], U8), a([2, 3], U8))
rec("Pow", rnd((2, 3), F32, 0.1, 3), rnd((3,), F32, -2, 2))
rec("Pow", a([2, 3, -2, 0], I32), a([3, 2, 3, 0], I32))
rec("Pow", a([2, 3], I32), a([-1, 2], I32))
rec("Pow", a([-8.0, 0.0, 0.0, np.nan, 1.0]), a([1 / 3, 0.0, -1.0, 0.0, np.nan]))
rec("Pow", a([2, 3], I64), a([40, 5], I64))
rec("Pow", rnd((3,), F64, 0, 5), a([0.5, 2.0, -1.5], F64))
rec("Atan2", rnd((3, 4)), rnd((4,)))
rec("Atan2", a([0.0, -0.0, 1.0, -1.0, 0.0], F64), a([-0.0, -0.0, 0.0, 0.0, 0.0], F64))
for _op in ("Xdivy", "Xlogy", "Xlog1py"):
    rec(_op, a([0.0, 1.0, 2.0, 0.0]), a([0.0, 2.0, 0.5, np.nan]))
rec("MulNoNan", a([1.0, np.inf, np.nan]), a([0.0, 0.0, 2.0]))
for _op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
    for _dt in (I8, I32, I64, U8, U16):
        rec(_op, rnd((2, 3), _dt, 0, 100), rnd((3,), _dt, 0, 100))
    rec(_op, a([-1, -128, 5], I8), a([3, 127, -6], I8))
for _op in ("LeftShift", "RightShift"):
    rec(_op, a([1, 1, 1, -8, 5], I32), a([0, 4, 31, 1, 2], I32))
    rec(_op, a([1, -128, 64, 3], I8), a([7, 1, 1, 0], I8))
    rec(_op, a([255, 1], U8), a([1, 7], U8))
    rec(_op, a([1, 1 << 40], I64), a([62, 3], I64))
rec("AddN", [rnd((2, 3)), rnd((2, 3)), rnd((2, 3))])
rec("AddN", [rnd((4,), I32, 0, 9)])
rec("AddN", [rnd((2, 2), F64), rnd((2, 2), F64)])
rec("AddN", [rnd((2, 3)), rnd((3,))])
rec("ClipByValue", rnd((3, 4), F32, -5, 5), a(-1.0), a(2.0))
rec("ClipByValue", rnd((2, 3), I32, -9, 9), rnd((2, 3), I32, -9, 0), rnd((2, 3), I32, 1, 9))
rec("ClipByValue", rnd((2, 3)), a([1.0, 2.0]), a(3.0))

# --------------------------------------------------------------------------- comparisons and logic

for _op in ("Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual"):
    rec(_op, rnd((3, 4), I32, 0, 4), rnd((4,), I32, 0, 4))
    rec(_op, a([1.0, np.nan, -0.0, np.inf]), a([1.0, np.nan, 0.0, np.inf]))
    rec(_op, rnd((2, 1), F64, 0, 2), rnd((1, 3), F64, 0, 2))
    rec(_op, rnd((2, 3), I64, 0, 3), rnd((2, 3), I64, 0, 3))
    rec(_op, rnd((2, 3), U8, 0, 3), a(1, U8))
    rec(_op, rnd((3,), F16), rnd((2,), F16))  # incompatible
for _op in ("Equal", "NotEqual"):
    rec(_op, s("a", "bc", ""), s("a", "b", ""))
    rec(_op, s("a", "b"), s("a"))
    rec(_op, a([True, False], np.bool_), a([True, True], np.bool_))
    rec(_op, rnd((3,)), rnd((2,)), incompatible_shape_error=False)
rec("ApproximateEqual", a([1.0, 1.0, 2.0]), a([1.000001, 1.1, 2.0]))
rec("ApproximateEqual", a([1.0, 2.0]), a([1.5, 2.0]), tolerance=0.6)
for _op in ("LogicalAnd", "LogicalOr"):
    rec(_op, rnd((2, 3), np.bool_), rnd((3,), np.bool_))
    rec(_op, rnd((2,), np.bool_), rnd((3,), np.bool_))

# --------------------------------------------------------------------------- Cast

for _src, _vals in (
    (F32, [-2.7, -0.5, 0.0, 0.5, 1.9, 255.9, -1.0]),
    (F64, [-2.7, 3.99, 1e10, -0.1]),
    (I32, [-1, 0, 1, 300, -300]),
    (I64, [1 << 40, -1, 5]),
    (U8, [0, 255, 7]),
    (np.bool_, [True, False]),
    (F16, [1.5, -2.25, 65504.0]),
):
    for _dst in ("float", "double", "int32", "int64", "uint8", "bool", "half", "int8", "bfloat16"):
        if _src == F64 and _dst in ("uint8", "int8", "int32") and 1e10 in _vals:
            continue
        if _dst in ("uint8", "int8") and _src in (F32, F64, F16):
            continue
        rec("Cast", a(_vals, _src), DstT=dt(_dst))
rec("Cast", a([0.5, 1.5, -0.0], F32), DstT=dt("bool"))
rec("Cast", a([np.nan, np.inf], F32), DstT=dt("bool"))
rec("Cast", a([1.0, 2.0]), DstT=dt("string"))
rec("Cast", s("1"), DstT=dt("float"))
rec("Cast", a([1 + 2j, -3.5 + 0j], np.complex64), DstT=dt("float"))
rec("Cast", a([1.1, 2.2], F32), DstT=dt("complex64"))
rec("Cast", a([3.14159265358979, 1e-40], F64), DstT=dt("float"))
rec("Cast", a([], F32), DstT=dt("int32"))

# --------------------------------------------------------------------------- shapes

_X234 = rnd((2, 3, 4))
for _op in ("Shape", "Size", "Rank"):
    rec(_op, _X234)
    rec(_op, a(5.0))
    rec(_op, rnd((0, 3), I32))
rec("Shape", _X234, out_type=dt("int64"))
rec("Size", _X234, out_type=dt("int64"))
rec("Shape", s("a", "b"))
rec("ShapeN", [rnd((2, 3)), rnd((4,)), a(1.0)])
rec("ShapeN", [rnd((2, 3)), rnd((1, 1, 1))], out_type=dt("int64"))
for _shape in ([4, 6], [-1], [2, -1, 3], [24], [3, 2, 2, 2], [5, -1], [5, 5], [-1, -1], [2, -3, 4]):
    rec("Reshape", _X234, a(_shape, I32))
rec("Reshape", rnd((0, 3)), a([-1, 0], I32))
rec("Reshape", rnd((0, 3)), a([0, -1], I32))
rec("Reshape", a(7.0), a([1, 1], I64))
rec("Reshape", rnd((1,)), a([], I32))
rec("Reshape", s("a", "b", "c", "d"), a([2, 2], I32))
rec("Squeeze", rnd((1, 3, 1, 2)))
rec("Squeeze", rnd((1, 3, 1, 2)), squeeze_dims=[0])
rec("Squeeze", rnd((1, 3, 1, 2)), squeeze_dims=[-2, 0])
rec("Squeeze", rnd((1, 3, 1, 2)), squeeze_dims=[1])
rec("Squeeze", rnd((1, 3, 1, 2)), squeeze_dims=[4])
rec("Squeeze", rnd((1, 1), I32))
for _axis in (0, 1, 3, -1, -4, 4, -5):
    rec("ExpandDims", _X234, a(_axis, I32))
rec("ExpandDims", a(3.0), a([0], I64))
rec("BroadcastTo", rnd((3,)), a([2, 3], I32))
rec("BroadcastTo", rnd((2, 1), I32), a([2, 2, 4], I64))
rec("BroadcastTo", rnd((3,)), a([2, 4], I32))
rec("BroadcastTo", a(1.0), a([0, 2], I32))
rec("BroadcastArgs", a([2, 1, 3], I32), a([4, 1], I32))
rec("BroadcastArgs", a([2, 3], I64), a([4], I64))
rec("BroadcastArgs", a([], I32), a([5, 1], I32))

# --------------------------------------------------------------------------- fill, like, range

rec("Fill", a([2, 3], I32), a(1.5))
rec("Fill", a([2, 0], I64), a(7, I32))
rec("Fill", a([], I32), a(True))
rec("Fill", a([2], I32), s("x")[0:1].reshape(()))
rec("Fill", a([2, -1], I32), a(1.0))
for _dt in (F32, I32, np.bool_, F64, I64):
    rec("ZerosLike", rnd((2, 3), _dt, 0, 5))
    rec("OnesLike", rnd((2, 3), _dt, 0, 5))
rec("ZerosLike", a([], F16))
for _args, _dt in (
    ((0, 10, 3), I32),
    ((10, 0, -3), I32),
    ((0, 1, 0.25), F32),
    ((5, 5, 1), I64),
    ((0.5, 3.2, 0.7), F64),
    ((-3, 4, 2), I64),
    ((1, 0, 1), I32),
    ((0, 5, 0), I32),
    ((1.0, 0.0, 0.1), F32),
):
    rec("Range", *(a(v, _dt) for v in _args))
rec("LinSpace", a(0.0), a(1.0), a(5, I32))
rec("LinSpace", a(-2.0, F64), a(3.0, F64), a(1, I64))

# --------------------------------------------------------------------------- join and split

for _axis in (0, 1, 2, -1, -3, 3):
    rec("ConcatV2", [_X234, rnd((2, 3, 4))], a(_axis, I32))
rec("ConcatV2", [rnd((2, 3)), rnd((2, 5)), rnd((2, 0))], a(1, I64))
rec("ConcatV2", [rnd((2, 3)), rnd((3, 3))], a(1, I32))
rec("ConcatV2", [rnd((2,), I32, 0, 5), rnd((3,), I32, 0, 5)], a(0, I32))
rec("ConcatV2", [s("a"), s("b", "c")], a(0, I32))
rec("ConcatV2", [rnd((2, 3)), rnd((2, 3, 1))], a(0, I32))
rec("Concat", a(1, I32), [rnd((2, 2)), rnd((2, 1))])
rec("Concat", a(0, I32), [rnd((1, 2), I64, 0, 4), rnd((2, 2), I64, 0, 4)])
for _axis in (0, 1, 2, -1, -3):
    rec("Pack", [rnd((2, 3)), rnd((2, 3)), rnd((2, 3))], axis=_axis)
rec("Pack", [a(1, I32), a(2, I32)])
rec("Pack", [rnd((2,)), rnd((3,))])
rec("Pack", [s("a", "b"), s("c", "d")], axis=1)
for _axis in (0, 1, 2, -1):
    rec("Unpack", _X234, num=_X234.shape[_axis], axis=_axis)
rec("Unpack", rnd((3,), I32, 0, 9), num=3)
for _axis, _num in ((0, 2), (1, 3), (2, 2), (-1, 4), (2, 3)):
    rec("Split", a(_axis, I32), _X234, num_split=_num)
rec("Split", a(0, I32), rnd((0, 2)), num_split=2)
rec("SplitV", _X234, a([1, 2, 1], I32), a(2, I32), num_split=3)
rec("SplitV", _X234, a([-1, 1], I64), a(1, I32), num_split=2)
rec("SplitV", _X234, a([4], I32), a(-1, I32), num_split=1)
rec("SplitV", _X234, a([2, 3], I32), a(2, I32), num_split=2)
rec("SplitV", _X234, a([0, 3, 0], I32), a(1, I32), num_split=3)

# --------------------------------------------------------------------------- slicing

for _b, _sz in (
    ([0, 0, 0], [1, 2, 3]),
    ([1, 1, 1], [-1, -1, -1]),
    ([0, 2, 0], [2, 1, -1]),
    ([0, 0, 0], [0, 3, 4]),
):
    rec("Slice", _X234, a(_b, I32), a(_sz, I32))
rec("Slice", _X234, a([0, 0, 2], I64), a([1, 1, 3], I64))
rec("Slice", _X234, a([0, 4, 0], I32), a([1, 1, 1], I32))
rec("Slice", _X234, a([0, 0], I32), a([1, 1], I32))
rec("Slice", s("a", "b", "c"), a([1], I32), a([2], I32))

_SS = rnd((4, 5, 6), I32, 0, 100)


def _ss(begin, end, strides, x=_SS, **masks) -> None:
    rec("StridedSlice", x, a(begin, I32), a(end, I32), a(strides, I32), **masks)


_ss([0], [2], [1])
_ss([1, 2], [3, 4], [1, 1])
_ss([0, 0, 0], [4, 5, 6], [2, 2, 2])
_ss([-1], [0], [-1])
_ss([3, 4], [0, 0], [-1, -2])
_ss([-2, -3], [-1, -1], [1, 1])
_ss([10, -10], [20, 20], [1, 1])
_ss([-10], [10], [1])
_ss([5], [-10], [-1])
_ss([0, 0], [0, 0], [1, 1], begin_mask=3, end_mask=3)
_ss([1, 1], [2, 2], [1, -1], begin_mask=2, end_mask=2)
_ss([2], [0], [1], begin_mask=1)
_ss([0], [2], [-1], end_mask=1)
_ss([1], [0], [1], shrink_axis_mask=1)
_ss([-1], [0], [1], shrink_axis_mask=1)
_ss([1, 2, 3], [0, 0, 0], [1, 1, 1], shrink_axis_mask=7)
_ss([0, 2], [0, 3], [1, 1], shrink_axis_mask=2, begin_mask=1, end_mask=1)
_ss([4], [5], [1], shrink_axis_mask=1)
_ss([-5], [0], [1], shrink_axis_mask=1)
_ss([0, 1], [0, 2], [1, 1], ellipsis_mask=1)
_ss([0, 1], [0, 2], [1, 1], ellipsis_mask=1, shrink_axis_mask=2)
_ss([1, 0], [2, 0], [1, 1], ellipsis_mask=2)
_ss([1, 0, 1], [2, 0, 2], [1, 1, 1], ellipsis_mask=2, shrink_axis_mask=5)
_ss([0, 0], [0, 0], [1, 1], new_axis_mask=1, ellipsis_mask=2)
_ss([0, 0, 0], [0, 0, 0], [1, 1, 1], new_axis_mask=2, begin_mask=5, end_mask=5)
_ss([0, 1], [0, 3], [1, 1], new_axis_mask=1)
_ss([0, 0, 0], [0, 0, 1], [1, 1, 1], ellipsis_mask=1, new_axis_mask=2, shrink_axis_mask=4)
_ss([0, 0], [1, 1], [1, 1], new_axis_mask=3)
_ss([0, 0], [0, 0], [1, 1], ellipsis_mask=3)
_ss([0], [1], [0])
_ss([0, 0, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1])
_ss([1, 0], [3, 0], [1, 1], end_mask=2)
_ss([3], [1], [1])
_ss([0, 0], [2, 0], [1, -1], end_mask=2, begin_mask=2)
_ss([0], [1], [1], x=a(5.0), new_axis_mask=1)
_ss([1], [2], [1], x=rnd((3,)), shrink_axis_mask=1)
_ss([0, -1], [0, 0], [1, 1], x=rnd((3, 4)), begin_mask=1, end_mask=1, shrink_axis_mask=2)
_ss([0, 0, 1], [0, 0, 2], [1, 1, 1], x=rnd((2, 3, 4)), begin_mask=3, end_mask=3, shrink_axis_mask=4)
_ss([0, 0], [0, 0], [1, 1], x=rnd((2, 3, 4)), ellipsis_mask=2, new_axis_mask=1)
_ss([0], [0], [1], x=rnd((2, 3)), ellipsis_mask=1)
_ss([0, 0], [0, 0], [1, 1], x=rnd((2, 3)), ellipsis_mask=1, new_axis_mask=2)
_ss([1, 1], [5, 5], [3, 2], x=s("a", "b", "c", "d", "e", "f").reshape(2, 3))
rec("StridedSlice", _SS, a([0, 1], I64), a([3, 4], I64), a([2, 1], I64))
rec("StridedSlice", _SS, a([0, 1], I32), a([3, 4, 5], I32), a([2, 1], I32))

for _reps in ([1, 1, 1], [2, 1, 3], [0, 1, 1], [1, 2]):
    rec("Tile", _X234, a(_reps, I32))
rec("Tile", s("a", "b"), a([3], I64))
rec("Tile", a(2.0), a([], I32))
for _perm in ([0, 1, 2], [2, 0, 1], [1, 0, 2], [2, 1, 0], [0, 0, 1], [0, 1]):
    rec("Transpose", _X234, a(_perm, I32))
rec("Transpose", rnd((2, 3), I64, 0, 9), a([1, 0], I64))
rec("Transpose", rnd((0, 3)), a([1, 0], I32))
rec("ConjugateTranspose", a([[1 + 1j, 2 - 1j]], np.complex64), a([1, 0], I32))
rec("ConjugateTranspose", rnd((2, 3)), a([1, 0], I32))
rec("InvertPermutation", a([2, 0, 1, 3], I32))
rec("InvertPermutation", a([3, 1, 0, 2], I64))
rec("InvertPermutation", a([0, 0, 1], I32))
rec("InvertPermutation", a([0, 5], I32))
for _axes in ([0], [1, 2], [-1], [], [0, 1, 2]):
    rec("ReverseV2", _X234, a(_axes, I32))
rec("ReverseV2", s("a", "b", "c"), a([0], I64))
rec("ReverseV2", _X234, a([3], I32))
rec("ReverseV2", _X234, a([1, 1], I32))
rec("ReverseSequence", rnd((3, 5, 2)), a([5, 2, 0], I64), seq_dim=1, batch_dim=0)
rec("ReverseSequence", rnd((4, 3), I32, 0, 9), a([1, 4, 3], I32), seq_dim=0, batch_dim=1)
rec("ReverseSequence", rnd((2, 3)), a([4, 1], I64), seq_dim=1, batch_dim=0)

# --------------------------------------------------------------------------- selection

_C = a([True, False, True], np.bool_)
rec("Select", _C, rnd((3,)), rnd((3,)))
rec("Select", _C, rnd((3, 2), I32, 0, 9), rnd((3, 2), I32, 0, 9))
rec("Select", a(True, np.bool_), rnd((2, 2)), rnd((2, 2)))
rec("Select", rnd((2, 2), np.bool_), rnd((2, 2)), rnd((2, 2)))
rec("Select", _C, rnd((3,)), rnd((2,)))
rec("Select", _C, rnd((2, 2)), rnd((2, 2)))
rec("Select", _C, s("a", "b", "c"), s("x", "y", "z"))
rec("SelectV2", _C, rnd((2, 3)), rnd((1,)))
rec("SelectV2", rnd((2, 1), np.bool_), rnd((3,), I64, 0, 9), a(-1, I64))
rec("SelectV2", a(False, np.bool_), rnd((2,)), rnd((2,)))
rec("SelectV2", _C, rnd((2,)), rnd((2,)))
rec("SelectV2", rnd((4,), np.bool_), a([np.nan, 1, 2, 3]), a(0.0))
rec("Where", a([[True, False], [False, True]], np.bool_))
rec("Where", a([0, 3, 0, -1], I32))
rec("Where", a([0.0, np.nan, -0.0, 2.0]))
rec("Where", rnd((2, 3, 2), np.bool_))
rec("Where", a(True, np.bool_))
rec("Where", a([], np.bool_))

# --------------------------------------------------------------------------- gathering and scattering

_P = rnd((4, 3, 2))
rec("GatherV2", _P, a([3, 0, 1, 1], I32), a(0, I32))
rec("GatherV2", _P, a([[2, 0], [1, 1]], I64), a(1, I32))
rec("GatherV2", _P, a([1, 0], I32), a(-1, I32))
rec("GatherV2", _P, a(2, I32), a(0, I64))
rec("GatherV2", _P, a([4], I32), a(0, I32))
rec("GatherV2", _P, a([-1], I32), a(0, I32))
rec("GatherV2", _P, a([], I32), a(1, I32))
rec("GatherV2", _P, a([0], I32), a(3, I32))
rec("GatherV2", rnd((3, 4, 5), I32, 0, 99), a([[1, 0], [3, 3], [2, 1]], I32), a(1, I32), batch_dims=1)
rec("GatherV2", rnd((2, 3, 4, 2)), a([[0, 2], [1, 1]], I32), a(2, I32), batch_dims=1)
rec("GatherV2", rnd((2, 3, 4)), a([[[0], [1], [3]], [[2], [2], [0]]], I32), a(2, I32), batch_dims=2)
rec("GatherV2", rnd((2, 3, 4)), a([[0, 2], [1, 1]], I32), a(2, I32), batch_dims=-1)
rec("GatherV2", rnd((2, 5)), a([[0, 1], [2, 3]], I32), a(0, I32), batch_dims=1)
rec("GatherV2", s("a", "b", "c"), a([2, 0], I32), a(0, I32))
rec("Gather", _P, a([1, 3], I32))
rec("Gather", rnd((5,), I64, 0, 9), a([[4, 0]], I64))
rec("GatherNd", _P, a([[0, 1], [3, 2]], I32))
rec("GatherNd", _P, a([[1], [0]], I64))
rec("GatherNd", _P, a([[0, 1, 1], [3, 2, 0]], I32))
rec("GatherNd", _P, a([[[0, 0]], [[1, 2]]], I32))
rec("GatherNd", _P, a([[4, 0]], I32))
rec("GatherNd", _P, a([[0, 0, 0, 0]], I32))
rec("GatherNd", rnd((3, 3), I32, 0, 9), a([2, 1], I32))
rec("GatherNd", s("a", "b", "c", "d").reshape(2, 2), a([[1, 0]], I32))
rec("ScatterNd", a([[1], [3], [1]], I32), a([1.0, 2.0, 3.0]), a([5], I32))
rec("ScatterNd", a([[0, 1], [2, 2]], I64), rnd((2, 4)), a([3, 3, 4], I64))
rec("ScatterNd", a([[5]], I32), a([1.0]), a([4], I32))
rec("ScatterNd", a([[1], [1]], I32), a([7, 8], I32), a([3], I32))
for _op in (
    "TensorScatterUpdate",
    "TensorScatterAdd",
    "TensorScatterSub",
    "TensorScatterMax",
    "TensorScatterMin",
):
    rec(_op, rnd((5, 2)), a([[4], [0]], I32), rnd((2, 2)))
    rec(_op, rnd((3, 3), I32, 0, 9), a([[0, 0], [2, 1]], I64), a([50, -50], I32))
    rec(_op, rnd((3,)), a([[3]], I32), a([1.0]))
rec("TensorScatterAdd", rnd((3,)), a([[1], [1], [2]], I32), a([1.0, 2.0, 3.0]))

# --------------------------------------------------------------------------- padding

rec("Pad", rnd((2, 3)), a([[1, 0], [2, 1]], I32))
rec("Pad", rnd((2, 3), I32, 0, 9), a([[0, 0], [0, 3]], I64))
rec("Pad", rnd((1, 2, 2, 1)), a([[0, 0], [1, 1], [1, 1], [0, 0]], I32))
rec("Pad", a(5.0), a(np.zeros((0, 2)), I32))
rec("Pad", rnd((2,)), a([[-1, 0]], I32))
rec("Pad", rnd((2, 2)), a([[1, 1]], I32))
rec("Pad", s("a", "b"), a([[1, 1]], I32))
rec("PadV2", rnd((2, 3)), a([[1, 1], [0, 2]], I32), a(-7.5))
rec("PadV2", rnd((2,), I64, 0, 9), a([[2, 0]], I32), a(9, I64))
for _mode in ("REFLECT", "SYMMETRIC"):
    rec("MirrorPad", rnd((3, 4)), a([[1, 2], [2, 1]], I32), mode=_mode)
    rec("MirrorPad", rnd((2, 3, 2), I32, 0, 99), a([[0, 1], [2, 2], [1, 0]], I64), mode=_mode)
    rec("MirrorPad", rnd((3,)), a([[3, 0]], I32), mode=_mode)
    rec("MirrorPad", rnd((3,)), a([[0, 2]], I32), mode=_mode)

# --------------------------------------------------------------------------- misc array

rec("OneHot", a([0, 2, -1, 1, 5], I32), a(3, I32), a(1.0), a(0.0))
rec("OneHot", a([[0, 2], [1, 1]], I64), a(4, I32), a(5, I32), a(-1, I32), axis=0)
rec("OneHot", a([[0, 2], [1, 1]], I32), a(3, I32), a(True), a(False), axis=1)
rec("OneHot", a([1, 0], U8), a(2, I32), a(2.0, F64), a(0.5, F64))
rec("OneHot", a([1], I32), a(-1, I32), a(1.0), a(0.0))
rec("OneHot", a([1, 2], I32), a(3, I32), a(1.0), a(0.0), axis=-2)
rec("Unique", a([3, 1, 3, 2, 1, 1, 7], I32))
rec("Unique", a([3.5, -1.0, 3.5, 0.0, -0.0]), out_idx=dt("int64"))
rec("Unique", s("b", "a", "b", "c"))
rec("Unique", a([], I64))
rec("Unique", rnd((2, 2), I32, 0, 3))
rec("UniqueWithCounts", a([5, 5, 1, 5, 2], I64))
rec("UniqueWithCounts", s("x", "y", "x"), out_idx=dt("int64"))
rec("CheckNumerics", rnd((3,)), message="fine")
rec("CheckNumerics", a([1.0, np.nan]), message="bad value")
rec("CheckNumerics", a([1.0, np.inf], F64), message="inf here")
rec("CheckNumerics", a([np.nan, -np.inf], F16), message="both")
rec("Snapshot", rnd((2, 3)))
rec("Snapshot", a([True, False], np.bool_))
rec("EnsureShape", rnd((2, 3)), shape=(2, 3))
rec("EnsureShape", rnd((2, 3)), shape=(None, 3))
rec("EnsureShape", rnd((2, 3)), shape=(3, 2))
rec("EnsureShape", rnd((2, 3)), shape=(2,))
rec("EnsureShape", rnd((2, 3)), shape=None)
for _fmt in ("NHWC", "NCHW"):
    rec(
        "SpaceToDepth",
        rnd((2, 4, 6, 3)) if _fmt == "NHWC" else rnd((2, 3, 4, 6)),
        block_size=2,
        data_format=_fmt,
    )
    rec(
        "DepthToSpace",
        rnd((2, 2, 3, 8)) if _fmt == "NHWC" else rnd((2, 8, 2, 3)),
        block_size=2,
        data_format=_fmt,
    )
rec("SpaceToDepth", rnd((1, 3, 3, 1)), block_size=2)
rec("DepthToSpace", rnd((1, 1, 1, 6), I32, 0, 9), block_size=2)
rec("SpaceToDepth", rnd((1, 6, 6, 2), I64, 0, 9), block_size=3)
rec("LowerBound", a([[1, 3, 5, 7], [0, 0, 2, 2]], I32), a([[0, 3, 8], [0, 1, 2]], I32))
rec("UpperBound", a([[1, 3, 5, 7], [0, 0, 2, 2]], I32), a([[0, 3, 8], [0, 1, 2]], I32))
rec("LowerBound", a([[0.5, 1.5]]), a([[1.0, 1.5, 2.0]]), out_type=dt("int64"))

# --------------------------------------------------------------------------- reductions

_R = rnd((3, 4, 5), F32, -5, 5)
_RI = rnd((3, 4, 5), I32, -50, 50)
for _op in ("Sum", "Mean", "Max", "Min", "Prod", "EuclideanNorm"):
    for _axis in ([0], [1, 2], [-1], [], [0, 1, 2], 1, [2, 0]):
        rec(_op, _R, a(_axis, I32), rtol=1e-5, atol=1e-5)
    rec(_op, _R, a([1], I32), keep_dims=True, rtol=1e-5, atol=1e-5)
    rec(_op, _R, a([0, 2], I64), keep_dims=True, rtol=1e-5, atol=1e-5)
    rec(_op, _RI, a([1], I32))
    rec(_op, _RI, a([0, 2], I32), keep_dims=True)
    rec(_op, rnd((4, 3), F64), a([0], I32))
    rec(_op, rnd((2, 8), F16, -1, 1), a([1], I32), rtol=1e-2, atol=1e-2)
    rec(_op, rnd((0, 3)), a([0], I32))
    rec(_op, rnd((0, 3)), a([1], I32))
    rec(_op, rnd((0, 3), I32, 0, 3), a([0], I32))
    rec(_op, _R, a([3], I32))
    rec(_op, a([[1.0, np.nan], [np.inf, 2.0]]), a([1], I32))
    rec(_op, rnd((2, 3), I64, -9, 9), a([0, 1], I32))
    rec(_op, a(4.0), a([], I32))
rec("Sum", a([2147483647, 1], I32), a([0], I32))
rec("Prod", a([65536, 65536], I32), a([0], I32))
rec("Mean", a([-7, 2, 0], I32), a([0], I32))
rec("Mean", a([[-7, -8], [3, 3]], I64), a([1], I32))
rec("Mean", a([250, 250, 10], U8), a([0], I32))
rec("Sum", rnd((2, 3), BF16), a([1], I32), rtol=2e-2, atol=2e-2)
rec("Max", a([3, 200, 7], U8), a([0], I32))
rec("Min", rnd((0,), U8), a([0], I32))
rec("Sum", _R, a([0, 0], I32))
for _op in ("All", "Any"):
    _B = rnd((3, 4), np.bool_)
    for _axis in ([0], [1], [0, 1], [], -1):
        rec(_op, _B, a(_axis, I32))
    rec(_op, _B, a([1], I32), keep_dims=True)
    rec(_op, a(np.zeros((0, 2)), np.bool_), a([0], I32))
for _op in ("ArgMax", "ArgMin"):
    rec(_op, _R, a(0, I32))
    rec(_op, _R, a(-1, I32))
    rec(_op, _RI, a(1, I64), output_type=dt("int32"))
    rec(_op, a([1, 3, 3, 0, 3], I32), a(0, I32))
    rec(_op, a([[2.0, 2.0], [1.0, -1.0]]), a(1, I32))
    rec(_op, rnd((3,), F64), a(0, I32))
    rec(_op, rnd((4, 2), F16), a(0, I32))
    rec(_op, rnd((0, 2)), a(0, I32))
    rec(_op, _R, a(3, I32))
    rec(_op, a([2, 255, 0], U8), a(0, I32))
for _op in ("Cumsum", "Cumprod"):
    for _exclusive in (False, True):
        for _reverse in (False, True):
            rec(_op, rnd((3, 4), F32, 0.5, 1.5), a(1, I32), exclusive=_exclusive, reverse=_reverse)
            rec(_op, rnd((3, 2), I32, -3, 4), a(0, I64), exclusive=_exclusive, reverse=_reverse)
    rec(_op, rnd((2, 3, 2), F64), a(-2, I32))
    rec(_op, rnd((2, 3)), a(2, I32))
    rec(_op, rnd((0, 3)), a(0, I32))
    rec(_op, a([1, 2, 3], I64), a(0, I32), exclusive=True)

_DATA = rnd((6, 3), F32, -5, 5)
for _op in ("SegmentSum", "SegmentMax", "SegmentMin", "SegmentProd", "SegmentMean"):
    rec(_op, _DATA, a([0, 0, 1, 3, 3, 3], I32))
    rec(_op, rnd((4,), I32, -9, 9), a([0, 1, 1, 2], I64))
    rec(_op, _DATA, a([0, 2, 1, 3, 3, 3], I32))
    rec(_op, _DATA, a([0, 0, 1], I32))
for _op in ("UnsortedSegmentSum", "UnsortedSegmentMax", "UnsortedSegmentMin", "UnsortedSegmentProd"):
    rec(_op, _DATA, a([2, 0, -1, 2, 4, 0], I32), a(5, I32))
    rec(_op, rnd((3, 2), I32, -9, 9), a([[0, 1], [1, 1], [0, 0]], I64), a(3, I64))
    rec(_op, rnd((4,), F64), a([0, 1, 7, 1], I32), a(3, I32))
    rec(_op, rnd((4,)), a([0, 1, 1, 0], I32), a(2, I32))
rec("Bucketize", a([-5.0, 0.0, 1.0, 2.5, 10.0, np.nan]), boundaries=[0.0, 1.0, 2.5, 5.0])
rec("Bucketize", a([[1, 7], [3, 11]], I32), boundaries=[2.0, 7.0, 10.0])
rec("Bucketize", a([1.0, 2.0], F64), boundaries=[])
rec("Bucketize", a([1, 2], I64), boundaries=[3.0, 1.0])
rec("Bincount", a([1, 1, 3, 0, 7], I32), a(5, I32), a([], F32))
rec("Bincount", a([1, 1, 3, 0], I32), a(4, I32), a([0.5, 1.5, 2.0, 1.0], F32))
rec("Bincount", a([1, -1], I32), a(4, I32), a([], F32))
rec("DenseBincount", a([1, 1, 3, 0, 7], I32), a(5, I32), a([], I32))
rec("DenseBincount", a([[1, 1, 3], [0, 2, 2]], I64), a(4, I64), a([], F32), binary_output=True)
rec("DenseBincount", a([[1, 1, 3], [0, 2, 2]], I32), a(4, I32), a([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]]))
rec("DenseBincount", a([2, 2, 0], I32), a(3, I32), a([], I64), binary_output=True)
rec("L2Loss", rnd((3, 4)))
rec("L2Loss", rnd((5,), F64))
rec("L2Loss", rnd((0,)))

# --------------------------------------------------------------------------- linear algebra

for _ta in (False, True):
    for _tb in (False, True):
        _m = rnd((4, 3) if _ta else (3, 4))
        _n = rnd((5, 4) if _tb else (4, 5))
        rec("MatMul", _m, _n, transpose_a=_ta, transpose_b=_tb, rtol=1e-5, atol=1e-5)
rec("MatMul", rnd((2, 3), I32, -5, 5), rnd((3, 2), I32, -5, 5))
rec("MatMul", rnd((2, 3), F64), rnd((3, 2), F64))
rec("MatMul", rnd((2, 3), F16), rnd((3, 2), F16), rtol=1e-2, atol=1e-2)
rec("MatMul", rnd((2, 3), BF16), rnd((3, 2), BF16), rtol=2e-2, atol=5e-2)
rec("MatMul", rnd((2, 3)), rnd((2, 3)))
rec("MatMul", rnd((0, 3)), rnd((3, 2)))
rec("MatMul", rnd((2, 0)), rnd((0, 2)))
rec("MatMul", rnd((2, 3), I64, -5, 5), rnd((3, 1), I64, -5, 5))
for _op in ("BatchMatMul", "BatchMatMulV2"):
    for _ax in (False, True):
        for _ay in (False, True):
            rec(
                _op,
                rnd((2, 3, 4) if not _ax else (2, 4, 3)),
                rnd((2, 4, 5) if not _ay else (2, 5, 4)),
                adj_x=_ax,
                adj_y=_ay,
                rtol=1e-5,
                atol=1e-5,
            )
    rec(_op, rnd((2, 3, 4), F64), rnd((3, 4, 2), F64))
    rec(_op, rnd((3, 4)), rnd((4, 2)))
    rec(_op, rnd((2, 3, 4), I32, -5, 5), rnd((2, 4, 2), I32, -5, 5))
rec("BatchMatMulV2", rnd((2, 1, 3, 4)), rnd((5, 4, 2)), rtol=1e-5, atol=1e-5)
rec("BatchMatMulV2", rnd((3, 4)), rnd((6, 4, 2)), rtol=1e-5, atol=1e-5)
rec("BatchMatMulV2", rnd((2, 3, 4)), rnd((3, 4, 2)))
rec(
    "BatchMatMulV2",
    a([[[1 + 1j, 2], [0, 1j]]], np.complex64),
    a([[[1, 1j], [2, 0]]], np.complex64),
    adj_x=True,
)
rec("BatchMatMulV3", rnd((2, 3, 4)), rnd((4, 5)), Tout=dt("float"), rtol=1e-5, atol=1e-5)
rec("BatchMatMulV3", rnd((2, 3), I8, -9, 9), rnd((3, 2), I8, -9, 9), Tout=dt("int32"))
rec("BatchMatMulV3", rnd((2, 3), U8, 0, 200), rnd((3, 2), U8, 0, 200), Tout=dt("int32"))
rec("BatchMatMulV3", rnd((2, 2, 3), BF16), rnd((2, 3, 2), BF16), Tout=dt("bfloat16"), rtol=2e-2, atol=5e-2)
for _eq, _shapes in (
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    ("ij->ji", [(2, 3)]),
    ("ii->i", [(3, 3)]),
    ("ij->", [(2, 3)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 2)]),
    ("abc,cd->abd", [(2, 3, 4), (4, 5)]),
    ("bqhd,bkhd->bhqk", [(2, 3, 2, 4), (2, 5, 2, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,jk->ik", [(2, 3), (4, 4)]),
):
    rec("Einsum", [rnd(_sh) for _sh in _shapes], equation=_eq, rtol=1e-5, atol=1e-5)
rec("Einsum", [rnd((2, 3), I32, -5, 5), rnd((3,), I32, -5, 5)], equation="ij,j->i")
for _lo, _hi in ((0, 0), (1, -1), (-1, 0), (0, 2), (-1, -1), (5, 0)):
    rec("MatrixBandPart", rnd((2, 4, 4)), a(_lo, I64), a(_hi, I64))
rec("MatrixBandPart", rnd((3, 5), I32, 0, 9), a(1, I32), a(2, I32))
rec("MatrixDiag", rnd((2, 3)))
rec("MatrixDiagPart", rnd((2, 3, 4)))
rec("MatrixSetDiag", rnd((3, 4)), rnd((3,)))
for _align in ("RIGHT_LEFT", "LEFT_RIGHT", "LEFT_LEFT", "RIGHT_RIGHT"):
    rec("MatrixDiagV3", rnd((2, 3, 3)), a([-1, 1], I32), a(-1, I32), a(-1, I32), a(0.0), align=_align)
    rec("MatrixDiagPartV3", rnd((2, 4, 3)), a([-2, 1], I32), a(9.0), align=_align)
    rec("MatrixSetDiagV3", rnd((3, 4)), rnd((2, 3)), a([0, 1], I32), align=_align)
rec("MatrixDiagV3", rnd((3,)), a(1, I32), a(-1, I32), a(-1, I32), a(0.0))
rec("MatrixDiagV3", rnd((3,), I32, 1, 9), a(0, I32), a(4, I32), a(5, I32), a(-1, I32))
rec("MatrixDiagV3", rnd((2,)), a(-1, I32), a(3, I32), a(-1, I32), a(7.0))
rec("MatrixDiagPartV3", rnd((3, 3)), a(0, I32), a(0.0))
rec("MatrixDiagPartV3", rnd((2, 3, 5), I32, 0, 9), a(2, I32), a(-1, I32))
rec("MatrixSetDiagV3", rnd((2, 3, 3)), rnd((2, 3)), a(0, I32))
_SPD = rnd((3, 3), F64)
_SPD = _SPD @ _SPD.T + 3 * np.eye(3)
rec("Cholesky", _SPD)
rec("Cholesky", _SPD.astype(F32)[None].repeat(2, 0), rtol=1e-4, atol=1e-5)
rec("MatrixInverse", _SPD)
rec("MatrixInverse", rnd((2, 3, 3)) + 4 * np.eye(3, dtype=F32), rtol=1e-4, atol=1e-5)
rec("MatrixInverse", _SPD, adjoint=True)
rec("MatrixDeterminant", _SPD)
rec("MatrixDeterminant", rnd((2, 3, 3)), rtol=1e-4, atol=1e-4)
for _lower in (True, False):
    for _adj in (False, True):
        rec("MatrixTriangularSolve", _SPD, rnd((3, 2), F64), lower=_lower, adjoint=_adj, rtol=1e-9, atol=1e-9)

# --------------------------------------------------------------------------- activations and softmax

for _op in ("Relu", "Relu6", "Elu", "Selu", "Softplus", "Softsign"):
    rec(_op, rnd((3, 4), F32, -8, 8))
    rec(_op, rnd((5,), F64, -8, 8))
    rec(_op, rnd((4,), F16, -8, 8), rtol=2e-3, atol=2e-3)
    rec(_op, _SPECIAL)
rec("Relu", rnd((2, 3), I32, -5, 5))
rec("Relu6", rnd((2, 3), I64, -5, 10))
rec("Relu", rnd((2, 3), BF16))
rec("Softplus", a([-100.0, -20.0, -15.0, 15.0, 20.0, 100.0]))
rec("Softplus", a([-800.0, -40.0, -30.0, 30.0, 40.0, 800.0], F64))
for _alpha in (0.2, 0.01, 1.5, -0.3):
    rec("LeakyRelu", rnd((3, 4), F32, -5, 5), alpha=_alpha)
rec("LeakyRelu", rnd((4,), F64))
rec("LeakyRelu", rnd((4,), F16), alpha=0.1)
for _op in ("Softmax", "LogSoftmax"):
    rec(_op, rnd((2, 5), F32, -10, 10))
    rec(_op, rnd((2, 3, 4), F64, -10, 10))
    rec(_op, rnd((3,), F32))
    rec(_op, a([[1000.0, 0.0, -1000.0], [-np.inf, 0.0, 1.0]]))
    rec(_op, rnd((4, 6), F16), rtol=2e-3, atol=2e-3)
    rec(_op, rnd((0, 3)))
    rec(_op, a(1.0))
    rec(_op, a([[np.nan, 1.0], [1.0, 2.0]]))
for _fmt, _shape in (("NHWC", (2, 3, 3, 4)), ("NCHW", (2, 4, 3, 3)), ("NHWC", (5, 4)), ("NCHW", (2, 4, 3))):
    rec("BiasAdd", rnd(_shape), rnd((4,)), data_format=_fmt)
rec("BiasAdd", rnd((2, 3), I32, 0, 9), rnd((3,), I32, 0, 9))
rec("BiasAdd", rnd((2, 3), F64), rnd((3,), F64))
rec("BiasAdd", rnd((2, 3)), rnd((4,)))
rec("BiasAdd", rnd((2, 2, 2, 2, 3)), rnd((3,)))
rec("BiasAddV1", rnd((2, 3)), rnd((3,)))

# --------------------------------------------------------------------------- convolution


def _conv_case(x_shape, f_shape, fmt="NHWC", dtype=F32, **attrs) -> None:
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype != F16 else {"rtol": 2e-2, "atol": 5e-2}
    rec("Conv2D", rnd(x_shape, dtype, -1, 1), rnd(f_shape, dtype, -1, 1), data_format=fmt, **tol, **attrs)


for _pad in ("VALID", "SAME"):
    for _st in ([1, 1, 1, 1], [1, 2, 2, 1], [1, 3, 2, 1]):
        _conv_case((2, 7, 8, 3), (3, 3, 3, 4), strides=_st, padding=_pad)
    _conv_case((1, 6, 6, 2), (2, 2, 2, 3), strides=[1, 1, 1, 1], padding=_pad, dilations=[1, 2, 2, 1])
    _conv_case((1, 5, 6, 2), (1, 1, 2, 5), strides=[1, 2, 1, 1], padding=_pad)
    _conv_case((1, 4, 4, 2), (5, 5, 2, 1), strides=[1, 1, 1, 1], padding=_pad)
_conv_case(
    (2, 6, 5, 3),
    (3, 2, 3, 2),
    strides=[1, 1, 1, 1],
    padding="EXPLICIT",
    explicit_paddings=[0, 0, 1, 2, 0, 1, 0, 0],
)
_conv_case(
    (2, 3, 6, 5),
    (3, 3, 3, 2),
    "NCHW",
    strides=[1, 1, 1, 1],
    padding="EXPLICIT",
    explicit_paddings=[0, 0, 0, 0, 2, 1, 1, 1],
)
_conv_case((1, 8, 8, 4), (3, 3, 2, 6), strides=[1, 1, 1, 1], padding="SAME")  # groups=2
_conv_case((1, 5, 5, 2), (3, 3, 2, 2), F64 and "NHWC", F64, strides=[1, 2, 2, 1], padding="SAME")
_conv_case((1, 5, 5, 2), (3, 3, 2, 2), "NHWC", F16, strides=[1, 1, 1, 1], padding="VALID")
_conv_case((1, 2, 2, 3), (3, 3, 3, 1), strides=[1, 1, 1, 1], padding="VALID")
_conv_case((1, 4, 4, 3), (3, 3, 2, 1), strides=[1, 1, 1, 1], padding="VALID")
_conv_case((0, 4, 4, 3), (3, 3, 3, 1), strides=[1, 1, 1, 1], padding="SAME")
for _pad in ("VALID", "SAME"):
    # TF's CPU kernel has no dilations (Keras dilates depthwise convs with SpaceToBatchND).
    for _st, _dil in (([1, 1, 1, 1], [1, 1, 1, 1]), ([1, 2, 2, 1], [1, 1, 1, 1])):
        rec(
            "DepthwiseConv2dNative",
            rnd((2, 7, 6, 3), F32, -1, 1),
            rnd((3, 3, 3, 2), F32, -1, 1),
            strides=_st,
            padding=_pad,
            dilations=_dil,
            rtol=1e-4,
            atol=1e-4,
        )
rec(
    "DepthwiseConv2dNative",
    rnd((1, 3, 5, 5), F32, -1, 1),
    rnd((2, 2, 3, 1), F32, -1, 1),
    strides=[1, 1, 1, 1],
    padding="SAME",
    data_format="NCHW",
    rtol=1e-4,
    atol=1e-4,
)
rec(
    "DepthwiseConv2dNative",
    rnd((1, 5, 5, 2), F64, -1, 1),
    rnd((3, 3, 2, 3), F64, -1, 1),
    strides=[1, 2, 2, 1],
    padding="EXPLICIT",
    explicit_paddings=[0, 0, 1, 1, 2, 0, 0, 0],
)
for _pad, _st, _in, _out in (
    ("SAME", [1, 2, 2, 1], [2, 8, 8, 3], (2, 4, 4, 4)),
    ("VALID", [1, 2, 2, 1], [2, 9, 9, 3], (2, 4, 4, 4)),
    ("SAME", [1, 1, 1, 1], [1, 5, 5, 3], (1, 5, 5, 4)),
    ("VALID", [1, 3, 2, 1], [1, 7, 6, 3], (1, 2, 2, 4)),
    ("SAME", [1, 2, 2, 1], [1, 7, 7, 3], (1, 4, 4, 4)),
):
    rec(
        "Conv2DBackpropInput",
        a(_in, I32),
        rnd((3, 3, 3, 4), F32, -1, 1),
        rnd(_out, F32, -1, 1),
        strides=_st,
        padding=_pad,
        rtol=1e-4,
        atol=1e-4,
    )
rec(
    "Conv2DBackpropInput",
    a([1, 3, 6, 6], I32),
    rnd((2, 2, 3, 2), F32, -1, 1),
    rnd((1, 2, 3, 3), F32, -1, 1),
    strides=[1, 1, 2, 2],
    padding="SAME",
    data_format="NCHW",
    rtol=1e-4,
    atol=1e-4,
)
rec(
    "Conv2DBackpropInput",
    a([1, 4, 4, 2], I32),
    rnd((3, 3, 2, 2), F32, -1, 1),
    rnd((1, 3, 3, 2), F32, -1, 1),
    strides=[1, 1, 1, 1],
    padding="VALID",
)
rec(
    "Conv3D",
    rnd((1, 4, 5, 6, 2), F32, -1, 1),
    rnd((2, 3, 2, 2, 3), F32, -1, 1),
    strides=[1, 1, 2, 1, 1],
    padding="SAME",
    rtol=1e-4,
    atol=1e-4,
)
rec(
    "Conv3D",
    rnd((2, 3, 4, 4, 1), F32, -1, 1),
    rnd((3, 3, 3, 1, 2), F32, -1, 1),
    strides=[1, 1, 1, 1, 1],
    padding="VALID",
    rtol=1e-4,
    atol=1e-4,
)

# --------------------------------------------------------------------------- pooling

for _op in ("MaxPool", "AvgPool"):
    for _pad in ("VALID", "SAME"):
        for _k, _st in (
            ([1, 2, 2, 1], [1, 2, 2, 1]),
            ([1, 3, 3, 1], [1, 1, 1, 1]),
            ([1, 3, 2, 1], [1, 2, 3, 1]),
        ):
            rec(_op, rnd((2, 7, 8, 3)), ksize=_k, strides=_st, padding=_pad)
    rec(_op, rnd((2, 3, 6, 6)), ksize=[1, 1, 2, 2], strides=[1, 1, 2, 2], padding="SAME", data_format="NCHW")
    rec(_op, rnd((1, 5, 5, 2), F64), ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME")
    rec(
        _op,
        rnd((1, 4, 4, 2), F16),
        ksize=[1, 2, 2, 1],
        strides=[1, 2, 2, 1],
        padding="VALID",
        rtol=1e-3,
        atol=1e-3,
    )
    rec(_op, rnd((1, 2, 2, 1)), ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding="VALID")
    rec(_op, rnd((1, 2, 2, 1)), ksize=[2, 1, 1, 1], strides=[1, 1, 1, 1], padding="VALID")
rec("MaxPool", rnd((1, 4, 4, 2), I32, -9, 9), ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="SAME")
rec("MaxPool", rnd((1, 4, 4, 2), U8, 0, 255), ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME")
rec(
    "MaxPool",
    a([[[[np.nan], [1.0]], [[2.0], [3.0]]]]),
    ksize=[1, 2, 2, 1],
    strides=[1, 1, 1, 1],
    padding="VALID",
)
rec(
    "MaxPool",
    rnd((1, 5, 5, 1)),
    ksize=[1, 2, 2, 1],
    strides=[1, 1, 1, 1],
    padding="EXPLICIT",
    explicit_paddings=[0, 0, 1, 0, 0, 1, 0, 0],
)
rec("MaxPoolV2", rnd((2, 6, 6, 3)), a([1, 2, 2, 1], I32), a([1, 2, 2, 1], I32), padding="SAME")
rec(
    "MaxPoolV2",
    rnd((1, 3, 7, 7)),
    a([1, 1, 3, 3], I32),
    a([1, 1, 2, 2], I32),
    padding="VALID",
    data_format="NCHW",
)
rec("MaxPool3D", rnd((1, 4, 4, 4, 2)), ksize=[1, 2, 2, 2, 1], strides=[1, 2, 2, 2, 1], padding="VALID")
rec("AvgPool3D", rnd((1, 3, 5, 4, 2)), ksize=[1, 2, 3, 2, 1], strides=[1, 1, 2, 2, 1], padding="SAME")

# --------------------------------------------------------------------------- normalisation

_BN_X = rnd((2, 3, 4, 5), F32, -3, 3)
_BN_C = [rnd((5,), F32, 0.5, 2), rnd((5,), F32, -1, 1), rnd((5,), F32, -1, 1), rnd((5,), F32, 0.5, 2)]
for _op in ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"):
    rec(_op, _BN_X, *_BN_C, is_training=False, epsilon=0.001, rtol=1e-5, atol=1e-5, compare=(0, 1, 2))
    rec(_op, _BN_X, *_BN_C, is_training=True, rtol=1e-4, atol=1e-4, compare=(0, 1, 2))
    rec(
        _op,
        rnd((2, 5, 3, 3)),
        *_BN_C,
        is_training=False,
        data_format="NCHW",
        rtol=1e-5,
        atol=1e-5,
        compare=(0, 1, 2),
    )
rec(
    "FusedBatchNormV3",
    _BN_X,
    *_BN_C,
    is_training=True,
    exponential_avg_factor=0.3,
    rtol=1e-4,
    atol=1e-4,
    compare=(0, 1, 2),
)
rec(
    "FusedBatchNormV3",
    rnd((1, 2, 2, 5), F16),
    *_BN_C,
    is_training=False,
    rtol=5e-3,
    atol=5e-3,
    compare=(0, 1, 2),
)
rec(
    "FusedBatchNormV3",
    rnd((2, 5, 3, 3)),
    *_BN_C,
    is_training=True,
    data_format="NCHW",
    epsilon=0.01,
    rtol=1e-4,
    atol=1e-4,
    compare=(0, 1, 2),
)
rec("FusedBatchNormV3", _BN_X, *_BN_C[:3], rnd((4,)), is_training=False, compare=(0,))
for _r, _bias, _alpha, _beta in (
    (5, 1.0, 1.0, 0.5),
    (2, 2.0, 1e-4, 0.75),
    (0, 1.0, 0.5, 1.0),
    (1, 0.5, 2.0, 0.3),
):
    rec(
        "LRN",
        rnd((2, 3, 3, 8), F32, -2, 2),
        depth_radius=_r,
        bias=_bias,
        alpha=_alpha,
        beta=_beta,
        rtol=1e-5,
        atol=1e-5,
    )
rec("LRN", rnd((1, 2, 2, 4), F16, -2, 2), depth_radius=1, rtol=3e-3, atol=3e-3)

# --------------------------------------------------------------------------- top k

rec("TopKV2", a([3.0, 1.0, 3.0, 2.0, 5.0, 1.0]), a(3, I32))
rec("TopKV2", a([[1, 1, 1, 0], [4, 2, 4, 4]], I32), a(2, I32))
rec("TopKV2", rnd((2, 3, 7)), a(7, I32))
rec("TopKV2", rnd((4,)), a(0, I32))
rec("TopKV2", rnd((4,)), a(5, I32))
rec("TopKV2", rnd((3,), F64), a(2, I64))
rec("TopKV2", a([2, 9, 9, 1], I64), a(3, I32), index_type=dt("int64"))
rec("TopKV2", a([-0.0, 0.0, -0.0]), a(2, I32))
rec("TopKV2", rnd((2, 5), I8, -9, 9), a(2, I32))

# --------------------------------------------------------------------------- images

for _align, _half in ((False, False), (True, False), (False, True)):
    for _size in ([4, 6], [2, 2], [7, 3], [1, 1], [5, 5]):
        rec(
            "ResizeBilinear",
            rnd((2, 3, 4, 2)),
            a(_size, I32),
            align_corners=_align,
            half_pixel_centers=_half,
            rtol=1e-5,
            atol=1e-5,
        )
        rec(
            "ResizeNearestNeighbor",
            rnd((1, 3, 4, 2)),
            a(_size, I32),
            align_corners=_align,
            half_pixel_centers=_half,
        )
    rec(
        "ResizeBilinear",
        rnd((1, 5, 5, 1), U8, 0, 255),
        a([8, 3], I32),
        align_corners=_align,
        half_pixel_centers=_half,
        rtol=1e-5,
        atol=1e-4,
    )
    rec(
        "ResizeBilinear",
        rnd((1, 4, 4, 1), F64),
        a([9, 9], I32),
        align_corners=_align,
        half_pixel_centers=_half,
        rtol=1e-5,
        atol=1e-5,
    )
    rec(
        "ResizeNearestNeighbor",
        rnd((1, 5, 7, 1), I32, 0, 99),
        a([11, 3], I32),
        align_corners=_align,
        half_pixel_centers=_half,
    )
    rec(
        "ResizeNearestNeighbor",
        rnd((1, 224, 224, 1), U8, 0, 255),
        a([299, 150], I32),
        align_corners=_align,
        half_pixel_centers=_half,
    )
    rec(
        "ResizeBilinear",
        rnd((1, 224, 224, 1)),
        a([299, 150], I32),
        align_corners=_align,
        half_pixel_centers=_half,
        rtol=1e-5,
        atol=1e-4,
    )
rec("ResizeBilinear", rnd((1, 2, 2, 1)), a([4, 4], I32), align_corners=True, half_pixel_centers=True)
rec("ResizeBilinear", rnd((1, 2, 2, 1)), a([0, 4], I32))
rec("ResizeNearestNeighbor", rnd((2, 2, 2)), a([4, 4], I32))
rec("ResizeBilinear", rnd((1, 3, 3, 1), F16), a([5, 2], I32), half_pixel_centers=True, rtol=1e-3, atol=1e-3)

# --------------------------------------------------------------------------- more array ops

rec("StridedSliceGrad", a([4, 5], I32), a([1, 0], I32), a([3, 5], I32), a([1, 2], I32), rnd((2, 3)))
rec(
    "StridedSliceGrad",
    a([3, 4], I64),
    a([0, -1], I64),
    a([0, 0], I64),
    a([1, -1], I64),
    rnd((3, 3)),
    begin_mask=1,
    end_mask=1,
)
rec("StridedSliceGrad", a([3, 4], I32), a([1], I32), a([2], I32), a([1], I32), rnd((4,)), shrink_axis_mask=1)
rec(
    "StridedSliceGrad",
    a([3, 4], I32),
    a([0, 0], I32),
    a([0, 0], I32),
    a([1, 1], I32),
    rnd((1, 3, 4)),
    new_axis_mask=1,
    ellipsis_mask=2,
)
rec("TensorStridedSliceUpdate", rnd((4, 5)), a([1, 0], I32), a([3, 5], I32), a([1, 2], I32), rnd((2, 3)))
rec(
    "TensorStridedSliceUpdate",
    rnd((4,), I32, 0, 9),
    a([-1], I32),
    a([0], I32),
    a([-1], I32),
    a([7, 8, 9], I32),
)
rec(
    "TensorStridedSliceUpdate",
    rnd((4, 5)),
    a([1], I32),
    a([2], I32),
    a([1], I32),
    rnd((5,)),
    shrink_axis_mask=1,
)
for _block, _pads in (([2, 2], [[0, 0], [0, 0]]), ([2, 3], [[1, 1], [0, 2]]), ([1, 2], [[0, 0], [1, 1]])):
    rec("SpaceToBatchND", rnd((2, 4, 6, 3)), a(_block, I32), a(_pads, I32))
    _sb_in = rnd((2 * _block[0] * _block[1], 3, 4, 2))
    rec("BatchToSpaceND", _sb_in, a(_block, I32), a(_pads, I32))
rec("SpaceToBatchND", rnd((1, 6, 2)), a([3], I64), a([[0, 0]], I64))
rec("SpaceToBatchND", rnd((1, 5, 2)), a([2], I32), a([[0, 0]], I32))
rec("BatchToSpaceND", rnd((4, 3, 2)), a([2], I32), a([[1, 0]], I32))
rec("BatchToSpaceND", rnd((3, 3, 2)), a([2], I32), a([[0, 0]], I32))
rec("SpaceToBatch", rnd((1, 4, 4, 1)), a([[0, 0], [0, 0]], I32), block_size=2)
rec("BatchToSpace", rnd((4, 2, 2, 1)), a([[0, 0], [0, 0]], I32), block_size=2)
rec("DataFormatVecPermute", a([1, 2, 3, 4], I32))
rec("DataFormatVecPermute", a([1, 2, 3, 4], I64), src_format="NCHW", dst_format="NHWC")
rec("DataFormatVecPermute", a([[1, 2], [3, 4], [5, 6], [7, 8]], I32))
rec("DataFormatVecPermute", a([7, 9], I32))
rec("DataFormatDimMap", a([0, 1, 2, 3, -1, -4], I32))
rec("DataFormatDimMap", a([1, 3], I64), src_format="NCHW", dst_format="NHWC")
rec("ConcatOffset", a(1, I32), [a([2, 3, 4], I32), a([2, 5, 4], I32), a([2, 1, 4], I32)])
rec("ConcatOffset", a(-1, I32), [a([2, 3], I32), a([2, 5], I32)])
rec("Diag", rnd((3,)))
rec("Diag", rnd((2, 2), I32, 0, 9))
rec("DiagPart", rnd((3, 3)))
rec("DiagPart", rnd((2, 3, 2, 3), I64, 0, 9))
rec("DiagPart", rnd((2, 3)))
rec("Empty", a([2, 3], I32), dtype=dt("float"), init=True)
rec("Bitcast", a([1.0, -2.0]), type=dt("int32"))
rec("Bitcast", a([1, 256], I32), type=dt("uint8"))
rec("Bitcast", a([[1, 2, 3, 4]], U8), type=dt("int32"))
rec("Bitcast", a([1.5], F64), type=dt("int64"))
rec("Roll", rnd((3, 4)), a(1, I32), a(0, I32))
rec("Roll", rnd((3, 4)), a([-1, 2], I32), a([0, 1], I32))
rec("Roll", rnd((3, 4), I32, 0, 9), a([5, 2], I64), a([1, 1], I64))
rec("Roll", rnd((3, 4)), a([1], I32), a([2], I32))
rec("ListDiff", a([1, 2, 3, 4, 2, 6], I32), a([2, 4, 9], I32))
rec("ListDiff", a([1.5, 2.5], F32), a([], F32), out_idx=dt("int64"))

# --------------------------------------------------------------------------- more math ops

rec("Complex", rnd((2, 3)), rnd((3,)))
rec("Complex", rnd((2,), F64), rnd((2,), F64), Tout=dt("complex128"))
rec("Angle", a([1 + 1j, -1 + 0j, -1j, 0j], np.complex64))
rec("Real", a([1 + 2j, -3j], np.complex64))
rec("Imag", a([1 + 2j, -3j], np.complex128), Tout=dt("double"))
rec("ComplexAbs", a([3 + 4j, -1j], np.complex64))
rec("Conj", a([3 + 4j, -1j], np.complex64))
for _dt in (I8, U8, I32, I64, U16):
    rec("PopulationCount", rnd((5,), _dt, 0, 100))
rec("PopulationCount", a([-1, -128], I8))
rec("Cross", rnd((2, 3)), rnd((2, 3)))
rec("Cross", rnd((3,), I32, -5, 5), rnd((3,), I32, -5, 5))
rec("Cross", rnd((2,)), rnd((2,)))
for _op in ("SigmoidGrad", "TanhGrad", "RsqrtGrad", "SqrtGrad", "ReciprocalGrad", "InvGrad"):
    rec(_op, rnd((3, 4), F32, 0.5, 2), rnd((3, 4)))
    rec(_op, rnd((3,), F64, 0.5, 2), rnd((3,), F64))
for _op in ("ReluGrad", "Relu6Grad", "EluGrad", "SeluGrad", "SoftplusGrad", "SoftsignGrad"):
    rec(_op, rnd((3, 4)), a(np.linspace(-8, 8, 12).reshape(3, 4)))
    rec(_op, rnd((3,), F64), a([-1.0, 0.0, 7.0], F64))
rec("LeakyReluGrad", rnd((4,)), a([-1.0, 0.0, 0.5, 3.0]), alpha=0.3)
rec("CumulativeLogsumexp", rnd((3, 4)), a(1, I32))
rec("CumulativeLogsumexp", rnd((3, 4), F64), a(0, I32), exclusive=True, reverse=True)
rec("CumulativeLogsumexp", rnd((5,)), a(0, I32), reverse=True)
rec("HistogramFixedWidth", a([-1.0, 0.0, 1.5, 2.0, 5.0, 15.0]), a([0.0, 5.0]), a(5, I32))
rec("HistogramFixedWidth", rnd((20,), I32, 0, 30), a([0, 30], I32), a(4, I32), dtype=dt("int64"))
rec("HistogramFixedWidth", rnd((3,)), a([1.0, 0.0]), a(2, I32))
rec("LogMatrixDeterminant", _SPD)
rec("LogMatrixDeterminant", rnd((2, 3, 3)), rtol=1e-4, atol=1e-4)
rec("MatrixSolve", _SPD, rnd((3, 2), F64))
rec("MatrixSolve", _SPD, rnd((3, 1), F64), adjoint=True)
rec(
    "MatrixSolve",
    (rnd((2, 3, 3)) + 4 * np.eye(3, dtype=F32)).astype(F32),
    rnd((2, 3, 2)),
    rtol=1e-4,
    atol=1e-4,
)

# --------------------------------------------------------------------------- more nn ops

rec("NthElement", rnd((3, 5)), a(0, I32))
rec("NthElement", rnd((3, 5)), a(4, I32), reverse=True)
rec("NthElement", rnd((2, 6), I32, 0, 4), a(2, I32))
rec("NthElement", rnd((5,)), a(5, I32))
rec("InTopKV2", a([[0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.5, 0.5, 0.0]]), a([1, 0, 1], I32), a(1, I32))
rec("InTopKV2", a([[0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [np.nan, 0.5, 0.0]]), a([2, 1, 0], I64), a(2, I64))
rec("InTopKV2", a([[0.1, 0.8], [0.3, 0.3]]), a([2, -1], I32), a(1, I32))
rec("BiasAddGrad", rnd((2, 3, 4)))
rec("BiasAddGrad", rnd((2, 3, 4, 5)), data_format="NCHW")
rec("BiasAddGrad", rnd((6, 3), F64))
rec("SoftmaxCrossEntropyWithLogits", rnd((3, 4)), a(np.eye(4)[[0, 2, 3]], F32))
rec("SoftmaxCrossEntropyWithLogits", rnd((3, 4), F64), rnd((3, 4), F64, 0, 1))
rec("SoftmaxCrossEntropyWithLogits", rnd((3, 4)), a(np.eye(4)[[1]], F32))
rec("SparseSoftmaxCrossEntropyWithLogits", rnd((3, 4)), a([0, 3, 1], I32))
rec("SparseSoftmaxCrossEntropyWithLogits", rnd((2, 5), F64), a([4, 0], I64))
rec("SparseSoftmaxCrossEntropyWithLogits", rnd((2, 5)), a([5, 0], I32))
# BatchNormWithGlobalNormalization: removed at GraphDef version 9, TF 2 cannot build it (see test_kernels_nn).
for _pad in ("VALID", "SAME"):
    rec(
        "ExtractImagePatches",
        rnd((2, 5, 6, 3)),
        ksizes=[1, 3, 2, 1],
        strides=[1, 2, 1, 1],
        rates=[1, 1, 1, 1],
        padding=_pad,
    )
    rec(
        "ExtractImagePatches",
        rnd((1, 7, 7, 2), I32, 0, 99),
        ksizes=[1, 2, 2, 1],
        strides=[1, 3, 3, 1],
        rates=[1, 2, 2, 1],
        padding=_pad,
    )
    rec("MaxPoolWithArgmax", rnd((2, 5, 6, 3)), ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding=_pad)
    rec(
        "MaxPoolWithArgmax",
        rnd((2, 4, 4, 2)),
        ksize=[1, 3, 3, 1],
        strides=[1, 1, 1, 1],
        padding=_pad,
        include_batch_in_index=True,
    )
rec(
    "MaxPoolWithArgmax",
    rnd((1, 4, 4, 1)),
    ksize=[1, 2, 2, 1],
    strides=[1, 2, 2, 1],
    padding="VALID",
    Targmax=dt("int32"),
)

# --------------------------------------------------------------------------- spectral and fake quant

for _op, _rank in (("FFT", 1), ("IFFT", 1), ("FFT2D", 2), ("IFFT2D", 2), ("FFT3D", 3), ("IFFT3D", 3)):
    _z = (rnd((2, 3, 4, 5)) + 1j * rnd((2, 3, 4, 5))).astype(np.complex64)
    rec(_op, _z, rtol=1e-4, atol=1e-4)
    rec(_op, _z.astype(np.complex128)[0])
for _op, _rank in (("RFFT", 1), ("RFFT2D", 2), ("RFFT3D", 3)):
    for _n in (6, 5, 9):
        rec(_op, rnd((2, 6, 6, 6)), a([_n] * _rank, I32), rtol=1e-4, atol=1e-4)
    rec(_op, rnd((3, 4, 4), F64), a([4] * _rank, I32), Tcomplex=dt("complex128"))
for _op, _rank in (("IRFFT", 1), ("IRFFT2D", 2), ("IRFFT3D", 3)):
    _z = (rnd((2, 4, 6, 4)) + 1j * rnd((2, 4, 6, 4))).astype(np.complex64)
    for _n in (6, 7, 4):
        rec(_op, _z, a([_n] * _rank, I32), rtol=1e-4, atol=1e-4)
# (fft_length 0 aborts TF's process: DUCC's "axis length mismatch" assertion.)
# Off the quantization grid's exact ties: at a tie TF's vectorised float32 may round the other way.
_FQ = a(np.linspace(-8, 8, 41) + 0.013)
rec("FakeQuantWithMinMaxArgs", _FQ)
rec("FakeQuantWithMinMaxArgs", _FQ, min=-1.0, max=3.0, num_bits=4)
rec("FakeQuantWithMinMaxArgs", _FQ, min=0.1, max=2.5, narrow_range=True)
rec("FakeQuantWithMinMaxArgs", _FQ, min=-5.3, max=-0.2, num_bits=16)
rec("FakeQuantWithMinMaxArgs", _FQ, min=2.0, max=1.0)
rec("FakeQuantWithMinMaxVars", _FQ, a(-2.0), a(6.3))
rec("FakeQuantWithMinMaxVars", _FQ, a(0.5), a(1.0), num_bits=3, narrow_range=True)
rec("FakeQuantWithMinMaxVarsPerChannel", rnd((4, 3), F32, -4, 4), a([-1.0, -3.0, 0.2]), a([1.0, 2.0, 3.7]))

# --------------------------------------------------------------------------- more image ops

_BOXES = a(
    [
        [0.1, 0.2, 0.6, 0.9],
        [0.0, 0.0, 1.0, 1.0],
        [0.5, 0.5, 0.5, 0.5],
        [-0.2, 0.3, 1.3, 0.8],
        [0.9, 0.7, 0.2, 0.1],
    ]
)
for _method in ("bilinear", "nearest"):
    rec(
        "CropAndResize",
        rnd((2, 6, 7, 3)),
        _BOXES,
        a([0, 1, 0, 1, 0], I32),
        a([4, 5], I32),
        method=_method,
        rtol=1e-5,
        atol=1e-5,
    )
    rec(
        "CropAndResize",
        rnd((1, 5, 5, 1), U8, 0, 255),
        _BOXES,
        a([0] * 5, I32),
        a([1, 3], I32),
        method=_method,
        extrapolation_value=-1.0,
        rtol=1e-5,
        atol=1e-4,
    )
rec("CropAndResize", rnd((1, 5, 5, 1)), _BOXES[:1], a([2], I32), a([2, 2], I32))
_RGB = rnd((2, 3, 4, 3), F32, 0, 1)
_RGB[0, 0, 0] = [0.5, 0.5, 0.5]
_RGB[0, 0, 1] = [0.0, 0.0, 0.0]
_RGB[0, 0, 2] = [1.0, 0.2, 0.2]
rec("RGBToHSV", _RGB)
rec("RGBToHSV", _RGB.astype(F64))
rec("HSVToRGB", rnd((2, 4, 3), F32, 0, 1))
rec("HSVToRGB", a([[0.0, 1.0, 1.0], [1 / 6, 1.0, 1.0], [0.5, 0.5, 0.5], [5 / 6, 0.2, 0.9], [1.0, 1.0, 1.0]]))
for _scale in (0.0, 0.5, 2.0):
    rec("AdjustSaturation", _RGB, a(_scale), rtol=1e-5, atol=1e-5)
for _factor in (0.5, 2.0, -1.0):
    rec("AdjustContrastv2", _RGB, a(_factor), rtol=1e-5, atol=1e-5)
_NB = a(
    [
        [0, 0, 1, 1],
        [0, 0.1, 1, 1.1],
        [0, -0.1, 1, 0.9],
        [0, 10, 1, 11],
        [0, 10.1, 1, 11.1],
        [0, 100, 1, 101],
        [1, 1, 0, 0],
    ]
)
_NS = a([0.9, 0.75, 0.6, 0.95, 0.5, 0.3, 0.9])
rec("NonMaxSuppressionV3", _NB, _NS, a(3, I32), a(0.5), a(0.0))
rec("NonMaxSuppressionV3", _NB, _NS, a(10, I32), a(0.5), a(0.55))
rec("NonMaxSuppressionV3", _NB, _NS, a(10, I32), a(1.0), a(-np.inf))
rec("NonMaxSuppressionV3", a([[0, 0, 1, 1], [0, 0, 1, 0.5]]), a([0.9, 0.8]), a(5, I32), a(0.5), a(0.0))
rec("NonMaxSuppressionV3", _NB, a([0.5] * 7), a(4, I32), a(0.0), a(0.0))
rec("NonMaxSuppressionV3", rnd((0, 4)), rnd((0,)), a(4, I32), a(0.5), a(0.0))
rec("NonMaxSuppressionV2", _NB, _NS, a(2, I32), a(0.3))
rec("NonMaxSuppression", _NB, _NS, a(4, I32), iou_threshold=0.4)
rec("NonMaxSuppressionV4", _NB, _NS, a(5, I32), a(0.5), a(0.0), pad_to_max_output_size=True)
rec("NonMaxSuppressionV4", _NB, _NS, a(5, I32), a(0.5), a(0.0))
rec("NonMaxSuppressionV5", _NB, _NS, a(6, I32), a(0.5), a(0.0), a(0.0), pad_to_max_output_size=True)
rec("NonMaxSuppressionV3", _NB, _NS, a(-1, I32), a(0.5), a(0.0))
rec("NonMaxSuppressionV3", _NB, _NS, a(3, I32), a(1.5), a(0.0))

# --------------------------------------------------------------------------- Cast edges

rec("Cast", a([np.nan, np.inf, -np.inf, 3e9, -3e9, 2147483520.0]), DstT=dt("int32"))
rec("Cast", a([np.nan, np.inf, -np.inf, 1e19, -1e19], F64), DstT=dt("int64"))
rec("Cast", a([-1.5, 0.7, 255.9, 300.0, -300.0]), DstT=dt("uint8"))
rec("Cast", a([-1.5, 0.7, 127.9, 300.0, -300.0]), DstT=dt("int8"))
rec("Cast", a([300, -1, 65535], I32), DstT=dt("uint8"))
rec("Cast", a([3.4e38, -3.4e38, 1e-45], F64), DstT=dt("half"))
rec("Cast", a([1.0, 65504.0, 70000.0]), DstT=dt("bfloat16"))

# --------------------------------------------------------------------------- bicubic and area resizing

for _align, _half in ((False, False), (True, False), (False, True)):
    for _size in ([4, 6], [2, 2], [7, 3], [1, 1], [9, 10]):
        rec(
            "ResizeBicubic",
            rnd((2, 3, 4, 2)),
            a(_size, I32),
            align_corners=_align,
            half_pixel_centers=_half,
            rtol=1e-4,
            atol=1e-4,
        )
    rec(
        "ResizeBicubic",
        rnd((1, 5, 5, 1), U8, 0, 255),
        a([8, 3], I32),
        align_corners=_align,
        half_pixel_centers=_half,
        rtol=1e-4,
        atol=1e-3,
    )
    rec(
        "ResizeBicubic",
        rnd((1, 64, 48, 3)),
        a([100, 33], I32),
        align_corners=_align,
        half_pixel_centers=_half,
        rtol=1e-4,
        atol=1e-4,
    )
for _align in (False, True):
    for _size in ([4, 6], [2, 2], [7, 3], [1, 1], [9, 10], [3, 4]):
        rec("ResizeArea", rnd((2, 3, 4, 2)), a(_size, I32), align_corners=_align, rtol=1e-5, atol=1e-5)
    rec(
        "ResizeArea",
        rnd((1, 64, 48, 3), U8, 0, 255),
        a([17, 30], I32),
        align_corners=_align,
        rtol=1e-5,
        atol=1e-3,
    )
    rec("ResizeArea", rnd((1, 7, 5, 1), F64), a([3, 2], I32), align_corners=_align, rtol=1e-5, atol=1e-5)

# --------------------------------------------------------------------------- stateless random (Philox)

for _seed in ([0, 0], [1, 2], [-5, 123456789012], [2**31 - 1, -1]):
    rec("StatelessRandomGetKeyCounter", a(_seed, I64))
rec("StatelessRandomGetKeyCounter", a([7, 9], I32))
rec("StatelessRandomGetKeyCounterAlg", a([7, 9], I32))
_KEY, _CTR, _ALG = a([0x1234567890ABCDEF], U64), a([5, 0xFFFFFFFFFFFFFFFF], U64), a(1, I32)
for _dtype in ("float", "double", "half", "bfloat16"):
    for _shape in ([3, 5], [7], [0]):
        rec("StatelessRandomUniformV2", a(_shape, I32), _KEY, _CTR, _ALG, dtype=dt(_dtype))
        rec(
            "StatelessRandomNormalV2",
            a(_shape, I32),
            _KEY,
            _CTR,
            _ALG,
            dtype=dt(_dtype),
            rtol=1e-5,
            atol=1e-5,
        )
    rec("StatelessRandomUniform", a([2, 3], I32), a([3, 4], I64), dtype=dt(_dtype))
    rec("StatelessRandomNormal", a([9], I32), a([3, 4], I32), dtype=dt(_dtype), rtol=1e-5, atol=1e-5)
rec("StatelessRandomUniformV2", a([10], I64), _KEY, a([0xFFFFFFFFFFFFFFFE, 3], U64), a(3, I32))
rec("StatelessRandomUniformIntV2", a([4, 5], I32), _KEY, _CTR, _ALG, a(-3, I32), a(17, I32))
rec("StatelessRandomUniformIntV2", a([9], I32), _KEY, _CTR, _ALG, a(-(2**40), I64), a(2**40, I64))
rec("StatelessRandomUniformIntV2", a([9], I32), _KEY, _CTR, _ALG, a(5, I32), a(5, I32))
rec("StatelessRandomUniformInt", a([6], I32), a([1, 1], I64), a(0, I64), a(10, I64))

# --------------------------------------------------------------------------- ScaleAndTranslate

_ST_IMG = rnd((2, 9, 7, 2))
for _kernel in (
    "lanczos1",
    "lanczos3",
    "lanczos5",
    "gaussian",
    "box",
    "triangle",
    "keyscubic",
    "mitchellcubic",
):
    for _antialias in (True, False):
        rec(
            "ScaleAndTranslate",
            _ST_IMG,
            a([4, 12], I32),
            a([4 / 9, 12 / 7]),
            a([0.0, 0.0]),
            kernel_type=_kernel,
            antialias=_antialias,
            rtol=1e-4,
            atol=1e-4,
        )
    rec(
        "ScaleAndTranslate",
        _ST_IMG,
        a([9, 7], I32),
        a([1.3, 0.8]),
        a([-1.5, 2.25]),
        kernel_type=_kernel,
        rtol=1e-4,
        atol=1e-4,
    )
rec(
    "ScaleAndTranslate",
    rnd((1, 5, 5, 1), U8, 0, 255),
    a([3, 8], I32),
    a([0.6, 1.6]),
    a([0.0, 0.0]),
    rtol=1e-4,
    atol=1e-3,
)
rec("ScaleAndTranslate", _ST_IMG, a([3, 3], I32), a([0.0, 1.0]), a([0.0, 0.0]))
rec("ScaleAndTranslate", _ST_IMG, a([3, 3], I32), a([1.0, 1.0]), a([0.0, 0.0]), kernel_type="cubic")

# --------------------------------------------------------------------------- partition, stitch, misc

rec("DynamicStitch", [a([0, 2], I32), a([1, 3], I32)], [rnd((2, 3)), rnd((2, 3))])
rec(
    "DynamicStitch",
    [a([[0, 4], [2, 1]], I32), a([1, 3], I32)],
    [rnd((2, 2), I64, 0, 9), rnd((2,), I64, 0, 9)],
)
rec("DynamicStitch", [a([0, 1], I32), a([1], I32)], [s("a", "b"), s("c")])
rec("DynamicStitch", [a([0, 1], I32)], [rnd((3,))])
rec("ParallelDynamicStitch", [a([0, 2], I32), a([1, 3], I32)], [rnd((2, 2)), rnd((2, 2))])
rec("DynamicPartition", rnd((5, 2)), a([0, 2, 1, 0, 2], I32), num_partitions=3)
rec("DynamicPartition", rnd((2, 3), I32, 0, 9), a([[1, 0, 1], [1, 1, 0]], I32), num_partitions=2)
rec("DynamicPartition", s("a", "b", "c"), a([1, 1, 1], I32), num_partitions=3)
rec("DynamicPartition", rnd((3,)), a([0, 3, 1], I32), num_partitions=2)
rec("Reverse", rnd((2, 3, 4)), a([True, False, True], np.bool_))
rec("Reverse", rnd((2, 3)), a([False, False], np.bool_))
rec("Reverse", rnd((2, 3)), a([True], np.bool_))
rec("UnravelIndex", a([0, 5, 11], I32), a([3, 4], I32))
rec("UnravelIndex", a(7, I64), a([2, 2, 2], I64))
rec("UnravelIndex", a([12], I32), a([3, 4], I32))
rec("UniqueV2", a([[1, 2], [3, 4], [1, 2]], I32), a([0], I32))
rec("UniqueV2", a([[1, 2, 1], [3, 4, 3]], I32), a([1], I64), out_idx=dt("int64"))
rec("UniqueV2", a([3, 1, 3], I64), a([], I32))
rec("UniqueV2", a([[1.0, 2.0], [1.0, 2.0]]), a([-1], I32))
rec("UniqueWithCountsV2", a([[1, 2], [3, 4], [1, 2]], I32), a([0], I32))
rec("UniqueWithCountsV2", a([5, 1, 5, 5], I64), a([], I32))
rec("AccumulateNV2", [rnd((2, 3)), rnd((2, 3))], shape=(2, 3))
rec("NextAfter", a([1.0, 0.0, -1.0, 1.0]), a([2.0, -1.0, 0.0, 1.0]))
rec("NextAfter", a([1.0, 0.0], F64), a([0.0, 1.0], F64))
rec("CheckNumericsV2", a([1.0, -np.inf, np.nan]), message="v2")
rec("CheckNumericsV2", a([1.0, np.inf]), message="v2")
rec("CheckNumericsV2", a([1.0, 2.0]), message="v2")
rec("CheckNumericsV2", a([-np.inf, np.inf], F64), message="both")
for _op in ("Erfinv", "Ndtri"):
    _ps = [0.0, 1e-30, 1e-10, 0.001, 0.02, 0.3, 0.5, 0.77, 0.97, 0.999, 0.9999999, 1.0]
    _ys = [-1.0, -0.9999999, -0.999, -0.97, -0.3, 0.0, 0.2, 0.5, 0.9, 0.99999, 1.0, 1.5]
    rec(_op, a(_ps if _op == "Ndtri" else _ys), rtol=1e-5, atol=1e-6)
    rec(_op, a(_ps if _op == "Ndtri" else _ys, F64), rtol=1e-10, atol=1e-12)
_QD = a(np.linspace(-3, 5, 33) + 0.01)
for _signed, _narrow, _bits in ((True, False, 8), (True, True, 8), (False, False, 4), (True, False, 3)):
    rec(
        "QuantizeAndDequantizeV2",
        _QD,
        a(-1.0),
        a(2.0),
        signed_input=_signed,
        narrow_range=_narrow,
        num_bits=_bits,
        range_given=True,
    )
    rec(
        "QuantizeAndDequantizeV2",
        _QD,
        a(0.0),
        a(0.0),
        signed_input=_signed,
        narrow_range=_narrow,
        num_bits=_bits,
        range_given=False,
    )
rec("QuantizeAndDequantizeV2", _QD, a(-1.0), a(2.0), range_given=True, round_mode="HALF_UP")
rec("QuantizeAndDequantizeV2", _QD, a(2.0), a(1.0), range_given=True)
# Per-channel bounds: TF 2.21 rejects them, 2.15 computes them (test_kernels_quantization).
rec("QuantizeAndDequantizeV4", rnd((3, 4), F64), a(0.0, F64), a(0.0, F64), axis=0)
rec("QuantizeAndDequantizeV3", _QD, a(-2.0), a(4.0), a(5, I32))
rec("QuantizeAndDequantizeV3", _QD, a(-2.0), a(4.0), a(8, I32), signed_input=False, range_given=False)
_CB = rnd((2, 6, 1, 4), F32, 0, 1)
_CB[..., 2:] += _CB[..., :2]
_CS = rnd((2, 6, 3), F32, 0, 1)
rec("CombinedNonMaxSuppression", _CB, _CS, a(3, I32), a(5, I32), a(0.5), a(0.2))
rec("CombinedNonMaxSuppression", _CB, _CS, a(2, I32), a(10, I32), a(0.3), a(0.0), pad_per_class=True)
rec(
    "CombinedNonMaxSuppression",
    np.repeat(_CB, 3, axis=2),
    _CS,
    a(4, I32),
    a(4, I32),
    a(0.5),
    a(0.5),
    clip_boxes=False,
)
for _delta in (0.0, 0.1, -0.3, 0.5, 1.2):
    rec("AdjustHue", _RGB, a(_delta), rtol=1e-5, atol=1e-5)

# --------------------------------------------------------------------------- more stateless random

for _dtype in ("uint64", "int64", "uint32", "int32"):
    rec("StatelessRandomUniformFullIntV2", a([3, 3], I32), _KEY, _CTR, _ALG, dtype=dt(_dtype))
for _dtype in ("float", "double", "half"):
    rec(
        "StatelessTruncatedNormalV2", a([4, 7], I32), _KEY, _CTR, _ALG, dtype=dt(_dtype), rtol=1e-5, atol=1e-5
    )
    rec("StatelessTruncatedNormal", a([3000], I32), a([9, 1], I64), dtype=dt(_dtype), rtol=1e-5, atol=1e-5)

# --------------------------------------------------------------------------- bfloat16 and half coverage

_BF = a([-2.75, -0.5, 0.0, 1.5, 3.25, 250.0], BF16)
for _dst in ("int32", "int64", "float", "half", "bool", "uint8"):
    rec("Cast", _BF, DstT=dt(_dst))
rec("Cast", a([np.nan, np.inf], BF16), DstT=dt("int32"))
rec("Range", a(0.0, BF16), a(2.0, BF16), a(0.5, BF16))
rec("Range", a(1.0, F16), a(-1.0, F16), a(-0.25, F16))
for _op in ("Max", "Min", "Mean", "Prod"):
    rec(_op, rnd((3, 4), BF16, -2, 2), a([1], I32), rtol=2e-2, atol=2e-2)
for _op in ("Maximum", "Minimum", "Mul", "Sub", "RealDiv", "Pow", "SquaredDifference"):
    rec(_op, rnd((2, 3), BF16, 0.5, 2), rnd((3,), BF16, 0.5, 2), rtol=2e-2, atol=2e-2)
for _op in ("Softmax", "Relu6", "Elu", "Softplus", "Exp", "Log", "Sqrt", "Erf"):
    rec(_op, rnd((2, 5), BF16, 0.1, 3), rtol=2e-2, atol=2e-2)
rec(
    "Conv2D",
    rnd((1, 5, 5, 2), BF16, -1, 1),
    rnd((3, 3, 2, 2), BF16, -1, 1),
    strides=[1, 1, 1, 1],
    padding="SAME",
    rtol=3e-2,
    atol=5e-2,
)
rec("MaxPool", rnd((1, 4, 4, 2), BF16), ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
rec(
    "AvgPool",
    rnd((1, 4, 4, 2), F16),
    ksize=[1, 3, 3, 1],
    strides=[1, 1, 1, 1],
    padding="SAME",
    rtol=2e-3,
    atol=2e-3,
)
rec("BiasAdd", rnd((2, 3), BF16), rnd((3,), BF16))
rec(
    "FusedBatchNormV3",
    rnd((1, 2, 2, 5), BF16),
    *_BN_C,
    is_training=False,
    rtol=2e-2,
    atol=3e-2,
    compare=(0, 1, 2),
)
rec("ResizeBilinear", rnd((1, 3, 3, 1), BF16), a([5, 5], I32), half_pixel_centers=True)
rec("GatherV2", rnd((4, 2), BF16), a([3, 1], I32), a(0, I32))
rec("Cumsum", rnd((2, 4), BF16), a(1, I32), rtol=2e-2, atol=3e-2)

# --------------------------------------------------------------------------- the rest

rec("BroadcastGradientArgs", a([2, 1, 3], I32), a([4, 3], I32))
rec("BroadcastGradientArgs", a([5], I64), a([], I64))
rec("BroadcastGradientArgs", a([2, 3], I32), a([4], I32))
rec("InTopK", a([[0.1, 0.8, 0.1], [0.3, 0.3, 0.4]]), a([1, 0], I32), k=1)
# TopK (V1): removed at GraphDef version 7, TF 2 cannot build it (see test_kernels_nn).
rec("MatrixDiagV2", rnd((2, 3)), a([-1, 0], I32), a(-1, I32), a(-1, I32), a(0.0))
rec("MatrixDiagPartV2", rnd((3, 4)), a([-1, 1], I32), a(5.0))
rec("MatrixSetDiagV2", rnd((3, 4)), rnd((2, 3)), a([0, 1], I32))
rec("StatelessRandomGetAlg")
for _pad, _st, _in, _out in (
    ("SAME", [1, 2, 2, 2, 1], [1, 6, 5, 4, 2], (1, 3, 3, 2, 3)),
    ("VALID", [1, 1, 2, 1, 1], [2, 4, 5, 3, 2], (2, 3, 2, 2, 3)),
):
    rec(
        "Conv3DBackpropInputV2",
        a(_in, I32),
        rnd((2, 2, 2, 2, 3), F32, -1, 1),
        rnd(_out, F32, -1, 1),
        strides=_st,
        padding=_pad,
        rtol=1e-4,
        atol=1e-4,
    )
rec(
    "Conv2DBackpropInput",
    a([1, 5, 5, 3], I32),
    rnd((3, 3, 3, 4), F32, -1, 1),
    rnd((1, 3, 3, 4), F32, -1, 1),
    strides=[1, 2, 2, 1],
    padding="SAME",
)

# --------------------------------------------------------------------------- decompositions

_TALL = rnd((2, 5, 3), F64)
rec("Qr", _TALL, rtol=1e-9, atol=1e-9)
rec("Qr", _TALL, full_matrices=True, rtol=1e-9, atol=1e-9)
rec("Qr", rnd((3, 4)), rtol=1e-4, atol=1e-4)
rec("Svd", _TALL, compute_uv=False, compare=(0,), rtol=1e-9, atol=1e-9)
rec("Svd", rnd((3, 5)), compute_uv=False, compare=(0,), rtol=1e-4, atol=1e-4)
rec("Svd", _TALL, compute_uv=True, compare=(0,), rtol=1e-9, atol=1e-9)
rec("SelfAdjointEigV2", _SPD, compute_v=False, compare=(0,), rtol=1e-9, atol=1e-9)
rec("SelfAdjointEigV2", _SPD.astype(F32), compare=(0,), rtol=1e-4, atol=1e-4)
rec("StatelessMultinomial", a([[0.0, 1.0, 2.0], [5.0, -np.inf, 0.0]]), a(7, I32), a([3, 4], I64))
rec("StatelessMultinomial", rnd((4, 6)), a(33, I32), a([1, 2], I32), output_dtype=dt("int32"))
rec("StatelessMultinomial", rnd((2, 5), F64), a(1, I32), a([9, 9], I64))
rec("StatelessMultinomial", rnd((2, 5)), a(0, I32), a([9, 9], I64))
rec("StatelessMultinomial", rnd((5, 4), F32, -1, 1), a(5, I32), a([2, 7], I64))
rec("StatelessMultinomial", rnd((3, 3), F16, -1, 1), a(3, I32), a([2, 8], I64))

# --------------------------------------------------------------------------- window kernels' forms

# Small feature maps under large kernels: the depthwise matrix form (conv_ops._depthwise_matrices).
for _x, _f, _st, _pad in (
    ((4, 2, 2, 8), (7, 7, 8, 1), [1, 1, 1, 1], "SAME"),
    ((6, 1, 1, 5), (3, 3, 5, 2), [1, 1, 1, 1], "SAME"),
    ((5, 4, 3, 4), (3, 3, 4, 2), [1, 2, 2, 1], "SAME"),
    ((8, 3, 3, 3), (2, 3, 3, 1), [1, 1, 2, 1], "VALID"),
):
    rec(
        "DepthwiseConv2dNative",
        rnd(_x, F32, -1, 1),
        rnd(_f, F32, -1, 1),
        strides=_st,
        padding=_pad,
        rtol=1e-4,
        atol=1e-4,
    )
_conv_case((6, 2, 2, 6), (7, 7, 1, 6), strides=[1, 1, 1, 1], padding="SAME")  # ConvNeXt's depthwise
_NAN_ROW = a([[[[np.nan], [np.nan], [1.0], [np.nan], [2.0], [np.nan], [np.nan], [np.nan]]]])
for _pad in ("VALID", "SAME"):  # windows of NaN only give TF's lowest(), not NaN or -inf
    rec("MaxPool", _NAN_ROW, ksize=[1, 1, 2, 1], strides=[1, 1, 2, 1], padding=_pad)
    rec("MaxPool", _NAN_ROW, ksize=[1, 1, 3, 1], strides=[1, 1, 1, 1], padding=_pad)
rec(  # so do windows of -inf only, and of -inf and NaN; -inf beside a number is skipped
    "MaxPool",
    a([[[[-np.inf], [-np.inf], [np.nan], [-np.inf], [-np.inf], [3.0]]]]),
    ksize=[1, 1, 2, 1],
    strides=[1, 1, 2, 1],
    padding="VALID",
)
