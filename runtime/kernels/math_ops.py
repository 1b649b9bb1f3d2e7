"""Elementwise math kernels: unary and binary cwise ops, comparisons, logical ops, Cast, AddN.

Numerics follow TF's CPU kernels (overflow, inf and nan come silently: the unary and binary
kernels rely on the Session running every plan under ``np.errstate(all="ignore")``): numpy broadcasting (TF's rules) with TF's "Incompatible
shapes" error, integer ops wrap on overflow, integer division by zero is an error, FloorDiv/
FloorMod round toward -inf while TruncateDiv/TruncateMod/Mod/Div (on integers) round toward
zero, Maximum/Minimum propagate NaN, Round is half-to-even. Float16 and bfloat16 transcendental
functions are computed in float32 and rounded back, as Eigen does.

The helpers at the top (``shape_str``, ``broadcast``, ``out``) are shared by the other families.
"""

from __future__ import annotations

import numpy as np

from runtime import dtypes
from runtime.errors import FailedPreconditionError, InternalError, InvalidArgumentError, UnimplementedError
from runtime.kernels.registry import kernel


def shape_str(shape) -> str:
    """A shape as TF writes it in error texts: ``[2,3]``."""
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def invalid(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(None, None, message)


def node_name(ctx) -> str:
    """The node a kernel runs for, for the few TF texts that name it ("?" outside a Session)."""
    return ctx.name if ctx is not None else "?"


def out(value, dtype) -> np.ndarray:
    """``value`` as an ndarray of ``dtype`` (numpy scalars become 0-d arrays)."""
    return np.asarray(value, dtype=dtype)


def broadcast(x: np.ndarray, y: np.ndarray) -> tuple[int, ...]:
    """The broadcast shape of two operands, or TF's InvalidArgumentError."""
    xs, ys = x.shape, y.shape
    if xs == ys or not ys:
        return xs
    if not xs:
        return ys
    if len(ys) < len(xs) and xs[len(xs) - len(ys) :] == ys:  # a bias over rows: no numpy call
        return xs
    if len(xs) < len(ys) and ys[len(ys) - len(xs) :] == xs:
        return ys
    try:
        return np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        raise invalid(f"Incompatible shapes: {shape_str(x.shape)} vs. {shape_str(y.shape)}") from None


_LOW_PRECISION = frozenset({np.dtype(np.float16), np.dtype(dtypes.as_numpy_dtype(dtypes.DT_BFLOAT16))})


def _low_precision(dtype: np.dtype) -> bool:
    return dtype in _LOW_PRECISION


def _is_int(dtype: np.dtype) -> bool:
    return dtype.kind in "iu"


# --------------------------------------------------------------------------- unary


def _unary(fn, via_float32: bool = True):
    def compute(x):
        x = np.asarray(x)
        if via_float32 and x.dtype in _LOW_PRECISION:
            return out(fn(x.astype(np.float32)), x.dtype)
        result = fn(x)
        return result if type(result) is np.ndarray and result.dtype == x.dtype else out(result, x.dtype)

    return compute


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _sign(x):
    if x.dtype.kind == "c":
        mag = np.abs(x)
        return np.where(mag == 0, 0, x / np.where(mag == 0, 1, mag))
    return np.sign(x)


def _rint(x):
    return x if _is_int(x.dtype) else np.rint(x)


def _reciprocal(x):
    if _is_int(x.dtype):
        return _trunc_div(np.ones_like(x), x)
    return 1 / x


_UNARY = {
    "Neg": (np.negative, False),
    "Abs": (np.abs, False),
    "Sign": (_sign, False),
    "Square": (np.square, False),
    "Sqrt": (np.sqrt, True),
    "Rsqrt": (lambda x: 1 / np.sqrt(x), True),
    "Reciprocal": (_reciprocal, True),
    "Inv": (_reciprocal, True),
    "Exp": (np.exp, True),
    "Expm1": (np.expm1, True),
    "Log": (np.log, True),
    "Log1p": (np.log1p, True),
    "Sin": (np.sin, True),
    "Cos": (np.cos, True),
    "Tan": (np.tan, True),
    "Asin": (np.arcsin, True),
    "Acos": (np.arccos, True),
    "Atan": (np.arctan, True),
    "Sinh": (np.sinh, True),
    "Cosh": (np.cosh, True),
    "Tanh": (np.tanh, True),
    "Asinh": (np.arcsinh, True),
    "Acosh": (np.arccosh, True),
    "Atanh": (np.arctanh, True),
    "Sigmoid": (_sigmoid, True),
    "Floor": (np.floor, False),
    "Ceil": (np.ceil, False),
    "Round": (_rint, False),
    "Rint": (_rint, False),
    "Invert": (np.invert, False),
}

for _op, (_fn, _via32) in _UNARY.items():
    kernel(_op)(_unary(_fn, _via32))


@kernel("Real")
def real(input, *, Tout=dtypes.DT_FLOAT):  # noqa: A002
    return out(np.real(input), dtypes.as_numpy_dtype(Tout))


@kernel("Imag")
def imag(input, *, Tout=dtypes.DT_FLOAT):  # noqa: A002
    return out(np.imag(input), dtypes.as_numpy_dtype(Tout))


@kernel("ComplexAbs")
def complex_abs(x, *, Tout=dtypes.DT_FLOAT):
    return out(np.abs(x), dtypes.as_numpy_dtype(Tout))


@kernel("Conj")
def conj(input):  # noqa: A002
    return out(np.conj(input), input.dtype)


@kernel("IsNan")
def is_nan(x):
    return out(np.isnan(x), np.bool_)


@kernel("IsInf")
def is_inf(x):
    return out(np.isinf(x), np.bool_)


@kernel("IsFinite")
def is_finite(x):
    return out(np.isfinite(x), np.bool_)


@kernel("LogicalNot")
def logical_not(x):
    return out(np.logical_not(x), np.bool_)


# --------------------------------------------------------------------------- binary


def _check_int_divisor(y, internal=False):
    if _is_int(y.dtype) and np.any(y == 0):
        if internal:  # TF's TruncateDiv/TruncateMod functors lack the error flag the others have
            raise InternalError(
                None,
                None,
                "Unexpected error in binary operator (only integer div and mod should have errors)",
            )
        raise invalid("Integer division by zero")


def _trunc_div(x, y):
    if _is_int(np.result_type(x, y)):
        q = np.floor_divide(x, y)
        fix = (np.remainder(x, y) != 0) & ((x < 0) != (y < 0))
        return q + fix.astype(q.dtype)
    return np.trunc(x / y)


def _floor_div(x, y):
    if _is_int(np.result_type(x, y)):
        return np.floor_divide(x, y)
    return np.floor(x / y)


def _floor_mod(x, y):
    if _is_int(np.result_type(x, y)):
        return np.remainder(x, y)
    trunc = np.fmod(x, y)
    return np.where((trunc != 0) & ((y < 0) != (trunc < 0)), trunc + y, trunc)


def _div(x, y):
    return _trunc_div(x, y) if _is_int(np.result_type(x, y)) else np.true_divide(x, y)


def _div_no_nan(x, y):
    zero = y == 0
    return np.where(zero, 0, np.true_divide(x, np.where(zero, 1, y)))


def _pow(x, y):
    if _is_int(np.result_type(x, y)) and np.any(y < 0):
        raise invalid("Integers to negative integer powers are not allowed")
    return np.power(x, y)


def _shift(fn):
    def compute(x, y):
        bits = x.dtype.itemsize * 8
        return fn(x, np.clip(y, 0, bits - 1).astype(x.dtype))

    return compute


def _squared_difference(x, y):
    d = np.subtract(x, y)
    return d * np.conj(d) if d.dtype.kind == "c" else d * d


_BINARY = {
    "Add": (np.add, False, False),
    "AddV2": (np.add, False, False),
    "Sub": (np.subtract, False, False),
    "Mul": (np.multiply, False, False),
    "MulNoNan": (lambda x, y: np.where(y == 0, 0, np.multiply(x, y)), False, False),
    "Div": (_div, True, False),
    "RealDiv": (_div, True, False),
    "DivNoNan": (_div_no_nan, False, True),
    "FloorDiv": (_floor_div, True, False),
    "FloorMod": (_floor_mod, True, False),
    "TruncateDiv": (_trunc_div, "internal", False),
    "TruncateMod": (np.fmod, "internal", False),
    "Mod": (np.fmod, True, False),
    "Pow": (_pow, False, True),
    "Maximum": (np.maximum, False, False),
    "Minimum": (np.minimum, False, False),
    "SquaredDifference": (_squared_difference, False, False),
    "Atan2": (np.arctan2, False, True),
    "Xdivy": (lambda x, y: np.where(x == 0, 0, x / np.where(x == 0, 1, y)), False, True),
    "Xlogy": (lambda x, y: np.where(x == 0, 0, x * np.log(np.where(x == 0, 1, y))), False, True),
    "Xlog1py": (lambda x, y: np.where(x == 0, 0, x * np.log1p(np.where(x == 0, 0, y))), False, True),
    "BitwiseAnd": (np.bitwise_and, False, False),
    "BitwiseOr": (np.bitwise_or, False, False),
    "BitwiseXor": (np.bitwise_xor, False, False),
    "LeftShift": (_shift(np.left_shift), False, False),
    "RightShift": (_shift(np.right_shift), False, False),
}


def _binary(fn, int_divisor: bool, via_float32: bool):
    if isinstance(fn, np.ufunc) and not int_divisor and not via_float32:
        return _binary_ufunc(fn)

    def compute(x, y):
        if type(x) is not np.ndarray:  # the common case, ndarrays, touches no numpy code here
            x = np.asarray(x)
        if type(y) is not np.ndarray:
            y = np.asarray(y)
        if x.shape != y.shape and x.ndim and y.ndim:  # equal shapes and scalars always broadcast
            broadcast(x, y)
        if int_divisor:
            _check_int_divisor(y, internal=int_divisor == "internal")
        if via_float32 and _low_precision(x.dtype):
            return out(fn(x.astype(np.float32), y.astype(np.float32)), x.dtype)
        result = fn(x, y)
        # The common case, an ndarray of x's dtype, needs no conversion (numpy scalars do).
        return result if type(result) is np.ndarray and result.dtype == x.dtype else out(result, x.dtype)

    return compute


def _binary_ufunc(fn: np.ufunc):
    """``_binary`` of a plain ufunc: numpy broadcasts as TF does, so shapes are checked only
    when numpy refuses them (for TF's error text), not before every call."""

    def compute(x, y):
        if type(x) is not np.ndarray:
            x = np.asarray(x)
        if type(y) is not np.ndarray:
            y = np.asarray(y)
        try:
            result = fn(x, y)
        except ValueError:
            broadcast(x, y)  # raises TF's error where the shapes do not broadcast
            raise
        # The common case, an ndarray of x's dtype, needs no conversion (numpy scalars do).
        if type(result) is np.ndarray and (result.dtype is x.dtype or result.dtype == x.dtype):
            return result
        return out(result, x.dtype)

    return compute


for _op, (_fn, _int_div, _via32) in _BINARY.items():
    kernel(_op)(_binary(_fn, _int_div, _via32))


@kernel("AddN")
def add_n(inputs, *, ctx=None):
    total = np.array(inputs[0], copy=True)
    with np.errstate(all="ignore"):
        for i, value in enumerate(inputs[1:], 1):
            if value.shape != total.shape:
                raise invalid(
                    f"Inputs to operation {node_name(ctx)} of type AddN must have the same size and shape.  Input 0: "
                    f"{shape_str(total.shape)} != input {i}: {shape_str(value.shape)}"
                )
            total = total + value
    return out(total, inputs[0].dtype)


@kernel("ClipByValue")
def clip_by_value(t, clip_value_min, clip_value_max):
    for bound in (clip_value_min, clip_value_max):
        if bound.ndim and bound.shape != t.shape:
            raise invalid(
                "clip_value_min and clip_value_max must be either of the same shape as input, or a scalar. "
                f"input shape: {shape_str(t.shape)}clip_value_min shape: {shape_str(clip_value_min.shape)}"
                f"clip_value_max shape: {shape_str(clip_value_max.shape)}"
            )
    return out(np.minimum(np.maximum(t, clip_value_min), clip_value_max), t.dtype)


# --------------------------------------------------------------------------- comparisons


def _compare(fn):
    def compute(x, y):
        x, y = np.asarray(x), np.asarray(y)
        broadcast(x, y)
        return out(fn(x, y), np.bool_)

    return compute


for _op, _fn in {
    "Less": np.less,
    "LessEqual": np.less_equal,
    "Greater": np.greater,
    "GreaterEqual": np.greater_equal,
    "LogicalAnd": np.logical_and,
    "LogicalOr": np.logical_or,
}.items():
    kernel(_op)(_compare(_fn))


def _equality(x, y, incompatible_shape_error, fn, mismatch):
    x, y = np.asarray(x), np.asarray(y)
    if not incompatible_shape_error:
        try:
            np.broadcast_shapes(x.shape, y.shape)
        except ValueError:
            return out(mismatch, np.bool_)
    broadcast(x, y)
    return out(fn(x, y), np.bool_)  # strings: numpy's object loop compares element by element


@kernel("Equal")
def equal(x, y, *, incompatible_shape_error=True):
    return _equality(x, y, incompatible_shape_error, np.equal, False)


@kernel("NotEqual")
def not_equal(x, y, *, incompatible_shape_error=True):
    return _equality(x, y, incompatible_shape_error, np.not_equal, True)


@kernel("ApproximateEqual")
def approximate_equal(x, y, *, tolerance=1e-5):
    if x.shape != y.shape:
        raise invalid(
            f"x and y must be of the same shape. x shape: {shape_str(x.shape)}. y shape: {shape_str(y.shape)}"
        )
    return out(np.abs(x - y) < tolerance, np.bool_)


# --------------------------------------------------------------------------- Cast


@kernel("Cast")
def cast(x, *, SrcT=None, DstT=dtypes.DT_FLOAT, Truncate=False):
    x = np.asarray(x)
    dst = dtypes.as_numpy_dtype(DstT)
    if x.dtype.kind in "biu" and (dst.kind in "iu" or dst.char in "fd"):  # float32/64 hold any int
        return out(x.astype(dst), dst)  # exact or wrapping as in C++, never a warning: no errstate
    src_is_string = x.dtype == object
    if src_is_string != (DstT == dtypes.DT_STRING):
        src_name = dtypes.name(SrcT) if SrcT is not None else str(x.dtype)
        raise UnimplementedError(None, None, f"Cast {src_name} to {dtypes.name(DstT)} is not supported")
    if src_is_string:
        return x.copy()
    if x.dtype.kind == "c" and dst.kind != "c":
        x = x.real
    if dst == np.bool_:
        return out(x != 0, np.bool_)
    with np.errstate(all="ignore"):
        if (x.dtype.kind == "f" or _low_precision(x.dtype)) and dst.kind in "iu":
            return _float_to_int(x, dst)
        return out(x.astype(dst), dst)


def _float_to_int(x: np.ndarray, dst: np.dtype) -> np.ndarray:
    """x86's truncating conversion, as TF's CPU Cast compiles to: toward zero; NaN and values out
    of the int32 (int64 for 8-byte targets) range become that type's minimum; narrower targets
    then wrap from the int32 value, as C++'s static_cast through int does."""
    wide = np.dtype(np.int64) if dst.itemsize == 8 or dst == np.dtype(np.uint32) else np.dtype(np.int32)
    info = np.iinfo(wide)
    t = np.trunc(x.astype(np.float64))
    bad = np.isnan(t) | (t >= 2.0 ** (info.bits - 1)) | (t < -(2.0 ** (info.bits - 1)))
    converted = np.where(bad, 0, t).astype(wide)
    converted[bad] = info.min
    return out(converted.astype(dst), dst)


# --------------------------------------------------------------------------- complex, bits, misc


@kernel("Complex")
def complex_(real, imag, *, Tout=dtypes.DT_COMPLEX64):
    broadcast(real, imag)
    return out(real + 1j * imag, dtypes.as_numpy_dtype(Tout))


@kernel("Angle")
def angle(input, *, Tout=dtypes.DT_FLOAT):  # noqa: A002
    return out(np.angle(input), dtypes.as_numpy_dtype(Tout))


@kernel("PopulationCount")
def population_count(x):
    unsigned = x.view(np.dtype(f"u{x.dtype.itemsize}"))  # numpy counts |x| for signed types
    return out(np.bitwise_count(unsigned), np.uint8)


@kernel("Cross")
def cross(a, b):
    if a.shape != b.shape:
        raise invalid(f"a and b must be the same shape: {shape_str(a.shape)} vs {shape_str(b.shape)}")
    if a.ndim == 0 or a.shape[-1] != 3:
        raise FailedPreconditionError(None, None, "Cross-products are only defined for 3-element vectors.")
    return out(np.cross(a, b), a.dtype)


# --------------------------------------------------------------------------- gradients
# Keras exports carry these in gradient functions; a few inference graphs (TF1 exports of training
# graphs) reach them too.


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _grad(fn):
    def compute(a, b):
        with np.errstate(all="ignore"):
            return out(fn(a.astype(np.float32) if _low_precision(a.dtype) else a, b), a.dtype)

    return compute


for _op, _fn in {
    "SigmoidGrad": lambda y, dy: dy * y * (1 - y),
    "TanhGrad": lambda y, dy: dy * (1 - y * y),
    "RsqrtGrad": lambda y, dy: dy * (-0.5 * y * y * y),
    "SqrtGrad": lambda y, dy: dy * 0.5 / y,
    "ReciprocalGrad": lambda y, dy: -dy * y * y,
    "InvGrad": lambda y, dy: -dy * y * y,
    "ReluGrad": lambda g, f: np.where(f > 0, g, 0),
    "Relu6Grad": lambda g, f: np.where((f > 0) & (f < 6), g, 0),
    "EluGrad": lambda g, o: np.where(o < 0, g * (o + 1), g),
    "SeluGrad": lambda g, o: np.where(o < 0, g * (o + _SELU_SCALE * _SELU_ALPHA), g * _SELU_SCALE),
    "SoftplusGrad": lambda g, f: g / (1 + np.exp(-f)),
    "SoftsignGrad": lambda g, f: g / np.square(1 + np.abs(f)),
}.items():
    kernel(_op)(_grad(_fn))


@kernel("LeakyReluGrad")
def leaky_relu_grad(gradients, features, *, alpha=0.2):
    return out(
        np.where(features > 0, gradients, gradients * np.asarray(alpha, gradients.dtype)), gradients.dtype
    )


@kernel("AccumulateNV2")
def accumulate_n_v2(inputs, *, shape=None, ctx=None):
    return add_n(inputs, ctx=ctx)


@kernel("NextAfter")
def next_after(x1, x2):
    broadcast(x1, x2)
    return out(np.nextafter(x1, x2), x1.dtype)


@kernel("CheckNumericsV2")
def check_numerics_v2(tensor, *, message):
    if tensor.dtype.kind != "f" and not _low_precision(tensor.dtype):
        return tensor
    values = tensor.astype(np.float32) if _low_precision(tensor.dtype) else tensor
    found = [
        name
        for name, present in (
            ("-Inf", np.any(values == -np.inf)),
            ("+Inf", np.any(values == np.inf)),
            ("NaN", np.any(np.isnan(values))),
        )
        if present
    ]
    if found:
        raise invalid(f"{message} : Tensor had {' and '.join(found)} values")
    return tensor
