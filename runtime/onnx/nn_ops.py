"""Converters for TF's nn ops: activations, bias, softmax and its loss, convolution, pooling, batch norm.

TF's default layout is NHWC, ONNX's Conv and pooling are NCHW: an NHWC op becomes
Transpose -> op -> Transpose, and the ops between convolutions (bias, batch norm, activation,
pooling) run on the NCHW values (``layout.py``), so the Transposes between them go. ``padding="SAME"`` is ONNX's ``SAME_UPPER`` (extra padding at the end).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from runtime import dtypes
from runtime.onnx import layout
from runtime.onnx.converter import FLOAT_TYPES, Builder, NotConvertible, TFNode, Value, converter, onnx_type

FLOATS = tuple(FLOAT_TYPES)


def _np_type(node: TFNode, index: int = 0):
    return helper.tensor_dtype_to_np_dtype(node.elem_type(index))


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else (value or "")


@converter("Relu", dtypes=FLOATS)
def relu(node: TFNode, b: Builder) -> str:
    return layout.unary(b, "Relu", node.inputs[0]) or b.op("Relu", node.inputs)


@converter("Relu6", dtypes=FLOATS)
def relu6(node: TFNode, b: Builder) -> str:
    low, high = (b.const(np.array(v, _np_type(node)), "clip") for v in (0, 6))
    inputs = [node.inputs[0], low, high]
    return layout.elementwise(b, "Clip", inputs) or b.op("Clip", inputs)


@converter("Elu", "Selu", "Softsign", dtypes=FLOATS)
def elu(node: TFNode, b: Builder) -> str:
    return b.op(node.type, node.inputs)


@converter("Softplus", dtypes=FLOATS)
def softplus(node: TFNode, b: Builder) -> str:
    return b.op("Softplus", node.inputs)


@converter("LeakyRelu", dtypes=FLOATS)
def leaky_relu(node: TFNode, b: Builder) -> str:
    return b.op("LeakyRelu", node.inputs, alpha=float(node.attr("alpha", 0.2)))


@converter("Softmax", "LogSoftmax", dtypes=FLOATS)
def softmax(node: TFNode, b: Builder) -> str:
    return b.op(node.type, node.inputs, axis=-1)


@converter("SparseSoftmaxCrossEntropyWithLogits", num_outputs=None, dtypes=FLOATS)
def sparse_softmax_cross_entropy_with_logits(node: TFNode, b: Builder) -> list[str]:
    """The loss, ``-log_softmax`` at each row's label, and the backprop, ``softmax - one_hot``
    (dropped by onnxruntime where no output needs it); labels guarded to ``[0, classes)`` as
    TF's kernel checks them."""
    logits, labels = node.inputs
    if node.rank(0) != 2 or node.rank(1) != 1:
        raise NotConvertible("SparseSoftmaxCrossEntropyWithLogits of other ranks than TF checks")
    classes = b.op("Shape", [logits], start=1, end=2, rank=1, elem_type=TensorProto.INT64)
    count = b.op("Squeeze", [classes, b.int64s([0])], rank=0)
    rows = b.op("Unsqueeze", [b.cast(labels, TensorProto.INT64), b.int64s([1])], rank=2)
    picked = b.op("GatherElements", [b.op("LogSoftmax", [logits], axis=1), rows], axis=1, rank=2)
    b.guard_in_range(labels, count, gathered=True)  # (GatherElements, as Gather, checks the end)
    loss = b.op("Neg", [b.op("Squeeze", [picked, b.int64s([1])], rank=1)])
    off_on = b.const(np.array([0, 1], _np_type(node)), "off_on")
    hot = b.op("OneHot", [labels, classes, off_on], axis=-1, rank=2, elem_type=node.elem_type(0))
    b.guard_in_range(labels, count, needed_by=hot)  # OneHot has no row where a label is out of range
    return [loss, b.op("Sub", [b.op("Softmax", [logits], axis=1), hot])]


