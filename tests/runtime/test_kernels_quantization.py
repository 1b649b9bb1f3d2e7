"""Per-channel QuantizeAndDequantizeV2/V4, which TF 2.15 computes and TF 2.21's CPU kernels reject
("input_min must be a scalar."): QAT models exported by 2.15 carry it, so the kernel keeps 2.15's
semantics. The expected values are TF 2.15.1's outputs for these inputs (op records evaluated in
the tf215 oracle venv), copied here because the op-record oracle is TF 2.21.
"""

from __future__ import annotations

import numpy as np
import pytest

from runtime import errors
from runtime.kernels import lookup

LOWER = np.array([-1.0, -2.0, -0.5, -3.0], np.float32)
UPPER = np.array([1.0, 0.5, 2.0, 3.0], np.float32)

CASES = [
    (
        "QuantizeAndDequantizeV4",
        [
            [-2.6027724742889404, -1.3857080936431885, -0.7325121164321899, 1.4354931116104126],
            [-1.9489166736602783, 1.9562931060791016, 1.1801694631576538, 1.621017575263977],
            [1.5295857191085815, 1.7576395273208618, 1.164654016494751, -0.08363457024097443],
        ],
        [
            [-1.0078740119934082, -1.390625, -0.7401574850082397, 1.4409449100494385],
            [-1.0078740119934082, 1.953125, 1.1811023950576782, 1.6299211978912354],
            [1.0, 1.75, 1.1653543710708618, -0.09448818862438202],
        ],
    ),
    (
        "QuantizeAndDequantizeV2",
        [
            [-2.1764028072357178, -2.6091017723083496, -2.5091450214385986, -0.8452417850494385],
            [-1.9165412187576294, -0.7243762016296387, 2.1992101669311523, -2.3685309886932373],
            [-2.3445351123809814, -1.8167307376861572, 0.7896899580955505, -1.842653751373291],
        ],
        [
            [-1.0078740119934082, -2.0, -2.0157480239868164, -0.8503937125205994],
            [-1.0078740119934082, -0.71875, 2.0, -2.3622047901153564],
            [-1.0078740119934082, -1.8125, 0.787401556968689, -1.8425196409225464],
        ],
    ),
]


@pytest.mark.parametrize("op,inputs,expected", CASES, ids=[c[0] for c in CASES])
def test_per_channel_bounds_as_tf_2_15(op, inputs, expected):
    x = np.array(inputs, np.float32)
    y = lookup(op).fn(x, LOWER, UPPER, range_given=True, axis=1)
    np.testing.assert_array_equal(y, np.array(expected, np.float32))


def test_per_channel_bounds_must_match_the_axis():
    with pytest.raises(errors.InvalidArgumentError):
        lookup("QuantizeAndDequantizeV2").fn(
            np.zeros((3, 4), np.float32), LOWER[:3], UPPER[:3], range_given=True, axis=1
        )


def test_per_tensor_bounds_must_be_scalars():
    with pytest.raises(errors.InvalidArgumentError, match="input_min must be a scalar."):
        lookup("QuantizeAndDequantizeV2").fn(np.zeros((3, 4), np.float32), LOWER, UPPER, range_given=True)
