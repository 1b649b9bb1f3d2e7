"""``model_server --rest_api_port``: TF Serving's REST API guide (``g3doc/api_rest.md``), end to end.

A real ``model_server`` process, driven with a real HTTP client (``http.client``, keep-alive),
over every example of the guide: row and columnar predict, strings, b64 in and out, several
named inputs, classify, regress, status, metadata, versions and labels, errors. Bodies are
compared byte for byte with what TF Serving writes (its PrettyWriter: ``"predictions": [3.5,
4.0, 5.5\\n    ]``), and the same requests over gRPC must give the same values. The guide's
own model, ``half_plus_three``, is the oracle corpus's ``rest_guide`` (its signatures cover the
guide's other request shapes); ``half_plus_two`` is TF Serving's test model.
"""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import shutil
import signal
import socket
import threading
import time

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from apis.tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)
from runtime.tensor_util import make_ndarray, make_tensor_proto
from tests.oracle.corpus import load_manifest

from .conftest import requires_model


class Rest:
    """An HTTP/1.1 client of one server: one keep-alive connection, reopened when closed."""

    def __init__(self, port: int):
        self.port = port
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, method: str, path: str, body=None, headers=None) -> tuple[int, dict, bytes]:
        if isinstance(body, dict | list):
            body = json.dumps(body).encode()
        self.connection.request(method, path, body=body, headers=headers or {})
        response = self.connection.getresponse()
        data = response.read()
        return response.status, dict(response.getheaders()), data

    def post(self, path: str, body) -> tuple[int, bytes]:
        status, _, data = self.call("POST", path, body)
        return status, data

    def get(self, path: str) -> tuple[int, bytes]:
        status, _, data = self.call("GET", path)
        return status, data


def start(model_server, free_port, *flags: str):
    port = free_port()
    server = model_server(f"--rest_api_port={port}", *flags)
    return server, Rest(port)


@pytest.fixture
def half_plus_two(model_server, model_dir, free_port, tmp_path):
    requires_model("half_plus_two")
    base = model_dir("half_plus_two")
    config = tmp_path / "models.config"
    config.write_text(
        f"model_config_list {{ config {{ name: 'half_plus_two' base_path: '{base}' "
        "model_platform: 'tensorflow' version_labels { key: 'stable' value: 123 } } }"
    )
    return start(
        model_server,
        free_port,
        f"--model_config_file={config}",
        "--allow_version_labels_for_unavailable_models",
    )


@pytest.fixture
def guide(model_server, free_port, tmp_path):
    """The guide's ``saved_model_half_plus_three``: the corpus's rest_guide as version 123."""
    export = load_manifest("rest_guide")["export_path"]
    shutil.copytree(export, tmp_path / "half_plus_three" / "00000123")
    return start(
        model_server,
        free_port,
        "--model_name=saved_model_half_plus_three",
        f"--model_base_path={tmp_path / 'half_plus_three'}",
    )


def error(message: str) -> bytes:
    return b'{\n    "error": ' + json.dumps(message).encode() + b"\n}"


def grpc_predict(server, model: str, signature: str, inputs: dict) -> dict:
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel())
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    for alias, value in inputs.items():
        request.inputs[alias].CopyFrom(make_tensor_proto(value))
    response = stub.Predict(request, timeout=30)
    return {alias: make_ndarray(tensor) for alias, tensor in response.outputs.items()}


# --- the guide's example, on its model ----------------------------------------------------------


