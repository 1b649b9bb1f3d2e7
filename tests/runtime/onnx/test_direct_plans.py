"""A plan that is one step from the feeds to the fetches runs as one call (``Plan.direct``), and a
plan of quiet kernels (onnxruntime clusters) runs without ``np.errstate``; both give what the
slot-by-slot interpreter gives, errors and edge cases included."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest

from apis.tensorflow.core.protobuf import config_pb2
from loader import load_saved_model
from runtime import Graph, Session, dtypes, errors
from runtime.execution.interpreter import fetched_values, run_plan
from runtime.onnx import DelegationOptions, delegate, propose_clusters, runner_of
from runtime.onnx import cluster as cluster_lib
from runtime.onnx.converter import CONVERTERS
from tests.runtime.onnx.test_partition import F, const, delegated_session, graph, node

REPO = Path(__file__).resolve().parents[3]
ORACLE = REPO / ".oracle" / "cache"
# Converters only whole graphs use (test_converters.py counts them as checked here).
WHOLE_GRAPH_CHECKED = frozenset({"NoOp"})


def _plan(session: Session, fetches: list[str], feeds: list[str]):
    g = session.graph
    return session.plan(
        [g.get_tensor_by_name(n) for n in feeds], [g.get_tensor_by_name(n) for n in fetches], []
    )


def _two_outputs():
    return graph(
        node("x", "Placeholder", dtype=F),
        node("y", "Placeholder", dtype=F),
        const("two", 2.0),
        node("m", "Mul", "x", "two", T=F),
        node("a", "AddV2", "m", "y", T=F),
        node("s", "Sum", "a", "axes", T=F),
        node("axes", "Const", dtype=dtypes.DT_INT32, value=np.int32([0, 1])),
        node("e", "Exp", "a", T=F),
    )


def test_a_delegated_model_is_one_quiet_direct_call_and_matches_native():
    path = str(REPO / "models" / "keras_mlp" / "1")
    delegated = load_saved_model(path, ["serve"], delegation=True)
    native = load_saved_model(path, ["serve"], delegation=False)
    try:
        signature = delegated.signature_defs["serving_default"]
        fetches = [info.name for info in signature.outputs.values()]
        feeds = [info.name for info in signature.inputs.values()]
        run = delegated.session.make_callable(fetches, feeds)
        reference = native.session.make_callable(fetches, feeds)
        rng = np.random.default_rng(0)
        batches = [rng.normal(size=(n, 4)).astype(np.float32) for n in (1, 3, 1)]
        batches.append(np.asfortranarray(rng.normal(size=(5, 4)).astype(np.float32)))  # not C order
        batches.append(rng.normal(size=(6, 8)).astype(np.float32)[:, ::2])  # strided
        for x in batches:
            np.testing.assert_allclose(run(x)[0], reference(x)[0], rtol=1e-5, atol=1e-6)
        empty = run(np.zeros((0, 4), np.float32))[0]  # empty batches run natively
        assert empty.shape == (0, 3)
        plan = _plan(delegated.session, fetches, feeds)
        assert plan.direct is not None and plan.quiet
        assert not _plan(native.session, fetches, feeds).quiet
    finally:
        delegated.close()
        native.close()


def test_direct_picks_fetches_in_order_repeats_them_and_makes_0d_results_scalars():
    session = delegated_session(_two_outputs())
    x, y = np.float32([[1, 2], [3, 4]]), np.float32([[0.5, 0.5], [0.5, 0.5]])
    fetches = ["s:0", "e:0", "s:0"]
    got = session.run(fetches, {"y:0": y, "x:0": x})
    a = 2 * x + y
    assert isinstance(got[0], np.float32) and got[0] == got[2] == np.float32(a.sum())
    np.testing.assert_allclose(got[1], np.exp(a), rtol=1e-6)
    plan = _plan(session, fetches, ["y:0", "x:0"])
    assert plan.direct is not None and plan.quiet
    # The slot-by-slot interpreter on the same plan gives the same values.
    slow = run_plan(plan, [y, x])
    assert slow[0] == got[0] and np.array_equal(slow[1], got[1])


def test_a_two_input_cluster_follows_its_inputs_signatures_call_after_call(caplog):
    """The two-input hot path tries the previous call's (dtype, rank) pair first: ranks that
    change between calls compile anew, and return to the earlier ones, every run in onnxruntime
    (a run given the wrong compiled session would fail there and warn)."""
    g = graph(
        node("x", "Placeholder", dtype=dtypes.DT_DOUBLE),
        node("y", "Placeholder", dtype=dtypes.DT_DOUBLE),
        node("m", "Mul", "x", "y", T=dtypes.DT_DOUBLE),
        node("e", "Exp", "m", T=dtypes.DT_DOUBLE),
    )
    session = delegated_session(g)
    run = session.make_callable("e:0", ["x:0", "y:0"])
    rng = np.random.default_rng(1)
    shapes = [((3,), (3,)), ((2, 3), (2, 3)), ((3,), (3,)), ((2, 3), (3,)), ((4, 3), (4, 3))]
    for x_shape, y_shape in shapes:
        x, y = rng.normal(size=x_shape), rng.normal(size=y_shape)
        np.testing.assert_allclose(run(x, y), np.exp(x * y), rtol=1e-12)
    assert _plan(session, ["e:0"], ["x:0", "y:0"]).direct is not None
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_plans_that_are_not_one_step_from_feeds_to_fetches_are_not_direct():
    session = delegated_session(_two_outputs())
    x = np.float32([[1, 2]])
    # A fetched feed, and a fetch of a tensor the cluster does not make (the fed placeholder).
    assert _plan(session, ["x:0", "e:0"], ["x:0", "y:0"]).direct is None
    assert session.run(["x:0", "e:0"], {"x:0": x, "y:0": x})[0] is x
    # Not every input fed: the placeholder runs as its own step and fails as TF does.
    with pytest.raises(errors.InvalidArgumentError, match="must feed a value for placeholder"):
        session.run("e:0", {"x:0": x})


def _waits_on_weights(*gate) -> Graph:
    """A frozen Keras graph's shape: a NoOp waits on every weight (its control edges, left from
    the variable reads), and the output on the NoOp; ``gate``: nodes, the last of which the last
    weight waits on."""
    weights = [const(f"w{i}", np.eye(2) * (i + 2)) for i in range(3)]
    if gate:
        weights[-1].input.append(f"^{gate[-1].name}")
    return graph(
        *gate,
        node("x", "Placeholder", dtype=F),
        *weights,
        node("h0", "MatMul", "x", "w0", T=F),
        node("h1", "MatMul", "h0", "w1", T=F),
        node("h2", "MatMul", "h1", "w2", T=F),
        node("done", "NoOp", "^w0", "^w1", "^w2"),
        node("y", "Identity", "h2", "^done", T=F),
    )


def test_control_edges_from_constants_cost_no_steps():
    """Weights that only order a NoOp are values of the plan, not steps: the native plan is the
    three MatMuls, the NoOp and the Identity waiting on it, and the delegated one a single direct call (in NASNetMobile's
    frozen graph 1126 Const steps ran on every call: 1 ms at batch 1)."""
    x = np.float32([[1, 2]])
    with Session(graph=_waits_on_weights()) as native:
        plan = _plan(native, ["y:0"], ["x:0"])
        assert sorted(step.op.type for step in plan.steps) == [
            "Identity",
            "MatMul",
            "MatMul",
            "MatMul",
            "NoOp",
        ]
        np.testing.assert_allclose(native.run("y:0", {"x:0": x}), x * 24)
    delegated = delegated_session(_waits_on_weights())
    assert _plan(delegated, ["y:0"], ["x:0"]).direct is not None
    np.testing.assert_allclose(delegated.run("y:0", {"x:0": x}), x * 24)


def test_a_constant_gated_by_a_branch_is_dead_where_the_branch_is_not_taken():
    """A TF1 cond's constants wait on its pivots: they keep their steps, and the Merge takes the
    branch the predicate picks."""
    g = graph(
        node("x", "Placeholder", dtype=F),
        node("p", "Placeholder", dtype=dtypes.DT_BOOL),
        node("s", "Switch", "x", "p", T=F),
        node("pivot_f", "Identity", "s", T=F),
        node("pivot_t", "Identity", "s:1", T=F),
        node("if_false", "Const", "^pivot_f", dtype=F, value=np.float32(2)),
        node("if_true", "Const", "^pivot_t", dtype=F, value=np.float32(1)),
        node("m", "Merge", "if_true", "if_false", T=F, N=2),
    )
    with Session(graph=g) as session:
        for predicate, want in ((True, 1), (False, 2)):
            assert session.run("m:0", {"x:0": np.float32(0), "p:0": predicate}) == want


def test_native_single_step_plan_is_direct_not_quiet_and_names_the_failing_node():
    g = graph(
        node("x", "Placeholder", dtype=F),
        node("w", "Placeholder", dtype=F),
        node("mm", "MatMul", "x", "w", T=F),
        node("d", "RealDiv", "x", "w", T=F),
    )
    with Session(graph=g) as session:
        plan = _plan(session, ["mm:0"], ["x:0", "w:0"])
        assert plan.direct is not None and not plan.quiet
        with pytest.raises(errors.InvalidArgumentError, match=r"\{\{node mm\}\}"):
            session.run("mm:0", {"x:0": np.ones((2, 3), np.float32), "w:0": np.ones((2, 3), np.float32)})
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a native division by zero warns nothing, as in TF
            got = session.run("d:0", {"x:0": np.float32([1, 0]), "w:0": np.float32([0, 0])})
        assert np.isinf(got[0]) and np.isnan(got[1])


def test_a_quiet_plan_silences_numpy_in_its_native_validation_and_fallback():
    g = graph(
        node("x", "Placeholder", dtype=F),
        node("w", "Placeholder", dtype=F),
        node("d", "RealDiv", "x", "w", T=F),
        node("l", "Log", "d", T=F),
    )
    session = delegated_session(g)
    plan = _plan(session, ["l:0"], ["x:0", "w:0"])
    assert plan.quiet and plan.direct is not None
    x, w = np.float32([1, -1, 0]), np.float32([0, 1, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = session.run("l:0", {"x:0": x, "w:0": w})  # compiles, validates against numpy
        empty = session.run("l:0", {"x:0": x[:0], "w:0": w[:0]})  # runs natively
    assert np.isposinf(first[0]) and np.isnan(first[1]) and np.isnan(first[2])
    assert empty.shape == (0,)


@pytest.mark.parametrize(
    "model",
    ["loader_tf2_module", "loader_partitioned_sharded", "loader_many_variables", "tf1_multi_metagraph"],
)
def test_a_small_model_that_converts_whole_is_one_cluster_and_matches_native(model):
    """Below ``min_cluster_ops``, a cluster holding the whole computation is still delegated:
    its run is one onnxruntime call. TF2's inlined calls leave NoOps and IdentityNs in it."""
    path = str(ORACLE / model / "saved_model")
    delegated = load_saved_model(path, ["serve"], delegation=True)
    native = load_saved_model(path, ["serve"], delegation=False)
    try:
        report = delegated.session.delegation_report
        assert len(report.clusters) == 1 and not report.native, report.summary()
        for name, signature in delegated.signature_defs.items():
            if not signature.inputs or name.startswith("__"):
                continue
            feeds = [info.name for info in signature.inputs.values()]
            fetches = [info.name for info in signature.outputs.values()]
            values = [_example(native.session.graph.get_tensor_by_name(n)) for n in feeds]
            ours = delegated.session.make_callable(fetches, feeds)(*values)
            reference = native.session.make_callable(fetches, feeds)(*values)
            for a, b in zip(ours, reference, strict=True):  # float sums: onnxruntime's order
                np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
            assert _plan(delegated.session, fetches, feeds).direct is not None
    finally:
        delegated.close()
        native.close()


