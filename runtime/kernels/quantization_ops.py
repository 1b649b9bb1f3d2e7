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
    return out(np.floor(shifted / scale + np.float32(0.5)) * scale + nudged_min, np.float32)


@kernel("FakeQuantWithMinMaxArgs")
def fake_quant_with_min_max_args(inputs, *, min=-6.0, max=6.0, num_bits=8, narrow_range=False):  # noqa: A002
    if min >= max:
        raise invalid(f"min has to be smaller than max, was: {min} >= {max}")
    return _fake_quant(inputs, min, max, num_bits, narrow_range)


@kernel("FakeQuantWithMinMaxVars")
def fake_quant_with_min_max_vars(inputs, min, max, *, num_bits=8, narrow_range=False):  # noqa: A002
    return _fake_quant(inputs, min, max, num_bits, narrow_range)


@kernel("FakeQuantWithMinMaxVarsPerChannel")
def fake_quant_with_min_max_vars_per_channel(inputs, min, max, *, num_bits=8, narrow_range=False):  # noqa: A002
    if min.shape != (inputs.shape[-1],) or max.shape != min.shape:
        raise invalid("min and max must be 1-D with size equal to the last dimension of inputs")
    return _fake_quant(inputs, min, max, num_bits, narrow_range)