def test_guide_example_status_predict_regress_and_error(guide):
    server, rest = guide
    status, body = rest.get("/v1/models/saved_model_half_plus_three")
    assert status == 200
    assert body == (
        b'{\n "model_version_status": [\n  {\n   "version": "123",\n   "state": "AVAILABLE",\n'
        b'   "status": {\n    "error_code": "OK",\n    "error_message": ""\n   }\n  }\n ]\n}\n'
    )
    status, body = rest.post("/v1/models/saved_model_half_plus_three:predict", {"instances": [1.0, 2.0, 5.0]})
    assert (status, body) == (200, b'{\n    "predictions": [3.5, 4.0, 5.5\n    ]\n}')
    assert json.loads(body) == {"predictions": [3.5, 4.0, 5.5]}  # the guide's body
    grpc_y = grpc_predict(server, "saved_model_half_plus_three", "", {"x": np.float32([1.0, 2.0, 5.0])})["y"]
    assert json.loads(body)["predictions"] == grpc_y.tolist()
    request = {"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1.0}, {"x": 2.0}]}
    status, body = rest.post("/v1/models/saved_model_half_plus_three:regress", request)
    assert (status, body) == (200, b'{\n    "results": [3.5, 4.0]\n}')
    status, headers, body = rest.call("POST", "/v1/models/half:predict", {"instances": [1.0, 5.0]})
    assert (status, body) == (404, error("Servable not found for request: Latest(half)"))
    assert headers["Content-Type"] == "application/json"


def test_guide_row_format_examples(guide):
    server, rest = guide
    model = "/v1/models/saved_model_half_plus_three:predict"
    # "List of 3 scalar tensors": strings; two named outputs, so a list of objects.
    status, body = rest.post(model, {"signature_name": "strings", "instances": ["foo", "bar", "baz"]})
    assert status == 200
    assert body == (
        b'{\n    "predictions": [\n        {\n            "length": 3,\n            "upper": "FOO"\n        },'
        b'\n        {\n            "length": 3,\n            "upper": "BAR"\n        },\n        {\n'
        b'            "length": 3,\n            "upper": "BAZ"\n        }\n    ]\n}'
    )
    # "List of 2 tensors each of [1, 2] shape"
    status, body = rest.post(model, {"signature_name": "pairs", "instances": [[[1, 2]], [[3, 4]]]})
    assert (status, body) == (200, b'{\n    "predictions": [[[2, 4]], [[6, 8]]\n    ]\n}')
    # Three named inputs, one object per instance; an output ending in _bytes comes back in b64.
    instances = [
        {"tag": "foo", "signal": [1, 2, 3, 4, 5], "sensor": [[1, 2], [3, 4]]},
        {"tag": "bar", "signal": [3, 4, 1, 2, 5], "sensor": [[4, 5], [6, 8]]},
    ]
    status, body = rest.post(model, {"signature_name": "tag_signal_sensor", "instances": instances})
    assert status == 200
    predictions = json.loads(body)["predictions"]
    assert predictions == [
        {"sensor_max": 4, "signal_sum": 15, "tag_bytes": {"b64": base64.b64encode(b"foo").decode()}},
        {"sensor_max": 8, "signal_sum": 15, "tag_bytes": {"b64": base64.b64encode(b"bar").decode()}},
    ]
    assert b'"tag_bytes": {\n                "b64": "Zm9v"\n            }\n' in body
    grpc_out = grpc_predict(
        server,
        "saved_model_half_plus_three",
        "tag_signal_sensor",
        {
            "tag": np.array([b"foo", b"bar"], object),
            "signal": np.int32([[1, 2, 3, 4, 5], [3, 4, 1, 2, 5]]),
            "sensor": np.int32([[[1, 2], [3, 4]], [[4, 5], [6, 8]]]),
        },
    )
    assert [p["signal_sum"] for p in predictions] == grpc_out["signal_sum"].tolist()
    assert [p["sensor_max"] for p in predictions] == grpc_out["sensor_max"].tolist()


def test_guide_columnar_format_gives_the_row_format_values(guide):
    _, rest = guide
    inputs = {
        "tag": ["foo", "bar"],
        "signal": [[1, 2, 3, 4, 5], [3, 4, 1, 2, 5]],
        "sensor": [[[1, 2], [3, 4]], [[4, 5], [6, 8]]],
    }
    status, body = rest.post(
        "/v1/models/saved_model_half_plus_three:predict",
        {"signature_name": "tag_signal_sensor", "inputs": inputs},
    )
    assert status == 200
    assert json.loads(body) == {
        "outputs": {
            "sensor_max": [4, 8],
            "signal_sum": [15, 15],
            "tag_bytes": [{"b64": "Zm9v"}, {"b64": "YmFy"}],
        }
    }
    assert body.startswith(
        b'{\n    "outputs": {\n        "sensor_max": [\n            4,\n            8\n        ],'
    )
    # A single unnamed input: "inputs" is the tensor itself.
    status, body = rest.post("/v1/models/saved_model_half_plus_three:predict", {"inputs": [1.0, 2.0, 5.0]})
    assert (status, body) == (200, b'{\n    "outputs": [\n        3.5,\n        4.0,\n        5.5\n    ]\n}')


def test_guide_binary_values_in_a_classify_request(guide):
    server, rest = guide
    request = {
        "signature_name": "classify_objects",
        "examples": [
            {"image": {"b64": "aW1hZ2UgYnl0ZXM="}, "caption": "seaside"},
            {"image": {"b64": "YXdlc29tZSBpbWFnZSBieXRlcw=="}, "caption": "mountains"},
        ],
    }
    status, body = rest.post("/v1/models/saved_model_half_plus_three:classify", request)
    assert status == 200
    assert body == (
        b'{\n    "results": [[["image", 11.0], ["caption", 7.0]], [["image", 19.0], ["caption", 9.0]]\n    ]\n}'
    )
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel())
    grpc_request = classification_pb2.ClassificationRequest()
    grpc_request.model_spec.name = "saved_model_half_plus_three"
    grpc_request.model_spec.signature_name = "classify_objects"
    for image, caption in ((b"image bytes", b"seaside"), (b"awesome image bytes", b"mountains")):
        features = grpc_request.input.example_list.examples.add().features.feature
        features["image"].bytes_list.value.append(image)
        features["caption"].bytes_list.value.append(caption)
    response = stub.Classify(grpc_request, timeout=30)
    grpc_results = [[[c.label, c.score] for c in cl.classes] for cl in response.result.classifications]
    assert json.loads(body)["results"] == grpc_results


