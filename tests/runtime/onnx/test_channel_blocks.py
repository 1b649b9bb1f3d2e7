"""Convolution widths padded to onnxruntime's NCHWc block (``runtime/onnx/channel_blocks.py``): a
NASNet-like cell of widths 22 and 11 converts to a model whose every convolution, pooling, add
and concatenation runs in the blocked layout, and whose outputs equal the unpadded model's and
the native kernels'."""

from __future__ import annotations

import collections

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from apis.tensorflow.core.framework import graph_pb2, tensor_shape_pb2
from runtime import Graph, Session, dtypes
from runtime.onnx import DelegationOptions, convert_subgraph, delegate
from runtime.onnx.channel_blocks import Layout, padded_width, spread
from runtime.onnx.converter import Signature
from runtime.onnx.options import CPU, CUDA, channel_block, cpu_channel_block, nchwc_block
from tests.runtime.onnx.test_layout import _const
from tests.runtime.onnx.test_loops import node

F, I32 = dtypes.DT_FLOAT, dtypes.DT_INT32
RNG = np.random.default_rng(7)
WIDTH, HALF = 22, 11  # 22 -> 32 and 11 -> 16 for a block of 16 or 8
WEIGHTS = {
    "stem_w": RNG.standard_normal((3, 3, 3, WIDTH)),
    "scale": RNG.uniform(0.5, 2, WIDTH),
    "offset": RNG.standard_normal(WIDTH),
    "mean": RNG.standard_normal(WIDTH),
    "variance": RNG.uniform(0.5, 2, WIDTH),
    "dw": RNG.standard_normal((3, 3, WIDTH, 1)),
    "pw": RNG.standard_normal((1, 1, WIDTH, WIDTH)),
    "half_a": RNG.standard_normal((1, 1, WIDTH, HALF)),
    "half_b": RNG.standard_normal((1, 1, WIDTH, HALF)),
    "dense": RNG.standard_normal((WIDTH, 5)),
}
CONV = {"T": F, "strides": [1, 1, 1, 1]}
FETCHES = ["logits:0", "features:0"]


def cell() -> graph_pb2.GraphDef:
    """x [N, H, W, 3] -> Conv2D(22), batch norm, Relu -> a separable convolution beside the
    concatenation of two 1x1 convolutions of 11 (added: their channels lie differently) ->
    NASNet's one-pixel shift (ZeroPadding2D(((0, 1), (0, 1))), Cropping2D(((1, 0), (1, 0))),
    AvgPool 1x1 stride 2) plus a zero-padded 3x3 MaxPool of stride 2 -> Relu: ``features``
    (NHWC, fetched) -> Mean over H and W -> MatMul: ``logits``."""
    pool = {"T": F, "strides": [1, 2, 2, 1], "padding": "VALID"}
    nodes = [
        node("x", "Placeholder", dtype=F),
        *(_const(name, value.astype(np.float32)) for name, value in WEIGHTS.items()),
        _const("channels", np.int32(3)),
        _const("hw", np.int32([1, 2])),
        _const("shift_pads", np.int32([[0, 0], [0, 1], [0, 1], [0, 0]])),
        _const("pool_pads", np.int32([[0, 0], [1, 1], [1, 1], [0, 0]])),
        _const("begin", np.int32([0, 1, 1, 0])),
        _const("end", np.int32([0, 0, 0, 0])),
        _const("strides", np.int32([1, 1, 1, 1])),
        node("stem", "Conv2D", "x", "stem_w", padding="SAME", **CONV),
        node(
            "norm",
            "FusedBatchNormV3",
            "stem",
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
        node("depthwise", "DepthwiseConv2dNative", "act", "dw", padding="SAME", **CONV),
        node("pointwise", "Conv2D", "depthwise", "pw", padding="SAME", **CONV),
        node("a", "Conv2D", "act", "half_a", padding="SAME", **CONV),
        node("b", "Conv2D", "act", "half_b", padding="SAME", **CONV),
        node("halves", "ConcatV2", "a", "b", "channels", T=F, N=2, Tidx=I32),
        node("sum", "AddV2", "pointwise", "halves", T=F),
        node("padded", "Pad", "sum", "shift_pads", T=F, Tpaddings=I32),
        node(
            "cropped",
            "StridedSlice",
            "padded",
            "begin",
            "end",
            "strides",
            T=F,
            Index=I32,
            begin_mask=9,
            end_mask=15,
        ),  # fmt: skip
        node("shifted", "AvgPool", "cropped", ksize=[1, 1, 1, 1], **pool),
        node("zero_padded", "Pad", "sum", "pool_pads", T=F, Tpaddings=I32),
        node("pooled", "MaxPool", "zero_padded", ksize=[1, 3, 3, 1], **pool),
        node("joined", "AddV2", "shifted", "pooled", T=F),
        node("features", "Relu", "joined", T=F),
        node("squeezed", "Mean", "features", "hw", T=F, Tidx=I32),
        node("logits", "MatMul", "squeezed", "dense", T=F),
    ]
    graph_def = graph_pb2.GraphDef()
    graph_def.node.extend(nodes)
    return graph_def


def _close(got, want, rtol=1e-5):
    """Equal to float rounding: the blocked kernels sum in another order (values reach ~500)."""
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())


