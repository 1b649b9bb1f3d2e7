"""Control flow: TF1 while loop frames and dead tensors, TF2 functional ops, against TensorFlow.

Conformance: every oracle model with loops or conds (``tf1_cond_while``, the Keras RNNs and the
``cf_*`` models of ``tests/oracle/builders/control_flow_graphs.py``) runs every case through
``loader.load_saved_model`` + ``Session.run`` and matches TF's recorded outputs. Hand-made
graphs cover what TF's exports do not show: dead loop entries, control triggers, deadlines,
errors, threads.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from apis.tensorflow.core.framework import graph_pb2, tensor_pb2, tensor_shape_pb2
from apis.tensorflow.core.protobuf import config_pb2
from loader import load_saved_model
from runtime import Graph, Session, errors
from runtime.execution import frames
from runtime.tensor_util import make_ndarray, make_tensor_proto
from tests.oracle.corpus import load_manifest

CONTROL_FLOW_MODELS = (
    "tf1_cond_while",
    "keras_lstm",
    "keras_gru_bidirectional",
    "cf_v1_nested_while",
    "cf_v1_while_cond",
    "cf_v1_map_fn",
    "cf_v1_dynamic_rnn",
    "cf_v1_tensor_array",
    "cf_v1_ref_variables",
    "cf_tf2_functional",
)
INT, FLOAT, BOOL, STRING = 3, 1, 10, 7


def _tensor(path) -> np.ndarray:
    return make_ndarray(tensor_pb2.TensorProto.FromString(path.read_bytes()))


@pytest.mark.parametrize("name", CONTROL_FLOW_MODELS)
def test_oracle_model_matches_tensorflow(name):
    manifest = load_manifest(name)
    bundles = {}
    for case in manifest["cases"]:
        tags = tuple(case["tags"])
        if tags not in bundles:
            bundles[tags] = load_saved_model(str(manifest["export_path"]), case["tags"], delegation=False)
        bundle = bundles[tags]
        signature = bundle.signature_defs[case["signature"]]
        feeds = {signature.inputs[k].name: _tensor(manifest["dir"] / p) for k, p in case["inputs"].items()}
        fetches = {k: signature.outputs[k].name for k in case["outputs"]}
        outputs = bundle.session.run(fetches, feeds)
        for key, path in case["outputs"].items():
            expected = _tensor(manifest["dir"] / path)
            got = np.asarray(outputs[key])
            where = f"{name} {case['signature']} {key}"
            assert got.shape == expected.shape and got.dtype == expected.dtype, (where, got, expected)
            if expected.dtype.kind == "f":
                np.testing.assert_allclose(got, expected, rtol=case["rtol"], atol=case["atol"], err_msg=where)
            else:
                assert (got == expected).all(), (where, got, expected)
    for bundle in bundles.values():
        bundle.close()


# -- hand-made graphs ------------------------------------------------------------------------
def graph_of(*nodes: tuple) -> Graph:
    """(name, op, inputs, attrs); attr values: arrays (tensors), str, bool, int (types for
    ``T``/``dtype``, else ints)."""
    graph_def = graph_pb2.GraphDef()
    for name, op, inputs, attrs in nodes:
        node = graph_def.node.add(name=name, op=op)
        node.input.extend(inputs)
        for key, value in attrs.items():
            if isinstance(value, np.ndarray):
                node.attr[key].tensor.CopyFrom(make_tensor_proto(value))
            elif isinstance(value, str):
                node.attr[key].s = value.encode()
            elif isinstance(value, bool):
                node.attr[key].b = value
            elif isinstance(value, list) and key == "shape":
                node.attr[key].shape.dim.extend(tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in value)
            elif isinstance(value, list):
                node.attr[key].list.type.extend(value)
            elif key in ("T", "dtype"):
                node.attr[key].type = value
            else:
                node.attr[key].i = value
    return Graph.from_graph_def(graph_def)


def const(name: str, value, *control: str) -> tuple:
    array = np.asarray(value)
    dtype = {np.dtype(np.int32): INT, np.dtype(np.float32): FLOAT, np.dtype(bool): BOOL}.get(
        array.dtype, STRING
    )
    return (name, "Const", [f"^{c}" for c in control], {"value": array, "dtype": dtype})


def counting_loop(prefix: str = "", frame: str = "L", start: str | None = None) -> list[tuple]:
    """``i = start; while i < n: i += 1`` as tf.compat.v1.while_loop writes it; exits ``{p}exit``."""
    p = prefix
    nodes = [] if start else [const(f"{p}zero", np.int32(0))]
    return nodes + [
        (f"{p}enter_i", "Enter", [start or f"{p}zero"], {"T": INT, "frame_name": frame}),
        (f"{p}enter_n", "Enter", ["n"], {"T": INT, "frame_name": frame, "is_constant": True}),
        (f"{p}merge", "Merge", [f"{p}enter_i", f"{p}next"], {"T": INT, "N": 2}),
        (f"{p}less", "Less", [f"{p}merge", f"{p}enter_n"], {"T": INT}),
        (f"{p}cond", "LoopCond", [f"{p}less"], {}),
        (f"{p}switch", "Switch", [f"{p}merge", f"{p}cond"], {"T": INT}),
        (f"{p}body", "Identity", [f"{p}switch:1"], {"T": INT}),
        const(f"{p}one", np.int32(1), f"{p}body"),
        (f"{p}add", "AddV2", [f"{p}body", f"{p}one"], {"T": INT}),
        (f"{p}next", "NextIteration", [f"{p}add"], {"T": INT}),
        (f"{p}exit", "Exit", [f"{p}switch"], {"T": INT}),
    ]


def test_while_loop_counts_and_exits():
    graph = graph_of(("n", "Placeholder", [], {"dtype": INT}), *counting_loop())
    session = Session(graph=graph)
    assert session.run("exit:0", {"n:0": 5}) == 5
    assert session.run("exit:0", {"n:0": -3}) == 0  # the body never runs
    assert session.run(["exit:0", "n:0"], {"n:0": 2}) == [2, 2]


def test_loop_entered_dead_exits_dead_and_merges_downstream():
    """A while in a cond's untaken branch: its Enters are dead, so are its Exits."""
    graph = graph_of(
        ("n", "Placeholder", [], {"dtype": INT}),
        ("p", "Placeholder", [], {"dtype": BOOL}),
        const("zero", np.int32(0)),
        ("sw", "Switch", ["zero", "p"], {"T": INT}),
        *counting_loop(start="sw:1"),
        const("minus", np.int32(-1)),
        ("out", "Merge", ["exit", "minus"], {"T": INT, "N": 2}),
    )
    session = Session(graph=graph)
    assert session.run(["out:0", "out:1"], {"n:0": 3, "p:0": True}) == [3, 0]
    assert session.run(["out:0", "out:1"], {"n:0": 3, "p:0": False}) == [-1, 1]
    with pytest.raises(errors.InvalidArgumentError, match=r"^Retval\[0\] does not have value"):
        session.run("exit:0", {"n:0": 3, "p:0": False})


