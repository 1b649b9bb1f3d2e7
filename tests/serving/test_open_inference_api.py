"""The Open Inference Protocol in-process: ``OpenInferenceApi`` (HTTP) and the gRPC servicer's
conversions over a real ServerCore serving real SavedModels.

The property that holds it together: a V2 inference is Predict. For every request below, the
outputs V2 answers (JSON, binary, gRPC typed or raw) are the ones ``predict`` answers for the
same tensors, and every refusal is Predict's code and text.
"""

from __future__ import annotations

import json
import shutil
import time

import numpy as np
import pytest
from test_manager import config_for

from apis.inference import grpc_predict_v2_pb2 as v2
from apis.tensorflow_serving.apis import predict_pb2
from runtime import errors
from serving.grpc_api import open_inference as grpc_v2
from serving.inference import tensor_codec
from serving.inference.predict import predict
from serving.lifecycle.health import Readiness
from serving.open_inference import datatypes, infer
from serving.options import ServerOptions
from serving.rest_api.open_inference import HEADER_LENGTH, OpenInferenceApi
from serving.server_core import ServerCore
from tests.e2e.conftest import MODELS_DIR
from tests.oracle import corpus


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("v2")
    shutil.copytree(MODELS_DIR / "half_plus_two" / "00000123", tmp / "half" / "123")
    shutil.copytree(corpus.load_manifest("tf1_all_dtypes")["export_path"], tmp / "all" / "1")
    options = ServerOptions(port=0, file_system_poll_wait_seconds=0)
    core = ServerCore(options)
    core.reload_config(config_for([("half", tmp / "half"), ("all", tmp / "all")]))
    deadline = time.monotonic() + 60
    while not (core.has_available_version("half") and core.has_available_version("all")):
        assert time.monotonic() < deadline, "models did not load"
        time.sleep(0.05)
    readiness = Readiness(core)
    readiness.set_serving()
    yield core, readiness, OpenInferenceApi(core, readiness)
    core.stop()


def call(api, method, path, document=None, headers=None, body=None):
    if body is None and document is not None:
        body = json.dumps(document).encode()
    reply = api.process(method, path, headers or {}, body or b"")
    return reply, reply.status


def as_json(reply):
    return json.loads(reply.body)


def predicted(core, model, inputs: dict, signature="", output_filter=()):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    for name, array in inputs.items():
        tensor_codec.encode_into(request.inputs[name], array)
    request.output_filter.extend(output_filter)
    response = predict(core, request)
    return {k: tensor_codec.decode(v) for k, v in response.outputs.items()}


def test_health_metadata_and_readiness(served):
    core, readiness, api = served
    assert as_json(call(api, "GET", "/v2")[0]) == {
        "name": "savedmodel-server", "version": "0.1.0", "extensions": ["binary_tensor_data"],
    }  # fmt: skip
    assert as_json(call(api, "GET", "/v2/health/live")[0]) == {"live": True}
    reply, status = call(api, "GET", "/v2/health/ready")
    assert (status, as_json(reply)) == (200, {"ready": True})
    for path in ("/v2/models/half/ready", "/v2/models/half/versions/123/ready"):
        reply, status = call(api, "GET", path)
        assert (status, as_json(reply)) == (200, {"name": "half", "ready": True})
    meta = as_json(call(api, "GET", "/v2/models/half/versions/123")[0])
    assert meta == {
        "name": "half", "versions": ["123"], "platform": "tensorflow_savedmodel",
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 1]}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 1]}],
    }  # fmt: skip
    everything = as_json(call(api, "GET", "/v2/models/all")[0])
    assert {t["name"]: t["datatype"] for t in everything["outputs"]}["complex64"] == "DT_COMPLEX64"
    assert {t["name"]: t["datatype"] for t in everything["outputs"]}["bfloat16"] == "BF16"
    for path, status_wanted in (
        ("/v2/models/nope", 404), ("/v2/models/nope/ready", 404), ("/v2/models/half/versions/9/ready", 404),
        ("/v2/models/half/versions/9", 404), ("/v2/nope", 404), ("/v2/models/half/versions/x/ready", 404),
    ):  # fmt: skip
        reply, status = call(api, "GET", path)
        assert (status, set(as_json(reply))) == (status_wanted, {"error"}), path
    for method, path in (("POST", "/v2/health/live"), ("GET", "/v2/models/half/infer"), ("DELETE", "/v2")):
        reply, status = call(api, method, path)
        assert status == 400 and as_json(reply)["error"].startswith("Malformed request"), (method, path)
    readiness.set_not_serving()
    try:
        reply, status = call(api, "GET", "/v2/health/ready")
        assert (status, as_json(reply)) == (503, {"ready": False})
        assert call(api, "GET", "/v2/health/live")[1] == 200
    finally:
        readiness.set_serving()


