"""Graph, attrs and DeviceSpec: lookups with TF's texts, round trips, collections, imports."""

from __future__ import annotations

import numpy as np
import pytest

from apis.tensorflow.core.framework import attr_value_pb2, graph_pb2, types_pb2
from apis.tensorflow.core.protobuf import meta_graph_pb2
from runtime import DeviceSpec, Graph, dtypes
from runtime.graph.attrs import AttrPlaceholder, FuncAttr, decode
from runtime.graph.graph import get_default_graph
from runtime.tensor_util import make_tensor_proto
from tests.oracle.builders.session_graphs import read_case


def basics() -> tuple[Graph, meta_graph_pb2.MetaGraphDef]:
    out, case = read_case("basics")
    meta_graph = meta_graph_pb2.MetaGraphDef.FromString((out / case["graph"]).read_bytes())
    graph = Graph()
    graph.import_meta_graph(meta_graph)
    return graph, meta_graph


def test_lookup_errors_match_tensorflow():
    graph, _ = basics()
    _, case = read_case("lookups")
    for run in case["runs"]:
        call = getattr(graph, run["method"])
        if run["error"] is None:
            call(run["arg"])
            continue
        with pytest.raises(Exception) as info:
            call(run["arg"])
        assert type(info.value).__name__ == run["error"]["type"], run
        assert str(info.value) == run["error"]["message"], run


def test_operations_tensors_and_attrs():
    graph, meta_graph = basics()
    assert [op.name for op in graph.get_operations()] == [n.name for n in meta_graph.graph_def.node]
    y = graph.get_operation_by_name("y")
    assert y.type == "Identity" and y.get_attr("T") == dtypes.DT_FLOAT
    assert [t.name for t in y.inputs] == ["add:0"] and y.outputs[0].name == "y:0"
    assert graph.get_tensor_by_name("y:0") is y.outputs[0]
    x = graph.get_tensor_by_name("x:0")
    assert x.dtype == dtypes.DT_FLOAT and x.shape == (None, 1)
    split = graph.get_operation_by_name("split")
    assert split.num_outputs == 2 and split.outputs[1].dtype == dtypes.DT_INT32
    with pytest.raises(ValueError, match="^Operation 'y' has no attr named 'foo'.$"):
        y.get_attr("foo")
    assert graph.get_tensor_by_name("pwd:0").shape == (2,)


def test_graph_def_round_trip_and_collections():
    graph, meta_graph = basics()
    again = Graph.from_graph_def(graph.as_graph_def())
    assert again.as_graph_def() == graph.as_graph_def()
    assert graph.as_graph_def().node[0] == meta_graph.graph_def.node[0]
    graph.add_to_collection("outputs", graph.get_tensor_by_name("y:0"))
    assert graph.get_collection("outputs", scope="y") == [graph.get_tensor_by_name("y:0")]
    assert graph.get_collection("outputs", scope="z") == []
    assert "outputs" in graph.get_all_collection_keys()


def test_import_meta_graph_restores_every_collection_kind():
    meta_graph = meta_graph_pb2.MetaGraphDef()
    const = meta_graph.graph_def.node.add(name="c", op="Const")
    const.attr["value"].tensor.CopyFrom(make_tensor_proto(np.float32(1)))
    const.attr["dtype"].type = types_pb2.DT_FLOAT
    collections = meta_graph.collection_def
    collections["nodes"].node_list.value.extend(["c", "c:0"])
    collections["bytes"].bytes_list.value.append(b"\x00raw")
    collections["ints"].int64_list.value.extend([1, 2])
    collections["floats"].float_list.value.append(0.5)
    collections["anys"].any_list.value.add().Pack(attr_value_pb2.AttrValue(i=3))
    graph = Graph()
    graph.import_meta_graph(meta_graph)
    op = graph.get_operation_by_name("c")
    assert graph.get_collection("nodes") == [op, op.outputs[0]]
    assert graph.get_collection("bytes") == [b"\x00raw"]
    assert graph.get_collection("ints") == [1, 2]
    assert graph.get_collection("floats") == [0.5]
    assert graph.get_collection("anys")[0].type_url.endswith("tensorflow.AttrValue")