def test_nested_frames_run_the_inner_loop_every_outer_iteration():
    """outer: i < n; inner (frame "I"): j counts from 0 to n, summed into the outer total."""
    graph = graph_of(
        ("n", "Placeholder", [], {"dtype": INT}),
        *counting_loop(),
        (
            "inner_n",
            "Enter",
            ["enter_n"],
            {"T": INT, "frame_name": "I", "is_constant": True},
        ),
        const("izero", np.int32(0), "body"),
        ("ienter", "Enter", ["izero"], {"T": INT, "frame_name": "I"}),
        ("imerge", "Merge", ["ienter", "inext"], {"T": INT, "N": 2}),
        ("iless", "Less", ["imerge", "inner_n"], {"T": INT}),
        ("icond", "LoopCond", ["iless"], {}),
        ("iswitch", "Switch", ["imerge", "icond"], {"T": INT}),
        ("ibody", "Identity", ["iswitch:1"], {"T": INT}),
        const("ione", np.int32(1), "ibody"),
        ("iadd", "AddV2", ["ibody", "ione"], {"T": INT}),
        ("inext", "NextIteration", ["iadd"], {"T": INT}),
        ("iexit", "Exit", ["iswitch"], {"T": INT}),
        # total += inner count, as a second outer loop variable
        const("tzero", np.int32(0)),
        ("tenter", "Enter", ["tzero"], {"T": INT, "frame_name": "L"}),
        ("tmerge", "Merge", ["tenter", "tnext"], {"T": INT, "N": 2}),
        ("tswitch", "Switch", ["tmerge", "cond"], {"T": INT}),
        ("tadd", "AddV2", ["tswitch:1", "iexit"], {"T": INT}),
        ("tnext", "NextIteration", ["tadd"], {"T": INT}),
        ("texit", "Exit", ["tswitch"], {"T": INT}),
    )
    session = Session(graph=graph)
    assert session.run(["exit:0", "texit:0"], {"n:0": 4}) == [4, 16]
    assert session.run("texit:0", {"n:0": 0}) == 0
    plan = session.plan((graph.get_tensor_by_name("n:0"),), (graph.get_tensor_by_name("texit:0"),), ())
    (runner,) = [s.call for s in plan.steps if isinstance(s.call, frames.FrameRunner)]
    assert [type(s.call).__name__ for s in runner.plan.steps].count("FrameRunner") == 1


