"""Guards: where TF's kernels raise (a failed ``Assert``, an index out of range) and ONNX would not,
the converted model says so and that run goes native, so the error is TF's own.

Each graph runs natively and delegated on the same inputs: good inputs give the same outputs from
onnxruntime (the cluster stays delegated), bad ones the native run's error, same type and text,
with no warning logged (a bad request is the client's) and the cluster still delegated after.
Last, the converters' other use of what the graph computes: a Reshape by the input's own
dimensions (feature columns' ``reshape(x, [tf.shape(x)[0], -1])``) needs no shape ops at all.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx
import pytest

from apis.tensorflow.core.framework import graph_pb2
from runtime import Graph, Session, dtypes, errors
from runtime.onnx import DelegationOptions, convert_subgraph, delegate, runner_of
from runtime.onnx.converter import GUARD, Signature
from tests.runtime.onnx.test_loops import const, function, node

F, I32, I64, B, S = dtypes.DT_FLOAT, dtypes.DT_INT32, dtypes.DT_INT64, dtypes.DT_BOOL, dtypes.DT_STRING
# Converters these tests check (an Assert has no output a one-node model could compare).
GUARD_CHECKED = frozenset({"Assert"})
TABLE = np.arange(12, dtype=np.float32).reshape(4, 3)


def _graph(*nodes, functions=()) -> Graph:
    graph_def = graph_pb2.GraphDef()
    graph_def.node.extend(nodes)
    graph_def.library.function.extend(functions)
    return Graph.from_graph_def(graph_def)


def asserted() -> Graph:
    """y = exp(x) + 1 once ``Assert(All(Shape(x) == Shape(z)))`` held, as TF1's dynamic_rnn
    checks its sequence lengths (string message data, an Identity waiting on the Assert)."""
    return _graph(
        node("x", "Placeholder", dtype=F),
        node("z", "Placeholder", dtype=F),
        node("sx", "Shape", "x", T=F, out_type=I32),
        node("sz", "Shape", "z", T=F, out_type=I32),
        node("eq", "Equal", "sx", "sz", T=I32),
        const("axes", [0]),
        node("all", "All", "eq", "axes", Tidx=I32),
        node("message", "Const", dtype=S, value=np.array(b"Expected the shape of z:")),
        node("check", "Assert", "all", "message", "sx", T=[S, I32], summarize=3),
        node("checked", "Identity", "x", "^check", T=F),
        node("e", "Exp", "checked", T=F),
        node("one", "Const", dtype=F, value=np.float32(1)),
        node("y", "AddV2", "e", "one", T=F),
    )


def gathered() -> Graph:
    """y = exp(x) + TABLE[i] (GatherV2 of a constant table at fed indices)."""
    return _graph(
        node("x", "Placeholder", dtype=F),
        node("i", "Placeholder", dtype=I32),
        node("table", "Const", dtype=F, value=TABLE),
        const("axis", 0),
        node("rows", "GatherV2", "table", "i", "axis", Tparams=F, Tindices=I32, Taxis=I32),
        node("e", "Exp", "x", T=F),
        node("y", "AddV2", "e", "rows", T=F),
    )


def cross_entropy(output: int = 0) -> Graph:
    """The mean sparse softmax cross entropy of logits = x W against fed labels (``output`` 1:
    the mean of its backprop instead)."""
    return _graph(
        node("x", "Placeholder", dtype=F),
        node("labels", "Placeholder", dtype=I64),
        node("w", "Const", dtype=F, value=np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)),
        node("logits", "MatMul", "x", "w", T=F),
        node("xent", "SparseSoftmaxCrossEntropyWithLogits", "logits", "labels", T=F, Tlabels=I64),
        const("axes", [0, 1] if output else [0]),
        node("y", "Mean", f"xent:{output}", "axes", T=F, Tidx=I32),
    )


def looped() -> Graph:
    """A While loop summing ``TABLE[k - t]`` for t < n: the index turns negative once t > k."""
    cond = function(
        "cond",
        [("t", I32), ("k", I32), ("n", I32), ("acc", F)],
        [("ok", B, "less:z:0")],
        [node("less", "Less", "t", "n", T=I32)],
    )
    body = function(
        "body",
        [("t", I32), ("k", I32), ("n", I32), ("acc", F)],
        [("t_out", I32, "next:z:0"), ("k_out", I32, "k"), ("n_out", I32, "n"), ("acc_out", F, "sum:z:0")],
        [
            node("index", "Sub", "k", "t", T=I32),
            node("table", "Const", dtype=F, value=TABLE),
            const("axis", 0),
            node(
                "row",
                "GatherV2",
                "table:output:0",
                "index:z:0",
                "axis:output:0",
                Tparams=F,
                Tindices=I32,
                Taxis=I32,
            ),
            node("sum", "AddV2", "acc", "row:output:0", T=F),
            const("one", 1),
            node("next", "AddV2", "t", "one:output:0", T=I32),
        ],
    )
    loop = node("loop", "While", "zero", "k", "n", "acc0", T=[I32, I32, I32, F])
    loop.attr["cond"].func.name, loop.attr["body"].func.name = "cond", "body"
    return _graph(
        node("x", "Placeholder", dtype=F),
        node("k", "Placeholder", dtype=I32),
        node("n", "Placeholder", dtype=I32),
        const("zero", 0),
        node("acc0", "Exp", "x", T=F),
        loop,
        node("y", "Identity", "loop:3", T=F),
        functions=[cond, body],
    )


def _both(graph_fn, feeds_list: list[dict], caplog):
    """Per feeds: (native result or error, delegated result or error); the delegated session."""
    native = Session(graph=graph_fn())
    delegated = Session(graph=graph_fn())
    fed = list(feeds_list[0])
    report = delegate(delegated, DelegationOptions(min_cluster_ops=1), [(fed, ["y:0"])])
    outcomes = []
    for feeds in feeds_list:
        pair = []
        for session in (native, delegated):
            try:
                pair.append(session.run("y:0", feeds))
            except errors.OpError as exc:
                pair.append(exc)
        outcomes.append(pair)
    assert "failed on this run" not in caplog.text and "runs natively" not in caplog.text
    assert not report.fallbacks, report.summary()
    return outcomes, delegated, report


def _assert_same(outcomes):
    for want, got in outcomes:
        if isinstance(want, Exception):
            assert type(got) is type(want) and str(got) == str(want), (want, got)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _cluster_types(report) -> set[str]:
    return {t for c in report.clusters for t in c.op_types}


def test_assert_joins_the_cluster_and_a_failing_one_raises_tfs_error(caplog):
    caplog.set_level(logging.INFO)
    x = np.ones((2, 3), np.float32)
    feeds = [{"x:0": x, "z:0": x}, {"x:0": x, "z:0": np.ones((3, 3), np.float32)}, {"x:0": x, "z:0": x}]
    outcomes, session, report = _both(asserted, feeds, caplog)
    _assert_same(outcomes)
    assert {"Assert", "All", "Exp"} <= _cluster_types(report) and len(report.clusters) == 1, report.summary()
    error = outcomes[1][1]
    assert isinstance(error, errors.InvalidArgumentError)
    assert str(error).startswith("assertion failed: [Expected the shape of z:] [2 3]"), str(error)
    assert str(error).endswith("[[{{node check}}]]"), str(error)  # the model's node, not the cluster


@pytest.mark.parametrize("bad", [[0, -1], [4, 0], [-5]])
def test_gather_out_of_range_raises_tfs_error_and_good_indices_stay_in_onnxruntime(bad, caplog):
    x = np.ones((len(bad), 3), np.float32)
    good = np.int32(np.arange(len(bad)) % 4)
    feeds = [{"x:0": x, "i:0": good}, {"x:0": x, "i:0": np.int32(bad)}, {"x:0": x, "i:0": good[::-1].copy()}]
    outcomes, session, report = _both(gathered, feeds, caplog)
    _assert_same(outcomes)
    assert "is not in [0, 4)" in str(outcomes[1][1])
    runner = runner_of(session.graph.get_operation_by_name(report.clusters[0].name))
    assert runner._runs and not runner._native_only  # still delegated after the bad request


@pytest.mark.parametrize("output", [0, 1])
def test_sparse_softmax_cross_entropy_guards_its_labels(output, caplog):
    """The loss reads at the labels (onnxruntime rejects one past the end itself), the backprop
    one-hot encodes them (an out-of-range label gives a zero row): either is guarded."""
    x = np.linspace(-2, 2, 15, dtype=np.float32).reshape(5, 3)
    feeds = [
        {"x:0": x, "labels:0": np.int64([0, 3, 1, 2, 3])},
        {"x:0": x, "labels:0": np.int64([0, 4, 1, 2, 3])},
    ]
    feeds.append({"x:0": x, "labels:0": np.int64([0, -1, 1, 2, 3])})
    outcomes, _, report = _both(lambda: cross_entropy(output), feeds, caplog)
    _assert_same(outcomes)
    assert "SparseSoftmaxCrossEntropyWithLogits" in _cluster_types(report), report.summary()
    assert "outside the valid range of [0, 4)" in str(outcomes[1][0])
    assert "outside the valid range of [0, 4)" in str(outcomes[2][0])


def test_a_guard_in_a_loop_body_is_carried_out_of_the_loop(caplog):
    x = np.zeros((3,), np.float32)
    feeds = [
        {"x:0": x, "k:0": np.int32(3), "n:0": np.int32(4)},  # indices 3, 2, 1, 0
        {"x:0": x, "k:0": np.int32(1), "n:0": np.int32(3)},  # 1, 0, -1: TF raises at the third step
        {"x:0": x, "k:0": np.int32(2), "n:0": np.int32(2)},
    ]
    outcomes, _, report = _both(looped, feeds, caplog)
    _assert_same(outcomes)
    assert "While" in _cluster_types(report), report.summary()
    assert "indices = -1 is not in [0, 4)" in str(outcomes[1][0])


def test_only_guards_that_can_fail_reach_the_model_and_unread_outputs_are_dropped():
    def model(graph: Graph, inputs, outputs, signature) -> onnx.ModelProto:
        return convert_subgraph(graph.as_graph_def(), inputs, outputs, signature)

    fed = model(gathered(), ["x", "i"], ["y:0"], Signature((F, I32), (2, 1)))
    assert fed.graph.output[-1].name == GUARD
    in_range = gathered().as_graph_def()
    for n in in_range.node:
        if n.name == "i":
            n.op = "Const"
            n.attr["value"].tensor.CopyFrom(const("i", [3, 0]).attr["value"].tensor)
    constant = convert_subgraph(in_range, ["x"], ["y:0"], Signature((F,), (2,)))
    assert [o.name for o in constant.graph.output] == ["output_0"]  # known to hold: no guard
    xent = model(cross_entropy(), ["x", "labels"], ["y:0"], Signature((F, I64), (2, 1)))
    assert not {"OneHot", "Softmax"} & {n.op_type for n in xent.graph.node}  # the unread backprop


def reshaped(of: str) -> Graph:
    """y = reshape(exp(x), [shape(<of>)[0], -1]): feature columns' batch-preserving reshape."""
    return _graph(
        node("x", "Placeholder", dtype=F),
        node("z", "Placeholder", dtype=F),
        node("e", "Exp", "x", T=F),
        node("shape", "Shape", of, T=F, out_type=I32),
        const("begin", [0]),
        const("end", [1]),
        const("stride", [1]),
        node(
            "batch", "StridedSlice", "shape", "begin", "end", "stride", T=I32, Index=I32, shrink_axis_mask=1
        ),
        const("rest", -1),
        node("dims", "Pack", "batch", "rest", T=I32, N=2),
        node("y", "Reshape", "e", "dims", T=F, Tshape=I32),
    )


