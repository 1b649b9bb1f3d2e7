"""Constant folding at delegation: ops of constants become Const, results unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from apis.tensorflow.core.framework import graph_pb2
from loader import load_saved_model
from runtime import Graph, Session, dtypes
from runtime.onnx import DelegationOptions, delegate
from runtime.onnx.constant_folding import fold_constants, foldable, frozen_chains
from runtime.onnx.rewrite import served_region
from tests.oracle import corpus
from tests.runtime.onnx.test_gather_folding import _node

F, I32, S = dtypes.DT_FLOAT, dtypes.DT_INT32, dtypes.DT_STRING


def _head_graph() -> Graph:
    """An estimator head's class names: range -> AsString -> ExpandDims (constant), tiled by the
    fed batch (not constant); a random op, a fed PlaceholderWithDefault and a too-big Fill stay."""
    g = graph_pb2.GraphDef()
    _node(g, "x", "Placeholder", [], dtype=F, shape=(-1, 3))
    for name, value in (("zero", 0), ("three", 3), ("one", 1), ("axis", 0)):
        _node(g, name, "Const", [], dtype=I32, value=np.array(value, np.int32))
    _node(g, "range", "Range", ["zero", "three", "one"], Tidx=I32)
    _node(g, "names", "AsString", ["range"], T=I32)
    _node(g, "row", "ExpandDims", ["names", "axis"], T=S, Tdim=I32)
    _node(g, "shape", "Shape", ["x"], T=F, out_type=I32)
    _node(g, "batch", "StridedSlice", ["shape", "b0", "b1", "b1"], T=I32, Index=I32)
    _node(g, "b0", "Const", [], dtype=I32, value=np.array([0], np.int32))
    _node(g, "b1", "Const", [], dtype=I32, value=np.array([1], np.int32))
    _node(g, "multiples", "ConcatV2", ["batch", "b1", "axis"], T=I32, N=2, Tidx=I32)
    _node(g, "tiled", "Tile", ["row", "multiples"], T=S, Tmultiples=I32)
    _node(g, "dims", "Const", [], dtype=I32, value=np.array([2], np.int32))
    _node(g, "noise", "RandomUniform", ["dims"], T=I32, dtype=F)
    _node(g, "default", "PlaceholderWithDefault", ["three"], dtype=I32, shape=())
    _node(g, "plus", "AddV2", ["default", "one"], T=I32)
    _node(g, "big_dims", "Const", [], dtype=I32, value=np.array([1 << 19], np.int32))
    _node(g, "big_one", "Const", [], dtype=F, value=np.array(1.0, np.float32))
    _node(g, "big", "Fill", ["big_dims", "big_one"], T=F, index_type=I32)
    _node(g, "big_sum", "Sum", ["big", "axis"], T=F, Tidx=I32)
    return Graph.from_graph_def(g)


def test_ops_of_constants_fold_and_results_hold():
    graph = _head_graph()
    session = Session(graph=graph)
    region = {op.name for op in graph.get_operations()}
    folded = fold_constants(graph, region, {"default"}, session.resources)
    kinds = {n.name: n.op for n in folded.node}
    assert kinds["range"] == kinds["names"] == kinds["row"] == kinds["big_sum"] == "Const"
    assert kinds["tiled"] == "Tile" and kinds["batch"] == "StridedSlice"  # the batch is fed
    assert kinds["noise"] == "RandomUniform" and kinds["plus"] == "AddV2" and kinds["default"] != "Const"
    assert kinds["big"] == "Fill"  # 2 MiB: computed when needed, not kept
    ours = Session(graph=Graph.from_graph_def(folded))
    feeds = {"x:0": np.zeros((4, 3), np.float32)}
    fetches = ["tiled:0", "row:0", "big_sum:0", "plus:0"]
    for want, got in zip(session.run(fetches, feeds), ours.run(fetches, feeds)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    assert ours.run("plus:0", {"default:0": np.int32(9)}) == 10  # a fed default is still fed
    assert ours.run("tiled:0", feeds).tolist() == [[b"0", b"1", b"2"]] * 4


def test_nothing_folds_without_constant_ops():
    g = graph_pb2.GraphDef()
    _node(g, "x", "Placeholder", [], dtype=F, shape=(-1,))
    _node(g, "y", "Neg", ["x"], T=F)
    graph = Graph.from_graph_def(g)
    assert fold_constants(graph, {"x", "y"}, set(), Session(graph=graph).resources) is None


@pytest.mark.parametrize("name", ["est_wide_deep", "keras_lookup_layers"])
def test_delegated_models_run_no_op_of_constants(name):
    """(tests/runtime/onnx/test_corpus.py checks every model's outputs against TF's.)"""
    manifest = corpus.load_manifest(name)
    case = manifest["cases"][0]
    bundle = load_saved_model(manifest["export_path"], case["tags"], delegation=True)
    try:
        signature = bundle.signature_defs[case["signature"]]
        feeds = [t.name for t in signature.inputs.values()]
        fetches = [t.name for t in signature.outputs.values()]
        served = served_region(bundle.session.graph, [(feeds, fetches)])
        left = [
            op.name
            for op in served
            if foldable(op) and len(op.outputs) == 1 and all(t.op.type == "Const" for t in op.inputs)
        ]
        assert not left
    finally:
        bundle.close()


def _variable_graph() -> tuple[Graph, Session, np.ndarray]:
    """A variable read through the chains Keras puts before its readers (Identity, Cast, Reshape,
    a batch norm's Rsqrt(variance + eps)), a Tile that makes it bigger, a product with a fed input,
    and a depthwise convolution whose filter is one of those chains."""
    value = np.random.default_rng(3).uniform(0.5, 2.0, (3, 3, 2, 1)).astype(np.float32)
    g = graph_pb2.GraphDef()
    _node(g, "x", "Placeholder", [], dtype=F, shape=(-1, 5, 5, 2))
    _node(g, "w", "VarHandleOp", [], dtype=F, shape=value.shape, shared_name="w")
    _node(g, "value", "Const", [], dtype=F, value=value)
    _node(g, "init", "AssignVariableOp", ["w", "value"], dtype=F)
    _node(g, "read", "ReadVariableOp", ["w"], dtype=F)
    _node(g, "identity", "Identity", ["read"], T=F)
    _node(g, "half", "Cast", ["identity"], SrcT=F, DstT=dtypes.DT_HALF)
    _node(g, "flat_shape", "Const", [], dtype=I32, value=np.array([-1], np.int32))
    _node(g, "flat", "Reshape", ["read", "flat_shape"], T=F, Tshape=I32)
    _node(g, "eps", "Const", [], dtype=F, value=np.array(1e-3, np.float32))
    _node(g, "plus_eps", "AddV2", ["flat", "eps"], T=F)
    _node(g, "rsqrt", "Rsqrt", ["plus_eps"], T=F)
    _node(g, "multiples", "Const", [], dtype=I32, value=np.array([4, 1, 1, 1], np.int32))
    _node(g, "tiled", "Tile", ["read", "multiples"], T=F, Tmultiples=I32)
    _node(g, "after_tile", "Neg", ["tiled"], T=F)
    _node(g, "scaled", "Mul", ["x", "eps"], T=F)
    _node(g, "conv", "DepthwiseConv2dNative", ["scaled", "identity"], T=F, padding="SAME")
    conv = next(n for n in g.node if n.name == "conv")
    conv.attr["strides"].list.i.extend([1, 1, 1, 1])
    _node(g, "y", "Relu", ["conv"], T=F)
    graph = Graph.from_graph_def(g)
    session = Session(graph=graph)
    session.run("init")
    return graph, session, value


def test_chains_of_frozen_reads_become_values_unless_they_grow():
    graph, session, value = _variable_graph()
    region = {op.name for op in graph.get_operations()}
    derived = frozen_chains(graph, region, {"read": value}, {"x"}, session.resources)
    assert sorted(derived) == ["flat", "half", "identity", "plus_eps", "rsqrt"]  # not tiled, after_tile
    names = sorted(derived)
    for name, want in zip(names, session.run([f"{n}:0" for n in names])):
        assert derived[name].dtype == want.dtype
        np.testing.assert_array_equal(derived[name], want)


def test_a_depthwise_filter_read_through_a_chain_delegates():
    """The issue's MobileNet: DepthwiseConv2dNative's filter is Identity(ReadVariableOp)."""
    graph, session, _ = _variable_graph()
    x = np.random.default_rng(4).standard_normal((2, 5, 5, 2)).astype(np.float32)
    native = session.run("y:0", {"x:0": x})
    report = delegate(session, DelegationOptions(min_cluster_ops=1), [(["x:0"], ["y:0"])])
    clustered = {op for cluster in report.clusters for op in cluster.op_types}
    assert "DepthwiseConv2dNative" in clustered, report.summary()
    np.testing.assert_allclose(session.run("y:0", {"x:0": x}), native, rtol=1e-5, atol=1e-6)
    assert not report.fallbacks
