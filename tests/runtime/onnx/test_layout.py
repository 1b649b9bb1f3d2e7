"""NHWC networks converted in NCHW (``runtime/onnx/layout.py``): the ops between convolutions run
on the Conv's NCHW output, so a block of Conv, bias, batch norm, activation and pooling keeps one
Transpose in and one out, and its outputs equal the native kernels' (delegated and not)."""

from __future__ import annotations

import numpy as np
import pytest

from apis.tensorflow.core.framework import graph_pb2
from runtime import Graph, Session, dtypes
from runtime.onnx import DelegationOptions, convert_subgraph, delegate
from runtime.onnx.converter import Signature
from tests.runtime.onnx.test_loops import node

F, I32 = dtypes.DT_FLOAT, dtypes.DT_INT32
RNG = np.random.default_rng(3)
WEIGHTS = {
    "w": RNG.standard_normal((3, 3, 3, 4)).astype(np.float32),
    "bias": RNG.standard_normal(4).astype(np.float32),
    "scale": RNG.uniform(0.5, 2, 4).astype(np.float32),
    "offset": RNG.standard_normal(4).astype(np.float32),
    "mean": RNG.standard_normal(4).astype(np.float32),
    "variance": RNG.uniform(0.5, 2, 4).astype(np.float32),
}


def _const(name, value):
    value = np.asarray(value)
    return node(name, "Const", dtype=dtypes.from_numpy(value.dtype), value=value)


