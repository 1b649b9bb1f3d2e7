"""TF1 conds raised to functional ``If`` nodes: which conds, the same outputs, and the ONNX ``If``.

Hand-built conds are written as ``tf.compat.v1.cond`` writes them (a pivot ``Switch(pred, pred)``
with ``switch_t``/``switch_f`` Identities ordering the branch constants, a ``pred_id`` Identity
the data Switches share, a ``Merge(false, true)`` per output). Raised, each runs natively as the
original does for both predicate values, and delegated it is one ONNX ``If`` in a cluster; conds
of other shapes stay dataflow. The oracle models with TF1 conds (``tf1_cond_while``: a cond and a
loop holding one; ``cf_v1_while_cond``: a loop holding nested conds) then run whole in onnxruntime.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from apis.tensorflow.core.framework import graph_pb2, tensor_pb2
from loader import load_saved_model
from runtime import Graph, Session, dtypes, errors, tensor_util
from runtime.onnx import DelegationOptions, convert_subgraph, delegate
from runtime.onnx.converter import Signature
from runtime.onnx.raise_conds import raise_conds
from runtime.onnx.raise_frames import raise_frames
from tests.oracle import catalog, corpus
from tests.runtime.onnx.test_loops import const, function, node

F, I32, B = dtypes.DT_FLOAT, dtypes.DT_INT32, dtypes.DT_BOOL
TABLE = np.arange(12, dtype=np.float32).reshape(4, 3)
X = np.array([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]], np.float32)
# Converters these tests check (an If's branches are functions: no one-node model holds them).
IF_CHECKED = frozenset({"If", "StatelessIf"})


def pivots(pred: str = "p", scope: str = "cond") -> list:
    """The plumbing tf.compat.v1.cond writes before its branches."""
    return [
        node(f"{scope}/Switch", "Switch", pred, pred, T=B),
        node(f"{scope}/switch_t", "Identity", f"{scope}/Switch:1", T=B),
        node(f"{scope}/switch_f", "Identity", f"{scope}/Switch", T=B),
        node(f"{scope}/pred_id", "Identity", pred, T=B),
    ]


def switch(name: str, data: str, scope: str = "cond", dtype=F):
    return node(f"{scope}/{name}", "Switch", data, f"{scope}/pred_id", T=dtype)


def _graph_def(*nodes) -> graph_pb2.GraphDef:
    graph_def = graph_pb2.GraphDef()
    graph_def.node.extend(nodes)
    return graph_def


def gathered_cond(*extra) -> graph_pb2.GraphDef:
    """y = cond(p, exp(2 x) + TABLE[i], -x) * 3 + x: the true branch guards its index."""
    two = node("cond/two", "Const", "^cond/switch_t", dtype=F, value=np.float32(2))
    table = node("cond/table", "Const", "^cond/switch_t", dtype=F, value=TABLE)
    axis = node("cond/axis", "Const", "^cond/switch_t", dtype=I32, value=np.int32(0))
    return _graph_def(
        node("x", "Placeholder", dtype=F),
        node("p", "Placeholder", dtype=B),
        node("i", "Placeholder", dtype=I32),
        *pivots(),
        switch("x_t", "x"),
        switch("i_t", "i", dtype=I32),
        two,
        node("cond/mul", "Mul", "cond/x_t:1", "cond/two", T=F),
        node("cond/exp", "Exp", "cond/mul", T=F),
        table,
        axis,
        node(
            "cond/rows",
            "GatherV2",
            "cond/table",
            "cond/i_t:1",
            "cond/axis",
            Tparams=F,
            Tindices=I32,
            Taxis=I32,
        ),
        node("cond/sum", "AddV2", "cond/exp", "cond/rows", T=F),
        switch("x_f", "x"),
        node("cond/neg", "Neg", "cond/x_f", T=F),
        node("cond/Merge", "Merge", "cond/neg", "cond/sum", T=F, N=2),
        node("three", "Const", dtype=F, value=np.float32(3)),
        node("scaled", "Mul", "cond/Merge", "three", T=F),
        node("y", "AddV2", "scaled", "x", T=F),
        *extra,
    )


def _ops(graph_def) -> list[str]:
    return [n.op for n in graph_def.node]


def _run(graph_def, library, fetches, feeds):
    graph = Graph(functions=library)
    graph.import_graph_def(graph_def)
    with Session(graph=graph) as session:
        return session.run(fetches, feeds)


FEEDS = [{"x:0": X, "p:0": p, "i:0": np.array([1, 3], np.int32)} for p in (True, False)]


@pytest.mark.parametrize("feeds", FEEDS, ids=["true", "false"])
def test_raised_cond_runs_as_the_dataflow_one(feeds):
    original = gathered_cond()
    copy = original.SerializeToString()
    raised, library = raise_conds(original, {})
    assert original.SerializeToString() == copy  # pure
    ops = _ops(raised)
    assert ops.count("StatelessIf") == 1 and not {"Switch", "Merge"} & set(ops), ops
    assert {"cond/Merge", "y"} <= {n.name for n in raised.node}  # names kept
    assert len(library) == 2
    want = _run(original, {}, ["y:0", "cond/Merge:0"], feeds)
    got = _run(raised, library, ["y:0", "cond/Merge:0"], feeds)
    for a, b in zip(want, got):
        np.testing.assert_allclose(b, a, rtol=1e-6)


def _delegated(graph_def, feeds_list, fetches=("y:0",), options=None):
    """(native results or errors, delegated results or errors) per feeds, and the report."""
    native = Session(graph=Graph.from_graph_def(graph_def))
    delegated = Session(graph=Graph.from_graph_def(graph_def))
    signatures = [(list(feeds_list[0]), list(fetches))]
    report = delegate(delegated, options or DelegationOptions(), signatures)
    outcomes = []
    for feeds in feeds_list:
        pair = []
        for session in (native, delegated):
            try:
                pair.append(session.run(list(fetches), feeds))
            except errors.OpError as exc:
                pair.append(exc)
        outcomes.append(pair)
    native.close()
    delegated.close()
    return outcomes, report


def _assert_same(want, got):
    if isinstance(want, errors.OpError):
        assert type(got) is type(want), (want, got)
        return
    assert not isinstance(got, Exception), got
    for a, b in zip(want, got):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_raised_cond_is_one_onnx_if_in_a_cluster():
    outcomes, report = _delegated(gathered_cond(), FEEDS)
    assert [c.op_types for c in report.clusters if "StatelessIf" in c.op_types], report.summary()
    assert report.flops_share == 1.0 and not report.native_compute_ops_with_flops(), report.summary()
    for want, got in outcomes:
        _assert_same(want, got)
    assert not report.fallbacks, report.fallbacks


def test_if_with_clustered_branches_still_converts_whole():
    outcomes, report = _delegated(gathered_cond(), FEEDS, options=DelegationOptions(min_cluster_ops=1))
    assert [c for c in report.clusters if "StatelessIf" in c.op_types], report.summary()
    for want, got in outcomes:
        _assert_same(want, got)


def test_branch_guards_hold_only_where_the_branch_runs():
    """An index out of range in the branch taken is TF's error (the run goes native); in the
    branch not taken it is never read."""
    out_of_range = np.array([1, 7], np.int32)
    feeds = [{"x:0": X, "p:0": p, "i:0": out_of_range} for p in (True, False)]
    outcomes, report = _delegated(gathered_cond(), [FEEDS[0], *feeds])
    assert [c for c in report.clusters if "StatelessIf" in c.op_types], report.summary()
    (ok_native, ok_got), (bad_native, bad_got), (untaken_native, untaken_got) = outcomes
    _assert_same(ok_native, ok_got)
    assert isinstance(bad_native, errors.InvalidArgumentError)
    _assert_same(bad_native, bad_got)
    _assert_same(untaken_native, untaken_got)
    assert not report.fallbacks, report.fallbacks


def _if_graph(cond_dtype) -> Graph:
    """y = If(c, x) with then 2x and else x - 1, for TF's truthiness of ``c``."""
    then = function("then", [("v", F)], [("out", F, "twice:z:0")], [node("twice", "AddV2", "v", "v", T=F)])
    other = function(
        "other",
        [("v", F)],
        [("out", F, "less:z:0")],
        [node("one", "Const", dtype=F, value=np.float32(1)), node("less", "Sub", "v", "one:output:0", T=F)],
    )
    branch = node("if", "If", "c", "x")
    branch.attr["Tcond"].type = cond_dtype
    branch.attr["Tin"].list.type.append(F)
    branch.attr["Tout"].list.type.append(F)
    branch.attr["then_branch"].func.name, branch.attr["else_branch"].func.name = "then", "other"
    graph_def = _graph_def(
        node("c", "Placeholder", dtype=cond_dtype), node("x", "Placeholder", dtype=F), branch
    )
    graph_def.node.append(node("y", "Identity", "if", T=F))
    graph_def.library.function.extend([then, other])
    return Graph.from_graph_def(graph_def)


