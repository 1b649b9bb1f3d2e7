"""Stateful random kernels (RandomUniform, RandomStandardNormal, TruncatedNormal, RandomUniformInt).

TF draws from Philox; these draw from numpy's PCG64 seeded from the op's ``seed``/``seed2``. The
distributions match TF's, the bits do not: a model that serves random values (dropout at
inference time, initialisers run by an init op) gets values of the same law, never TF's values.
"""

from __future__ import annotations

import numpy as np

from runtime import dtypes
from runtime.kernels.math_ops import invalid, out
from runtime.kernels.registry import kernel


def _generator(seed: int, seed2: int) -> np.random.Generator:
    return np.random.default_rng(None if seed == 0 and seed2 == 0 else (seed, seed2))


def _shape(shape) -> list[int]:
    dims = [int(v) for v in np.asarray(shape).reshape(-1)]
    if any(d < 0 for d in dims):
        raise invalid(f"Dimension {min(dims)} must be >= 0")
    return dims


@kernel("RandomUniform", stateful=True, const_inputs=(0,))
def random_uniform(shape, *, dtype, seed=0, seed2=0):
    return out(_generator(seed, seed2).random(_shape(shape)), dtypes.as_numpy_dtype(dtype))


@kernel("RandomStandardNormal", stateful=True, const_inputs=(0,))
def random_standard_normal(shape, *, dtype, seed=0, seed2=0):
    return out(_generator(seed, seed2).standard_normal(_shape(shape)), dtypes.as_numpy_dtype(dtype))


@kernel("TruncatedNormal", stateful=True, const_inputs=(0,))
def truncated_normal(shape, *, dtype, seed=0, seed2=0):
    rng = _generator(seed, seed2)
    values = rng.standard_normal(_shape(shape))
    bad = np.abs(values) > 2
    while np.any(bad):  # resample the (rare) draws beyond two standard deviations, as TF does
        values[bad] = rng.standard_normal(int(bad.sum()))
        bad = np.abs(values) > 2
    return out(values, dtypes.as_numpy_dtype(dtype))


@kernel("RandomUniformInt", stateful=True, const_inputs=(0,))
def random_uniform_int(shape, minval, maxval, *, seed=0, seed2=0):
    lo, hi = int(np.asarray(minval)), int(np.asarray(maxval))
    if lo >= hi:
        raise invalid(f"Need minval < maxval: {lo} >= {hi}")
    return out(_generator(seed, seed2).integers(lo, hi, _shape(shape)), minval.dtype)
