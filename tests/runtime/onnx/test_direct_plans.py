"""A plan that is one step from the feeds to the fetches runs as one call (``Plan.direct``), and a
plan of quiet kernels (onnxruntime clusters) runs without ``np.errstate``; both give what the
slot-by-slot interpreter gives, errors and edge cases included."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from apis.tensorflow.core.protobuf import config_pb2
from loader import load_saved_model
from runtime import Session, dtypes, errors
from runtime.interpreter import run_plan
from runtime.onnx import propose_clusters
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
    native = load_saved_model(path, ["serve"])
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
    native = load_saved_model(path, ["serve"])
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
    native = load_saved_model(path, ["serve"])
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