def _example(tensor) -> np.ndarray:
    shape = [d if d is not None and d >= 0 else 2 for d in (tensor.shape or [])]
    return np.random.default_rng(1).normal(size=shape).astype(dtypes.as_numpy_dtype(tensor.dtype))


def test_a_direct_plan_serves_runs_with_a_timeout_and_traces_when_asked():
    session = delegated_session(_two_outputs())
    x = np.float32([[1, 2]])
    run = session.make_callable(["e:0"], ["x:0", "y:0"], accept_options=True)
    want = np.exp(2 * x + x)
    timed = config_pb2.RunOptions(timeout_in_ms=60_000)  # a served request's deadline
    np.testing.assert_allclose(run(x, x, options=timed)[0], want, rtol=1e-6)
    traced = config_pb2.RunOptions(trace_level=config_pb2.RunOptions.FULL_TRACE)
    metadata = config_pb2.RunMetadata()
    np.testing.assert_allclose(run(x, x, options=traced, run_metadata=metadata)[0], want, rtol=1e-6)
    nodes = [n.node_name for d in metadata.step_stats.dev_stats for n in d.node_stats]
    assert nodes == ["ort_cluster_0"]


def test_independent_parts_of_signatures_merge_into_one_whole_cluster_once():
    """Two signatures that compute the same two independent parts: the parts merge into one
    cluster (kept below ``min_cluster_ops``: it is all either signature computes), and the
    second signature's identical parts do not merge again."""
    g = graph(
        node("x", "Placeholder", dtype=F),
        node("w", "Placeholder", dtype=F),
        node("n0", "Exp", "x", T=F),
        node("n", "Log", "n0", T=F),
        node("e0", "Exp", "w", T=F),
        node("e", "Log", "e0", T=F),
    )
    both = frozenset({0, 1})
    clusters = propose_clusters(g, within=dict.fromkeys(["n0", "n", "e0", "e"], both), min_cluster_ops=6)
    assert [sorted(c.nodes) for c in clusters] == [["e", "e0", "n", "n0"]]
    within = {"n0": frozenset({0}), "n": frozenset({0}), "e0": frozenset({1}), "e": frozenset({1})}
    apart = propose_clusters(g, within=within, min_cluster_ops=6)
    assert sorted(sorted(c.nodes) for c in apart) == [["e", "e0"], ["n", "n0"]]  # each its signature's whole
    assert propose_clusters(g, min_cluster_ops=6) != []


