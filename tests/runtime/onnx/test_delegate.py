"""rewrite.drop_inert_control_edges: which control edges order nothing, and a served model whose
plan is then one onnxruntime call."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from apis.tensorflow.core.framework import graph_pb2
from loader import load_saved_model
from runtime.onnx.rewrite import drop_inert_control_edges

REPO = Path(__file__).resolve().parents[3]


def _graph(*nodes: tuple[str, str, list[str]]) -> graph_pb2.GraphDef:
    graph_def = graph_pb2.GraphDef()
    for name, op, inputs in nodes:
        graph_def.node.add(name=name, op=op, input=inputs)
    return graph_def


def _inputs(graph_def: graph_pb2.GraphDef) -> dict[str, list[str]]:
    return {n.name: list(n.input) for n in graph_def.node}


def test_edges_implied_by_data_or_from_frozen_reads_go_others_stay():
    graph_def = _graph(
        ("x", "Placeholder", []),
        ("read", "ReadVariableOp", ["handle"]),
        ("handle", "VarHandleOp", []),
        ("a", "Neg", ["x"]),
        ("done", "NoOp", ["^a", "^read"]),  # a TF2 function's control outputs
        ("y", "Identity", ["a", "^done"]),  # waits for what its data input implies anyway
        ("write", "AssignVariableOp", ["handle", "x"]),
        ("z", "Identity", ["a", "^write", "^read"]),  # the write orders z: that edge stays
    )
    drop_inert_control_edges(graph_def, {"read": np.float32(1)})
    inputs = _inputs(graph_def)
    assert inputs["y"] == ["a"]
    assert inputs["z"] == ["a", "^write"]
    assert inputs["done"] == ["^a"]  # the frozen read cannot fail: nothing waits for it
    assert len(graph_def.node) == 8  # no node is removed: every name still resolves


def test_delegated_keras_mlp_runs_as_one_onnxruntime_call():
    bundle = load_saved_model(str(REPO / "models" / "keras_mlp" / "1"), ["serve"], delegation=True)
    try:
        signature = bundle.signature_defs["serving_default"]
        fetches = [info.name for info in signature.outputs.values()]
        feeds = [info.name for info in signature.inputs.values()]
        run = bundle.session.make_callable(fetches, feeds)
        run(np.float32([[0.5, -1.0, 2.0, 0.25]]))
        (plan,) = [p for key, p in bundle.session._plans.items() if [t.name for t in key[1]] == fetches]
        assert [step.op.type for step in plan.steps] == ["_OrtCluster"]
    finally:
        bundle.close()
