"""Map-shaped While loops run item by item (``runtime/execution/map_loops.py``): the same outputs and errors as
the loop run as written, which these tests get by turning the analysis off."""

from __future__ import annotations

import numpy as np
import pytest

from apis.tensorflow.core.framework import graph_pb2
from runtime import Graph, Session, dtypes, errors
from runtime.execution import map_loops
from tests.runtime.onnx.test_loops import const, function, node, rnn_graph

F, I32, V, B = dtypes.DT_FLOAT, dtypes.DT_INT32, dtypes.DT_VARIANT, dtypes.DT_BOOL
ARGS = [("c", I32), ("m", I32), ("t", I32), ("out", V), ("seq", V), ("n", I32)]


def map_graph(body_extra=()) -> Graph:
    """``tf.map_fn(lambda x: tanh(2 x), seq)`` as TF2 writes it: counters c (bound m) and t (bound n)."""
    cond = function(
        "cond",
        ARGS,
        [("ok", B, "and:z:0")],
        [
            node("less", "Less", "c", "m", T=I32),
            node("less_1", "Less", "t", "n", T=I32),
            node("and", "LogicalAnd", "less:z:0", "less_1:z:0"),
        ],
    )
    body_nodes = [
        const("shape", [-1]),
        node("x_t", "TensorListGetItem", "seq", "t", "shape:output:0", element_dtype=F),
        const("two", 2.0, np.float32),
        node("scaled", "Mul", "x_t:item:0", "two:output:0", T=F),
        node("y", "Tanh", "scaled:z:0", T=F),
        node("write", "TensorListSetItem", "out", "t", "y:y:0", element_dtype=F),
        const("one", 1),
        node("t_next", "AddV2", "t", "one:output:0", T=I32),
        node("c_next", "AddV2", "c", "one:output:0", T=I32),
        *body_extra,
    ]
    out = "write:output_handle:0"
    rets = [
        ("c_out", I32, "c_next:z:0"),
        ("m_out", I32, "m"),
        ("t_out", I32, "t_next:z:0"),
        ("out_out", V, out),
        ("seq_out", V, "seq"),
        ("n_out", I32, "n"),
    ]
    graph_def = graph_pb2.GraphDef()
    graph_def.node.extend(
        [
            node("x", "Placeholder", dtype=F),
            node("m", "Placeholder", dtype=I32),
            node("n", "Placeholder", dtype=I32),
            const("zero", 0),
            const("row", [-1]),
            const("elem", [3]),
            node("seq", "TensorListFromTensor", "x", "row", element_dtype=F, shape_type=I32),
            node("reserve", "TensorListReserve", "elem", "n", element_dtype=F, shape_type=I32),
            node("loop", "While", "zero", "m", "zero", "reserve", "seq", "n", T=[I32, I32, I32, V, V, I32]),
            node("stack", "TensorListStack", "loop:3", "elem", element_dtype=F),
        ]
    )
    loop = graph_def.node[8]
    loop.attr["cond"].func.name, loop.attr["body"].func.name = "cond", "body"
    graph_def.library.function.extend([cond, function("body", ARGS, rets, body_nodes)])
    return Graph.from_graph_def(graph_def)


FETCHES = ["stack:0", "loop:0", "loop:2"]
ANALYZE = map_loops.analyze


def run(graph_fn, feeds, monkeypatch, mapped: bool):
    """The fetches with map-shaped loops on or off, and whether an analysis found one."""
    found = []

    def spy(cond, body, plan_items):
        found.append(ANALYZE(cond, body, plan_items))
        return found[-1] if mapped else None

    monkeypatch.setattr(map_loops, "analyze", spy)
    with Session(graph=graph_fn()) as session:
        return session.run(FETCHES, feeds), [f is not None for f in found]


@pytest.mark.parametrize(("rows", "m", "n"), [(5, 9, 5), (5, 3, 5), (5, 0, 5), (1, 4, 1), (0, 2, 0)])
def test_map_shaped_loop_gives_what_the_loop_gives(rows, m, n, monkeypatch):
    feeds = {
        "x:0": np.random.default_rng(rows).standard_normal((rows, 3)).astype(np.float32),
        "m:0": m,
        "n:0": n,
    }
    want, _ = run(map_graph, feeds, monkeypatch, mapped=False)
    got, found = run(map_graph, feeds, monkeypatch, mapped=True)
    assert found == [True]
    for a, b in zip(want, got):
        np.testing.assert_array_equal(b, a)
        assert np.asarray(b).dtype == np.asarray(a).dtype
    assert got[0].shape == (n, 3) and int(got[1]) == min(m, n)


def test_failing_step_fails_as_the_loop_does(monkeypatch):
    """``n`` past the rows: the read at step ``rows`` fails either way, with the same error class."""
    feeds = {"x:0": np.ones((2, 3), np.float32), "m:0": 9, "n:0": 4}
    raised = []
    for mapped in (False, True):
        with pytest.raises(errors.OpError) as info:
            run(map_graph, feeds, monkeypatch, mapped)
        raised.append(type(info.value))
    assert raised[0] is raised[1]


def test_loops_of_other_shapes_run_as_written():
    """A carried state (an RNN), a list the body also reads, a stateful op: not map-shaped."""
    graphs = {
        "rnn": rnn_graph,
        "reads its list": lambda: map_graph([node("peek", "TensorListLength", "out")]),
        "stateful": lambda: map_graph([node("noise", "RandomUniform", "shape:output:0", dtype=F, T=I32)]),
        "map": map_graph,
    }
    for name, graph_fn in graphs.items():
        with Session(graph=graph_fn()) as session:
            loop = session.graph.get_operation_by_name("loop")
            found = session._functions.map_loop(loop.attrs["cond"], loop.attrs["body"])
            assert (found is not None) == (name == "map"), name
