"""``supported`` -> ``propose_clusters`` -> ``fuse``, each alone, on small hand-made graphs; then the
``_OrtCluster`` kernel: validation fallback, per-rank compilation, threads, the off switch."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from apis.tensorflow.core.framework import graph_pb2, node_def_pb2
from runtime import Graph, Session, dtypes, tensor_util
from runtime.onnx import DelegationOptions, delegate, fuse, propose_clusters, runner_of, supported
from runtime.onnx.converter import CONVERTERS, ConverterDef
from runtime.onnx.inline import inline_calls
from runtime.onnx.partition import CLUSTER_OP, reason

F = dtypes.DT_FLOAT


def node(name, op, *inputs, **attrs) -> node_def_pb2.NodeDef:
    n = node_def_pb2.NodeDef(name=name, op=op)
    n.input.extend(inputs)
    for key, value in attrs.items():
        if key == "value":
            n.attr[key].tensor.CopyFrom(tensor_util.make_tensor_proto(value))
        elif isinstance(value, bool):
            n.attr[key].b = value
        elif key in ("T", "dtype", "DstT", "SrcT"):
            n.attr[key].type = value
        else:
            n.attr[key].i = value
    return n


def graph(*nodes) -> Graph:
    graph_def = graph_pb2.GraphDef()
    graph_def.node.extend(nodes)
    return Graph.from_graph_def(graph_def)


def const(name, value):
    value = np.asarray(value, np.float32)
    return node(name, "Const", dtype=F, value=value)


def mlp() -> Graph:
    """x -> MatMul(w) -> Relu -> [StringOp-free native op: Where] -> Add -> Tanh."""
    return graph(
        node("x", "Placeholder", dtype=F),
        const("w", np.eye(3) * 2),
        const("b", [1.0, 2.0, 3.0]),
        node("mm", "MatMul", "x", "w", T=F),
        node("relu", "Relu", "mm", T=F),
        node("native", "Atan", "relu", T=F),  # no converter: splits the graph
        node("add", "AddV2", "native", "b", T=F),
        node("tanh", "Tanh", "add", T=F),
    )


def test_supported_and_reason():
    g = mlp()
    assert supported(g.get_operation_by_name("mm"))
    assert reason(g.get_operation_by_name("native")) == "no ONNX converter"
    s = graph(
        node("s", "Placeholder", dtype=dtypes.DT_STRING), node("i", "Identity", "s", T=dtypes.DT_STRING)
    )
    assert "dtype string" in reason(s.get_operation_by_name("i"))
    t = graph(
        node("x", "Placeholder", dtype=F),
        node("p", "Placeholder", dtype=dtypes.DT_INT32),
        node("t", "Transpose", "x", "p", T=F),
    )
    assert reason(t.get_operation_by_name("t")) == "input 1 is not a constant"


def test_propose_clusters_splits_at_unsupported_ops_and_is_deterministic():
    clusters = propose_clusters(mlp())
    assert [c.nodes for c in clusters] == [("mm", "relu"), ("add", "tanh")]
    assert propose_clusters(mlp()) == clusters


def test_propose_clusters_never_makes_a_cycle():
    # a -> native -> c and a -> c: {a, c} in one cluster would need native's output and feed it.
    g = graph(
        node("x", "Placeholder", dtype=F),
        node("a", "Exp", "x", T=F),
        node("native", "Atan", "a", T=F),
        node("c", "AddV2", "a", "native", T=F),
    )
    clusters = propose_clusters(g)
    assert all(not {"a", "c"} <= set(c.nodes) for c in clusters)


def test_propose_clusters_merges_siblings_through_a_common_consumer():
    g = graph(
        node("x", "Placeholder", dtype=F),
        node("a", "Exp", "x", T=F),
        node("b", "Sigmoid", "x", T=F),
        node("c", "Mul", "a", "b", T=F),
    )
    assert [c.nodes for c in propose_clusters(g)] == [("a", "b", "c")]


def test_propose_clusters_keeps_groups_apart():
    g = graph(
        node("x", "Placeholder", dtype=F),
        node("a", "Exp", "x", T=F),
        node("b", "Sigmoid", "a", T=F),
    )
    assert len(propose_clusters(g, within={"a": 1, "b": 2})) == 2
    assert len(propose_clusters(g, within={"a": 1, "b": 1})) == 1


def test_data_movement_only_cluster_stays_native():
    g = graph(node("x", "Placeholder", dtype=F), node("r", "Identity", "x", T=F))
    assert propose_clusters(g) == []


def test_fuse_returns_a_new_graph_with_the_same_names_and_outputs():
    g = mlp()
    before = g.as_graph_def().SerializeToString(deterministic=True)
    fused_def = fuse(g, propose_clusters(g))
    assert g.as_graph_def().SerializeToString(deterministic=True) == before  # input untouched
    fused = Graph.from_graph_def(fused_def)
    types = {op.name: op.type for op in fused.get_operations()}
    assert types["relu"] == "IdentityN" and types["tanh"] == "IdentityN"
    assert sum(t == CLUSTER_OP for t in types.values()) == 2
    x = np.array([[0.5, -1.0, 2.0], [1.0, 1.0, -3.0]], np.float32)
    with Session(graph=g) as native, Session(graph=fused) as delegated:
        want = native.run(["relu:0", "tanh:0", "mm:0"], {"x:0": x})
        got = delegated.run(["relu:0", "tanh:0", "mm:0"], {"x:0": x})  # mm: interior, still fetchable
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_inline_calls_keeps_call_names():
    from apis.tensorflow.core.framework import function_pb2

    fdef = function_pb2.FunctionDef()
    fdef.signature.name = "f"
    fdef.signature.input_arg.add(name="a", type=F)
    fdef.signature.output_arg.add(name="out", type=F)
    fdef.node_def.append(node("e", "Exp", "a", T=F))
    fdef.ret["out"] = "e:y:0"
    call = node("call", "StatefulPartitionedCall", "x")
    call.attr["f"].func.name = "f"
    call.attr["Tout"].list.type.append(F)
    call.attr["Tin"].list.type.append(F)
    graph_def = graph_pb2.GraphDef()
    graph_def.node.extend([node("x", "Placeholder", dtype=F), call])
    graph_def.library.function.append(fdef)
    inlined = inline_calls(graph_def, {"f": fdef})
    ops = {n.name: n.op for n in inlined.node}
    assert ops == {"x": "Placeholder", "call/e": "Exp", "call": "IdentityN"}
    assert [n.op for n in graph_def.node] == ["Placeholder", "StatefulPartitionedCall"]


def delegated_session(g: Graph, **options) -> Session:
    options.setdefault("min_cluster_ops", 1)
    session = Session(graph=g)
    delegate(session, DelegationOptions(**options))
    return session


def test_validation_mismatch_falls_back_to_native(monkeypatch, caplog):
    def wrong_tanh(node, b):
        return b.op("Sigmoid", node.inputs)  # a deliberately wrong converter

    monkeypatch.setitem(CONVERTERS, "Tanh", ConverterDef(("Tanh",), wrong_tanh, 1, (), None))
    session = delegated_session(mlp())
    x = np.ones((2, 3), np.float32)
    got = session.run("tanh:0", {"x:0": x})
    with Session(graph=mlp()) as native:
        np.testing.assert_allclose(got, native.run("tanh:0", {"x:0": x}), rtol=1e-6)
    report = session.delegation_report
    assert any("validation failed" in why for why in report.fallbacks.values()), report.summary()
    assert "runs natively from now on" in caplog.text


def test_compiles_once_per_rank_signature_and_is_thread_safe():
    g = graph(
        node("x", "Placeholder", dtype=F),
        node("e", "Exp", "x", T=F),
        node("s", "Sigmoid", "e", T=F),
    )
    session = delegated_session(g)
    runner = runner_of(session.graph.get_operation_by_name("ort_cluster_0"))
    results, errors = [], []

    def work(shape):
        try:
            for _ in range(20):
                x = np.full(shape, 0.5, np.float32)
                results.append(np.allclose(session.run("s:0", {"x:0": x}), 1 / (1 + np.exp(-np.exp(0.5)))))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in [(2,), (3,), (2, 2), (4, 1, 2)] * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and all(results) and len(results) == 160
    assert sorted(tuple(ndim for _, ndim in key) for key in runner._compiled) == [(1,), (2,), (3,)]


def test_delegation_off_keeps_every_op_native():
    session = delegated_session(mlp(), enabled=False)
    assert session.delegation_report.enabled is False
    assert all(op.type != CLUSTER_OP for op in session.graph.get_operations())
    assert session.delegation_report.summary() == "onnxruntime delegation: off"


def test_bad_option_is_refused():
    with pytest.raises(ValueError):
        DelegationOptions(graph_optimization_level="fastest")


def test_report_says_what_was_delegated_and_why_the_rest_was_not():
    session = delegated_session(mlp())
    report = session.delegation_report
    assert [c.ops for c in report.clusters] == [("mm", "relu"), ("add", "tanh")]
    assert report.native == {"native": ("Atan", "no ONNX converter")}
    assert 0 < report.flops_share < 1 and report.delegated_ops == 4
    text = report.summary()
    assert "2 clusters, 4 ops" in text and "native: Atan x1: no ONNX converter" in text


def test_delegate_once_per_session():
    session = delegated_session(mlp())
    graph = session.graph
    assert delegate(session) is session.delegation_report and session.graph is graph


def test_fuse_exposes_only_what_the_served_region_reads():
    """A reader outside the served region (dead code) makes no cluster output; it still runs, on
    the member's kept original node."""
    g = graph(
        node("x", "Placeholder", dtype=F),
        const("w", np.eye(3) * 2),
        node("mm", "MatMul", "x", "w", T=F),
        node("relu", "Relu", "mm", T=F),
        node("tanh", "Tanh", "relu", T=F),
        node("dead", "Atan", "mm", T=F),  # read by no signature
    )
    clusters = propose_clusters(g)
    region = {op.name for op in g.get_operations()} - {"dead"}
    fused_def = fuse(g, clusters, region=region)
    cluster = next(n for n in fused_def.node if n.op == CLUSTER_OP)
    assert [t.decode() for t in cluster.attr["output_names"].list.s] == ["tanh:0"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with Session(graph=g) as native, Session(graph=Graph.from_graph_def(fused_def)) as delegated:
        want = native.run(["tanh:0", "dead:0"], {"x:0": x})
        got = delegated.run(["tanh:0", "dead:0"], {"x:0": x})
    for a, b in zip(want, got):
        np.testing.assert_allclose(b, a, rtol=1e-6)


def test_fuse_exposes_every_fetched_tensor_even_one_only_members_read():
    """A signature's fetch that only cluster members read is still a cluster output: otherwise
    fetching it would run the member's original node, and all it needs, natively again."""
    g = graph(
        node("x", "Placeholder", dtype=F),
        const("w", np.eye(3) * 2),
        node("mm", "MatMul", "x", "w", T=F),
        node("relu", "Relu", "mm", T=F),
        node("tanh", "Tanh", "relu", T=F),
    )
    clusters = propose_clusters(g)
    region = {op.name for op in g.get_operations()}
    fused_def = fuse(g, clusters, region=region, fetched={"relu:0", "tanh:0"})
    cluster = next(n for n in fused_def.node if n.op == CLUSTER_OP)
    assert sorted(t.decode() for t in cluster.attr["output_names"].list.s) == ["relu:0", "tanh:0"]
    delegated = Session(graph=Graph.from_graph_def(fused_def))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    relu, tanh = delegated.run(["relu:0", "tanh:0"], {"x:0": x})
    np.testing.assert_allclose(tanh, np.tanh(relu), rtol=1e-6)
    plan = next(iter(delegated._plans.values()))
    assert not [step.op.type for step in plan.steps if step.op.type in ("MatMul", "Relu", "Tanh")]


@pytest.mark.parametrize("split", [False, True])
def test_clusters_never_mix_cpu_pinned_ops_with_others_where_they_may_run_on_a_gpu(split):
    """``split_cpu_pinned``: an op tf.device put on a CPU joins no cluster of other ops, not
    even one it reads only from as an op fewer signatures need; otherwise pins change nothing."""
    nodes = [
        node("x", "Placeholder", dtype=F),
        const("w", np.eye(3)),
        node("mm", "MatMul", "x", "w", T=F),
        node("relu", "Relu", "mm", T=F),
        node("t", "Tanh", "relu", T=F),  # signature 0 only, pinned to the CPU
        node("e", "Exp", "t", T=F),  # signature 0 only, pinned to the CPU (another spelling)
    ]
    nodes[4].device, nodes[5].device = "/device:CPU:0", "/job:localhost/replica:0/task:0/device:CPU:0"
    g = graph(*nodes)
    both, first = frozenset({0, 1}), frozenset({0})
    within = {"mm": both, "relu": both, "t": first, "e": first}
    clusters = propose_clusters(g, within=within, min_cluster_ops=1, split_cpu_pinned=split)
    expected = [["mm", "relu"], ["e", "t"]] if split else [["e", "mm", "relu", "t"]]
    assert [sorted(c.nodes) for c in clusters] == expected
    fused = fuse(g, clusters)
    devices = {n.name: n.attr["device"].s.decode() for n in fused.node if n.op == CLUSTER_OP}
    assert devices == (
        {"ort_cluster_0": "", "ort_cluster_1": "/device:CPU:0"} if split else {"ort_cluster_0": ""}
    )