def test_a_whole_signature_of_two_elementwise_ops_stays_native_with_its_variables_as_constants():
    """y = a * x + b is faster as two numpy calls than as an onnxruntime call (which also lets go
    of the GIL, a thread switch in a busy server): no cluster. Its frozen variable reads are
    constants of the plan, so the run is the two math steps. A MatMul and an add are one call."""
    path = str(ORACLE / "tf1_half_plus_two" / "saved_model")
    delegated = load_saved_model(path, ["serve"], delegation=True)
    native = load_saved_model(path, ["serve"], delegation=False)
    try:
        assert not delegated.session.delegation_report.clusters
        feeds, fetches = ["x:0"], ["y:0"]  # predict_x_to_y
        x = np.float32([[1.0], [2.5]])
        got = delegated.session.make_callable(fetches, feeds)(x)
        want = native.session.make_callable(fetches, feeds)(x)
        np.testing.assert_array_equal(got[0], want[0])
        steps = [step.op.type for step in _plan(delegated.session, fetches, feeds).steps]
        assert steps == ["Mul", "AddV2"]
    finally:
        delegated.close()
        native.close()
    g = graph(
        node("x", "Placeholder", dtype=F),
        const("w", np.float32([[1.0]])),
        node("m", "MatMul", "x", "w", T=F),
        node("y", "AddV2", "m", "x", T=F),
    )
    assert [sorted(c.nodes) for c in propose_clusters(g, min_cluster_ops=6)] == [["m", "y"]]
    g = graph(
        node("x", "Placeholder", dtype=F), node("m", "Mul", "x", "x", T=F), node("y", "AddV2", "m", "x", T=F)
    )
    assert propose_clusters(g, min_cluster_ops=6) == []


