"""TF2 ``While`` loops as one ONNX ``Loop``, on hand-built RNN-shaped graphs, against the native run.

Each graph is Keras' shape of a recurrent layer: the sequence enters through
``TensorListFromTensor``, the body reads a step with ``TensorListGetItem``, computes a cell, and
writes it with ``TensorListSetItem`` into a ``TensorListReserve`` list stacked after the loop. The
variants cover each role a loop variable can take (invariant, scan at a counter or a constant
index, carried dense list), a variable read in the body (frozen into it), and the fallback of a
body that cannot convert (the loop stays a loop, its body partitioned as before).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from apis.tensorflow.core.framework import function_pb2, graph_pb2, node_def_pb2, tensor_shape_pb2
from runtime import Graph, Session, dtypes, tensor_util
from runtime.onnx import CONVERTERS, DelegationOptions, NotConvertible, convert_subgraph, delegate, runner_of
from runtime.onnx.converter import Signature
from runtime.onnx.loop_variables import freeze_loop_variables

F, I32, V, R, B = dtypes.DT_FLOAT, dtypes.DT_INT32, dtypes.DT_VARIANT, dtypes.DT_RESOURCE, dtypes.DT_BOOL
STEPS, DEPTH, UNITS = 4, 3, 2
RNG = np.random.default_rng(0)
W = RNG.standard_normal((DEPTH, UNITS)).astype(np.float32)
U = RNG.standard_normal((UNITS, UNITS)).astype(np.float32)
# Converters these tests check (whole graphs: a TensorList cannot be a one-node model's input).
GRAPH_CHECKED = frozenset(
    {
        "While", "StatelessWhile", "TensorListFromTensor", "TensorListReserve", "TensorListGetItem",
        "TensorListSetItem", "TensorListStack", "TensorListLength", "TensorListElementShape",
    }
)  # fmt: skip


def node(name, op, *inputs, **attrs) -> node_def_pb2.NodeDef:
    n = node_def_pb2.NodeDef(name=name, op=op)
    n.input.extend(inputs)
    for key, value in attrs.items():
        if key == "value":
            n.attr[key].tensor.CopyFrom(tensor_util.make_tensor_proto(value))
        elif key in ("cond", "body"):
            n.attr[key].func.name = value
        elif key == "shape":
            n.attr[key].shape.dim.extend(tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in value)
        elif key == "T" and isinstance(value, list):
            n.attr[key].list.type.extend(value)
        elif isinstance(value, bool):
            n.attr[key].b = value
        elif isinstance(value, str):
            n.attr[key].s = value.encode()
        elif key in ("T", "U", "Tidx", "dtype", "element_dtype", "shape_type", "out_type"):
            n.attr[key].type = value
        elif isinstance(value, float):
            n.attr[key].f = value
        elif isinstance(value, list):  # ints: strides, ksize
            n.attr[key].list.i.extend(value)
        else:
            n.attr[key].i = value
    return n


def const(name, value, dtype=np.int32):
    return node(name, "Const", dtype=dtypes.from_numpy(np.dtype(dtype)), value=np.asarray(value, dtype))


def function(name, args, rets, nodes) -> function_pb2.FunctionDef:
    """``args``: (name, dtype); ``rets``: (name, dtype, tensor reference)."""
    fdef = function_pb2.FunctionDef()
    fdef.signature.name = name
    for arg, dtype in args:
        fdef.signature.input_arg.add(name=arg, type=dtype)
    for ret, dtype, ref in rets:
        fdef.signature.output_arg.add(name=ret, type=dtype)
        fdef.ret[ret] = ref
    fdef.node_def.extend(nodes)
    return fdef


LOOP_ARGS = [("c", I32), ("m", I32), ("t", I32), ("out", V), ("h", F), ("seq", V)]


def cond_function(weight: bool = False) -> function_pb2.FunctionDef:
    nodes = [
        node("less", "Less", "c", "m", T=I32),
        const("steps", STEPS),
        node("less_1", "Less", "t", "steps:output:0", T=I32),
        node("and", "LogicalAnd", "less:z:0", "less_1:z:0"),
    ]
    args = LOOP_ARGS + ([("w", R)] if weight else [])  # TF passes every loop variable to cond
    return function("cond", args, [("ok", B, "and:z:0")], nodes)


def body_function(index: str = "t", cell_op: str = "Tanh", weight=None) -> function_pb2.FunctionDef:
    """The cell ``h = cell_op(x_t W + h U)``, written at ``index`` (a TF tensor reference)."""
    args = LOOP_ARGS + ([("w", R)] if weight is not None else [])
    w = "w_read:value:0" if weight is not None else "w:output:0"
    nodes = [
        const("shape", [-1, DEPTH]),
        node("x_t", "TensorListGetItem", "seq", "t", "shape:output:0", element_dtype=F),
        node("w_read", "ReadVariableOp", "w", dtype=F) if weight is not None else const("w", W, np.float32),
        const("u", U, np.float32),
        node("mm", "MatMul", "x_t:item:0", w, T=F),
        node("mm_1", "MatMul", "h", "u:output:0", T=F),
        node("add", "AddV2", "mm:product:0", "mm_1:product:0", T=F),
        node("cell", cell_op, "add:z:0", T=F),
        const("last", STEPS - 1),
        node("reverse", "Sub", "last:output:0", "t", T=I32),
        const("zero", 0),
        node("write", "TensorListSetItem", "out", index, "cell:y:0", element_dtype=F),
        const("one", 1),
        node("t_next", "AddV2", "t", "one:output:0", T=I32),
        node("c_next", "AddV2", "c", "one:output:0", T=I32),
        node("out_next", "Identity", "write:output_handle:0", T=V),
    ]
    rets = [
        ("c_out", I32, "c_next:z:0"),
        ("m_out", I32, "m"),
        ("t_out", I32, "t_next:z:0"),
        ("out_out", V, "out_next:output:0"),
        ("h_out", F, "cell:y:0"),
        ("seq_out", V, "seq"),
    ] + ([("w_out", R, "w")] if weight is not None else [])
    return function("body", args, rets, nodes)


def rnn_graph(
    index="t", reserved=(-1, UNITS), count=STEPS, cell_op="Tanh", weight=None, loop_op="While"
) -> Graph:
    """x [STEPS, batch, DEPTH], h0 [batch, UNITS] -> the stacked list and the final state."""
    loop_inputs = ["zero", "steps", "zero", "reserve", "h0", "seq"] + (["w"] if weight is not None else [])
    nodes = [
        node("x", "Placeholder", dtype=F),
        node("h0", "Placeholder", dtype=F),
        const("zero", 0),
        const("steps", STEPS),
        const("x_shape", [-1, DEPTH]),
        node("seq", "TensorListFromTensor", "x", "x_shape", element_dtype=F, shape_type=I32),
        const("element_shape", list(reserved)),
        const("count", count),
        node("reserve", "TensorListReserve", "element_shape", "count", element_dtype=F, shape_type=I32),
        node("loop", loop_op, *loop_inputs, T=[I32, I32, I32, V, F, V] + ([R] if weight is not None else [])),
        const("out_shape", [-1, UNITS]),
        node("stack", "TensorListStack", "loop:3", "out_shape", element_dtype=F),
        node("h_last", "Identity", "loop:4", T=F),
        node("length", "TensorListLength", "loop:3"),
        node("element", "TensorListElementShape", "loop:3", shape_type=I32),
    ]
    loop = nodes[9]
    loop.attr["cond"].func.name, loop.attr["body"].func.name = "cond", "body"
    if weight is not None:
        nodes += [
            node("w", "VarHandleOp", dtype=F, shared_name="w", shape=()),
            const("w_init", weight, np.float32),
            node("assign", "AssignVariableOp", "w", "w_init", dtype=F),
        ]
    graph_def = graph_pb2.GraphDef()
    graph_def.node.extend(nodes)
    graph_def.library.function.extend(
        [cond_function(weight is not None), body_function(index, cell_op, weight)]
    )
    return Graph.from_graph_def(graph_def)


FETCHES = ["stack:0", "h_last:0", "length:0", "element:0"]


def run_both(graph_fn, batch=3, fetches=FETCHES, init=None):
    """(native outputs, delegated outputs, report), each Session on a fresh graph."""
    feeds = {
        "x:0": RNG.standard_normal((STEPS, batch, DEPTH)).astype(np.float32),
        "h0:0": RNG.standard_normal((batch, UNITS)).astype(np.float32),
    }
    with Session(graph=graph_fn()) as native:
        if init:
            native.run(init)
        want = native.run(fetches, feeds)
    delegated = Session(graph=graph_fn())
    if init:
        delegated.run(init)
    report = delegate(delegated, DelegationOptions(), [(list(feeds), fetches)])
    got = [delegated.run(fetches, feeds) for _ in range(2)]  # the first run validates
    delegated.close()
    return want, got, report


def assert_same(want, got):
    for run in got:
        for a, b in zip(want, run):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def loop_cluster(report):
    return [c for c in report.clusters if {"While", "StatelessWhile"} & set(c.op_types)]


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("loop_op", ["While", "StatelessWhile"])
def test_rnn_loop_runs_as_one_onnx_loop(batch, loop_op):
    want, got, report = run_both(lambda: rnn_graph(loop_op=loop_op), batch)
    assert_same(want, got)
    assert loop_cluster(report) and not report.fallbacks, report.summary()
    assert report.flops_share == 1.0 and not report.native_compute_ops_with_flops(), report.summary()
    assert want[0].shape == (STEPS, batch, UNITS)


def test_constant_index_keeps_the_last_step():
    """Keras without return_sequences: every step writes row 0 of a one-row list."""
    want, got, report = run_both(lambda: rnn_graph(index="zero:output:0", count=1))
    assert_same(want, got)
    assert want[0].shape == (1, 3, UNITS)
    assert loop_cluster(report) and not report.fallbacks, report.summary()


def test_reserved_rows_the_loop_does_not_write_are_zeros():
    want, got, report = run_both(lambda: rnn_graph(count=STEPS + 2))
    assert_same(want, got)
    assert want[0].shape == (STEPS + 2, 3, UNITS) and not want[0][STEPS:].any()
    assert loop_cluster(report) and not report.fallbacks, report.summary()


def test_dense_list_written_out_of_order_is_a_loop_state():
    """A list of known element shape written at ``STEPS - 1 - t``: carried, one ScatterND a step."""
    want, got, report = run_both(lambda: rnn_graph(index="reverse:z:0", reserved=(3, UNITS)))
    assert_same(want, got)
    assert loop_cluster(report) and not report.fallbacks, report.summary()


def test_variable_read_in_the_body_is_frozen_into_it():
    want, got, report = run_both(lambda: rnn_graph(weight=W), init="assign")
    assert_same(want, got)
    assert loop_cluster(report) and not report.fallbacks, report.summary()
    assert report.flops_share == 1.0, report.summary()


def test_body_that_cannot_convert_keeps_the_loop_native():
    """``Atan`` has no converter: the While stays, its body's cell is delegated as before."""
    want, got, report = run_both(lambda: rnn_graph(cell_op="Atan"))
    assert_same(want, got)
    assert not loop_cluster(report) and not report.fallbacks, report.summary()
    assert any(kind == "While" for kind, _ in report.native.values()), report.summary()