def test_import_with_prefix_duplicates_unknown_inputs_finalize_and_version():
    graph_def = graph_pb2.GraphDef()
    const = graph_def.node.add(name="a", op="Const")
    const.attr["value"].tensor.CopyFrom(make_tensor_proto(np.float32(1)))
    const.attr["dtype"].type = types_pb2.DT_FLOAT
    graph_def.node.add(name="b", op="Identity", input=["a:0", "^a"]).attr["T"].type = types_pb2.DT_FLOAT
    graph = Graph()
    version = graph.version
    graph.import_graph_def(graph_def, name="p")
    assert graph.version > version
    b = graph.get_operation_by_name("p/b")
    assert b.node_def.input == ["p/a:0", "^p/a"]
    assert b.control_inputs == [graph.get_operation_by_name("p/a")]
    with pytest.raises(ValueError, match="^Node 'p/a' is not unique$"):
        graph.import_graph_def(graph_def, name="p")
    broken = graph_pb2.GraphDef()
    broken.node.add(name="c", op="Identity", input=["missing"])
    with pytest.raises(ValueError, match="^Node 'c': Unknown input node 'missing'$"):
        graph.import_graph_def(broken)
    no_output = graph_pb2.GraphDef()
    no_output.node.add(name="n", op="NoOp")
    no_output.node.add(name="m", op="Identity", input=["n:0"]).attr["T"].type = types_pb2.DT_FLOAT
    with pytest.raises(ValueError, match="^Node 'm': Connecting to invalid output 0 of source node n"):
        graph.import_graph_def(no_output)
    graph.finalize()
    with pytest.raises(RuntimeError, match="Graph is finalized and cannot be modified."):
        graph.import_graph_def(graph_def, name="q")


def test_outputs_of_ops_tf_does_not_know_are_inferred():
    graph_def = graph_pb2.GraphDef()
    graph_def.node.add(name="custom", op="MyCustomOp")
    graph_def.node.add(name="use", op="Identity", input=["custom:2"]).attr["T"].type = types_pb2.DT_FLOAT
    graph = Graph.from_graph_def(graph_def)
    assert graph.get_operation_by_name("custom").num_outputs == 3
    assert graph.get_tensor_by_name("custom:4").name == "custom:4"  # its kernel decides


def test_default_graph():
    graph = Graph()
    assert get_default_graph() is not graph
    with graph.as_default():
        assert get_default_graph() is graph


@pytest.mark.parametrize(
    ("text", "spec", "canonical"),
    [
        (
            "/job:worker/replica:1/task:2/device:GPU:3",
            DeviceSpec("worker", 1, 2, "GPU", 3),
            "/job:worker/replica:1/task:2/device:GPU:3",
        ),
        ("/cpu:0", DeviceSpec(device_type="CPU", device_index=0), "/device:CPU:0"),
        ("/device:CPU:*", DeviceSpec(device_type="CPU"), "/device:CPU:*"),
        ("", DeviceSpec(), ""),
    ],
)
def test_device_spec(text, spec, canonical):
    assert DeviceSpec.from_string(text) == spec
    assert spec.to_string() == canonical


def test_device_spec_rejects_garbage():
    with pytest.raises(ValueError):
        DeviceSpec.from_string("/nonsense:3")


def test_attr_decoding():
    shape = attr_value_pb2.AttrValue()
    shape.shape.dim.add(size=-1)
    shape.shape.dim.add(size=3)
    unknown = attr_value_pb2.AttrValue()
    unknown.shape.unknown_rank = True
    func = attr_value_pb2.AttrValue()
    func.func.name = "f"
    func.func.attr["T"].type = dtypes.DT_INT32
    table = [
        (attr_value_pb2.AttrValue(s=b"SAME"), "SAME"),
        (attr_value_pb2.AttrValue(i=7), 7),
        (attr_value_pb2.AttrValue(f=0.5), 0.5),
        (attr_value_pb2.AttrValue(b=True), True),
        (attr_value_pb2.AttrValue(type=dtypes.DT_HALF), dtypes.DT_HALF),
        (shape, (None, 3)),
        (unknown, None),
        (attr_value_pb2.AttrValue(placeholder="T"), AttrPlaceholder("T")),
        (attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(i=[1, 2])), [1, 2]),
        (attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue()), []),
        (attr_value_pb2.AttrValue(), None),
    ]
    for proto, expected in table:
        assert decode(proto) == expected, proto
    decoded = decode(func)
    assert isinstance(decoded, FuncAttr) and decoded.name == "f"
    assert decoded.attrs == {"T": dtypes.DT_INT32}
    tensor = attr_value_pb2.AttrValue()
    tensor.tensor.CopyFrom(make_tensor_proto(np.arange(3, dtype=np.int64)))
    assert (decode(tensor) == np.arange(3)).all()


