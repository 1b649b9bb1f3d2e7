"""Fake quantization kernels (FakeQuantWithMinMaxArgs/Vars/VarsPerChannel), TF's nudged grid.

TF nudges ``[min, max]`` so that zero is exactly representable, then rounds each clamped input to
the grid ``nudged_min + k * scale``; all arithmetic is float32, as in ``fake_quant_ops_functor.h``.
"""

from __future__ import annotations

import numpy as np

from runtime.kernels.math_ops import invalid, out
from runtime.kernels.registry import kernel


def _nudge(min_value, max_value, num_bits: int, narrow_range: bool):
    quant_min = np.float32(1 if narrow_range else 0)
    quant_max = np.float32((1 << num_bits) - 1)
    lo, hi = np.float32(min_value), np.float32(max_value)
    scale = (hi - lo) / (quant_max - quant_min)
    zero_from_min = quant_min - lo / scale
    # std::round: half away from zero.
    rounded = np.sign(zero_from_min) * np.floor(np.abs(zero_from_min) + np.float32(0.5))
    nudged_zero = np.clip(rounded, quant_min, quant_max).astype(np.float32)
    nudged_zero = np.where(
        zero_from_min < quant_min, quant_min, np.where(zero_from_min > quant_max, quant_max, nudged_zero)
    )
    return (quant_min - nudged_zero) * scale, (quant_max - nudged_zero) * scale, scale


def _fake_quant(x, min_value, max_value, num_bits, narrow_range):
    if not 2 <= num_bits <= 16:
        raise invalid(f"num_bits is out of range, expected between 2 and 16, was: {num_bits}")
    nudged_min, nudged_max, scale = _nudge(min_value, max_value, num_bits, narrow_range)
    x = np.asarray(x, np.float32)
    shifted = np.clip(x, nudged_min, nudged_max) - nudged_min
    inverse = np.float32(1) / scale  # TF multiplies by the inverse scale
    return out(np.floor(shifted * inverse + np.float32(0.5)) * scale + nudged_min, np.float32)


@kernel("FakeQuantWithMinMaxArgs")
def fake_quant_with_min_max_args(inputs, *, min=-6.0, max=6.0, num_bits=8, narrow_range=False):  # noqa: A002
    if min >= max:
        raise invalid(f"min has to be smaller than max, was: {min:g} >= {max:g}")
    return _fake_quant(inputs, min, max, num_bits, narrow_range)


@kernel("FakeQuantWithMinMaxVars")
def fake_quant_with_min_max_vars(inputs, min, max, *, num_bits=8, narrow_range=False):  # noqa: A002
    return _fake_quant(inputs, min, max, num_bits, narrow_range)


@kernel("FakeQuantWithMinMaxVarsPerChannel")
def fake_quant_with_min_max_vars_per_channel(inputs, min, max, *, num_bits=8, narrow_range=False):  # noqa: A002
    if min.shape != (inputs.shape[-1],) or max.shape != min.shape:
        raise invalid("min and max must be 1-D with size equal to the last dimension of inputs")
    return _fake_quant(inputs, min, max, num_bits, narrow_range)


def _quantize_and_dequantize(
    x, input_min, input_max, signed_input, num_bits, range_given, round_mode, narrow_range, axis
):
    if not 1 <= num_bits <= 63:
        raise invalid(f"num_bits is out of range: {num_bits} with signed_input_ {signed_input}")
    if axis != -1 and not 0 <= axis < x.ndim:
        raise invalid(
            f"Axis requested is larger than input dimensions. Axis: {axis} Input Dimensions: {x.ndim}"
        )
    reduce_axes = None if axis == -1 else tuple(a for a in range(x.ndim) if a != axis)
    shape = [1] * x.ndim
    if axis != -1:
        shape[axis] = -1
    for name, bound in (("input_min", input_min), ("input_max", input_max)):
        bound = np.asarray(bound)
        if axis == -1 and bound.ndim:
            raise invalid(f"{name} must be a scalar.")
        if axis != -1 and bound.ndim and bound.shape != (x.shape[axis],):
            raise invalid(f"{name} has incorrect size, expected {x.shape[axis]} was {bound.size}")
    if range_given:
        lo = np.asarray(input_min, x.dtype).reshape(shape if axis != -1 else ())
        hi = np.asarray(input_max, x.dtype).reshape(shape if axis != -1 else ())
        if np.any(lo > hi):
            raise invalid(f"Invalid range: input_min {float(np.min(lo)):g} > input_max {float(np.max(hi)):g}")
    else:
        lo = np.min(x, axis=reduce_axes, keepdims=axis != -1) if x.size else np.zeros((), x.dtype)
        hi = np.max(x, axis=reduce_axes, keepdims=axis != -1) if x.size else np.zeros((), x.dtype)
    dtype = x.dtype
    q_min = (-(1 << (num_bits - 1)) + (1 if narrow_range else 0)) if signed_input else 0
    q_max = ((1 << (num_bits - 1)) - 1) if signed_input else (1 << num_bits) - 1
    q_min, q_max = np.asarray(q_min, dtype), np.asarray(q_max, dtype)
    big = np.finfo(dtype).max
    with np.errstate(all="ignore"):
        from_min = np.where(q_min * lo > 0, q_min / lo, big)
        from_max = np.where(q_max * hi > 0, q_max / hi, big)
        use_min = from_min < from_max
        scale = np.where(use_min, from_min, from_max).astype(dtype)
        inverse = np.where(use_min, lo / q_min, hi / q_max).astype(dtype)
        lo = np.where(use_min, lo, q_min * inverse).astype(dtype)
        hi = np.where(use_min, q_max * inverse, hi).astype(dtype)
        # Only a given range clamps: a computed one already holds every value (one side widened).
        clamped = np.minimum(np.maximum(x, lo), hi) if range_given else x
        scaled = clamped * scale
        rounded = (
            np.rint(scaled) if round_mode == "HALF_TO_EVEN" else np.floor(scaled + np.asarray(0.5, dtype))
        )
        return out(rounded * inverse, dtype)


@kernel("QuantizeAndDequantizeV2", "QuantizeAndDequantizeV4")
def quantize_and_dequantize_v2(
    input,  # noqa: A002
    input_min,
    input_max,
    *,
    signed_input=True,
    num_bits=8,
    range_given=False,
    round_mode="HALF_TO_EVEN",
    narrow_range=False,
    axis=-1,
):
    return _quantize_and_dequantize(
        input, input_min, input_max, signed_input, num_bits, range_given, round_mode, narrow_range, axis
    )


@kernel("QuantizeAndDequantizeV3")
def quantize_and_dequantize_v3(
    input,  # noqa: A002
    input_min,
    input_max,
    num_bits,
    *,
    signed_input=True,
    range_given=True,
    narrow_range=False,
    axis=-1,
):
    return _quantize_and_dequantize(
        input,
        input_min,
        input_max,
        signed_input,
        int(np.asarray(num_bits)),
        range_given,
        "HALF_TO_EVEN",
        narrow_range,
        axis,
    )