@pytest.mark.parametrize("of", ["e", "z"])
def test_reshape_by_the_inputs_own_dimension_takes_a_constant_shape(of, caplog):
    x = np.linspace(0, 1, 24, dtype=np.float32).reshape(4, 3, 2)
    feeds = [{"x:0": x, "z:0": x}, {"x:0": x, "z:0": x[:2]}]  # z's batch of 2: [2, 12] where of="z"
    outcomes, _, _ = _both(lambda: reshaped(of), feeds, caplog)
    _assert_same(outcomes)
    assert outcomes[0][1].shape == (4, 6)
    graph = reshaped(of)
    model = convert_subgraph(graph.as_graph_def(), ["x", "z"], ["y:0"], Signature((F, F), (3, 3)))
    types = {n.op_type for n in model.graph.node}
    if of == "e":  # the input's own batch: no shape ops
        assert "Shape" not in types, types
    else:  # another tensor's: Shape(z, 0, 1) and the -1 joined, not the graph's seven ops
        assert types == {"Exp", "Shape", "Concat", "Reshape"}, types


def tensordot() -> Graph:
    """Keras' Dense on a 3-D x: flatten by products of x's dimensions, MatMul, reshape back."""
    w = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    return _graph(
        node("x", "Placeholder", dtype=F),
        node("shape", "Shape", "x", T=F, out_type=I32),
        const("free", [0, 1]),
        const("contracted", [2]),
        const("axis", 0),
        node("free_dims", "GatherV2", "shape", "free", "axis", Tparams=I32, Tindices=I32, Taxis=I32),
        node(
            "contracted_dims", "GatherV2", "shape", "contracted", "axis", Tparams=I32, Tindices=I32, Taxis=I32
        ),
        const("axes", [0]),
        node("rows", "Prod", "free_dims", "axes", T=I32, Tidx=I32),
        node("depth", "Prod", "contracted_dims", "axes", T=I32, Tidx=I32),
        node("flat_shape", "Pack", "rows", "depth", T=I32, N=2),
        const("perm", [0, 1, 2]),
        node("moved", "Transpose", "x", "perm", T=F, Tperm=I32),
        node("flat", "Reshape", "moved", "flat_shape", T=F, Tshape=I32),
        node("w", "Const", dtype=F, value=w),
        node("mm", "MatMul", "flat", "w", T=F),
        const("units", [4]),
        node("out_shape", "ConcatV2", "free_dims", "units", "axis", T=I32, N=2, Tidx=I32),
        node("y", "Reshape", "mm", "out_shape", T=F, Tshape=I32),
    )