def test_output_dtypes_of_a_call_follow_the_library_once_it_has_the_function():
    """An op's output dtypes are kept once its signature gives them; before the library holds
    the function a call names, none are kept, so the function's arrival is seen."""
    from google.protobuf import text_format

    g = Graph()
    g.import_graph_def(
        text_format.Parse(
            'node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }'
            'node { name: "call" op: "to_int" input: "x" attr { key: "_output_shapes" value { list { shape {} } } } }',
            graph_pb2.GraphDef(),
        )
    )
    call = g.get_operation_by_name("call")
    assert call.outputs[0].dtype is None  # no signature yet, and no dtype attr
    library = text_format.Parse(
        'library { function { signature { name: "to_int" input_arg { name: "a" type: DT_FLOAT }'
        ' output_arg { name: "y" type: DT_INT32 } }'
        ' node_def { name: "c" op: "Cast" input: "a" attr { key: "SrcT" value { type: DT_FLOAT } }'
        ' attr { key: "DstT" value { type: DT_INT32 } } } ret { key: "y" value: "c:y:0" } } }',
        graph_pb2.GraphDef(),
    )
    g.import_graph_def(library)
    assert call.outputs[0].dtype == dtypes.DT_INT32
    assert g.get_operation_by_name("x").outputs[0].dtype == dtypes.DT_FLOAT
    assert g.get_operation_by_name("x").outputs[0].dtype == dtypes.DT_FLOAT  # (kept)


def _two_node_graph_def() -> graph_pb2.GraphDef:
    graph_def = graph_pb2.GraphDef()
    const = graph_def.node.add(name="a", op="Const")
    const.attr["value"].tensor.CopyFrom(make_tensor_proto(np.float32(1)))
    const.attr["dtype"].type = types_pb2.DT_FLOAT
    graph_def.node.add(name="b", op="Identity", input=["a:0", "^a"]).attr["T"].type = types_pb2.DT_FLOAT
    return graph_def


def test_a_derived_import_builds_the_same_graph_as_a_checked_one():
    checked, derived = Graph(), Graph()
    checked.import_graph_def(_two_node_graph_def())
    derived.import_graph_def(_two_node_graph_def(), derived=True)
    for a, b in zip(checked.get_operations(), derived.get_operations(), strict=True):
        assert (a.name, a.type, a.node_def) == (b.name, b.type, b.node_def)
        assert [t.name for t in a.inputs] == [t.name for t in b.inputs]
        assert [op.name for op in a.control_inputs] == [op.name for op in b.control_inputs]
        assert [(t.name, t.dtype, t.shape) for t in a.outputs] == [
            (t.name, t.dtype, t.shape) for t in b.outputs
        ]


def test_a_derived_import_still_refuses_repeated_names_and_unknown_inputs_and_skips_node_checks():
    graph = Graph()
    graph.import_graph_def(_two_node_graph_def(), derived=True)
    with pytest.raises(ValueError, match="repeats a node name"):
        graph.import_graph_def(_two_node_graph_def(), derived=True)
    repeated = _two_node_graph_def()
    repeated.node.add(name="b2", op="NoOp")
    repeated.node.add(name="b2", op="NoOp")
    with pytest.raises(ValueError, match="repeats a node name"):
        Graph().import_graph_def(repeated, derived=True)
    broken = graph_pb2.GraphDef()
    broken.node.add(name="c", op="Identity", input=["missing"])
    with pytest.raises(ValueError, match="^Node 'c': Unknown input node 'missing'$"):
        Graph().import_graph_def(broken, derived=True)
    no_attr = graph_pb2.GraphDef()
    no_attr.node.add(name="x", op="Placeholder")  # no dtype: TF's NodeDef check refuses it
    with pytest.raises(ValueError, match="missing attr 'dtype'"):
        Graph().import_graph_def(no_attr)
    assert Graph().import_graph_def(no_attr, derived=True)[0].name == "x"  # (checked when first imported)