def test_control_trigger_runs_when_its_inputs_are_dead():
    graph = graph_of(
        ("x", "Placeholder", [], {"dtype": FLOAT}),
        ("p", "Placeholder", [], {"dtype": BOOL}),
        ("sw", "Switch", ["x", "p"], {"T": FLOAT}),
        ("dead_side", "Identity", ["sw:1"], {"T": FLOAT}),
        ("trigger", "ControlTrigger", ["^dead_side"], {}),
        ("after", "Identity", ["x", "^trigger"], {"T": FLOAT}),
    )
    assert Session(graph=graph).run("after:0", {"x:0": 2.0, "p:0": False}) == 2.0


def test_infinite_loop_stops_at_the_run_deadline():
    graph = graph_of(("n", "Placeholder", [], {"dtype": INT}), *counting_loop())
    options = config_pb2.RunOptions(timeout_in_ms=50)
    with pytest.raises(errors.DeadlineExceededError):
        Session(graph=graph).run("exit:0", {"n:0": 2**31 - 1}, options=options)


def test_kernel_error_inside_a_loop_names_the_node():
    graph = graph_of(
        ("n", "Placeholder", [], {"dtype": INT}),
        *counting_loop(),
        const("shape", np.array([3], np.int32), "body"),
        ("bad", "Reshape", ["body", "shape"], {"T": INT}),
        ("bnext", "NextIteration", ["bad"], {"T": INT}),
        ("benter", "Enter", ["zero"], {"T": INT, "frame_name": "L"}),
        ("bmerge", "Merge", ["benter", "bnext"], {"T": INT, "N": 2}),
        ("bswitch", "Switch", ["bmerge", "cond"], {"T": INT}),
        ("bexit", "Exit", ["bswitch"], {"T": INT}),
    )
    with pytest.raises(errors.InvalidArgumentError) as info:
        Session(graph=graph).run("bexit:0", {"n:0": 2})
    assert info.value.op.name == "bad"
    assert str(info.value).endswith("[[{{node bad}}]]")


def test_fetching_inside_a_frame_is_reported():
    graph = graph_of(("n", "Placeholder", [], {"dtype": INT}), *counting_loop())
    with pytest.raises(errors.UnimplementedError, match="inside while loop frame 'L'"):
        Session(graph=graph).run("add:0", {"n:0": 2})


def test_cycle_outside_any_frame_is_refused_at_import_as_tf_refuses_it():
    with pytest.raises(errors.InvalidArgumentError, match="^2 nodes in a cycle$"):
        graph_of(
            ("x", "Placeholder", [], {"dtype": INT}),
            ("a", "AddV2", ["x", "b"], {"T": INT}),
            ("b", "Identity", ["a"], {"T": INT}),
        )


def test_loops_run_from_many_threads_at_once():
    graph = graph_of(("n", "Placeholder", [], {"dtype": INT}), *counting_loop())
    session = Session(graph=graph)
    results: dict[int, list] = {}

    def work(k: int) -> None:
        results[k] = [session.run("exit:0", {"n:0": k + i}) for i in range(20)]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {k: [k + i for i in range(20)] for k in range(8)}


