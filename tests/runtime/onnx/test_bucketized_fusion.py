"""bucketized_fusion: each bucketized column's SparseTensor subgraph in est_wide_deep (the linear
model's and the crossed column's) becomes one ``_BucketizedSparseTensor`` whose indices, values
and dense_shape are what the subgraph gave, on many ``Bucketize`` outputs, failing where it
failed; a subgraph with a fed op keeps that part as it is."""

from __future__ import annotations

import numpy as np
import pytest

from loader import load_saved_model
from runtime import Graph, errors, tensor_util
from runtime.execution.interpreter import run_plan
from runtime.execution.planner import build_plan
from runtime.kernels import load_all
from runtime.kernels.feature_column_ops import OP_TYPE, bucketized_sparse_tensor
from runtime.onnx.bucketized_fusion import fuse_bucketized_columns
from runtime.onnx.constant_folding import fold_constants
from tests.oracle import corpus

KERNELS = load_all()  # the whole registry: these tests call kernels by op type

PREFIX = "linear/linear_model/linear/linear_model/linear/linear_model/"
COLUMNS = ("age_bucketized", "age_bucketized_X_color")
# The terminals rewritten to read the fused op: values, indices, dense_shape.
TERMINALS = ("add", "Cast", "Cast_1")


@pytest.fixture(scope="module")
def model():
    manifest = corpus.load_manifest("est_wide_deep")
    bundle = load_saved_model(manifest["export_path"], manifest["cases"][0]["tags"], delegation=False)
    bundle.close()
    return bundle.session.graph, bundle.session.resources


def _region(graph: Graph) -> set[str]:
    return {op.name for op in graph.get_operations()}


def _fused(graph: Graph, fed=frozenset()) -> Graph | None:
    graph_def = fuse_bucketized_columns(graph, _region(graph), set(fed))
    if graph_def is None:
        return None
    fused = Graph(functions=graph.functions)
    fused.import_graph_def(graph_def)
    return fused


def _outcome(graph: Graph, resources, column: str, x: np.ndarray):
    feed = graph.get_tensor_by_name(PREFIX + "age_bucketized/Bucketize:0")
    fetches = [graph.get_tensor_by_name(f"{PREFIX}{column}/{name}:0") for name in TERMINALS]
    plan = build_plan([feed], fetches, (), resources, graph.functions)
    try:
        return run_plan(plan, [x])
    except errors.InvalidArgumentError as exc:
        return exc


# Bucketize outputs: batch 0, 1 and 32, ids past any bucket count (values wrap in int32), and the
# shapes the subgraph rejects (a scalar; too many elements) or broadcasts (one row of several).
INPUTS = [
    np.zeros((0, 1), np.int32),
    np.array([[2]], np.int32),
    np.arange(32, dtype=np.int32).reshape(32, 1) % 5,
    np.array([[2**31 - 1], [-(2**31)], [-1]], np.int32),
    np.array(3, np.int32),
    np.zeros((2, 2), np.int32),
    np.array([[1, 2, 3]], np.int32),
    np.array([7, 8], np.int32),
]


@pytest.mark.parametrize("folded", [False, True], ids=["Range", "folded Range"])
def test_columns_fuse_and_give_what_the_subgraph_gave(model, folded):
    graph, resources = model
    if folded:  # as delegation sees it: Range(0, D, 1) of constants folded to a Const
        graph_def = fold_constants(graph, _region(graph), set(), resources)
        graph = Graph(functions=graph.functions)
        graph.import_graph_def(graph_def)
    fused = _fused(graph)
    nodes = [op for op in fused.get_operations() if op.type == OP_TYPE]
    assert sorted((op.attrs["source_dimension"], op.attrs["num_buckets"]) for op in nodes) == [(1, 4), (1, 4)]
    for column in COLUMNS:
        for name in TERMINALS:
            rewritten = fused.get_operation_by_name(f"{PREFIX}{column}/{name}")
            assert rewritten.type == "Identity" and rewritten.inputs[0].op.type == OP_TYPE
        errors_seen = 0
        for x in INPUTS:
            want = _outcome(graph, resources, column, x)
            got = _outcome(fused, resources, column, x)
            if isinstance(want, Exception):
                assert isinstance(got, errors.InvalidArgumentError), (column, x)
                errors_seen += 1
                continue
            for a, b in zip(got, want, strict=True):
                assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), (column, x)
        assert errors_seen == 2


def test_fed_ops_keep_their_part(model):
    graph, _ = model
    # The batch size is read by all three: fed, nothing fuses.
    assert _fused(graph, {f"{PREFIX}{c}/strided_slice" for c in COLUMNS}) is None
    # A fed dense_shape (or an op only it reads) keeps its Cast; the rest fuses.
    fused = _fused(graph, {f"{PREFIX}age_bucketized/stack_1", f"{PREFIX}age_bucketized_X_color/Cast_1"})
    for column in COLUMNS:
        assert fused.get_operation_by_name(f"{PREFIX}{column}/Cast_1").type == "Cast"
        assert fused.get_operation_by_name(f"{PREFIX}{column}/Cast").type == "Identity"
    # A fed values op: that column's values subgraph is not matched at all.
    fused = _fused(graph, {f"{PREFIX}age_bucketized/mul"})
    assert fused.get_operation_by_name(f"{PREFIX}age_bucketized/add").type == "AddV2"
    assert fused.get_operation_by_name(f"{PREFIX}age_bucketized_X_color/add").type == "Identity"


def test_columns_with_other_constants_stay(model):
    graph, _ = model
    graph_def = graph.as_graph_def()
    for node in graph_def.node:
        if node.name == f"{PREFIX}age_bucketized/transpose/perm":
            node.attr["value"].tensor.CopyFrom(tensor_util.make_tensor_proto(np.array([0, 1], np.int32)))
    changed = Graph(functions=graph.functions)
    changed.import_graph_def(graph_def)
    fused = _fused(changed)
    assert fused.get_operation_by_name(f"{PREFIX}age_bucketized/Cast").type == "Cast"
    assert fused.get_operation_by_name(f"{PREFIX}age_bucketized/add").type == "Identity"


def test_kernel_layout_and_wrapping():
    x = np.array([[1, 2, 0], [3, 0, 2**31 - 1]], np.int32)
    indices, values, shape = bucketized_sparse_tensor(x, source_dimension=3, num_buckets=5)
    assert indices.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    assert values.dtype == np.int32 and values.tolist() == [1, 7, 10, 3, 5, -(2**31) + 9]
    assert shape.dtype == np.int64 and shape.tolist() == [2, 3]
    assert indices.dtype == np.int64 and not indices.flags.writeable  # shared between runs
    assert KERNELS[OP_TYPE].fn is bucketized_sparse_tensor