def test_an_inference_is_predict_in_every_form(served):
    core, _, api = served
    rng = np.random.default_rng(3)
    for rows in (1, 2, 7):
        x = rng.normal(size=(rows, 1)).astype(np.float32)
        want = predicted(core, "half", {"x": x})["y"]
        flat = {
            "id": f"r{rows}",
            "inputs": [{"name": "x", "shape": [rows, 1], "datatype": "FP32", "data": x.ravel().tolist()}],
        }
        nested = {"inputs": [{"name": "x", "shape": [rows, 1], "datatype": "FP32", "data": x.tolist()}]}
        for document in (flat, nested):
            reply, status = call(api, "POST", "/v2/models/half/infer", document)
            answer = as_json(reply)
            assert (
                status == 200 and answer["model_version"] == "123" and answer.get("id") == document.get("id")
            )
            (output,) = answer["outputs"]
            assert (output["name"], output["datatype"], output["shape"]) == ("y", "FP32", [rows, 1])
            np.testing.assert_array_equal(np.float32(output["data"]).reshape(rows, 1), want)
        header = json.dumps(
            {
                "inputs": [
                    {
                        "name": "x",
                        "shape": [rows, 1],
                        "datatype": "FP32",
                        "parameters": {"binary_data_size": 4 * rows},
                    }
                ],
                "parameters": {"binary_data_output": True},
            }  # fmt: skip
        ).encode()
        reply, status = call(
            api, "POST", "/v2/models/half/versions/123/infer", headers={HEADER_LENGTH: str(len(header))},
            body=header + x.tobytes(),
        )  # fmt: skip
        length = int(dict(reply.headers)[HEADER_LENGTH])
        assert status == 200 and reply.content_type == "application/octet-stream"
        (output,) = json.loads(reply.body[:length])["outputs"]
        assert output["parameters"] == {"binary_data_size": 4 * rows}
        np.testing.assert_array_equal(np.frombuffer(reply.body[length:], np.float32).reshape(rows, 1), want)
        for raw in (True, False):  # and over gRPC, raw and typed
            request = v2.ModelInferRequest(model_name="half", id="g")
            tensor = request.inputs.add(name="x", datatype="FP32", shape=[rows, 1])
            if raw:
                request.raw_input_contents.append(x.tobytes())
            else:
                tensor.contents.fp32_contents.extend(x.ravel().tolist())
            response = grpc_v2.infer_response(
                infer.infer(api.functions, core, grpc_v2.infer_request(request), None), raw
            )
            assert (response.id, response.model_version, response.outputs[0].name) == ("g", "123", "y")
            got = (
                np.frombuffer(response.raw_output_contents[0], np.float32)
                if raw
                else np.float32(response.outputs[0].contents.fp32_contents)
            )
            np.testing.assert_array_equal(got.reshape(rows, 1), want)


def test_every_dtype_output_and_the_ones_v2_has_no_datatype_for(served):
    """tf1_all_dtypes answers an output of every TF dtype: asked for all, the complex ones
    refuse the request; asked for the others, each is Predict's, in its V2 datatype."""
    core, _, api = served
    x = np.int32([0, 3, -2])
    request = {"inputs": [{"name": "x", "shape": [3], "datatype": "INT32", "data": x.tolist()}]}
    reply, status = call(api, "POST", "/v2/models/all/infer", request)
    assert status == 400 and "has no Open Inference Protocol datatype" in as_json(reply)["error"]
    names = sorted(set(predicted(core, "all", {"x": x})) - {"complex64", "complex128"})
    want = predicted(core, "all", {"x": x}, output_filter=names)
    request["outputs"] = [{"name": n, "parameters": {"binary_data": True}} for n in names]
    reply, status = call(api, "POST", "/v2/models/all/infer", request)
    assert status == 200, reply.body[:300]
    length = int(dict(reply.headers)[HEADER_LENGTH])
    answer, at = json.loads(reply.body[:length]), length
    assert [o["name"] for o in answer["outputs"]] == names
    for output in answer["outputs"]:
        size = output["parameters"]["binary_data_size"]
        got = datatypes.from_raw(
            reply.body[at : at + size], output["datatype"], output["shape"], output["name"]
        )
        at += size
        expected = want[output["name"]]
        assert got.dtype == expected.dtype and got.shape == expected.shape, output["name"]
        assert got.tolist() == expected.tolist(), output["name"]
        assert datatypes.tf_dtype(output["datatype"]) == tensor_codec.dtype_of(expected), output["name"]
    assert at == len(reply.body)


