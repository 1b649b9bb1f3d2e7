"""``freeze_variables``: variable reads read by their kernels (the fast path) and by a plan (its
general twin) give the same values, and what the fast path does not take the plan reads."""

from __future__ import annotations

import numpy as np
import pytest

import runtime.onnx.rewrite  # noqa: F401 - first: the converters' import order (partition, control flow)
from runtime import Session
from runtime.onnx import frozen_variables
from tests.runtime.test_session import make_graph

FLOAT = 1


def _session():
    nodes = [
        ("ctrl", "NoOp", [], {}),
        ("w", "VarHandleOp", [], {"dtype": FLOAT, "shape": [2, 3], "shared_name": "w"}),
        ("b", "VarHandleOp", [], {"dtype": FLOAT, "shape": [3], "shared_name": "b"}),
        ("w_value", "Const", [], {"dtype": FLOAT, "value": np.arange(6, dtype=np.float32).reshape(2, 3)}),
        ("b_value", "Const", [], {"dtype": FLOAT, "value": np.float32([0.5, -1, 2])}),
        ("init_w", "AssignVariableOp", ["w", "w_value"], {"dtype": FLOAT}),
        ("init_b", "AssignVariableOp", ["b", "b_value"], {"dtype": FLOAT}),
        ("read_w", "ReadVariableOp", ["w"], {"dtype": FLOAT}),
        ("read_b", "ReadVariableOp", ["b"], {"dtype": FLOAT}),
        ("read_b_after", "ReadVariableOp", ["b", "^ctrl"], {"dtype": FLOAT}),  # a control input
    ]
    graph = make_graph(*nodes)
    session = Session(graph=graph)
    session.run(["init_w", "init_b"])
    return session, graph


@pytest.mark.parametrize("names", [["read_w", "read_b"], ["read_w", "read_b", "read_b_after"]])
def test_reads_by_their_kernels_equal_the_plans(names, monkeypatch):
    session, graph = _session()
    reads = [graph.get_operation_by_name(n) for n in names]
    direct = frozen_variables._read_directly(reads, session.resources)
    frozen, note = frozen_variables.freeze_variables(graph, reads, session.resources)
    monkeypatch.setattr(frozen_variables, "_read_directly", lambda *a: None)
    planned, planned_note = frozen_variables.freeze_variables(graph, reads, session.resources)
    assert note == planned_note == ""
    assert frozen.keys() == planned.keys() == set(names)
    for name in names:
        np.testing.assert_array_equal(frozen[name], planned[name], strict=True)
    assert (direct is None) == ("read_b_after" in names)  # a control input: the plan's to run


def test_an_unassigned_variable_is_read_natively_with_the_plans_error():
    session, graph = _session()
    graph_ops = [graph.get_operation_by_name("read_w")]
    fresh = Session(graph=graph)  # nothing assigned in this one
    frozen, note = frozen_variables.freeze_variables(graph, graph_ops, fresh.resources)
    assert frozen == {} and note.startswith("variables read natively: FailedPreconditionError")
