"""Session.run against TensorFlow's own runs of the same graphs, plus what TF cannot record.

The TF-made cases come from ``tests/oracle/builders/session_graphs.py`` (built on first use; a
missing oracle venv fails these tests with the command to run).
"""

from __future__ import annotations

import threading
import time
import weakref

import numpy as np
import pytest

from apis.tensorflow.core.framework import graph_pb2, tensor_pb2
from apis.tensorflow.core.protobuf import config_pb2, meta_graph_pb2, saved_model_pb2
from runtime import Graph, Session, errors
from runtime.kernels.registry import DEAD, kernel
from runtime.session import get_default_session
from runtime.tensor_util import make_ndarray, make_tensor_proto
from tests.oracle.builders.session_graphs import fetch_structure, read_case, result_structure


# -- the TF-made cases -------------------------------------------------------------------------
def open_case(name: str) -> tuple[Session, dict, callable]:
    """A Session over a built case's graph (SavedModels restored), its case, a tensor reader."""
    out, case = read_case(name)

    def read(file: str) -> np.ndarray:
        return make_ndarray(tensor_pb2.TensorProto.FromString((out / file).read_bytes()))

    if case["kind"] == "saved_model":
        saved_model = saved_model_pb2.SavedModel.FromString(
            (out / case["graph"] / "saved_model.pb").read_bytes()
        )
        meta_graph = saved_model.meta_graphs[0]
    else:
        meta_graph = meta_graph_pb2.MetaGraphDef.FromString((out / case["graph"]).read_bytes())
    session = Session(graph=Graph())
    session.graph.import_meta_graph(meta_graph)
    if case["kind"] == "saved_model":
        saver = meta_graph.saver_def
        prefix = str(out / case["graph"] / "variables" / "variables")
        session.run(saver.restore_op_name, {saver.filename_tensor_name: prefix})
    return session, case, read


def assert_same(got, expected, where: str) -> None:
    assert type(got) is type(expected) or (
        isinstance(expected, np.ndarray) and isinstance(got, (np.ndarray, np.generic))
    ), f"{where}: {type(got)} vs {type(expected)}"
    if isinstance(expected, dict):
        assert list(got) == list(expected), where
        for key in expected:
            assert_same(got[key], expected[key], f"{where}[{key!r}]")
    elif isinstance(expected, (list, tuple)):
        assert len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, f"{where}[{i}]")
    elif expected is not None:
        got = np.asarray(got)
        assert got.dtype == expected.dtype and got.shape == expected.shape, (where, got, expected)
        if expected.dtype.kind == "f":
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=where)
        else:
            assert (got == expected).all(), (where, got, expected)


def check_runs(name: str, kernel_texts: tuple[int, ...] = ()) -> None:
    """Replays every recorded run of a case in one Session: same values, same errors.

    Error texts must match TF's exactly, except the node suffix of errors TF reports from its
    internal ``_retval`` nodes and, for runs in ``kernel_texts``, the text of a kernel's own
    message (numpy's words, not TF's): there only the error type and failing node must match.
    """
    session, case, read = open_case(name)
    for index, run in enumerate(case["runs"]):
        where = f"{name} run {index} ({run['fetches']})"
        feeds = {
            key: read(value["tensor"]) if "tensor" in value else value["json"]
            for key, value in run["feeds"].items()
        }
        fetches = fetch_structure(run["fetches"])
        if run["error"] is None:
            assert_same(session.run(fetches, feeds), result_structure(run["result"], read), where)
            continue
        with pytest.raises(Exception) as info:
            session.run(fetches, feeds)
        expected = run["error"]
        assert type(info.value).__name__ == expected["type"], (where, info.value)
        got_text, want_text = str(info.value), expected["message"]
        want_head, _, want_node = want_text.partition("\n\t [[")
        got_head, _, got_node = got_text.partition("\n\t [[")
        if "_retval_" not in want_node:
            assert want_node in got_text, (where, got_text, want_text)
        if index not in kernel_texts:
            assert got_head == want_head, where


def test_basics_match_tensorflow():
    # Run 16 adds shapes [2] and [3]: TF says "Incompatible shapes", numpy its own words.
    check_runs("basics", kernel_texts=(16,))


