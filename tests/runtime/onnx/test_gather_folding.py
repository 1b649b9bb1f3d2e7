"""gather_folding: lookups into read-only variables become GatherV2 of a constant table, giving
what the lookups gave (and failing where they failed); lookups mixing in other data stay."""

from __future__ import annotations

import numpy as np
import pytest

from apis.tensorflow.core.framework import graph_pb2
from loader import load_saved_model
from runtime import Graph, Session, dtypes, errors, tensor_util
from runtime.onnx.gather_folding import fold_gathers
from tests.oracle import corpus

F, I32, I64 = dtypes.DT_FLOAT, dtypes.DT_INT32, dtypes.DT_INT64
SHARDS = [np.arange(6, dtype=np.float32).reshape(3, 2), -np.arange(4, dtype=np.float32).reshape(2, 2)]


def _node(graph_def, name: str, op: str, inputs: list[str], **attrs) -> None:
    node = graph_def.node.add(name=name, op=op, input=inputs)
    for key, value in attrs.items():
        if isinstance(value, np.ndarray):
            node.attr[key].tensor.CopyFrom(tensor_util.make_tensor_proto(value))
        elif isinstance(value, tuple):
            node.attr[key].shape.dim.extend(node.attr[key].shape.Dim(size=d) for d in value)
        elif key in ("num_partitions", "N", "batch_dims"):
            node.attr[key].i = value
        elif isinstance(value, str):
            node.attr[key].s = value.encode()
        else:
            node.attr[key].type = value


def _lookup_graph() -> Graph:
    """TF1's 'mod' partitioned lookup over two shards (5 rows), a plain lookup of shard 0, and a
    stitch that mixes in a fed tensor (not foldable)."""
    g = graph_pb2.GraphDef()
    _node(g, "ids", "Placeholder", [], dtype=I64, shape=(-1,))
    _node(g, "fed", "Placeholder", [], dtype=F, shape=(-1, 2))
    for i, value in enumerate(SHARDS):
        _node(g, f"w{i}", "VarHandleOp", [], dtype=F, shape=value.shape, shared_name=f"w{i}")
        _node(g, f"value{i}", "Const", [], dtype=F, value=value)
        _node(g, f"init{i}", "AssignVariableOp", [f"w{i}", f"value{i}"], dtype=F)
    _node(g, "two", "Const", [], dtype=I64, value=np.array(2, np.int64))
    _node(g, "mod", "FloorMod", ["ids", "two"], T=I64)
    _node(g, "shard", "Cast", ["mod"], SrcT=I64, DstT=I32)
    _node(g, "row", "FloorDiv", ["ids", "two"], T=I64)
    _node(g, "size", "Size", ["ids"], T=I64, out_type=I32)
    for name, value in (("zero", 0), ("one", 1)):
        _node(g, name, "Const", [], dtype=I32, value=np.array(value, np.int32))
    _node(g, "range", "Range", ["zero", "size", "one"], Tidx=I32)
    _node(g, "rows", "DynamicPartition", ["row", "shard"], T=I64, num_partitions=2)
    _node(g, "where", "DynamicPartition", ["range", "shard"], T=I32, num_partitions=2)
    _node(g, "fed_parts", "DynamicPartition", ["fed", "shard"], T=F, num_partitions=2)
    for i in range(2):
        _node(g, f"gather{i}", "ResourceGather", [f"w{i}", f"rows:{i}"], dtype=F, Tindices=I64, batch_dims=0)
    _node(g, "lookup", "ParallelDynamicStitch", ["where:0", "where:1", "gather0", "gather1"], T=F, N=2)
    _node(g, "mixed", "ParallelDynamicStitch", ["where:0", "where:1", "gather0", "fed_parts:1"], T=F, N=2)
    _node(g, "plain", "ResourceGather", ["w0", "row"], dtype=F, Tindices=I64, batch_dims=0)
    return Graph.from_graph_def(g)


def test_lookups_fold_to_gathers_of_constant_tables_with_the_same_results():
    graph = _lookup_graph()
    session = Session(graph=graph)
    session.run(["init0", "init1"])
    folded = fold_gathers(graph, set(graph.get_operations()), session.resources)
    kinds = {n.name: n.op for n in folded.node}
    assert kinds["lookup"] == kinds["plain"] == "GatherV2"
    assert kinds["mixed"] == "ParallelDynamicStitch"  # it depends on a fed float tensor too
    ours = Session(graph=Graph.from_graph_def(folded))
    ids, fed = np.array([3, 0, 4, 1, 3], np.int64), np.ones((5, 2), np.float32)
    fetches = ["lookup:0", "plain:0", "mixed:0"]
    feeds = {"ids:0": ids, "fed:0": fed}
    for want, got in zip(session.run(fetches, feeds), ours.run(fetches, feeds)):
        np.testing.assert_array_equal(got, want)
    expected = np.stack([SHARDS[i % 2][i // 2] for i in ids.tolist()])
    np.testing.assert_array_equal(ours.run("lookup:0", {"ids:0": ids}), expected)
    for bad in ([5], [-1]):  # not a row of either shard: both fail
        with pytest.raises(errors.InvalidArgumentError):
            session.run("lookup:0", {"ids:0": np.array(bad, np.int64)})
        with pytest.raises(errors.InvalidArgumentError):
            ours.run("lookup:0", {"ids:0": np.array(bad, np.int64)})


def test_nothing_to_fold_without_variable_lookups():
    g = graph_pb2.GraphDef()
    _node(g, "x", "Placeholder", [], dtype=F, shape=(-1,))
    _node(g, "y", "Neg", ["x"], T=F)
    graph = Graph.from_graph_def(g)
    assert fold_gathers(graph, set(graph.get_operations()), Session(graph=graph).resources) is None


@pytest.mark.parametrize("name", ["tf1_partitioned", "tf1_feature_columns_partitioned"])
def test_partitioned_models_run_no_partition_or_stitch_op(name):
    manifest = corpus.load_manifest(name)
    case = manifest["cases"][0]
    bundle = load_saved_model(manifest["export_path"], case["tags"], delegation=True)
    try:
        report = bundle.session.delegation_report
        assert not {k for k, _ in report.native.values()} & {"ParallelDynamicStitch", "DynamicPartition"}
    finally:
        bundle.close()