@pytest.mark.parametrize(
    "cond",
    [
        np.array(True),
        np.array(False),
        np.int32(3),
        np.int32(0),
        np.zeros(2, np.float32),
        np.zeros(0, np.float32),
    ],
    ids=["true", "false", "nonzero", "zero", "elements", "empty"],
)
def test_if_predicate_is_tensorflows_truthiness(cond):
    cond = np.asarray(cond)
    graph = _if_graph(dtypes.from_numpy(cond.dtype))
    feeds = {"c:0": cond, "x:0": X}
    with Session(graph=graph) as native:
        want = native.run("y:0", feeds)
    model = convert_subgraph(
        _cluster_def(graph),
        ["c", "x"],
        ["y:0"],
        Signature((dtypes.from_numpy(cond.dtype), F), (cond.ndim, 2)),
    )
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"input_0": cond, "input_1": X})
    np.testing.assert_allclose(got, want)


def _cluster_def(graph: Graph) -> graph_pb2.GraphDef:
    graph_def = graph.as_graph_def()
    graph_def.library.function.extend(graph.functions.values())
    return graph_def


def counting_loop_with_cond() -> graph_pb2.GraphDef:
    """``i = 0; while i < n: i += 1 if i % 2 == 0 else 2`` as tf.compat.v1 writes it (the cond's
    branches are constants ordered by the pivots only)."""
    return _graph_def(
        node("n", "Placeholder", dtype=I32),
        const("zero", 0),
        node("enter_i", "Enter", "zero", T=I32, frame_name="L"),
        node("enter_n", "Enter", "n", T=I32, frame_name="L", is_constant=True),
        node("merge", "Merge", "enter_i", "next", T=I32, N=2),
        node("less", "Less", "merge", "enter_n", T=I32),
        node("loop_cond", "LoopCond", "less"),
        node("switch", "Switch", "merge", "loop_cond", T=I32),
        node("body", "Identity", "switch:1", T=I32),
        node("two", "Const", "^body", dtype=I32, value=np.int32(2)),
        node("mod", "FloorMod", "body", "two", T=I32),
        node("zero_b", "Const", "^body", dtype=I32, value=np.int32(0)),
        node("even", "Equal", "mod", "zero_b", T=I32),
        *pivots("even"),
        node("cond/one", "Const", "^cond/switch_t", dtype=I32, value=np.int32(1)),
        node("cond/two", "Const", "^cond/switch_f", dtype=I32, value=np.int32(2)),
        node("cond/Merge", "Merge", "cond/two", "cond/one", T=I32, N=2),
        node("add", "AddV2", "body", "cond/Merge", T=I32),
        node("next", "NextIteration", "add", T=I32),
        node("exit", "Exit", "switch", T=I32),
        node("y", "Identity", "exit", T=I32),
    )