def test_pyfunc_is_never_executed():
    session, _, _ = open_case("basics")
    with pytest.raises(errors.UnimplementedError, match=r"^Op types not supported: PyFunc \(x1\)$"):
        session.run("pyfunc:0", {"x:0": np.ones((1, 1), np.float32)})


# -- hand-made graphs --------------------------------------------------------------------------
def make_graph(*nodes: tuple) -> Graph:
    """A Graph from (name, op, inputs, attrs) tuples; attr values: DataType ints (or lists),
    arrays, str, bool, and a list of dims for ``shape``."""
    graph_def = graph_pb2.GraphDef()
    for name, op, inputs, attrs in nodes:
        node = graph_def.node.add(name=name, op=op)
        node.input.extend(inputs)
        for key, value in attrs.items():
            if isinstance(value, np.ndarray):
                node.attr[key].tensor.CopyFrom(make_tensor_proto(value))
            elif isinstance(value, str):
                node.attr[key].s = value.encode()
            elif key == "shape":  # a list of dims
                node.attr[key].shape.SetInParent()
                for size in value:
                    node.attr[key].shape.dim.add().size = size
            elif isinstance(value, list):
                node.attr[key].list.type.extend(value)
            elif isinstance(value, bool):
                node.attr[key].b = value
            else:
                node.attr[key].type = value
    return Graph.from_graph_def(graph_def)


def _chain(length: int) -> Graph:
    nodes = [("x", "Placeholder", [], {"dtype": 1})]
    nodes += [(f"n{i}", "Identity", [f"n{i - 1}" if i else "x"], {"T": 1}) for i in range(length)]
    return make_graph(*nodes)


def test_unsupported_ops_are_reported_at_once_with_counts():
    graph = make_graph(
        ("x", "Placeholder", [], {"dtype": 1}),
        ("a", "Foo", ["x"], {}),
        ("b", "Foo", ["a"], {}),
        ("c", "PyFunc", ["b"], {"Tin": [1], "Tout": [1], "token": "pyfunc_0"}),
        ("d", "Foo", ["c"], {}),
        ("e", "EagerPyFunc", ["d"], {"Tin": [1], "Tout": [1], "token": "pyfunc_1"}),
    )
    with pytest.raises(errors.UnimplementedError) as info:
        Session(graph=graph).run("e", {"x:0": 1.0})
    assert str(info.value) == "Op types not supported: EagerPyFunc (x1), Foo (x3), PyFunc (x1)"


def test_pruning_skips_unneeded_and_fed_producers():
    graph = make_graph(
        ("x", "Placeholder", [], {"dtype": 1}),
        ("bad", "Foo", ["x"], {}),
        ("y", "Identity", ["bad"], {"T": 1}),
        ("z", "Identity", ["x"], {"T": 1}),
    )
    session = Session(graph=graph)
    assert session.run("z:0", {"x:0": 2.0}) == np.float32(2.0)
    assert session.run("y:0", {"bad:0": 3.0}) == np.float32(3.0)  # Foo is cut off by the feed


def test_make_callable_and_plan_cache():
    graph = _chain(3)
    session = Session(graph=graph)
    run = session.make_callable(["n2:0", "n0"], feed_list=["x:0"])
    assert run(np.float32(4)) == [np.float32(4), None]
    x, n2 = graph.get_tensor_by_name("x:0"), graph.get_tensor_by_name("n2:0")
    assert session.plan((x,), (n2,), ()) is session.plan((x,), (n2,), ())


def test_many_threads_share_a_session():
    session = Session(graph=_chain(50))
    failures = []

    def worker(seed: int) -> None:
        for i in range(200):
            value = np.full((2,), seed * 1000 + i, np.float32)
            if not (session.run("n49:0", {"x:0": value}) == value).all():
                failures.append((seed, i))

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


@kernel("_TestSleep")
def _test_sleep(x):
    time.sleep(0.005)
    return x


