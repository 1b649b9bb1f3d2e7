"""Library functions: TF1 Defun call nodes, TF2 SavedModels (StatefulPartitionedCall), FunctionDefs."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from apis.tensorflow.core.framework import function_pb2, graph_pb2
from runtime import Graph, Session, dtypes, errors
from runtime.graph.function_def import instantiate
from runtime.tensor_util import make_tensor_proto
from tests.oracle.builders.session_graphs import fetch_structure
from tests.runtime.test_session import check_runs, open_case


def test_defun_call_nodes_match_tensorflow():
    # Run 2 gathers out of range inside the function: TF's and numpy's texts differ, the
    # failing node (inside the function) must still be named.
    check_runs("defun", kernel_texts=(2,))


def test_tf_module_saved_model_through_stateful_partitioned_call():
    check_runs("tf_module")


def test_keras_saved_model():
    check_runs("keras_mlp")


def _library_graph(fdef: function_pb2.FunctionDef, *nodes: tuple) -> Graph:
    graph_def = graph_pb2.GraphDef()
    graph_def.library.function.append(fdef)
    for name, op, inputs, attrs in nodes:
        node = graph_def.node.add(name=name, op=op, input=inputs)
        for key, value in attrs.items():
            node.attr[key].CopyFrom(value)
    return Graph.from_graph_def(graph_def)


def _split_twice() -> function_pb2.FunctionDef:
    """f<T>(x) -> (second half, first half) of Split, typed through an attr placeholder."""
    fdef = function_pb2.FunctionDef()
    fdef.signature.name = "split_twice"
    fdef.signature.input_arg.add(name="x", type_attr="T")
    fdef.signature.output_arg.add(name="hi", type_attr="T")
    fdef.signature.output_arg.add(name="lo", type_attr="T")
    fdef.signature.attr.add(name="T", type="type")
    fdef.signature.control_output.append("marker")
    axis = fdef.node_def.add(name="axis", op="Const")
    axis.attr["dtype"].type = dtypes.DT_INT32
    axis.attr["value"].tensor.CopyFrom(make_tensor_proto(np.int32(0)))
    split = fdef.node_def.add(name="split", op="Split", input=["axis:output:0", "x"])
    split.attr["T"].placeholder = "T"
    split.attr["num_split"].i = 2
    fdef.node_def.add(name="marker", op="NoOp", input=["^split"])
    fdef.ret["hi"] = "split:output:1"
    fdef.ret["lo"] = "split:output:0"
    fdef.control_ret["marker"] = "marker"
    return fdef


def test_instantiation_substitutes_placeholders_and_flattens_output_names():
    fdef = _split_twice()
    attrs = {"T": _type_attr(dtypes.DT_FLOAT)}
    body = instantiate(fdef, attrs, {fdef.signature.name: fdef})
    split = body.graph.get_operation_by_name("split")
    assert split.get_attr("T") == dtypes.DT_FLOAT
    assert split.node_def.input == ["axis:0", "x"]
    assert [t.name for t in body.rets] == ["split:1", "split:0"]
    assert [op.name for op in body.control_rets] == ["marker"]


def _type_attr(dtype: int):
    from apis.tensorflow.core.framework import attr_value_pb2

    return attr_value_pb2.AttrValue(type=dtype)


def test_direct_call_and_partitioned_call_run_the_function():
    from apis.tensorflow.core.framework import attr_value_pb2

    fdef = _split_twice()
    f = attr_value_pb2.AttrValue()
    f.func.name = "split_twice"
    f.func.attr["T"].type = dtypes.DT_INT64
    types = attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(type=[9]))
    graph = _library_graph(
        fdef,
        ("x", "Placeholder", [], {"dtype": _type_attr(dtypes.DT_INT64)}),
        ("direct", "split_twice", ["x"], {"T": _type_attr(dtypes.DT_INT64)}),
        (
            "call",
            "StatefulPartitionedCall",
            ["x"],
            {"f": f, "Tin": types, "Tout": attr_value_pb2.AttrValue(list={"type": [9, 9]})},
        ),
    )
    session = Session(graph=graph)
    x = np.arange(4, dtype=np.int64)
    hi, lo = session.run(["direct:0", "direct:1"], {"x:0": x})
    assert hi.tolist() == [2, 3] and lo.tolist() == [0, 1]
    assert [v.tolist() for v in session.run(["call:0", "call:1"], {"x:0": x})] == [[2, 3], [0, 1]]


def test_unsupported_ops_inside_functions_are_reported_with_the_callers():
    fdef = function_pb2.FunctionDef()
    fdef.signature.name = "uses_py"
    fdef.signature.input_arg.add(name="x", type=dtypes.DT_FLOAT)
    fdef.signature.output_arg.add(name="y", type=dtypes.DT_FLOAT)
    py = fdef.node_def.add(name="py", op="PyFunc", input=["x"])
    py.attr["Tout"].list.type.append(dtypes.DT_FLOAT)
    py.attr["Tin"].list.type.append(dtypes.DT_FLOAT)
    py.attr["token"].s = b"pyfunc_0"
    fdef.node_def.add(name="other", op="Frobnicate", input=["py:output:0"])
    fdef.ret["y"] = "other:output:0"
    graph = _library_graph(
        fdef,
        ("x", "Placeholder", [], {"dtype": _type_attr(dtypes.DT_FLOAT)}),
        ("call", "uses_py", ["x"], {}),
        ("also", "Frobnicate", ["call"], {}),
    )
    with pytest.raises(errors.UnimplementedError) as info:
        Session(graph=graph).run("also:0", {"x:0": 1.0})
    assert str(info.value) == "Op types not supported: Frobnicate (x2), PyFunc (x1)"


def test_tf2_cond_and_while_loop_through_functional_ops():
    check_runs("tf_control")


def test_function_calls_from_many_threads():
    session, case, read = open_case("tf_module")
    (run,) = case["runs"]
    feeds = {k: read(v["tensor"]) for k, v in run["feeds"].items()}
    fetches = fetch_structure(run["fetches"])
    expected = session.run(fetches, feeds)
    failures = []

    def worker() -> None:
        for _ in range(100):
            got = session.run(fetches, feeds)
            if not all(np.array_equal(got[k], expected[k]) for k in expected):
                failures.append(got)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