def test_assert_fails_with_tensorflows_text():
    # The text TF 2.15 prints for these inputs (summarize=3), recorded from a v1 Session.
    expected = "assertion failed: [value is] [1 2 3...] [[1.5 2][3...]...] [x] [7] [1 2]"
    graph = graph_of(
        ("ok", "Placeholder", [], {"dtype": BOOL}),
        const("what", np.array(b"value is", object)),
        const("v", np.array([1, 2, 3, 4], np.int32)),
        const("m", np.array([[1.5, 2], [3, 4]], np.float32)),
        const("x", np.array(b"x", object)),
        const("seven", np.int32(7)),
        const("pair", np.array([1, 2], np.int32)),
        (
            "check",
            "Assert",
            ["ok", "what", "v", "m", "x", "seven", "pair"],
            {"T": [STRING, INT, FLOAT, STRING, INT, INT], "summarize": 3},
        ),
    )
    session = Session(graph=graph)
    session.run("check", {"ok:0": True})
    with pytest.raises(errors.InvalidArgumentError) as info:
        session.run("check", {"ok:0": False})
    assert str(info.value) == expected + "\n\t [[{{node check}}]]"


def test_ref_variable_enters_the_loop_by_reference():
    """RefEnter keeps a TF1 ref variable a ref inside the frame; a read sees later assigns."""
    graph = graph_of(
        ("n", "Placeholder", [], {"dtype": INT}),
        ("v", "VariableV2", [], {"dtype": INT, "shape": []}),
        const("v_init_value", np.int32(10)),
        ("v_init", "Assign", ["v", "v_init_value"], {"T": INT}),
        *counting_loop(),
        ("ref_enter", "RefEnter", ["v"], {"T": INT, "frame_name": "L", "is_constant": True}),
        ("read", "Identity", ["ref_enter"], {"T": INT}),
        const("tzero", np.int32(0)),
        ("tenter", "Enter", ["tzero"], {"T": INT, "frame_name": "L"}),
        ("tmerge", "Merge", ["tenter", "tnext"], {"T": INT, "N": 2}),
        ("tswitch", "Switch", ["tmerge", "cond"], {"T": INT}),
        ("tadd", "AddV2", ["tswitch:1", "read"], {"T": INT}),
        ("tnext", "NextIteration", ["tadd"], {"T": INT}),
        ("texit", "Exit", ["tswitch"], {"T": INT}),
    )
    session = Session(graph=graph)
    session.run("v_init")
    assert session.run("texit:0", {"n:0": 3}) == 30


def test_control_input_into_a_frame_gates_its_enter():
    """``with tf.control_dependencies([...]): while_loop(...)``: a dead control input kills the
    Enter, so the loop exits dead; a live one only orders it."""
    nodes = counting_loop()
    nodes[1] = ("enter_i", "Enter", ["zero", "^gate"], {"T": INT, "frame_name": "L"})
    graph = graph_of(
        ("n", "Placeholder", [], {"dtype": INT}),
        ("p", "Placeholder", [], {"dtype": BOOL}),
        ("sw", "Switch", ["n", "p"], {"T": INT}),
        ("gate", "Identity", ["sw:1"], {"T": INT}),
        *nodes,
    )
    session = Session(graph=graph)
    assert session.run("exit:0", {"n:0": 4, "p:0": True}) == 4
    with pytest.raises(errors.InvalidArgumentError, match=r"^Retval\[0\] does not have value"):
        session.run("exit:0", {"n:0": 4, "p:0": False})


def test_loop_iteration_overhead():
    """One iteration of an 8-step loop body (two numpy scalar kernels): measured, bounded loosely."""
    graph = graph_of(("n", "Placeholder", [], {"dtype": INT}), *counting_loop())
    session = Session(graph=graph)
    session.run("exit:0", {"n:0": 10})
    iterations = 5000
    start = time.perf_counter()
    assert session.run("exit:0", {"n:0": iterations}) == iterations
    per_iteration_us = (time.perf_counter() - start) / iterations * 1e6
    print(f"per-iteration overhead: {per_iteration_us:.2f} us")
    assert per_iteration_us < 200.0
