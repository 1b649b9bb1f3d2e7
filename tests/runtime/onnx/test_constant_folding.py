"""Constant folding at delegation: ops of constants become Const, results unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from apis.tensorflow.core.framework import graph_pb2
from loader import load_saved_model
from runtime import Graph, Session, dtypes
from runtime.onnx.constant_folding import fold_constants, foldable
from runtime.onnx.delegate import served_region
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