def test_floats_as_tf_serving_writes_them(guide):
    """WriteDecimal: six digits when they read back as the value, else all of them."""
    server, rest = guide
    status, body = rest.post(
        "/v1/models/saved_model_half_plus_three:predict",
        {"signature_name": "thirds", "instances": [1.0, 2.0, 0.5]},
    )
    assert status == 200
    assert body == (
        b'{\n    "predictions": [\n        {\n            "third": 0.333333343,\n'
        b'            "third_double": 0.33333333333333331\n        },\n        {\n'
        b'            "third": 0.666666687,\n            "third_double": 0.66666666666666663\n'
        b'        },\n        {\n            "third": 0.166666672,\n'
        b'            "third_double": 0.16666666666666666\n        }\n    ]\n}'
    )
    grpc_out = grpc_predict(
        server, "saved_model_half_plus_three", "thirds", {"thirds": np.float32([1.0, 2.0, 0.5])}
    )
    assert (
        np.float32([p["third"] for p in json.loads(body)["predictions"]]).tolist()
        == grpc_out["third"].tolist()
    )


# --- TF Serving's test model: versions, labels, metadata, errors ----------------------------------


def test_versions_labels_status_and_metadata(half_plus_two):
    server, rest = half_plus_two
    expected = b'{\n    "predictions": [[2.5], [3.0], [4.5]\n    ]\n}'
    for path in ("", "/versions/123", "/labels/stable", "/LABELS/stable"):
        assert rest.post(f"/v1/models/half_plus_two{path}:predict", {"instances": [[1.0], [2.0], [5.0]]}) == (
            200,
            expected,
        )
    assert rest.post("/v1/models/half_plus_two/labels/nope:predict", {"instances": [[1.0]]}) == (
        400,
        error("Unrecognized servable version label: nope"),
    )
    assert rest.get("/v1/models/half_plus_two/versions/7") == (
        404,
        error("Could not find version 7 of model half_plus_two"),
    )
    status, body = rest.get("/v1/models/half_plus_two/versions/123/metadata")
    assert status == 200
    assert body.startswith(
        b'{\n"model_spec":{\n "name": "half_plus_two",\n "version": "123",\n "signature_name": ""\n}\n,\n'
        b'"metadata": {"signature_def": {\n "signature_def": {\n'
    )
    assert body.endswith(b"\n}\n}\n}\n")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel())
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "half_plus_two"
    signature_def_map = get_model_metadata_pb2.SignatureDefMap()
    stub.GetModelMetadata(request, timeout=30).metadata["signature_def"].Unpack(signature_def_map)
    served = json.loads(body)["metadata"]["signature_def"]["signature_def"]
    assert sorted(served) == sorted(signature_def_map.signature_def)
    assert (
        served["serving_default"]["inputs"]["x"]["name"]
        == signature_def_map.signature_def["serving_default"].inputs["x"].name
    )