# -- a Keras LSTM layer's loop: one ONNX LSTM -------------------------------------------------
LSTM_WEIGHTS = [
    RNG.standard_normal(shape).astype(np.float32)
    for shape in [(DEPTH, 4 * UNITS), (UNITS, 4 * UNITS), 4 * UNITS]
]
LSTM_ARGS = [("c", I32), ("m", I32), ("t", I32), ("out", V), ("h", F), ("cell", F), ("seq", V)]


def lstm_body(recurrent_activation: str = "Sigmoid") -> function_pb2.FunctionDef:
    """Keras' LSTM cell: z = x_t W + h U + b; i, f, g, o = split(z); c' = f c + i g; h' = o tanh(c')."""
    kernel, recurrent, bias = LSTM_WEIGHTS
    nodes = [
        const("shape", [-1, DEPTH]),
        node("x_t", "TensorListGetItem", "seq", "t", "shape:output:0", element_dtype=F),
        const("kernel", kernel, np.float32),
        const("recurrent", recurrent, np.float32),
        const("bias", bias, np.float32),
        node("mm", "MatMul", "x_t:item:0", "kernel:output:0", T=F),
        node("mm_1", "MatMul", "h", "recurrent:output:0", T=F),
        node("add", "AddV2", "mm:product:0", "mm_1:product:0", T=F),
        node("z", "BiasAdd", "add:z:0", "bias:output:0", T=F),
        const("axis", 1),
        node("split", "Split", "axis:output:0", "z:output:0", T=F, num_split=4),
        node("i", recurrent_activation, "split:output:0", T=F),
        node("f", recurrent_activation, "split:output:1", T=F),
        node("g", "Tanh", "split:output:2", T=F),
        node("o", recurrent_activation, "split:output:3", T=F),
        node("keep", "Mul", "f:y:0", "cell", T=F),
        node("write_c", "Mul", "i:y:0", "g:y:0", T=F),
        node("c_next", "AddV2", "keep:z:0", "write_c:z:0", T=F),
        node("tanh_c", "Tanh", "c_next:z:0", T=F),
        node("h_next", "Mul", "o:y:0", "tanh_c:y:0", T=F),
        node("write", "TensorListSetItem", "out", "t", "h_next:z:0", element_dtype=F),
        const("one", 1),
        node("t_next", "AddV2", "t", "one:output:0", T=I32),
        node("c_count", "AddV2", "c", "one:output:0", T=I32),
    ]
    rets = [
        ("c_out", I32, "c_count:z:0"),
        ("m_out", I32, "m"),
        ("t_out", I32, "t_next:z:0"),
        ("out_out", V, "write:output_handle:0"),
        ("h_out", F, "h_next:z:0"),
        ("cell_out", F, "c_next:z:0"),
        ("seq_out", V, "seq"),
    ]
    return function("body", LSTM_ARGS, rets, nodes)


