"""serving.grpc_api.services over a real in-process grpc server: statuses on the wire, deadlines, and a
servicer that survives failing requests. Every PredictionService method is called once."""

from concurrent import futures
from types import SimpleNamespace

import grpc
import numpy as np
import pytest

from apis.tensorflow.core.example import example_pb2
from apis.tensorflow.core.framework import tensor_pb2, types_pb2
from apis.tensorflow.core.protobuf import meta_graph_pb2
from apis.tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    inference_pb2,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)
from runtime import errors
from serving.grpc_api import services as grpc_service
from serving.lifecycle.servable import Servable


def _xs(serialized):
    return np.float32(
        [example_pb2.Example.FromString(s).features.feature["x"].float_list.value[0] for s in serialized]
    )


class Session:
    def __init__(self):
        self.options = []

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        self.options.append(options)
        out = []
        for name in fetches:
            if name == "y:0":
                out.append(0.5 * feed_dict["x:0"] + 2)
            elif name == "ye:0":
                out.append((0.5 * _xs(feed_dict["tf_example:0"]) + 2)[:, None])
            else:
                raise KeyError(name)  # a bug in the runtime: must not take the server down
        return out


def _mgd():
    mgd = meta_graph_pb2.MetaGraphDef()
    f, s = types_pb2.DT_FLOAT, types_pb2.DT_STRING
    mgd.signature_def["serving_default"].CopyFrom(
        meta_graph_pb2.SignatureDef(
            inputs={"x": meta_graph_pb2.TensorInfo(name="x:0", dtype=f)},
            outputs={"y": meta_graph_pb2.TensorInfo(name="y:0", dtype=f)},
            method_name="tensorflow/serving/predict",
        )
    )
    mgd.signature_def["broken"].CopyFrom(
        meta_graph_pb2.SignatureDef(
            inputs={"x": meta_graph_pb2.TensorInfo(name="x:0", dtype=f)},
            outputs={"y": meta_graph_pb2.TensorInfo(name="missing:0", dtype=f)},
        )
    )
    for key, method, out in (("classify", "classify", "scores"), ("regress", "regress", "outputs")):
        mgd.signature_def[key].CopyFrom(
            meta_graph_pb2.SignatureDef(
                inputs={"inputs": meta_graph_pb2.TensorInfo(name="tf_example:0", dtype=s)},
                outputs={out: meta_graph_pb2.TensorInfo(name="ye:0", dtype=f)},
                method_name=f"tensorflow/serving/{method}",
            )
        )
    return mgd


class Core:
    def __init__(self):
        self.session = Session()
        mgd = _mgd()
        self.servable = Servable(
            "m",
            7,
            SimpleNamespace(session=self.session, meta_graph_def=mgd, signature_defs=mgd.signature_def),
        )

    def pinned(self, model_spec, deadline=None):
        if model_spec.name != "m":
            raise errors.NotFoundError(
                None, None, f"Servable not found for request: Latest({model_spec.name})"
            )
        return self.servable


@pytest.fixture(scope="module")
def served():
    core = Core()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    grpc_service.add_to_server(core, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield core, prediction_service_pb2_grpc.PredictionServiceStub(channel)
    channel.close()
    server.stop(None).wait()


def predict_request(name="m", signature="", value=2.0):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = name
    req.model_spec.signature_name = signature
    req.inputs["x"].CopyFrom(tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[value]))
    return req


def test_predict_over_grpc_with_deadline(served):
    core, stub = served
    response = stub.Predict(predict_request(), timeout=5)
    assert list(response.outputs["y"].float_val) == [3.0]
    assert (response.model_spec.name, response.model_spec.version.value) == ("m", 7)
    # The server's clock starts after the client's, so its remaining time can be a few ms over.
    assert 3000 < core.session.options[-1].timeout_in_ms <= 5100
    stub.Predict(predict_request())
    assert core.session.options[-1] is None


@pytest.mark.parametrize(
    "req, code, text",
    [
        (
            predict_request(name="nope"),
            grpc.StatusCode.NOT_FOUND,
            "Servable not found for request: Latest(nope)",
        ),
        (
            predict_request(signature="x"),
            grpc.StatusCode.FAILED_PRECONDITION,
            'Serving signature key "x" not found.',
        ),
        (predict_pb2.PredictRequest(), grpc.StatusCode.INVALID_ARGUMENT, "Missing ModelSpec"),
    ],
)
def test_errors_on_the_wire(served, req, code, text):
    _, stub = served
    with pytest.raises(grpc.RpcError) as info:
        stub.Predict(req, timeout=5)
    assert (info.value.code(), info.value.details()) == (code, text)


def test_unexpected_failure_is_internal_and_the_server_keeps_serving(served):
    _, stub = served
    for _ in range(3):
        with pytest.raises(grpc.RpcError) as info:
            stub.Predict(predict_request(signature="broken"), timeout=5)
        assert info.value.code() == grpc.StatusCode.INTERNAL
    assert list(stub.Predict(predict_request(), timeout=5).outputs["y"].float_val) == [3.0]


def _with_example(req, x=2.0):
    req.input.example_list.examples.add().features.feature["x"].float_list.value.append(x)
    return req


def test_classify_regress_multi_inference_and_metadata_over_grpc(served):
    _, stub = served
    req = _with_example(
        classification_pb2.ClassificationRequest(model_spec={"name": "m", "signature_name": "classify"})
    )
    assert stub.Classify(req, timeout=5).result.classifications[0].classes[0].score == 3.0
    req = _with_example(
        regression_pb2.RegressionRequest(model_spec={"name": "m", "signature_name": "regress"})
    )
    assert stub.Regress(req, timeout=5).result.regressions[0].value == 3.0
    req = _with_example(inference_pb2.MultiInferenceRequest())
    req.tasks.add(
        model_spec={"name": "m", "signature_name": "regress"}, method_name="tensorflow/serving/regress"
    )
    req.tasks.add(
        model_spec={"name": "m", "signature_name": "classify"}, method_name="tensorflow/serving/classify"
    )
    results = stub.MultiInference(req, timeout=5).results
    assert results[0].regression_result.regressions[0].value == 3.0
    assert results[1].classification_result.classifications[0].classes[0].score == 3.0
    req = get_model_metadata_pb2.GetModelMetadataRequest(
        model_spec={"name": "m"}, metadata_field=["signature_def"]
    )
    response = stub.GetModelMetadata(req, timeout=5)
    signature_def_map = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signature_def_map)
    assert sorted(signature_def_map.signature_def) == ["broken", "classify", "regress", "serving_default"]
    with pytest.raises(grpc.RpcError) as info:
        stub.Classify(
            classification_pb2.ClassificationRequest(model_spec={"name": "m", "signature_name": "classify"})
        )
    assert (info.value.code(), info.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, "Input is empty.")