def test_timeout_in_ms_raises_deadline_exceeded():
    nodes = [("x", "Placeholder", [], {"dtype": 1})]
    nodes += [(f"s{i}", "_TestSleep", [f"s{i - 1}" if i else "x"], {}) for i in range(40)]
    session = Session(graph=make_graph(*nodes))
    with pytest.raises(errors.DeadlineExceededError, match="^Timed out waiting for notification$"):
        session.run("s39:0", {"x:0": 1.0}, options=config_pb2.RunOptions(timeout_in_ms=20))
    config = config_pb2.ConfigProto(operation_timeout_in_ms=20)
    with pytest.raises(errors.DeadlineExceededError):
        Session(graph=session.graph, config=config).run("s39:0", {"x:0": 1.0})
    run = session.make_callable("s39:0", ["x:0"], accept_options=True)
    with pytest.raises(errors.DeadlineExceededError, match="^Timed out waiting for notification$"):
        run(1.0, timeout_ms=20)  # a server's per-request timeout, without RunOptions
    assert run(1.0, timeout_ms=60_000) == 1.0


def test_a_timeout_reaches_the_steps_of_functions_a_run_calls():
    """A run calling a function (here a TF2 While that never ends) stops at its timeout, from a
    callable's ``timeout_ms`` as from RunOptions: the function's own steps see the deadline."""
    from tests.runtime.onnx.test_loops import I32, const, function, node

    int32 = np.dtype(np.int32)
    graph_def = graph_pb2.GraphDef()
    graph_def.node.extend(
        [
            node("x", "Placeholder", dtype=I32),
            node("loop", "StatelessWhile", "x", T=[I32], cond="forever", body="step"),
        ]
    )
    graph_def.library.function.extend(
        [
            function("forever", [("i", I32)], [("r", 10, "yes:output:0")], [const("yes", True, np.bool_)]),
            function(
                "step",
                [("i", I32)],
                [("o", I32, "next:z:0")],
                [const("zero", 0), node("next", "AddV2", "i", "zero:output:0", T=I32)],
            ),
        ]
    )
    session = Session(graph=Graph.from_graph_def(graph_def))
    run = session.make_callable("loop:0", ["x:0"], accept_options=True)
    started = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError):
        run(int32.type(0), timeout_ms=50)
    with pytest.raises(errors.DeadlineExceededError):
        session.run("loop:0", {"x:0": 0}, options=config_pb2.RunOptions(timeout_in_ms=50))
    assert time.monotonic() - started < 30


def test_full_trace_fills_step_stats():
    nodes = [("x", "Placeholder", [], {"dtype": 1})]
    nodes += [(f"n{i}", "Neg", [f"n{i - 1}" if i else "x"], {"T": 1}) for i in range(3)]
    session = Session(graph=make_graph(*nodes))
    metadata = config_pb2.RunMetadata()
    options = config_pb2.RunOptions(trace_level=config_pb2.RunOptions.FULL_TRACE)
    session.run("n2:0", {"x:0": 1.0}, options=options, run_metadata=metadata)
    (device,) = metadata.step_stats.dev_stats
    assert [s.node_name for s in device.node_stats] == ["n0", "n1", "n2"]
    assert all(s.all_start_micros > 0 for s in device.node_stats)


def test_close_context_manager_default_session_and_devices():
    graph = _chain(1)
    with Session(graph=graph) as session:
        assert get_default_session() is session
        assert session.list_devices()[0].name == "/job:localhost/replica:0/task:0/device:CPU:0"
    assert get_default_session() is None
    with pytest.raises(RuntimeError, match="^Attempted to use a closed Session.$"):
        session.run("n0:0", {"x:0": 1.0})


# TF1 control flow's dead tensors, with stand-in kernels (the real Switch/Merge come later).
@kernel("_TestSwitch")
def _test_switch(data, pred):
    return (DEAD, data) if pred else (data, DEAD)


@kernel("_TestMerge", accepts_dead=True)
def _test_merge(*inputs):
    live = [(i, v) for i, v in enumerate(inputs) if v is not DEAD]
    return (live[0][1], np.int32(live[0][0])) if live else (DEAD, DEAD)