def test_forwarding_ops_do_not_count_toward_a_clusters_size():
    """Identity and NoOp cost no interpreter step natively: a cluster of two sums and five
    Identities is below min_cluster_ops=6 (a While body's, say, run once per iteration)."""
    g = graph(
        node("x", "Placeholder", dtype=F),
        node("y", "Placeholder", dtype=F),
        node("z", "Placeholder", dtype=F),
        node("a", "AddV2", "x", "y", T=F),
        *[node(f"i{k}", "Identity", "a" if k == 0 else f"i{k - 1}", T=F) for k in range(5)],
        node("b", "AddV2", "i4", "z", T=F),
        node("c", "Neg", "y", T=F),  # another native step of the same signature: nothing is whole
        node("d", "Atan", "c", T=F),
    )
    assert propose_clusters(g, min_cluster_ops=6) == []
    assert len(propose_clusters(g, min_cluster_ops=2)) == 1


def test_a_small_convolution_is_still_delegated():
    """numpy has no convolution (windows are gathered first): a conv cluster is kept whatever
    its size, even beside native steps."""
    conv = node("c", "Conv2D", "x", "w", T=F)
    conv.attr["strides"].list.i.extend([1, 1, 1, 1])
    conv.attr["padding"].s = b"SAME"
    g = graph(
        node("x", "Placeholder", dtype=F),
        node("w", "Const", dtype=F, value=np.ones((1, 1, 1, 1), np.float32)),
        conv,
        node("r", "Relu", "c", T=F),
        node("a", "Atan", "r", T=F),  # a native step: the signature is not one call
    )
    clusters = propose_clusters(g, min_cluster_ops=6, heavy_flops=1e12)
    assert [sorted(c.nodes) for c in clusters] == [["c", "r"]]