def test_regress_and_classify_give_grpc_values(half_plus_two):
    server, rest = half_plus_two
    examples = [{"x": 1.0}, {"x": 2.0, "x2": 4.0}, {"x": -3.5}]
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel())
    grpc_request = regression_pb2.RegressionRequest()
    grpc_request.model_spec.name = "half_plus_two"
    grpc_request.model_spec.signature_name = "regress_x2_to_y3"
    for example in examples:
        features = grpc_request.input.example_list.examples.add().features.feature
        for key, value in example.items():
            features[key].float_list.value.append(value)
    grpc_values = [r.value for r in stub.Regress(grpc_request, timeout=30).result.regressions]
    status, body = rest.post(
        "/v1/models/half_plus_two:regress", {"signature_name": "regress_x2_to_y3", "examples": examples}
    )
    assert status == 200
    assert json.loads(body)["results"] == grpc_values == [3.0, 5.0, 3.0]
    status, body = rest.post(
        "/v1/models/half_plus_two:classify",
        {"signature_name": "classify_x_to_y", "context": {"x2": 1.0}, "examples": [{"x": 4.0}]},
    )
    assert (status, body) == (200, b'{\n    "results": [[["", 4.0]]\n    ]\n}')


BAD_REQUESTS = [
    # (method, path, body, status, error text)
    ("POST", "/v1/models/half_plus_two:predict", b"", 400, "JSON Parse error: The document is empty"),
    (
        "POST",
        "/v1/models/half_plus_two:predict",
        b'{"instances": [1.0, 2.0',
        400,
        "JSON Parse error: Missing a comma or ']' after an array element. at offset: 23",
    ),
    ("POST", "/v1/models/half_plus_two:predict", b'{"instances": 5}', 400, None),
    (
        "POST",
        "/v1/models/half_plus_two:predict",
        b'{"nothing": 5}',
        400,
        "Missing 'inputs' or 'instances' key",
    ),
    (
        "POST",
        "/v1/models/half_plus_two:predict",
        b'{"instances": [[1.0], ["a"]]}',
        400,
        "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: \"a\" "
        "Type: String is not of expected type: float",
    ),
    (
        "POST",
        "/v1/models/half_plus_two:predict",
        b'{"instances": [[1.0], [1.0, 2.0]]}',
        400,
        "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: Expecting tensor size: 1 but got: 2",
    ),
    (
        "POST",
        "/v1/models/half_plus_two:predict",
        b'{"signature_name": "nope", "instances": [1.0]}',
        400,
        'Serving signature name: "nope" not found in signature def',
    ),
    (
        "POST",
        "/v1/models/half_plus_two:PREDICT",
        b"{}",
        400,
        "Malformed request: POST /v1/models/half_plus_two:PREDICT",
    ),
    ("PUT", "/v1/models/half_plus_two", b"{}", 400, "Malformed request: PUT /v1/models/half_plus_two"),
    (
        "GET",
        "/v1/models/half_plus_two:predict",
        None,
        400,
        "Malformed request: GET /v1/models/half_plus_two:predict",
    ),
    (
        "GET",
        "/v1/models/half_plus_two/versions/99999999999999999999",
        None,
        400,
        "Failed to convert version: 99999999999999999999 to numeric.",
    ),
    ("GET", "/v1/models/versions/1", None, 400, "Missing model name in request."),
    (
        "POST",
        "/v1/models/half_plus_two:regress",
        b'{"examples": [{"x": [1, 2.5]}]}',
        400,
        "Unexpected element type in feature: x expecting type: int64",
    ),
]


