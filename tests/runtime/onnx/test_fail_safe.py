"""Delegation fails safe: a partition is never unsound, and a failure at any stage (partition,
conversion, validation, a cluster's first run, a later run of the rewritten graph) leaves the
model answering what the native kernels answer, said once in the log and in the report."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from loader import load_saved_model
from runtime import Graph, Session, errors
from runtime.onnx import cluster as cluster_lib
from runtime.onnx import converters, fuse, partition, propose_clusters
from runtime.onnx.contraction import Contraction, contraction_cycle
from tests.oracle import catalog, corpus
from tests.runtime.onnx.test_corpus import assert_close, read_tensor, run_cases
from tests.runtime.onnx.test_partition import F, graph, node


def crossed() -> Graph:
    """{a, e} and {d, b} are each convex, but contracted they wait on each other:
    a -> native -> b and d -> e."""
    return graph(
        node("x", "Placeholder", dtype=F),
        node("a", "Exp", "x", T=F),
        node("d", "Sigmoid", "x", T=F),
        node("native", "Atan", "a", T=F),
        node("b", "Mul", "native", "d", T=F),
        node("e", "Mul", "a", "d", T=F),
    )


def preds_of(g: Graph) -> dict[str, list[str]]:
    return {
        op.name: [t.op.name for t in op.inputs] + [c.name for c in op.control_inputs]
        for op in g.get_operations()
    }


def test_contraction_cycle_finds_clusters_that_wait_on_each_other():
    preds = preds_of(crossed())
    assert contraction_cycle([("a", "e"), ("d", "b")], preds) == [0, 1]
    assert contraction_cycle([("a",), ("d", "b", "e")], preds) is None


def test_a_join_that_closes_a_cycle_through_another_cluster_is_refused():
    g = crossed()
    clusters = propose_clusters(g)
    assert contraction_cycle([c.nodes for c in clusters], preds_of(g)) is None
    x = np.array([0.5, -1.0], np.float32)
    with Session(graph=g) as native, Session(graph=Graph.from_graph_def(fuse(g, clusters))) as fused:
        for got, want in zip(fused.run(["b:0", "e:0"], {"x:0": x}), native.run(["b:0", "e:0"], {"x:0": x})):
            np.testing.assert_allclose(got, want, rtol=1e-6)


def test_contraction_reaches_through_a_cluster_taken_whole():
    order = ["x", "a", "d", "native", "b", "e"]
    state = Contraction(preds_of(crossed()), {n: i for i, n in enumerate(order)})
    state.new(0, "a")
    state.new(1, "d")
    state.add(1, "b")
    assert state.reaches({0}, {"e"})  # a -> native -> {d, b} -> e
    assert not state.reaches({1}, {"e"})


def test_an_unsound_partition_is_caught_and_left_native(monkeypatch, caplog):
    monkeypatch.setattr(Contraction, "reaches", lambda self, group, start: False)  # a broken check
    g = crossed()
    with caplog.at_level(logging.WARNING, logger="runtime.onnx.partition"):
        clusters = propose_clusters(g)
    assert partition.UNSOUND_PARTITION in caplog.text
    assert contraction_cycle([c.nodes for c in clusters], preds_of(g)) is None
    Graph.from_graph_def(fuse(g, clusters))  # imports: no cycle


# -- forced failures on real models -----------------------------------------------------------
ENTRIES = {e.name: e for e in catalog.discover()}
MODELS = ["keras_mlp", "real_dynamic_rnn_stripped"]


def check_against_tf(manifest: dict, results: list) -> None:
    for case, got in results:
        assert not isinstance(got, Exception), f"{case['signature']}: {got!r}"
        for key, path in case["outputs"].items():
            want = read_tensor(manifest, path)
            assert_close(got[key], want, max(case["rtol"], 1e-4), max(case["atol"], 1e-5), key)


def forced(manifest: dict, caplog) -> tuple[list, object]:
    with caplog.at_level(logging.WARNING):
        return run_cases(manifest, ["serve"], True)


def fail(*_, **__):
    raise RuntimeError("forced failure")


@pytest.mark.parametrize("name", MODELS)
def test_a_failing_partition_leaves_every_op_native(name, monkeypatch, caplog):
    manifest = corpus.check_current(ENTRIES[name])
    monkeypatch.setattr(partition, "propose_clusters", fail)
    results, report = forced(manifest, caplog)
    check_against_tf(manifest, results)
    assert not report.enabled and "forced failure" in report.fallbacks["graph"], report.summary()
    assert caplog.text.count("every op runs natively") == 1


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize(
    "stage, target, said",
    [
        ("convert", (converters, "convert_cluster"), "not converted"),
        ("first run", (cluster_lib.ClusterRunner, "_first_run"), "not converted"),
        ("validate", (cluster_lib.ClusterRunner, "_mismatch"), "validation failed"),
    ],
)
def test_a_failing_cluster_runs_natively(name, stage, target, said, monkeypatch, caplog):
    manifest = corpus.check_current(ENTRIES[name])
    owner, attribute = target
    replacement = (lambda self, ours, native: "forced mismatch") if stage == "validate" else fail
    monkeypatch.setattr(owner, attribute, replacement)
    results, report = forced(manifest, caplog)
    check_against_tf(manifest, results)
    assert report.fallbacks and all(said in why for why in report.fallbacks.values()), report.fallbacks
    # (one line per runner: clusters of loop bodies share names, and the report keys by name)
    assert caplog.text.count("runs natively from now on") >= len(report.fallbacks)


@pytest.mark.parametrize("name", MODELS)
def test_a_failing_run_of_the_rewritten_graph_is_answered_by_the_original(name, monkeypatch, caplog):
    """Every cluster raises on every run (a rewrite that broke the graph): each signature moves
    back to the original graph once, and answers as TF; a bad input still gets TF's error."""
    manifest = corpus.check_current(ENTRIES[name])
    monkeypatch.setattr(cluster_lib.ClusterRunner, "plan_run", lambda self, args, picks, general: fail)
    real_attach = cluster_lib.attach

    def broken(*args, **kwargs):
        runner = real_attach(*args, **kwargs)
        runner.run = fail
        return runner

    monkeypatch.setattr(cluster_lib, "attach", broken)
    results, report = forced(manifest, caplog)
    check_against_tf(manifest, results)
    signatures = {case["signature"] for case in manifest["cases"]}
    moved = [k for k in report.fallbacks if k.startswith("signature ")]
    assert len(moved) == len(signatures), report.fallbacks
    assert all("forced failure" in report.fallbacks[k] for k in moved)
    assert caplog.text.count("runs natively from now on (the delegated graph failed") == len(signatures)