def lstm_graph(recurrent_activation: str = "Sigmoid") -> Graph:
    cond = cond_function()
    cond.signature.input_arg.add(name="seq_1", type=V)  # one more loop variable than the RNN's
    graph_def = graph_pb2.GraphDef()
    graph_def.node.extend(
        [
            node("x", "Placeholder", dtype=F),
            node("h0", "Placeholder", dtype=F),
            node("c0", "ZerosLike", "h0", T=F),
            const("zero", 0),
            const("steps", STEPS),
            const("x_shape", [-1, DEPTH]),
            node("seq", "TensorListFromTensor", "x", "x_shape", element_dtype=F, shape_type=I32),
            const("element_shape", [-1, UNITS]),
            node("reserve", "TensorListReserve", "element_shape", "steps", element_dtype=F, shape_type=I32),
            node(
                "loop",
                "While",
                "zero",
                "steps",
                "zero",
                "reserve",
                "h0",
                "c0",
                "seq",
                T=[I32, I32, I32, V, F, F, V],
            ),
            const("out_shape", [-1, UNITS]),
            node("stack", "TensorListStack", "loop:3", "out_shape", element_dtype=F),
            node("h_last", "Identity", "loop:4", T=F),
            node("c_last", "Identity", "loop:5", T=F),
        ]
    )
    loop = graph_def.node[9]
    loop.attr["cond"].func.name, loop.attr["body"].func.name = "cond", "body"
    graph_def.library.function.extend([cond, lstm_body(recurrent_activation)])
    return Graph.from_graph_def(graph_def)