@pytest.mark.parametrize(
    "document, status, text",
    [
        (
            {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP64", "data": [1.0]}]},
            400,
            "Expects arg[0] to be float but double is provided",
        ),
        (
            {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1.0, 2.0]}]},
            400,
            "input 'x' of shape [1, 1] needs 1 elements, got 2",
        ),
        (
            {"inputs": [{"name": "z", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}]},
            400,
            "Signature input alias: x(feed name: x:0) not found in request",
        ),
        (
            {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}] * 2},
            400,
            "input 'x' is given more than once",
        ),
        (
            {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FLOAT", "data": [1.0]}]},
            400,
            "invalid datatype 'FLOAT'",
        ),
        (
            {
                "inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}],
                "outputs": [{"name": "q"}],
            },
            400,
            "output tensor alias not found in signature: q",
        ),
        (
            {
                "inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}],
                "parameters": {"signature_name": "nope"},
            },
            400,
            'Serving signature key "nope" not found.',
        ),
        (
            {
                "inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}],
                "parameters": {"signature_name": 3},
            },
            400,
            "parameter 'signature_name' must be a string",
        ),
        (
            {
                "inputs": [
                    {"name": "x", "shape": [1, 1], "datatype": "FP32", "parameters": {"binary_data_size": 4}}
                ]
            },
            400,
            "input 'x': binary_data_size 4 runs past the binary data",
        ),
        ({"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32"}]}, 400, "input 'x' has no 'data'"),
        ({"inputs": {}}, 400, "'inputs' must be an array"),
        ({"inputs": [], "id": 5}, 400, "'id' must be a string"),
        ([], 400, "the inference request must be a JSON object"),
    ],
)
def test_refusals_are_predicts_code_and_text(served, document, status, text):
    _, _, api = served
    reply, got = call(api, "POST", "/v2/models/half/infer", document)
    assert (got, as_json(reply)["error"][: len(text)]) == (status, text)


def test_refused_and_unknown_on_grpc(served):
    core, _, api = served

    def run(request):
        return grpc_v2.infer_response(
            infer.infer(api.functions, core, grpc_v2.infer_request(request), None), False
        )

    request = v2.ModelInferRequest(model_name="half")
    request.inputs.add(name="x", datatype="FP32", shape=[1, 1])
    request.raw_input_contents.extend([b"\x00" * 4, b""])
    with pytest.raises(errors.InvalidArgumentError, match="raw_input_contents has 2 entries for 1 inputs"):
        run(request)
    del request.raw_input_contents[1]
    request.raw_input_contents[0] = b"\x00" * 3
    with pytest.raises(errors.InvalidArgumentError, match="needs 4 bytes, got 3"):
        run(request)
    request.raw_input_contents[0] = b"\x00" * 4
    request.inputs[0].contents.fp32_contents.append(1.0)
    with pytest.raises(errors.InvalidArgumentError, match="contents and raw_input_contents are both given"):
        run(request)
    request = v2.ModelInferRequest(model_name="nope")
    request.inputs.add(name="x", datatype="FP32", shape=[1, 1]).contents.fp32_contents.append(1.0)
    with pytest.raises(errors.NotFoundError, match=r"Servable not found for request: Latest\(nope\)"):
        run(request)
    request.model_name, request.model_version = "half", "12x"
    with pytest.raises(errors.NotFoundError, match=r"Specific\(half, 12x\)"):
        run(request)
    half = v2.ModelInferRequest(model_name="half")
    half.inputs.add(name="x", datatype="FP16", shape=[1, 1]).contents.fp32_contents.append(1.0)
    with pytest.raises(errors.InvalidArgumentError, match="FP16 data must be sent in raw_input_contents"):
        run(half)


@pytest.mark.parametrize("request_id", ["", "req-7"])
@pytest.mark.parametrize("raw", [True, False])
def test_response_bytes_are_the_response_message(served, raw, request_id):
    """``response_bytes`` (the gRPC handler's answer) parses to what ``infer_response`` builds,
    for outputs of every V2 datatype, several outputs and batch sizes."""
    core, _, api = served
    answers = []
    for rows in (1, 3):
        arrays = {
            "bool": np.resize([True, False], (rows, 2)),
            "float16": np.resize(np.float16([0.5, -2]), (rows, 2)),
            "int64": np.resize(np.int64([2**40, -3]), (rows, 2)),
            "string": np.resize(np.array([b"a", b"\xff"], object), (rows, 2)),
        }
        outputs = [
            infer.InferOutput(name + "_out", datatype, (rows, 2), array)
            for name, datatype, array in (
                (n, datatypes.datatype_of(d), arrays[n])
                for n, d in (("bool", 10), ("float16", 19), ("int64", 9), ("string", 7))
            )
        ]
        answers.append(infer.InferResponse("m", "12", request_id, outputs))
        answers.append(infer.InferResponse("m", "12", request_id, outputs[2:]))
    for answer in answers:
        built = grpc_v2.infer_response(answer, raw)
        assert v2.ModelInferResponse.FromString(grpc_v2.response_bytes(answer, raw)) == built


