"""NHWC ops on their NCHW twins: a network's convolutions, biases, norms and activations in one layout.

TF's layout is NHWC, ONNX's Conv and pooling are NCHW, so each converted convolution sits between
two Transposes. Left so, the ops between convolutions run on NHWC tensors: onnxruntime adds a
per-channel bias or batch norm to them about ten times slower than to NCHW ones (a broadcast
loop per pixel over a few channels), and cannot fold them into the Conv. So converters of
layout-free ops ask here first: where their input is the NHWC ``Transpose`` of an NCHW value
(``Builder.nchw``), they apply to that value -- per-channel constants reshaped to ``[C, 1, 1]``
-- and give the Transpose of their result, itself recorded. Chains of Conv, bias, batch norm,
activation, padding, pooling, residual adds, channel concatenations and squeeze-excite gates then
stay NCHW; onnxruntime folds the bias, norm and padding into the Conv, and each Transpose nobody
else reads is pruned (``convert_subgraph``).
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
    """``op_type(a, c)`` on NCHW twins: see ``elementwise``."""
    return elementwise(b, op_type, [a, c])


def elementwise(b: Builder, op_type: str, inputs: list[str], **attrs) -> str | None:
    """An elementwise ``op_type`` of the inputs on their NCHW twins, where each input has one
    (the same permutation of both operands keeps numpy broadcasting: a residual add, a
    squeeze-excite gate of shape [N, 1, 1, C]) or is a constant scalar or per-channel vector (any
    leading 1s; reshaped to [C, 1, 1]), and one at least has a twin; None otherwise."""
    mapped, twinned = [], False
    for x in inputs:
        twin = b.nchw.get(x)
        if twin is not None:
            mapped.append(twin)
            twinned = True
            continue
        value = b.values[x].const
        if value is None or value.ndim > 4 or any(d != 1 for d in value.shape[:-1]):
            return None
        mapped.append(b.const(value.reshape(-1, 1, 1) if value.ndim else value, "channels"))
    if not twinned:
        return None
    return from_nchw(b, b.op(op_type, mapped, rank=4, **attrs))


def pad(b: Builder, x: str, paddings: np.ndarray, extra: list[str]) -> str | None:
    """A constant Pad of an NHWC value with an NCHW twin, on the twin (onnxruntime then folds a
    zero spatial padding into the Conv after it); None where x has no twin."""
    twin = b.nchw.get(x)
    if twin is None or paddings.shape[0] != 4:
        return None
    paddings = paddings[TO_NCHW]
    pads = b.int64s(np.concatenate([paddings[:, 0], paddings[:, 1]]), "pads")
    padded = b.op("Pad", [twin, pads, *extra], mode="constant", rank=4)
    value = b.values[extra[0]].const if extra else np.zeros(())
    if value is not None and not np.any(value) and not paddings[:2].any() and (paddings >= 0).all():
        (top, bottom), (left, right) = paddings[2:].tolist()
        b.zero_pads[padded] = (twin, [top, left, bottom, right])
    return from_nchw(b, padded)


def unpadded(b: Builder, x: str, pads: dict) -> tuple[str, dict]:
    """A convolution's NCHW input and ONNX padding attrs, a zero Pad before it (Keras'
    ZeroPadding2D) folded into its explicit pads where its own padding is VALID or explicit
    (onnxruntime folds no Pad of opset 21 itself)."""
    source = b.zero_pads.get(x)
    if source is None or pads.get("auto_pad", "NOTSET") not in ("VALID", "NOTSET"):
        return x, pads
    inner, extra = source
    own = pads.get("pads", [0, 0, 0, 0])
    return inner, {"pads": [int(a) + int(e) for a, e in zip(own, extra)]}


def slice_(b: Builder, x: str, spans: dict[str, list[int]]) -> str | None:
    """A Slice of an NHWC value with an NCHW twin (``spans``: ONNX Slice's starts, ends, axes and
    steps), on the twin: NASNet's Cropping2D, between a padding and a pooling, stays NCHW."""
    twin = b.nchw.get(x)
    if twin is None or b.rank(x) != 4:
        return None
    axes = [TO_NCHW.index(int(a) % 4) for a in spans["axes"]]
    bounds = [b.int64s(spans[k], k) for k in ("starts", "ends")]
    sliced = b.op("Slice", [twin, *bounds, b.int64s(axes, "axes"), b.int64s(spans["steps"], "steps")], rank=4)
    return from_nchw(b, sliced)


def concat(b: Builder, values: list[str], axis: int) -> str | None:
    """A channel concatenation (axis 3 or -1) of NHWC values that all have NCHW twins, on the
    twins (axis 1); None otherwise."""
    twins = [b.nchw.get(v) for v in values]
    if axis not in (3, -1) or None in twins or any(b.rank(v) != 4 for v in values):
        return None
    return from_nchw(b, b.op("Concat", twins, axis=1, rank=4))


def channels_to_image(b: Builder, x: str) -> str:
    """The NHWC [N, 1, 1, C] of a [N, C] value (Keras' squeeze-excite reshape), with its NCHW
    twin [N, C, 1, 1] recorded: the 1x1 convolutions after it then need no Transpose."""
    return from_nchw(b, b.op("Unsqueeze", [x, b.int64s([2, 3], "axes")], rank=4))


_GLOBAL_POOLS = {"ReduceMean": "GlobalAveragePool", "ReduceMax": "GlobalMaxPool"}


def global_pool(b: Builder, op_type: str, x: str, axes, keep: int) -> str | None:
    """A reduction over H and W of an NHWC value with an NCHW twin: the same [N, C] from the
    twin's axes 2 and 3 (no Transpose of the whole map), or, keeping them, the twin of the
    [N, 1, 1, C] (a squeeze-excite block's); None otherwise."""
    twin = b.nchw.get(x)
    if twin is None or axes is None:
        return None
    if sorted(int(a) % 4 for a in np.asarray(axes).reshape(-1)) != [1, 2]:
        return None
    if keep and op_type in _GLOBAL_POOLS:  # onnxruntime runs these in its blocked layout
        return from_nchw(b, b.op(_GLOBAL_POOLS[op_type], [twin], rank=4))
    pooled = b.op(op_type, [twin, b.int64s([2, 3], "axes")], keepdims=keep, rank=4 if keep else 2)
    return from_nchw(b, pooled) if keep else pooled