def test_dead_tensors_propagate_until_a_kernel_that_accepts_them():
    graph = make_graph(
        ("x", "Placeholder", [], {"dtype": 1}),
        ("p", "Placeholder", [], {"dtype": 10}),
        ("sw", "_TestSwitch", ["x", "p"], {}),
        ("f", "Identity", ["sw:0"], {"T": 1}),
        ("t", "Identity", ["sw:1"], {"T": 1}),
        ("after_t", "NoOp", ["^t"], {}),
        ("gated", "Identity", ["x", "^after_t"], {"T": 1}),
        ("m", "_TestMerge", ["f", "t"], {}),
    )
    session = Session(graph=graph)
    assert session.run(["m:0", "m:1"], {"x:0": 5.0, "p:0": True}) == [5.0, 1]
    assert session.run(["m:0", "m:1"], {"x:0": 5.0, "p:0": False}) == [5.0, 0]
    assert session.run("gated:0", {"x:0": 5.0, "p:0": True}) == 5.0
    with pytest.raises(errors.InvalidArgumentError, match=r"^Retval\[0\] does not have value"):
        session.run("gated:0", {"x:0": 5.0, "p:0": False})  # dead through a control edge
    with pytest.raises(errors.InvalidArgumentError, match=r"^Retval\[1\] does not have value"):
        session.run(["f:0", "t:0"], {"x:0": 5.0, "p:0": False})


def test_kernel_exception_becomes_invalid_argument_naming_node_and_op():
    graph = make_graph(
        ("x", "Placeholder", [], {"dtype": 1}),
        ("r", "Reshape", ["x", "shape"], {"T": 1}),
        ("shape", "Const", [], {"value": np.array([7], np.int32), "dtype": 3}),
    )
    with pytest.raises(errors.InvalidArgumentError) as info:
        Session(graph=graph).run("r:0", {"x:0": np.ones(3, np.float32)})
    assert str(info.value).endswith("\n\t [[{{node r}}]]")
    assert info.value.op.name == "r" and info.value.node_def.op == "Reshape"


def test_per_node_overhead_on_a_1000_node_graph():
    """The interpreter's cost per cheap node (Identity): measured, printed, bounded loosely."""
    graph = _chain(1000)
    session = Session(graph=graph)
    x, out = graph.get_tensor_by_name("x:0"), graph.get_tensor_by_name("n999:0")
    value = np.float32(1)
    for _ in range(20):
        session.run(out, {x: value})
    runs = 200
    start = time.perf_counter()
    for _ in range(runs):
        session.run(out, {x: value})
    per_node_us = (time.perf_counter() - start) / runs / 1001 * 1e6
    print(f"per-node overhead: {per_node_us:.2f} us")
    assert per_node_us < 5.0


def test_tf1_cond_switch_merge_matches_tensorflow():
    check_runs("cond_v1")


def test_cycles_are_refused_at_import_not_looped():
    with pytest.raises(errors.InvalidArgumentError, match="^2 nodes in a cycle$"):
        make_graph(("a", "Identity", ["b"], {"T": 1}), ("b", "Identity", ["a"], {"T": 1}))


class _Big(np.ndarray):
    """An ndarray subclass, so a weakref can tell when the interpreter let go of a value."""


_alive: list = []


@kernel("_TestAlloc")
def _test_alloc(x):
    value = np.zeros(4, np.float32).view(_Big)
    _alive.append(weakref.ref(value))
    return value


@kernel("_TestFreed")
def _test_freed(x):
    return np.asarray([ref() is None for ref in _alive[:-1]])


def test_values_are_freed_after_their_last_use():
    graph = make_graph(
        ("x", "Placeholder", [], {"dtype": 1}),
        ("a", "_TestAlloc", ["x"], {}),
        ("b", "_TestAlloc", ["a"], {}),
        ("c", "_TestFreed", ["b"], {}),
    )
    _alive.clear()
    # When c runs, a's value (read only by b) is gone; b's is still c's input.
    assert Session(graph=graph).run("c:0", {"x:0": 1.0}).tolist() == [True]


def test_forwarding_identity_costs_no_step_but_keeps_names_and_deadness():
    """An Identity without control edges shares its input's slot; one with control inputs runs."""
    graph = make_graph(
        ("x", "Placeholder", [], {"dtype": 1}),
        ("i", "Identity", ["x"], {"T": 1}),
        ("n", "Neg", ["i"], {"T": 1}),
        ("j", "Identity", ["n", "^n"], {"T": 1}),
    )
    session = Session(graph=graph)
    assert session.run(["i:0", "n:0", "j:0"], {"x:0": 2.0}) == [2.0, -2.0, -2.0]
    plan = session.plan([graph.get_tensor_by_name("x:0")], [graph.get_tensor_by_name("j:0")], [])
    assert [step.op.type for step in plan.steps] == ["Neg", "Identity"]