def test_cond_inside_a_loop_makes_the_frame_raisable():
    original = counting_loop_with_cond()
    left, _ = raise_frames(original, {})
    assert "Enter" in _ops(left)  # a cond inside: the frame stays a frame
    raised, library = raise_frames(*raise_conds(original, {}))
    assert _ops(raised).count("While") == 1 and not {"Enter", "Switch", "Merge"} & set(_ops(raised))
    body = [f for f in library.values() if any(n.op == "StatelessIf" for n in f.node_def)]
    assert len(body) == 1, sorted(library)
    for n in (0, 1, 4, 5):
        assert _run(raised, library, "y:0", {"n:0": np.int32(n)}) == _run(original, {}, "y:0", {"n:0": n})
    outcomes, report = _delegated(original, [{"n:0": np.int32(n)} for n in (0, 1, 4, 5)])
    for want, got in outcomes:
        _assert_same(want, got)
    assert [c for c in report.clusters if "While" in c.op_types] and not report.native, report.summary()


@pytest.mark.parametrize(
    "extra",
    [
        [node("index", "Identity", "cond/Merge:1", T=I32)],  # the Merge's value_index is read
        [node("leak", "Identity", "cond/exp", T=F)],  # a branch value leaves other than by a Merge
        [node("after", "NoOp", "^cond/neg")],  # a control edge leaves a branch
    ],
    ids=["value_index", "leaked_value", "leaked_control"],
)
def test_irregular_cond_is_left_alone(extra):
    original = gathered_cond(*extra)
    raised, library = raise_conds(original, {})
    assert raised.SerializeToString() == original.SerializeToString() and not library