def test_a_bad_input_gets_tfs_error_not_a_fallback(monkeypatch, caplog):
    manifest = corpus.check_current(ENTRIES["keras_mlp"])
    case = manifest["cases"][0]
    errors_seen = []
    for delegation in (False, True):
        bundle = load_saved_model(manifest["export_path"], ["serve"], delegation=delegation)
        signature = bundle.signature_defs[case["signature"]]
        (key,) = case["inputs"]
        good = read_tensor(manifest, case["inputs"][key])
        bad = np.zeros((2, good.shape[1] + 1), good.dtype)  # a wrong inner dimension
        fetches = {k: signature.outputs[k].name for k in case["outputs"]}
        bundle.session.run(fetches, {signature.inputs[key].name: good})
        with pytest.raises(errors.OpError) as raised:
            bundle.session.run(fetches, {signature.inputs[key].name: bad})
        errors_seen.append(type(raised.value))
        if delegation:
            assert not any(k.startswith("signature ") for k in bundle.session.delegation_report.fallbacks)
        bundle.close()
    assert errors_seen[0] is errors_seen[1] is errors.InvalidArgumentError


def test_a_loaded_model_keeps_no_second_graph_until_a_run_fails(monkeypatch):
    """The loader hands the Session what imports the graph again: the replaced graph is freed
    (a frozen model's weights are not held twice), and imported only for a failed run."""
    import gc
    import weakref

    from runtime.execution.session import Session as SessionClass

    replaced = []
    real = SessionClass._replace_graph

    def recording(self, graph, *args, **kwargs):
        replaced.append(weakref.ref(self.graph))
        return real(self, graph, *args, **kwargs)

    monkeypatch.setattr(SessionClass, "_replace_graph", recording)
    manifest = corpus.check_current(ENTRIES["keras_mlp"])
    bundle = load_saved_model(manifest["export_path"], ["serve"], delegation=True)
    try:
        gc.collect()
        assert replaced and replaced[0]() is None, "the replaced graph is still alive"
        assert bundle.session._fallback._graph is None  # not imported again before it is needed
    finally:
        bundle.close()