def onnx_op_types(session: Session) -> set[str]:
    """The ONNX op types of the session's compiled clusters (nested graphs included)."""
    found = set()
    for op in session.graph.get_operations():
        runner = runner_of(op)
        for key, entry in (runner._compiled if runner else {}).items():
            if entry is not None and hasattr(entry, "run"):
                signature = Signature(tuple(dtypes.from_numpy(d) for d, _ in key), tuple(n for _, n in key))
                model = convert_subgraph(runner._graph_def, runner._inputs, runner._outputs, signature)
                found |= {n.op_type for n in model.graph.node}
    return found


@pytest.mark.parametrize("activation, fused", [("Sigmoid", True), ("Tanh", False)])
def test_keras_lstm_loop_is_one_onnx_lstm(activation, fused):
    """The Keras cell becomes ONNX LSTM; another recurrent activation is a plain Loop, as exact."""
    fetches = ["stack:0", "h_last:0", "c_last:0"]
    feeds = {
        "x:0": RNG.standard_normal((STEPS, 3, DEPTH)).astype(np.float32),
        "h0:0": RNG.standard_normal((3, UNITS)).astype(np.float32),
    }
    with Session(graph=lstm_graph(activation)) as native:
        want = native.run(fetches, feeds)
    with Session(graph=lstm_graph(activation)) as delegated:
        report = delegate(delegated, DelegationOptions(), [(list(feeds), fetches)])
        got = [delegated.run(fetches, feeds) for _ in range(2)]
        kinds = onnx_op_types(delegated)
    assert_same(want, got)
    assert loop_cluster(report) and not report.fallbacks, report.summary()
    assert ("LSTM" in kinds) is fused and ("Loop" in kinds) is not fused, kinds