def test_ref_switch_is_left_alone():
    original = gathered_cond()
    for n in original.node:
        if n.name == "cond/x_f":
            n.attr["T"].type = dtypes.DT_FLOAT + dtypes.REF_OFFSET
    raised, _ = raise_conds(original, {})
    assert "Merge" in _ops(raised)


# -- oracle models -----------------------------------------------------------------------------
ENTRIES = {e.name: e for e in catalog.discover()}


def _read(manifest: dict, relative: str) -> np.ndarray:
    return tensor_util.make_ndarray(
        tensor_pb2.TensorProto.FromString((manifest["dir"] / relative).read_bytes())
    )


@pytest.mark.parametrize("name", ["tf1_cond_while", "cf_v1_while_cond"])
def test_oracle_conds_run_whole_in_onnxruntime(name):
    """Every cond and loop raised: one cluster with all the FLOPs, TF's outputs."""
    manifest = corpus.check_current(ENTRIES[name])
    tags = manifest["cases"][0]["tags"]
    bundle = load_saved_model(manifest["export_path"], tags, delegation=True)
    try:
        report = bundle.session.delegation_report
        kinds = {kind for kind, _ in report.native.values()}
        assert not kinds & {"Switch", "Merge", "Enter"}, report.summary()
        assert report.flops_share == 1.0 and not report.native_compute_ops_with_flops(), report.summary()
        for case in manifest["cases"]:
            signature = bundle.signature_defs[case["signature"]]
            feeds = {signature.inputs[k].name: _read(manifest, p) for k, p in case["inputs"].items()}
            got = bundle.session.run({k: signature.outputs[k].name for k in case["outputs"]}, feeds)
            for key, path in case["outputs"].items():
                want = _read(manifest, path)
                rtol, atol = max(case["rtol"], 1e-5), max(case["atol"], 1e-6)
                np.testing.assert_allclose(got[key], want, rtol=rtol, atol=atol, err_msg=f"{name} {key}")
        assert not report.fallbacks, report.summary()
    finally:
        bundle.close()
