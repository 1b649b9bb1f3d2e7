"""Math kernel checks beyond the op records: special functions against Python's ``math`` on dense
grids (the records sample them against TF), registry data of the families, random kernels.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from runtime import dtypes
from runtime.kernels import load_all, lookup
from runtime.kernels.special_math_ops import digamma64, erf64, erfc64, lgamma64

KERNELS = load_all()  # the whole registry: these tests call kernels by op type

GRID = np.linspace(-9, 9, 20001)


@pytest.mark.parametrize(
    "ours,reference,rtol",
    [(erf64, math.erf, 1e-14), (erfc64, math.erfc, 1e-11), (lgamma64, math.lgamma, 1e-10)],
    ids=["erf", "erfc", "lgamma"],
)
def test_special_functions_in_double_precision(ours, reference, rtol):
    xs = GRID[~((GRID <= 0) & (GRID == np.floor(GRID)))]
    expected = np.array([reference(v) for v in xs])
    np.testing.assert_allclose(ours(xs), expected, rtol=rtol, atol=1e-300 if ours is not lgamma64 else 1e-11)


def test_digamma_by_its_recurrence_and_known_values():
    xs = np.linspace(0.1, 30, 500)
    np.testing.assert_allclose(digamma64(xs + 1) - digamma64(xs), 1 / xs, rtol=1e-10, atol=1e-12)
    euler_gamma = 0.5772156649015329
    np.testing.assert_allclose(
        digamma64(np.array([1.0, 0.5])), [-euler_gamma, -euler_gamma - 2 * math.log(2)], rtol=1e-12
    )


# Inputs that are shapes, axes or sizes must be known before a run (ONNX conversion, shape
# inference): the registry says which, per op.
CONST_INPUTS = {
    "Reshape": (1,),
    "ExpandDims": (1,),
    "Fill": (0,),
    "Tile": (1,),
    "Transpose": (1,),
    "ConcatV2": (1,),
    "Split": (0,),
    "SplitV": (1, 2),
    "Slice": (1, 2),
    "StridedSlice": (1, 2, 3),
    "Pad": (1,),
    "PadV2": (1,),
    "MirrorPad": (1,),
    "Sum": (1,),
    "Mean": (1,),
    "Max": (1,),
    "ArgMax": (1,),
    "GatherV2": (2,),
    "BroadcastTo": (1,),
    "OneHot": (1,),
    "TopKV2": (1,),
    "ResizeBilinear": (1,),
    "ResizeNearestNeighbor": (1,),
    "UnsortedSegmentSum": (2,),
    "Conv2DBackpropInput": (0,),
    "MaxPoolV2": (1, 2),
    "Cumsum": (1,),
    "ReverseV2": (1,),
    "SpaceToBatchND": (1, 2),
    "BatchToSpaceND": (1, 2),
}


@pytest.mark.parametrize("op,indices", sorted(CONST_INPUTS.items()))
def test_const_inputs_are_registry_data(op, indices):
    assert lookup(op).const_inputs == indices


@pytest.mark.parametrize(
    "op", ["RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt"]
)
def test_random_kernels_are_stateful(op):
    assert lookup(op).stateful


# The dense-math families: nothing in them reads or writes state, so the Session may fold and
# cache them freely. (special_math_ops registers math_ops closures, so it counts as math_ops.)
PURE_FAMILIES = {
    "math_ops",
    "reduction_ops",
    "array_ops",
    "concat_ops",
    "permute_ops",
    "selection_ops",
    "indexing_ops",
    "layout_ops",
    "data_flow_ops",
    "nn_ops",
    "conv_ops",
    "image_ops",
    "image_color_ops",
    "non_max_suppression_ops",
    "linalg_ops",
    "spectral_ops",
    "quantization_ops",
}


def test_dense_math_kernels_are_not_stateful():
    families = {op: k.fn.__module__.rsplit(".", 1)[-1] for op, k in KERNELS.items()}
    assert PURE_FAMILIES <= set(families.values())
    assert not [op for op, family in families.items() if family in PURE_FAMILIES and KERNELS[op].stateful]


def test_stateless_random_kernels_are_pure():
    # Counter-based: same key, counter and shape give the same values, so they are not stateful.
    assert not lookup("StatelessRandomUniformV2").stateful


def test_random_uniform_shape_dtype_and_range():
    value = lookup("RandomUniform").fn(np.array([1000, 3], np.int32), dtype=dtypes.DT_FLOAT, seed=1, seed2=2)
    assert value.shape == (1000, 3) and value.dtype == np.float32
    assert 0 <= value.min() and value.max() < 1 and abs(value.mean() - 0.5) < 0.05


def test_truncated_normal_stays_within_two_sigma():
    value = lookup("TruncatedNormal").fn(np.array([10000], np.int64), dtype=dtypes.DT_DOUBLE)
    assert value.dtype == np.float64 and np.abs(value).max() <= 2


def test_random_uniform_int_range():
    value = lookup("RandomUniformInt").fn(np.array([500], np.int32), np.int64(-3), np.int64(4), seed=5)
    assert value.dtype == np.int64 and value.min() >= -3 and value.max() < 4


def test_multinomial_draws_valid_classes():
    logits = np.log(np.array([[0.7, 0.2, 0.1], [0.0, 0.0, 1.0]], np.float32) + 1e-30)
    value = lookup("Multinomial").fn(logits, np.int32(2000), seed=3, seed2=4)
    assert value.shape == (2, 2000) and value.dtype == np.int64
    assert abs((value[0] == 0).mean() - 0.7) < 0.05 and np.all(value[1] == 2)
    assert lookup("Multinomial").stateful and not lookup("StatelessMultinomial").stateful