def _one_input() -> Session:
    """One input, two outputs (an exp and its sum, a scalar) of one cluster."""
    g = graph(
        node("x", "Placeholder", dtype=F),
        node("e", "Exp", "x", T=F),
        node("axes", "Const", dtype=dtypes.DT_INT32, value=np.int32([0, 1])),
        node("s", "Sum", "e", "axes", T=F),
    )
    session = Session(graph=g)
    delegate(session, DelegationOptions(min_cluster_ops=1), signatures=[(["x:0"], ["e:0", "s:0"])])
    return session


def _is_the_clusters_own(direct) -> bool:
    return direct.__qualname__ == "ClusterRunner.plan_run.<locals>.plan_run"


def _count_fast_runs(monkeypatch) -> list:
    """One entry per onnxruntime call a cluster's ``plan_run`` makes itself."""
    calls = []
    picked_run = cluster_lib.picked_run

    def counting(*args):
        run, names, guarded = picked_run(*args)

        def counted(*run_args):
            calls.append(1)
            return run(*run_args)

        return counted, names, guarded

    monkeypatch.setattr(cluster_lib, "picked_run", counting)
    return calls


@pytest.mark.parametrize("fetches", [["s:0", "e:0"], ["e:0", "s:0"], ["e:0"], ["s:0"], ["s:0", "e:0", "s:0"]])
def test_a_one_input_clusters_plan_is_its_own_call_and_gives_what_the_interpreter_gives(fetches, monkeypatch):
    """The cluster's ``plan_run`` asks onnxruntime for the fetches in fetch order; a 0-d fetch is
    a numpy scalar, as TF's are. A repeated fetch keeps the plan's general direct call."""
    fast_runs = _count_fast_runs(monkeypatch)
    session = _one_input()
    plan = _plan(session, fetches, ["x:0"])
    assert _is_the_clusters_own(plan.direct) == (len(set(fetches)) == len(fetches))
    run = session.make_callable(fetches, ["x:0"])
    rng = np.random.default_rng(2)
    for _ in range(3):  # the first run learns the signature, the next ones take the fast path
        x = rng.normal(size=(2, 3)).astype(np.float32)
        got = run(x)
        slow = fetched_values(plan, run_plan(plan, [x]))  # the slot-by-slot interpreter, same runner
        want = {"e:0": np.exp(x), "s:0": np.exp(x).sum()}
        for name, value, reference, direct in zip(fetches, got, slow, plan.direct([x]), strict=True):
            assert type(direct) is type(reference) and np.array_equal(direct, reference)
            assert type(value) is type(reference) is (np.float32 if name == "s:0" else np.ndarray)
            np.testing.assert_allclose(value, want[name], rtol=1e-5)
            np.testing.assert_array_equal(value, reference)
    # The callable's runs after the first (it fetches a repeated tensor once), and every run of
    # plan.direct where it is the same plan (no repeat): it learned the signature from the callable.
    assert len(fast_runs) == (5 if len(set(fetches)) == len(fetches) else 2)