def block(bias_op: str = "BiasAdd", pool: bool = True) -> Graph:
    """x [N, 8, 8, 3] -> Conv2D(4) -> bias -> FusedBatchNormV3 -> Relu -> MaxPool -> Mean(H, W),
    and the NHWC feature map itself as a second output."""
    nodes = [
        node("x", "Placeholder", dtype=F),
        *(_const(name, value) for name, value in WEIGHTS.items()),
        node("conv", "Conv2D", "x", "w", T=F, strides=[1, 1, 1, 1], padding="SAME"),
        node("biased", bias_op, "conv", "bias", T=F),
        node(
            "norm",
            "FusedBatchNormV3",
            "biased",
            "scale",
            "offset",
            "mean",
            "variance",
            T=F,
            U=F,
            epsilon=0.001,
            is_training=False,
        ),  # fmt: skip
        node("act", "Relu", "norm", T=F),
    ]
    last = "act"
    if pool:
        nodes.append(
            node("pool", "MaxPool", "act", T=F, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
        )
        last = "pool"
    nodes += [_const("axes", np.int32([1, 2])), node("y", "Mean", last, "axes", T=F, Tidx=I32)]
    graph_def = graph_pb2.GraphDef()
    graph_def.node.extend(nodes)
    return Graph.from_graph_def(graph_def)


@pytest.mark.parametrize("bias_op", ["BiasAdd", "AddV2"])
@pytest.mark.parametrize("pool", [True, False])
def test_a_conv_block_runs_in_nchw_and_matches_native(bias_op, pool):
    x = RNG.standard_normal((2, 8, 8, 3)).astype(np.float32)
    fetches = ["y:0", "act:0"]
    with Session(graph=block(bias_op, pool)) as native:
        want = native.run(fetches, {"x:0": x})
    delegated = Session(graph=block(bias_op, pool))
    report = delegate(delegated, DelegationOptions(min_cluster_ops=1), [(["x:0"], fetches)])
    for _ in range(2):  # the first run validates against the native kernels
        got = delegated.run(fetches, {"x:0": x})
        for a, b in zip(want, got):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
    assert len(report.clusters) == 1 and not report.fallbacks, report.summary()

    model = convert_subgraph(block(bias_op, pool).as_graph_def(), ["x"], fetches, Signature((F,), (4,)))
    types = [n.op_type for n in model.graph.node]
    assert types.count("Transpose") == 2, types  # in, and out for the NHWC feature map fetched
    conv_at = types.index("Conv")
    assert "Transpose" not in types[conv_at + 1 : types.index("Relu")], types  # bias and norm in NCHW
    pooled = convert_subgraph(block(bias_op, pool).as_graph_def(), ["x"], ["y:0"], Signature((F,), (4,)))
    types = [n.op_type for n in pooled.graph.node]
    assert types.count("Transpose") == 1, types  # in only: the Mean over H and W reads the NCHW value


MODERN_WEIGHTS = {
    "w1": RNG.standard_normal((1, 1, 3, 4)).astype(np.float32),
    "dw": RNG.standard_normal((3, 3, 4, 1)).astype(np.float32),
    "w2": RNG.standard_normal((1, 1, 4, 4)).astype(np.float32),
    "se": RNG.standard_normal((1, 1, 8, 8)).astype(np.float32),
}


def modern_block() -> Graph:
    """What Keras' applications put between convolutions: ZeroPadding2D before a VALID depthwise
    convolution, Relu6, a residual add of two convolutions, a channel concatenation, a
    squeeze-excite gate (Mean keeping H and W, 1x1 convolution, Sigmoid, Mul), a division by a
    constant; then Mean over H and W."""
    conv = {"T": F, "strides": [1, 1, 1, 1]}
    nodes = [
        node("x", "Placeholder", dtype=F),
        *(_const(name, value) for name, value in MODERN_WEIGHTS.items()),
        _const("paddings", np.int32([[0, 0], [1, 1], [0, 1], [0, 0]])),
        _const("hw", np.int32([1, 2])),
        _const("channels", np.int32(3)),
        _const("six", np.float32(6)),
        node("expand", "Conv2D", "x", "w1", padding="SAME", **conv),
        node("act", "Relu6", "expand", T=F),
        node("padded", "Pad", "act", "paddings", T=F, Tpaddings=I32),
        node("depthwise", "DepthwiseConv2dNative", "padded", "dw", padding="VALID", **conv),
        node("project", "Conv2D", "depthwise", "w2", padding="SAME", **conv),
        node("shortcut", "Conv2D", "depthwise", "w2", padding="SAME", **conv),
        node("residual", "AddV2", "project", "shortcut", T=F),
        node("joined", "ConcatV2", "residual", "depthwise", "channels", T=F, N=2, Tidx=I32),
        node("squeezed", "Mean", "joined", "hw", T=F, Tidx=I32, keep_dims=True),
        node("excite", "Conv2D", "squeezed", "se", padding="VALID", **conv),
        node("gate", "Sigmoid", "excite", T=F),
        node("gated", "Mul", "joined", "gate", T=F),
        node("scaled", "RealDiv", "gated", "six", T=F),
        node("y", "Mean", "scaled", "hw", T=F, Tidx=I32),
    ]
    graph_def = graph_pb2.GraphDef()
    graph_def.node.extend(nodes)
    return Graph.from_graph_def(graph_def)


def test_padding_residuals_concatenation_and_gates_stay_in_nchw():
    x = RNG.standard_normal((2, 6, 7, 3)).astype(np.float32)
    with Session(graph=modern_block()) as native:
        want = native.run("y:0", {"x:0": x})
    delegated = Session(graph=modern_block())
    report = delegate(delegated, DelegationOptions(min_cluster_ops=1), [(["x:0"], ["y:0"])])
    for _ in range(2):
        np.testing.assert_allclose(delegated.run("y:0", {"x:0": x}), want, rtol=1e-5, atol=1e-5)
    assert len(report.clusters) == 1 and not report.fallbacks, report.summary()
    model = convert_subgraph(modern_block().as_graph_def(), ["x"], ["y:0"], Signature((F,), (4,)))
    types = [n.op_type for n in model.graph.node]
    assert types.count("Transpose") == 1 and "Pad" not in types, types  # the input's Transpose only
    (depthwise,) = [n for n in model.graph.node if n.op_type == "Conv" and any(a.i == 4 for a in n.attribute)]
    pads = next(a.ints for a in depthwise.attribute if a.name == "pads")
    assert list(pads) == [1, 0, 1, 1]  # the ZeroPadding, folded: top, left, bottom, right


@pytest.mark.parametrize("scale", ["Mul", "RealDiv"])
def test_keras_hard_swish_converts_to_one_hard_sigmoid(scale):
    """Keras' hard_swish, x * relu6(x + 3) * (1 / 6) (Keras 3: / 6), after a convolution:
    one HardSigmoid (onnxruntime folds it into the Conv), not Add, Clip and Mul/Div."""
    factor = np.float32(1 / 6) if scale == "Mul" else np.float32(6)
    nodes = [
        node("x", "Placeholder", dtype=F),
        _const("w", WEIGHTS["w"]),
        _const("three", np.float32(3)),
        _const("factor", factor),
        node("conv", "Conv2D", "x", "w", T=F, strides=[1, 1, 1, 1], padding="SAME"),
        node("shifted", "AddV2", "conv", "three", T=F),
        node("clipped", "Relu6", "shifted", T=F),
        node("hard", scale, "clipped", "factor", T=F),
        node("y", "Mul", "conv", "hard", T=F),
    ]
    graph_def = graph_pb2.GraphDef()
    graph_def.node.extend(nodes)
    x = RNG.uniform(-4, 4, (2, 6, 6, 3)).astype(np.float32)
    with Session(graph=Graph.from_graph_def(graph_def)) as native:
        want = native.run("y:0", {"x:0": x})
    delegated = Session(graph=Graph.from_graph_def(graph_def))
    report = delegate(delegated, DelegationOptions(min_cluster_ops=1), [(["x:0"], ["y:0"])])
    np.testing.assert_allclose(delegated.run("y:0", {"x:0": x}), want, rtol=1e-5, atol=1e-5)
    assert not report.fallbacks, report.summary()
    model = convert_subgraph(graph_def, ["x"], ["y:0"], Signature((F,), (4,)))
    types = [n.op_type for n in model.graph.node]
    assert "HardSigmoid" in types and "Clip" not in types and "Div" not in types, types