@converter("BiasAdd", "BiasAddV1", dtypes=FLOATS)
def bias_add(node: TFNode, b: Builder) -> str:
    x, bias = node.inputs
    if _text(node.attr("data_format", "NHWC")) != "NCHW":
        return layout.channelwise(b, "Add", x, bias) or b.op("Add", [x, bias])
    if _text(node.attr("data_format", "NHWC")) == "NCHW":
        rank = node.rank(0)
        bias = b.op("Reshape", [bias, b.int64s([-1] + [1] * (rank - 2), "shape")], rank=rank - 1)
    return b.op("Add", [x, bias])


def _nhwc(node: TFNode) -> bool:
    layout = _text(node.attr("data_format", "NHWC"))
    if layout not in ("NHWC", "NCHW"):
        raise NotConvertible(f"{node.type} with data_format {layout}")
    return layout == "NHWC"


def _spatial(values, nhwc: bool) -> list[int]:
    values = list(values)
    return values[1:3] if nhwc else values[2:4]


def _padding(node: TFNode) -> dict:
    padding = _text(node.attr("padding"))
    if padding == "SAME":
        return {"auto_pad": "SAME_UPPER"}
    if padding == "VALID":
        return {"auto_pad": "VALID"}
    if padding == "EXPLICIT":
        pairs = np.asarray(node.attr("explicit_paddings"), np.int64).reshape(-1, 2)
        pairs = pairs[1:3] if _nhwc(node) else pairs[2:4]
        return {"pads": [int(p) for p in (*pairs[:, 0], *pairs[:, 1])]}
    raise NotConvertible(f"{node.type} with padding {padding!r}")


def _in_nchw(b: Builder, x: str, nhwc: bool) -> str:
    return layout.to_nchw(b, x) if nhwc else x


def _out_layout(b: Builder, y: str, nhwc: bool) -> str:
    return layout.from_nchw(b, y) if nhwc else y


def _filter(b: Builder, node: TFNode, depthwise: bool, nhwc: bool) -> tuple[str, int]:
    """The filter as ONNX's [O, I/group, kH, kW] and the group count (TF's is [kH, kW, I/group, O]:
    a Conv2D whose input is deeper than its filter is grouped, as Keras' ``groups`` makes it)."""
    w = node.inputs[1]
    value = node.const(1)
    if depthwise:  # [kH, kW, C, M] -> [C*M, 1, kH, kW], group C
        if value is None:
            raise NotConvertible("DepthwiseConv2dNative with a non-constant filter")
        kh, kw, c, m = value.shape
        return b.const(value.reshape(kh, kw, 1, c * m).transpose(3, 2, 0, 1), "filter"), c
    group = _groups(node, nhwc)
    if value is not None:
        return b.const(np.ascontiguousarray(value.transpose(3, 2, 0, 1)), "filter"), group
    return b.op("Transpose", [w], perm=[3, 2, 0, 1], rank=4), group


def _groups(node: TFNode, nhwc: bool) -> int:
    """Input depth over filter depth; 1 where either is unknown (onnxruntime then rejects a
    grouped one on its first run, and the cluster runs natively)."""
    x, w = node.static_shape(0), node.static_shape(1)
    depth = (x[3] if nhwc else x[1]) if x is not None and len(x) == 4 else None
    filter_depth = w[2] if w is not None and len(w) == 4 else None
    if not depth or not filter_depth or depth % filter_depth:
        return 1
    return depth // filter_depth


@converter("DepthwiseConv2dNative", const_inputs=(1,), dtypes=FLOATS)
def depthwise_conv_2d_native(node: TFNode, b: Builder) -> str:
    return conv_2d(node, b)


@converter("Conv2D", dtypes=FLOATS)
def conv_2d(node: TFNode, b: Builder) -> str:
    nhwc = _nhwc(node)
    if node.rank(0) != 4:
        raise NotConvertible(f"{node.type} with batch dimensions")
    dilated = any(d != 1 for d in node.attr("dilations", [1, 1, 1, 1]))
    if dilated and _text(node.attr("padding")) == "SAME":
        raise NotConvertible(f"{node.type}: onnxruntime has no SAME padding with dilations")
    w, group = _filter(b, node, node.type == "DepthwiseConv2dNative", nhwc)
    x, padding = layout.unpadded(b, _in_nchw(b, node.inputs[0], nhwc), _padding(node))
    y = b.op(
        "Conv",
        [x, w],
        strides=_spatial(node.attr("strides", [1, 1, 1, 1]), nhwc),
        dilations=_spatial(node.attr("dilations", [1, 1, 1, 1]), nhwc),
        group=group,
        rank=4,
        **padding,
    )
    return _out_layout(b, y, nhwc)