def test_a_one_input_clusters_plan_follows_signatures_and_takes_odd_inputs_the_general_way(caplog):
    session = _one_input()
    run = session.make_callable(["e:0", "s:0"], ["x:0"])
    rng = np.random.default_rng(3)
    for shape in [(2, 3), (2, 3), (4, 1, 2), (4, 1, 2), (2, 3), (1, 1), (2, 3)]:
        x = rng.normal(size=shape).astype(np.float32)
        e, s = run(x)
        np.testing.assert_allclose(e, np.exp(x), rtol=1e-6)
        np.testing.assert_allclose(s, np.exp(x).sum(axis=(0, 1)), rtol=1e-5)
    e, s = run(np.zeros((0, 3), np.float32))  # empty: native
    assert e.shape == (0, 3) and s == 0 and type(s) is np.float32
    e, s = run([[0.0, 1.0]])  # not an ndarray: converted by the Session, then the fast path
    np.testing.assert_allclose(e, np.exp([[0.0, 1.0]]), rtol=1e-6)
    x64 = np.ones((2, 3))  # float64 fed to a float32 placeholder: converted as TF does
    np.testing.assert_allclose(run(x64)[0], np.exp(x64), rtol=1e-6)
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    runner = runner_of(session.graph.get_operation_by_name("ort_cluster_0"))
    assert not runner._native_only and len(runner._runs) == 2  # ranks 2 and 3


def test_a_one_input_clusters_plan_stops_using_onnxruntime_once_the_cluster_falls_back(monkeypatch):
    """A signature whose validation fails makes the whole cluster native: the signature the
    plan's own call had learned runs natively from then on too."""
    right = CONVERTERS["Exp"]

    def exp_wrong_for_rank_3(node, b):
        if node.rank(0) == 3:
            return b.op("Sigmoid", node.inputs)  # deliberately wrong
        return right.fn(node, b)

    monkeypatch.setitem(CONVERTERS, "Exp", dataclasses.replace(right, fn=exp_wrong_for_rank_3))
    fast_runs = _count_fast_runs(monkeypatch)
    session = _one_input()
    run = session.make_callable(["e:0"], ["x:0"])
    x = np.float32([[0.5, 1.0]])
    for _ in range(3):
        np.testing.assert_allclose(run(x)[0], np.exp(x), rtol=1e-6)
    assert len(fast_runs) == 2  # the first run learned the signature
    rank_3 = np.float32([[[0.5]]])  # fails validation: the cluster falls back
    np.testing.assert_allclose(run(rank_3)[0], np.exp(rank_3), rtol=1e-6)
    runner = runner_of(session.graph.get_operation_by_name("ort_cluster_0"))
    assert runner._native_only and session.delegation_report.fallbacks
    for _ in range(2):
        np.testing.assert_allclose(run(x)[0], np.exp(x), rtol=1e-6)
    assert len(fast_runs) == 2


def test_a_guard_that_fails_in_a_one_input_clusters_plan_gives_tfs_error(caplog, monkeypatch):
    """GatherV2 of a constant table at fed indices: a negative index (ONNX's Gather counts it
    from the end, TF's fails) fails the guard in the plan's own call too, and the native run
    raises TF's error; the next good run is fast."""
    g = graph(
        node("i", "Placeholder", dtype=dtypes.DT_INT32),
        node("table", "Const", dtype=F, value=np.arange(12, dtype=np.float32).reshape(4, 3)),
        node("axis", "Const", dtype=dtypes.DT_INT32, value=np.int32(0)),
        node(
            "g", "GatherV2", "table", "i", "axis", Tparams=F, Tindices=dtypes.DT_INT32, Taxis=dtypes.DT_INT32
        ),
        node("e", "Exp", "g", T=F),
    )
    fast_runs = _count_fast_runs(monkeypatch)
    session = delegated_session(g)
    run = session.make_callable(["e:0"], ["i:0"])
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    for indices in ([0, 3], [1, 2]):
        (got,) = run(np.int32(indices))
        np.testing.assert_allclose(got, np.exp(table[indices]), rtol=1e-6)
    assert _is_the_clusters_own(_plan(session, ["e:0"], ["i:0"]).direct)
    with pytest.raises(errors.InvalidArgumentError, match=r"indices\[1\] = -1 is not in \[0, 4\)"):
        run(np.int32([0, -1]))
    (got,) = run(np.int32([2]))
    np.testing.assert_allclose(got, np.exp(table[[2]]), rtol=1e-6)
    assert len(fast_runs) == 3  # the failed guard's run too
    runner = runner_of(session.graph.get_operation_by_name("ort_cluster_0"))
    assert not runner._native_only and session.delegation_report.summary().count("guard") == 0
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