_DATATYPES = (*datatypes.CONTENTS_FIELD, "FP16", "BF16", "BYTES", "BOGUS")


def _random_infer_request(rng) -> v2.ModelInferRequest:
    """A ModelInferRequest of raw inputs, mostly well formed, sometimes not in one way or another."""
    request = v2.ModelInferRequest(
        model_name=str(rng.choice(["half", "all", "", "nope"], p=[0.4, 0.4, 0.1, 0.1])),
        model_version=str(rng.choice(["", "", "123", "1", "12x", "99999999999999999999"])),
        id=str(rng.choice(["", "req-1"])),
    )
    kind = rng.integers(6)
    if kind == 1:
        request.parameters[infer.SIGNATURE_PARAMETER].string_param = "serving_default"
    elif kind == 2:
        request.parameters[infer.SIGNATURE_PARAMETER].int64_param = 3
    elif kind == 3:
        request.parameters["priority"].int64_param = 1
    for _ in range(rng.integers(1, 4)):
        datatype = str(rng.choice(_DATATYPES))
        shape = [int(d) for d in rng.integers(-1 if rng.random() < 0.1 else 0, 4, rng.integers(0, 3))]
        tensor = request.inputs.add(
            name=str(rng.choice(["x", "x", "y", "z"])), datatype=datatype, shape=shape
        )
        if rng.random() < 0.05:
            tensor.contents.fp32_contents.append(1.0)
        try:
            size = datatypes.raw_size(datatype, tuple(shape))
        except errors.OpError:
            size = int(rng.integers(0, 9))
        if rng.random() < 0.1:
            size += int(rng.choice([-1, 1]))
        request.raw_input_contents.append(rng.bytes(max(size, 0)))
    if rng.random() < 0.05:
        request.raw_input_contents.append(b"")
    for name in rng.choice(["y", "int32", "float"], rng.integers(0, 3), replace=False):
        request.outputs.add(name=str(name))
    return request


def test_the_raw_fast_path_builds_the_general_paths_predict_request():
    """``grpc_v2.raw_predict_request`` (ModelInfer's path for raw inputs) gives the PredictRequest
    the general path (``infer_request`` then ``predict_request``) gives, or None: never a request
    the general path would refuse, and for most well-formed requests not None."""
    rng = np.random.default_rng(7)
    fast_count = general_ok = 0
    for _ in range(3000):
        request = _random_infer_request(rng)
        fast = grpc_v2.raw_predict_request(request)
        try:
            general = infer.predict_request(grpc_v2.infer_request(request))
        except errors.OpError as e:
            assert fast is None, (request, e)
            continue
        general_ok += 1
        if fast is not None:
            fast_count += 1
            assert fast == general, request
            assert fast.SerializeToString(deterministic=True) == general.SerializeToString(deterministic=True)
    assert general_ok > 500 and fast_count > 0.6 * general_ok, (general_ok, fast_count)


@pytest.mark.parametrize("request_id", ["", "req-7"])
def test_the_raw_fast_paths_answer_is_the_general_paths(served, request_id):
    """``raw_response_bytes`` of Predict's outputs is ``response_bytes`` of the InferResponse the
    general path makes of them, for outputs of every V2 datatype; an output V2 has no datatype
    for is the same refusal on both."""
    core, _, api = served
    x = np.int32([0, 3, -2])
    names = sorted(set(predicted(core, "all", {"x": x})) - {"complex64", "complex128"})
    for filter_names, model, value in ((names, "all", x), ([], "half", np.float32([[1.0], [2.5]]))):
        request = v2.ModelInferRequest(model_name=model, id=request_id)
        request.inputs.add(
            name="x", datatype=datatypes.datatype_of(tensor_codec.dtype_of(value)), shape=value.shape
        )
        request.raw_input_contents.append(value.tobytes())
        for name in filter_names:
            request.outputs.add(name=name)
        message = grpc_v2.raw_predict_request(request)
        assert message is not None
        fast = grpc_v2.raw_response_bytes(api.functions.infer(core, message, None), request_id)
        general = grpc_v2.response_bytes(
            infer.infer(api.functions, core, grpc_v2.infer_request(request), None), True
        )
        assert fast == general and v2.ModelInferResponse.FromString(fast).outputs
    request.model_name = "all"
    del request.outputs[:]
    request.inputs[0].datatype, request.raw_input_contents[0] = "INT32", x.tobytes()
    request.inputs[0].shape[:] = [3]
    with pytest.raises(errors.InvalidArgumentError, match="has no Open Inference Protocol datatype"):
        grpc_v2.raw_response_bytes(api.functions.infer(core, grpc_v2.raw_predict_request(request), None), "")