def test_list_read_by_a_native_op_keeps_the_loop_native():
    """``TensorListPushBack`` has no converter: a list never crosses a cluster's boundary, so the
    loop that makes it stays native (its body delegated) and the rest clusters as usual."""

    def pushed() -> Graph:
        graph = rnn_graph()
        graph_def = graph.as_graph_def()
        graph_def.node.extend(
            [
                node("push", "TensorListPushBack", "loop:3", "h_last", element_dtype=F),
                node("pushed_length", "TensorListLength", "push"),
            ]
        )
        return Graph.from_graph_def(graph_def)

    want, got, report = run_both(pushed, fetches=["stack:0", "pushed_length:0"])
    assert_same(want, got)
    assert not loop_cluster(report) and not report.fallbacks, report.summary()
    assert report.native["loop"][0] == "While", report.summary()


def test_freeze_loop_variables_drops_the_resource_or_leaves_the_loop():
    graph_def = rnn_graph(weight=W).as_graph_def()
    library = {f.signature.name: f for f in graph_def.library.function}
    frozen_def, frozen_library = freeze_loop_variables(graph_def, library, {"w": W})
    loop = next(n for n in frozen_def.node if n.name == "loop")
    assert list(loop.input) == ["zero", "steps", "zero", "reserve", "h0", "seq"]
    assert loop.attr["body"].func.name == "body__frozen" and "body__frozen" in frozen_library
    read = next(n for n in frozen_library["body__frozen"].node_def if n.name == "w_read")
    assert read.op == "Const" and R not in list(loop.attr["T"].list.type)
    graph_def.node.add(name="handle_out", op="Identity", input=["loop:6"]).attr["T"].type = R
    unchanged, _ = freeze_loop_variables(graph_def, library, {"w": W})  # its resource output is read
    assert unchanged == graph_def


def test_loop_that_fails_to_convert_falls_back_to_delegated_bodies(monkeypatch):
    """A whole-loop cluster whose conversion fails at its first run runs its native copy, in
    which the loop's body is delegated (as for loops that never convert whole)."""

    def refuse(node, b):
        raise NotConvertible("refused by the test")

    monkeypatch.setitem(CONVERTERS, "While", dataclasses.replace(CONVERTERS["While"], fn=refuse))
    feeds = {
        "x:0": RNG.standard_normal((STEPS, 3, DEPTH)).astype(np.float32),
        "h0:0": RNG.standard_normal((3, UNITS)).astype(np.float32),
    }
    with Session(graph=rnn_graph()) as native:
        want = native.run(FETCHES, feeds)
    with Session(graph=rnn_graph()) as delegated:
        options = DelegationOptions(min_cluster_ops=1)  # the test's cell is small
        report = delegate(delegated, options, [(list(feeds), FETCHES)])
        assert_same(want, [delegated.run(FETCHES, feeds) for _ in range(2)])
        runners = [runner_of(op) for op in delegated.graph.get_operations() if runner_of(op)]
    assert loop_cluster(report) and "refused by the test" in report.fallbacks.get(runners[0].name, "")
    assert any(f.signature.name.endswith("__ort") for f in runners[0]._native_def.library.function)