def test_bad_requests_get_tf_servings_texts_and_others_are_served_meanwhile(half_plus_two):
    _, rest = half_plus_two
    for method, path, body, status, text in BAD_REQUESTS:
        got_status, headers, got = rest.call(method, path, body)
        assert got_status == status, (path, got)
        assert headers["Content-Type"] == "application/json"
        if text is not None:
            assert got == error(text), (path, got)
    assert rest.post("/v1/models/half_plus_two:predict", b'{"instances": 5}')[1] == error(
        "JSON Value: {\n    \"instances\": 5\n} Expecting 'instances' to be an list/array"
    )
    # Bad and good requests at once, on many connections: every good one gets its answer.
    answers, bad = [], []

    def good(port):
        client = Rest(port)
        for i in range(20):
            answers.append(client.post("/v1/models/half_plus_two:predict", {"instances": [[float(i)]]}))

    def bad_client(port):
        client = Rest(port)
        for method, path, body, _, _ in BAD_REQUESTS * 2:
            bad.append(client.call(method, path, body)[0])

    threads = [threading.Thread(target=f, args=(rest.port,)) for f in (good, good, bad_client, bad_client)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(answers) == 40 and all(status == 200 for status, _ in answers)
    assert sorted(json.loads(body)["predictions"][0][0] for _, body in answers) == sorted(
        0.5 * i + 2 for i in range(20) for _ in range(2)
    )
    assert len(bad) == 2 * 2 * len(BAD_REQUESTS) and all(status >= 400 for status in bad)


def test_paths_off_v1_get_a_plain_404_and_probes_answer(half_plus_two):
    server, rest = half_plus_two
    for path in ("/v3/models/half_plus_two", "/v2x/models/half_plus_two"):  # (/v2 is the V2 protocol's)
        status, headers, body = rest.call("GET", path)
        assert (status, headers["Content-Type"]) == (404, "text/html")
        assert (
            body
            == b"<HTML><HEAD>\n<TITLE>404 Not Found</TITLE>\n</HEAD><BODY>\n<H1>Not Found</H1>\n</BODY></HTML>\n"
        )
    assert rest.get("/healthz") == (200, b'{\n "status": "alive"\n}\n')
    assert rest.get("/readyz") == (200, b'{\n "status": "ready"\n}\n')
    status, body = rest.get("/v1/models")
    assert status == 200
    listing = json.loads(body)
    held = listing["models"][0]["model_version_status"][0].pop("memory_bytes")  # ours: what it holds
    assert listing["models"][0]["model_version_status"][0].pop("resident") is True  # ours: no budget
    assert set(held) == {"arrays", "onnxruntime"} and 0 <= held["arrays"] < 1 << 20
    assert listing == {
        "models": [
            {
                "name": "half_plus_two",
                "model_version_status": [
                    {
                        "version": "123",
                        "state": "AVAILABLE",
                        "status": {"error_code": "OK", "error_message": ""},
                    }
                ],
            }
        ]
    }
    health = health_pb2_grpc.HealthStub(server.channel())
    assert (
        health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10).status
        == health_pb2.HealthCheckResponse.SERVING
    )


def test_keep_alive_gzip_bodies_any_content_type(half_plus_two):
    _, rest = half_plus_two
    body = gzip.compress(b'{"instances": [[1.0]]}')
    for content_type in ("application/json", "text/plain", "application/x-www-form-urlencoded"):
        status, headers, data = rest.call(
            "POST",
            "/v1/models/half_plus_two:predict",
            body,
            {"Content-Encoding": "gzip", "Content-Type": content_type},
        )
        assert (status, data) == (200, b'{\n    "predictions": [[2.5]\n    ]\n}')
    sock = rest.connection.sock
    for _ in range(3):  # one connection for all of them
        assert rest.get("/v1/models/half_plus_two")[0] == 200
    assert rest.connection.sock is sock
    status, _, data = rest.call(  # curl's way with large bodies: "100 Continue" first
        "POST", "/v1/models/half_plus_two:predict", b'{"instances": [[1.0]]}', {"Expect": "100-continue"}
    )
    assert (status, data) == (200, b'{\n    "predictions": [[2.5]\n    ]\n}')


def test_cors_headers_and_preflight(model_server, model_dir, free_port):
    requires_model("half_plus_two")
    _, rest = start(
        model_server,
        free_port,
        "--rest_api_enable_cors_support",
        "--model_name=half_plus_two",
        f"--model_base_path={model_dir('half_plus_two')}",
    )
    status, headers, _ = rest.call("POST", "/v1/models/half_plus_two:predict", {"instances": [[1.0]]})
    assert status == 200
    assert headers["Access-Control-Allow-Origin"] == "*"
    assert headers["Access-Control-Allow-Methods"] == "POST, GET"
    assert headers["Access-Control-Allow-Headers"] == "Content-Type"
    status, headers, body = rest.call(
        "OPTIONS", "/v1/models/half_plus_two:predict", None, {"Origin": "https://a.b"}
    )
    assert (status, body, headers["Access-Control-Allow-Origin"]) == (200, b"", "*")
    assert "Content-Type" not in headers
    status, _, body = rest.call("OPTIONS", "/v1/models/half_plus_two:predict")
    assert (status, body) == (400, b"")


