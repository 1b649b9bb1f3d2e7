"""NHWC ops on their NCHW twins: a network's convolutions, biases, norms and activations in one layout.

TF's layout is NHWC, ONNX's Conv and pooling are NCHW, so each converted convolution sits between
two Transposes. Left so, the ops between convolutions run on NHWC tensors: onnxruntime adds a
per-channel bias or batch norm to them about ten times slower than to NCHW ones (a broadcast
loop per pixel over a few channels), and cannot fold them into the Conv. So converters of
layout-free ops ask here first: where their input is the NHWC ``Transpose`` of an NCHW value
(``Builder.nchw``), they apply to that value -- per-channel constants reshaped to ``[C, 1, 1]``
-- and give the Transpose of their result, itself recorded. Chains of Conv, bias, batch norm,
activation and pooling then stay NCHW; onnxruntime folds the bias and norm into the Conv, and
each Transpose nobody else reads is pruned (``convert_subgraph``).
"""

from __future__ import annotations

import numpy as np

from runtime.onnx.converter import Builder

TO_NCHW = [0, 3, 1, 2]
TO_NHWC = [0, 2, 3, 1]


def to_nchw(b: Builder, x: str) -> str:
    """The NCHW form of the NHWC value ``x``."""
    return b.nchw.get(x) or b.op("Transpose", [x], perm=TO_NCHW, rank=4)


def from_nchw(b: Builder, y: str) -> str:
    """The NHWC form of the NCHW value ``y``, recorded as its twin."""
    out = b.op("Transpose", [y], perm=TO_NHWC, rank=4)
    b.nchw[out] = y
    return out


def unary(b: Builder, op_type: str, x: str, **attrs) -> str | None:
    """``op_type(x)`` on x's NCHW twin, or None where x has none."""
    twin = b.nchw.get(x)
    return None if twin is None else from_nchw(b, b.op(op_type, [twin], rank=4, **attrs))


def channelwise(b: Builder, op_type: str, a: str, c: str) -> str | None:
    """``op_type(a, c)`` on the NCHW twin of whichever of a and c has one, the other a constant
    scalar or per-channel vector (any leading 1s); None otherwise."""
    for x, other, first in ((a, c, True), (c, a, False)):
        twin = b.nchw.get(x)
        value = b.values[other].const
        if twin is None or value is None or value.ndim > 4 or any(d != 1 for d in value.shape[:-1]):
            continue
        per_channel = b.const(value.reshape(-1, 1, 1) if value.ndim else value, "channels")
        inputs = [twin, per_channel] if first else [per_channel, twin]
        return from_nchw(b, b.op(op_type, inputs, rank=4))
    return None


def global_pool(b: Builder, op_type: str, x: str, axes, keep: int) -> str | None:
    """A reduction over H and W of an NHWC value with an NCHW twin, without keeping them: the
    same [N, C] from the twin's axes 2 and 3 (no Transpose of the whole map); None otherwise."""
    twin = b.nchw.get(x)
    if twin is None or keep or axes is None:
        return None
    if sorted(int(a) % 4 for a in np.asarray(axes).reshape(-1)) != [1, 2]:
        return None
    return b.op(op_type, [twin, b.int64s([2, 3], "axes")], keepdims=0, rank=2)