def test_keras_tensordot_reshapes_become_flatten_and_a_sliced_shape(caplog):
    x = np.linspace(-1, 1, 30, dtype=np.float32).reshape(3, 5, 2)
    outcomes, _, _ = _both(tensordot, [{"x:0": x}, {"x:0": x[:1, :2]}], caplog)
    _assert_same(outcomes)
    assert outcomes[0][1].shape == (3, 5, 4)
    model = convert_subgraph(tensordot().as_graph_def(), ["x"], ["y:0"], Signature((F,), (3,)))
    types = [n.op_type for n in model.graph.node]
    assert "Flatten" in types and not {"Gather", "ReduceProd", "Cast", "Transpose"} & set(types), types


def segments() -> Graph:
    """y = SparseSegmentSum(exp(data), i, s): embedding_lookup_sparse's combiner."""
    return _graph(
        node("x", "Placeholder", dtype=F),
        node("i", "Placeholder", dtype=I32),
        node("s", "Placeholder", dtype=I32),
        node("e", "Exp", "x", T=F),
        node("y", "SparseSegmentSum", "e", "i", "s", T=F, Tidx=I32, Tsegmentids=I32),
    )


@pytest.mark.parametrize(
    "indices, ids",
    [([0, -1, 2], [0, 0, 1]), ([0, 4, 2], [0, 0, 1]), ([0, 1, 2], [0, 1, 0]), ([0, 1, 2], [-1, 0, 1])],
    ids=["negative index", "index past the rows", "ids not increasing", "negative id"],
)
def test_sparse_segment_sum_guards_indices_and_segment_ids(indices, ids, caplog):
    x = np.linspace(0, 1, 12, dtype=np.float32).reshape(4, 3)
    good = {"x:0": x, "i:0": np.int32([0, 3, 2]), "s:0": np.int32([0, 0, 2])}
    feeds = [good, {"x:0": x, "i:0": np.int32(indices), "s:0": np.int32(ids)}, good]
    outcomes, _, report = _both(segments, feeds, caplog)
    _assert_same(outcomes)
    assert isinstance(outcomes[1][0], errors.InvalidArgumentError), outcomes[1]
    assert "SparseSegmentSum" in _cluster_types(report), report.summary()