def _run(model, x) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), so, providers=[CPU])
    return session.run(None, {"input_0": x})


@pytest.mark.parametrize("block", [16, 8])
@pytest.mark.parametrize("shape", [(2, 8, 8, 3), (1, 7, 9, 3)])  # odd sizes: the shift pads
def test_a_padded_cell_equals_the_unpadded_one(block, shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    signature = Signature((F,), (4,))
    plain = convert_subgraph(cell(), ["x"], FETCHES, signature)
    padded = convert_subgraph(cell(), ["x"], FETCHES, signature, channel_block=block)
    for got, want in zip(_run(padded, x), _run(plain, x)):
        assert got.shape == want.shape  # the outputs keep their real channels
        _close(got, want)
    with Session(graph=Graph.from_graph_def(cell())) as native:
        for got, want in zip(_run(padded, x), native.run(FETCHES, {"x:0": x})):
            _close(got, want, rtol=1e-4)

    types = collections.Counter(n.op_type for n in padded.graph.node)
    # The paddings and the crop are convolutions, the add's operands meet by a 1x1 convolution,
    # and the real channels are gathered only for the fetched feature map.
    assert not {"Pad", "Slice"} & set(types), types
    assert types["Gather"] == 1 and types["Conv"] == 8, types
    initializers = {t.name: numpy_helper.to_array(t) for t in padded.graph.initializer}
    for conv in (n for n in padded.graph.node if n.op_type == "Conv"):
        weights = initializers[conv.input[1]]
        assert weights.shape[0] % block == 0, (conv.name, weights.shape)


def test_the_padded_cell_runs_blocked_in_onnxruntime(tmp_path):
    """What the padding is for: onnxruntime's blocked kernels take every convolution and
    pooling, with one reorder out for the feature map and one for the mean."""
    block = cpu_channel_block()
    if block == 0:
        pytest.skip("onnxruntime has no blocked (NCHWc) kernels on this CPU")
    padded = convert_subgraph(cell(), ["x"], FETCHES, Signature((F,), (4,)), channel_block=block)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(padded.SerializeToString(), so, providers=[CPU])
    optimized = onnx.load(so.optimized_model_filepath)
    plain = [
        n.op_type
        for n in optimized.graph.node
        if not n.domain and n.op_type in ("Conv", "MaxPool", "AveragePool")
    ]
    assert not plain, plain
    reorders = [n for n in optimized.graph.node if n.op_type == "ReorderOutput"]
    assert len(reorders) <= 2, [n.op_type for n in optimized.graph.node]


def test_delegation_pads_and_matches_the_native_kernels():
    x = RNG.standard_normal((2, 8, 8, 3)).astype(np.float32)
    with Session(graph=Graph.from_graph_def(cell())) as native:
        want = native.run(FETCHES, {"x:0": x})
    delegated = Session(graph=Graph.from_graph_def(cell()))
    report = delegate(delegated, DelegationOptions(min_cluster_ops=1), [(["x:0"], FETCHES)])
    for _ in range(2):  # the first run validates against the native kernels
        for got, expected in zip(delegated.run(FETCHES, {"x:0": x}), want):
            _close(got, expected, rtol=1e-4)
    assert len(report.clusters) == 1 and not report.fallbacks, report.summary()


def test_layouts_end_where_a_reader_needs_the_real_channels():
    """A Reshape reads the padded map: it gets the real channels back, and the answer stands."""
    graph_def = cell()
    graph_def.node.extend(
        [_const("flat", np.int32([-1, WIDTH])), node("rows", "Reshape", "sum", "flat", T=F, Tshape=I32)]
    )
    x = RNG.standard_normal((2, 8, 8, 3)).astype(np.float32)
    signature = Signature((F,), (4,))
    padded = convert_subgraph(graph_def, ["x"], ["rows:0"], signature, channel_block=16)
    plain = convert_subgraph(graph_def, ["x"], ["rows:0"], signature)
    _close(_run(padded, x)[0], _run(plain, x)[0])


def test_widths_are_padded_only_where_worth_it():
    assert padded_width(22, 16) == 32 and padded_width(11, 16) == 16 and padded_width(44, 16) == 48
    assert padded_width(32, 16) is None  # aligned
    assert padded_width(3, 16) is None and padded_width(8, 16) is None  # 16 would double it or more
    layout = Layout(np.array([0, 1, 4]), 8)
    np.testing.assert_array_equal(
        spread(np.array([1.0, 2.0, 3.0]), layout, 0, fill=-1), [1, 2, -1, -1, 3, -1, -1, -1]
    )


def test_the_block_follows_onnxruntime_and_the_options():
    assert nchwc_block("x86_64", ["fma", "avx2", "avx512f"]) == 16
    assert nchwc_block("x86_64", ["fma", "avx2"]) == 8
    assert nchwc_block("aarch64", ["asimd"]) == 0
    on = DelegationOptions()
    assert channel_block(on, [CPU]) == cpu_channel_block()
    assert channel_block(DelegationOptions(align_channels=False), [CPU]) == 0
    assert channel_block(DelegationOptions(graph_optimization_level="extended"), [CPU]) == 0
    assert channel_block(on, [CUDA, CPU]) == 0


def _shaped(n, shape):
    """``n`` with TF's static shape of its output (which tells a grouped convolution's groups)."""
    n.attr["_output_shapes"].list.shape.add().dim.extend(
        tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in shape
    )
    return n


@pytest.mark.parametrize("width", [24, 32])  # 24: padded to 32 first; 32: aligned as it is
def test_narrow_groups_merge_into_blocks(width):
    """RegNet's grouped convolutions of 8 channels a group: neighbouring groups merged into groups
    of one block (onnxruntime has no blocked kernel for narrower groups)."""
    weights = {
        "expand": RNG.standard_normal((1, 1, 3, width)),
        "grouped": RNG.standard_normal((3, 3, 8, width)),  # width / 8 groups
        "project": RNG.standard_normal((1, 1, width, 8)),
    }
    graph_def = graph_pb2.GraphDef()
    graph_def.node.extend(
        [
            node("x", "Placeholder", dtype=F),
            *(_const(name, value.astype(np.float32)) for name, value in weights.items()),
            _shaped(node("a", "Conv2D", "x", "expand", padding="SAME", **CONV), [-1, 6, 6, width]),
            node("b", "Conv2D", "a", "grouped", padding="SAME", **CONV),
            node("c", "Relu", "b", T=F),
            node("y", "Conv2D", "c", "project", padding="SAME", **CONV),
        ]
    )
    x = RNG.standard_normal((2, 6, 6, 3)).astype(np.float32)
    signature = Signature((F,), (4,))
    padded = convert_subgraph(graph_def, ["x"], ["y:0"], signature, channel_block=16)
    plain = convert_subgraph(graph_def, ["x"], ["y:0"], signature)
    _close(_run(padded, x)[0], _run(plain, x)[0])
    with Session(graph=Graph.from_graph_def(graph_def)) as native:
        _close(_run(padded, x)[0], native.run("y:0", {"x:0": x}), rtol=1e-4)
    initializers = {t.name: list(t.dims) for t in padded.graph.initializer}
    convs = [
        (initializers[n.input[1]], next(a.i for a in n.attribute if a.name == "group"))
        for n in padded.graph.node
        if n.op_type == "Conv"
    ]
    assert ([32, 16, 3, 3], 2) in convs, convs  # 32 channels in 2 groups of 16, from 3 or 4 of 8
