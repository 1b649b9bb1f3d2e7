"""The request path over a real ``runtime.Session``: a hand-built GraphDef (y = 0.5x + 2 and an
Example-parsing half) with its SignatureDefs, no files. Checks what the fakes cannot: feeds by
tensor name, fetch order, dtypes of real outputs, and TF Serving's texts on a real Session."""

import numpy as np
import pytest

from apis.tensorflow.core.framework import (
    attr_value_pb2,
    graph_pb2,
    node_def_pb2,
    tensor_shape_pb2,
    types_pb2,
)
from apis.tensorflow.core.protobuf import meta_graph_pb2
from apis.tensorflow_serving.apis import predict_pb2, regression_pb2
from runtime import Graph, Session, errors
from serving.inference import tensor_codec
from serving.inference.predict import run_predict
from serving.inference.regress import run_regress
from serving.lifecycle.servable import Servable

FLOAT, STRING = types_pb2.DT_FLOAT, types_pb2.DT_STRING


def node(name, op, inputs=(), **attrs):
    n = node_def_pb2.NodeDef(name=name, op=op, input=list(inputs))
    for key, value in attrs.items():
        n.attr[key].CopyFrom(value)
    return n


def dtype_attr(dtype):
    return attr_value_pb2.AttrValue(type=dtype)


def const(name, value):
    proto = tensor_codec.make_tensor_proto(np.float32(value))
    return node(name, "Const", dtype=dtype_attr(FLOAT), value=attr_value_pb2.AttrValue(tensor=proto))


def placeholder(name, dtype, dims):
    shape = tensor_shape_pb2.TensorShapeProto(
        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in dims]
    )
    return node(name, "Placeholder", dtype=dtype_attr(dtype), shape=attr_value_pb2.AttrValue(shape=shape))


def info(name, dtype):
    return meta_graph_pb2.TensorInfo(name=name, dtype=dtype)


@pytest.fixture(scope="module")
def servable():
    graph_def = graph_pb2.GraphDef(
        node=[
            placeholder("x", FLOAT, [-1]),
            const("a", 0.5),
            const("b", 2.0),
            node("ax", "Mul", ["a", "x"], T=dtype_attr(FLOAT)),
            node("y", "AddV2", ["ax", "b"], T=dtype_attr(FLOAT)),
            node("twice", "AddV2", ["y", "y"], T=dtype_attr(FLOAT)),
        ]
    )
    graph = Graph.from_graph_def(graph_def)
    mgd = meta_graph_pb2.MetaGraphDef()
    mgd.signature_def["serving_default"].CopyFrom(
        meta_graph_pb2.SignatureDef(
            inputs={"x": info("x:0", FLOAT)},
            outputs={"y": info("y:0", FLOAT), "twice": info("twice:0", FLOAT)},
            method_name="tensorflow/serving/predict",
        )
    )
    mgd.signature_def["regress"].CopyFrom(
        meta_graph_pb2.SignatureDef(
            inputs={"inputs": info("x:0", FLOAT)},
            outputs={"outputs": info("y:0", FLOAT)},
            method_name="tensorflow/serving/regress",
        )
    )
    session = Session(graph=graph)

    class Bundle:
        meta_graph_def = mgd
        signature_defs = mgd.signature_def

    Bundle.session = session
    yield Servable("m", 3, Bundle())
    session.close()


def request(**inputs):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "m"
    for alias, value in inputs.items():
        tensor_codec.encode_into(req.inputs[alias], value)
    return req


def test_predict_on_a_real_session(servable):
    response = run_predict(servable, request(x=np.float32([1.0, 2.0, 5.0])))
    assert sorted(response.outputs) == ["twice", "y"]
    assert list(response.outputs["y"].float_val) == [2.5, 3.0, 4.5]
    assert list(response.outputs["twice"].float_val) == [5.0, 6.0, 9.0]
    assert response.outputs["y"].dtype == FLOAT
    assert (response.model_spec.name, response.model_spec.version.value) == ("m", 3)
    req = request(x=np.float32([2.0]))
    req.output_filter.append("twice")
    assert list(run_predict(servable, req).outputs) == ["twice"]


def test_wrong_dtype_never_reaches_the_session(servable):
    with pytest.raises(errors.InvalidArgumentError) as info:
        run_predict(servable, request(x=np.float64([1.0])))
    assert info.value.message == "Expects arg[0] to be float but double is provided"


def test_regress_feeds_serialized_examples_as_tf_serving_does(servable):
    """The signature's input is float: TF's Session refuses the string feed, with TF's text."""
    req = regression_pb2.RegressionRequest()
    req.model_spec.name = "m"
    req.model_spec.signature_name = "regress"
    req.input.example_list.examples.add()
    with pytest.raises(errors.InvalidArgumentError) as info:
        run_regress(servable, req)
    assert info.value.message == "Expects arg[0] to be float but string is provided"


def test_predict_on_the_init_op_signature_answers_as_tf_servings_session():
    """A TF2 export's ``__saved_model_init_op`` signature has no inputs and one output naming the
    NoOp. TF Serving fetches it as a tensor and TF 2.21's C++ Session answers OUT_OF_RANGE (the
    text of ``Session::MakeCallable``/``Run`` fetching ``NoOp``, taken from TF); never INTERNAL."""
    from loader.bundle import load_saved_model
    from tests.oracle import corpus

    manifest = corpus.load_manifest("tf2_half_plus_two")
    bundle = load_saved_model(str(manifest["export_path"]), tags=["serve"])
    try:
        req = predict_pb2.PredictRequest()
        req.model_spec.name = "m"
        req.model_spec.signature_name = "__saved_model_init_op"
        with pytest.raises(errors.OutOfRangeError) as info:
            run_predict(Servable("m", 1, bundle), req)
        assert str(info.value) == "Node 'NoOp' (type: 'NoOp', num of outputs: 0) does not have output 0"
    finally:
        bundle.close()