def test_a_gather_guards_its_upper_bound_only_where_onnxruntime_does_not(caplog):
    """On the CPU onnxruntime's Gather rejects an index past the end itself, so the guard checks
    the lower bound only; a first request past the end, unvalidated, still gets TF's error and
    leaves the cluster delegated."""
    signature = Signature((F, I32), (2, 1))
    cpu = convert_subgraph(gathered().as_graph_def(), ["x", "i"], ["y:0"], signature)
    other = convert_subgraph(gathered().as_graph_def(), ["x", "i"], ["y:0"], signature, checks_bounds=False)
    assert [n.op_type for n in cpu.graph.node].count("ReduceMax") == 0
    assert [n.op_type for n in other.graph.node].count("ReduceMax") == 1
    session = Session(graph=gathered())
    report = delegate(
        session, DelegationOptions(min_cluster_ops=1, validate=False), [(["x:0", "i:0"], ["y:0"])]
    )
    x = np.ones((2, 3), np.float32)
    with pytest.raises(errors.InvalidArgumentError, match=r"indices\[1\] = 4 is not in \[0, 4\)"):
        session.run("y:0", {"x:0": x, "i:0": np.int32([0, 4])})
    np.testing.assert_allclose(
        session.run("y:0", {"x:0": x, "i:0": np.int32([3, 0])}), np.e + TABLE[[3, 0]], rtol=1e-6
    )
    runner = runner_of(session.graph.get_operation_by_name(report.clusters[0].name))
    assert runner._runs and not runner._native_only and not report.fallbacks, report.summary()