@converter("MaxPool", "AvgPool", dtypes=FLOATS)
def pool(node: TFNode, b: Builder) -> str:
    nhwc = _nhwc(node)
    if node.type == "MaxPool" and _text(node.attr("padding")) == "EXPLICIT":
        raise NotConvertible("MaxPool with explicit paddings")
    x = _in_nchw(b, node.inputs[0], nhwc)
    y = b.op(
        "MaxPool" if node.type == "MaxPool" else "AveragePool",
        [x],
        kernel_shape=_spatial(node.attr("ksize"), nhwc),
        strides=_spatial(node.attr("strides"), nhwc),
        rank=4,
        **_padding(node),
    )
    return _out_layout(b, y, nhwc)


@converter("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", dtypes=(dtypes.DT_FLOAT,))
def fused_batch_norm(node: TFNode, b: Builder) -> list[str | None]:
    """Inference batch norm as one multiply-add per channel: y = x * scale' + shift'."""
    if node.attr("is_training", True):
        raise NotConvertible("FusedBatchNorm in training mode")
    x, scale, offset, mean, variance = node.inputs
    eps = b.const(np.array(node.attr("epsilon", 1e-4), np.float32), "eps")
    factor = b.op("Mul", [scale, b.op("Reciprocal", [b.op("Sqrt", [b.op("Add", [variance, eps])])])])
    shift = b.op("Sub", [offset, b.op("Mul", [mean, factor])])
    twin = b.nchw.get(x) if _nhwc(node) else None  # after a Conv: on its NCHW output (layout.py)
    known = b.values[factor].const is not None and b.values[shift].const is not None
    if known and (twin is not None or not _nhwc(node)):
        # One BatchNormalization of x * factor + shift (mean 0, variance 1, epsilon 0: exactly
        # that): onnxruntime folds it into a Conv before it, and runs it as one pass where none
        # is (DenseNet's norms after a concatenation), half of a Mul then an Add.
        zero, one = (b.const(np.full(b.values[factor].const.shape, v, np.float32), "stat") for v in (0, 1))
        y = b.op("BatchNormalization", [twin or x, factor, shift, zero, one], epsilon=0.0)
        return [layout.from_nchw(b, y) if twin is not None else y, None, None, None, None, None]
    if not _nhwc(node) or twin is not None:
        shape = b.int64s([-1, 1, 1], "shape")
        factor, shift = (b.op("Reshape", [v, shape], rank=3) for v in (factor, shift))
    y = b.op("Add", [b.op("Mul", [twin or x, factor]), shift])
    return [layout.from_nchw(b, y) if twin is not None else y, None, None, None, None, None]


def _top_k_reason(op) -> str | None:
    return None if op.attrs.get("sorted", True) else "sorted=False (TF's order is unspecified)"


@converter(
    "TopKV2",
    num_outputs=None,
    const_inputs=(1,),
    dtypes=(*FLOATS, dtypes.DT_INT32, dtypes.DT_INT64),
    check=_top_k_reason,
)
def top_k_v2(node: TFNode, b: Builder) -> list[str]:
    """ONNX TopK over the last axis: same order, ties to the lower index as in TF."""
    k = int(np.asarray(node.const_required(1)).reshape(()))
    rank = b.rank(node.inputs[0])
    values, indices = b.op(
        "TopK", [node.inputs[0], b.int64s([k])], axis=-1, largest=1, sorted=1, outputs=2, rank=rank
    )
    b.values[indices] = Value(TensorProto.INT64, rank)
    return [values, b.cast(indices, onnx_type(node.attr("index_type", dtypes.DT_INT32)))]