def test_cors_allowed_origins(model_server, model_dir, free_port):
    """--rest_api_cors_allowed_origins: the CORS headers, with the caller's origin, for the listed
    origins only; a preflight from another is 403; every answer says Vary: Origin."""
    requires_model("half_plus_two")
    _, rest = start(
        model_server,
        free_port,
        "--rest_api_cors_allowed_origins=https://app.example.com, http://localhost:3000/",
        "--model_name=half_plus_two",
        f"--model_base_path={model_dir('half_plus_two')}",
    )
    path = "/v1/models/half_plus_two:predict"
    for origin in ("https://app.example.com", "http://localhost:3000", "HTTPS://APP.example.com"):
        status, headers, _ = rest.call("POST", path, {"instances": [[1.0]]}, {"Origin": origin})
        assert status == 200
        assert headers["Access-Control-Allow-Origin"] == origin
        assert headers["Access-Control-Allow-Methods"] == "POST, GET"
        assert headers["Access-Control-Allow-Headers"] == "Content-Type"
        assert headers["Vary"] == "Origin"
        status, headers, body = rest.call("OPTIONS", path, None, {"Origin": origin})
        assert (status, body, headers["Access-Control-Allow-Origin"]) == (200, b"", origin)
    for headers_sent in (
        {"Origin": "https://evil.example.com"},
        {"Origin": "https://app.example.com.evil"},
        {},
    ):
        status, headers, _ = rest.call("POST", path, {"instances": [[1.0]]}, headers_sent)
        assert status == 200  # answered, but no browser may read it
        assert "Access-Control-Allow-Origin" not in headers and headers["Vary"] == "Origin"
        status, headers, _ = rest.call("OPTIONS", path, None, headers_sent)
        assert status == 403 and "Access-Control-Allow-Origin" not in headers
    status, headers, _ = rest.call("GET", "/v2/health/ready", None, {"Origin": "http://localhost:3000"})
    assert (status, headers["Access-Control-Allow-Origin"]) == (200, "http://localhost:3000")


def test_a_body_over_the_limit_is_answered_413_and_the_server_goes_on(model_server, model_dir, free_port):
    requires_model("half_plus_two")
    _, rest = start(
        model_server,
        free_port,
        "--rest_api_max_body_bytes=1000",
        "--model_name=half_plus_two",
        f"--model_base_path={model_dir('half_plus_two')}",
    )
    big = {"instances": [[1.0]] * 500}
    status, headers, body = rest.call("POST", "/v1/models/half_plus_two:predict", big)
    assert status == 413
    assert json.loads(body) == {
        "error": "Request body is larger than the limit of 1000 bytes (--rest_api_max_body_bytes)."
    }
    chunked = Rest(rest.port)  # no Content-Length: counted as it arrives
    chunked.connection.putrequest("POST", "/v1/models/half_plus_two:predict")
    chunked.connection.putheader("Transfer-Encoding", "chunked")
    chunked.connection.endheaders()
    data = json.dumps(big).encode()
    chunked.connection.send(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
    assert chunked.connection.getresponse().status == 413
    again = Rest(rest.port)
    assert again.post("/v1/models/half_plus_two:predict", {"instances": [[1.0]]})[0] == 200


def test_sigterm_finishes_a_request_in_flight_then_exits_0(half_plus_two):
    server, rest = half_plus_two
    body = json.dumps({"instances": [[1.0], [2.0]]}).encode()
    sock = socket.create_connection(("127.0.0.1", rest.port))
    head = f"POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
    sock.sendall(head.encode() + body[:10])  # the request has begun: it is in flight
    time.sleep(0.5)
    server.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the port closes to new connections
        try:
            socket.create_connection(("127.0.0.1", rest.port), timeout=1).close()
            time.sleep(0.1)
        except OSError:
            break
    else:
        raise AssertionError("the REST port still accepts connections after SIGTERM")
    sock.sendall(body[10:])
    reply = b""
    while not reply.endswith(b"}"):
        chunk = sock.recv(4096)
        if not chunk:
            break
        reply += chunk
    sock.close()
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n")
    assert reply.endswith(b'{\n    "predictions": [[2.5], [3.0]\n    ]\n}')
    assert b"Connection: close" in reply
    assert server.wait_exit(30) == 0
    assert grpc.StatusCode  # (gRPC is covered by test_model_management's SIGTERM tests)
