"""The reference TF Serving (``tests/e2e/tfs_reference``) behaves as TF Serving does.

Clients are tested against it as "TF Serving itself", so it is checked here once, from the main
venv with our wire-identical stubs and ``urllib``: values, model specs and typed output fields
(``float_val``, as ``Tensor::AsProtoField`` writes), every version served with "latest" the
highest, labels, metadata and status in proto and JSON form, TF Serving's status codes and texts,
and TLS with client certificates on both transports. One server for the module; the TLS test
starts its own through the ``tfs_reference`` fixture.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import shutil
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import numpy as np
import pytest

from apis.tensorflow.core.example import example_pb2
from apis.tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)
from runtime.tensor_util import make_ndarray, make_tensor_proto
from tests.e2e.tfs_reference import start_reference

MODELS = Path(__file__).resolve().parents[2] / "models"
CLASSIFY, REGRESS = "tensorflow/serving/classify", "tensorflow/serving/regress"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """half_plus_two (TF1, version 123), tf2 (half_plus_two_tf2 as versions 1 and 2, label
    stable=1) and keras_mlp, in one reference server."""
    tmp = tmp_path_factory.mktemp("tfs_reference")
    for version in ("1", "2"):
        shutil.copytree(MODELS / "half_plus_two_tf2" / "1", tmp / "tf2" / version)
    models = {
        "half_plus_two": MODELS / "half_plus_two",
        "tf2": tmp / "tf2",
        "keras_mlp": MODELS / "keras_mlp",
    }
    reference = start_reference(tmp, models, labels={"tf2": {"stable": 1}})
    yield reference
    assert reference.stop() == 0, reference.output()


@pytest.fixture(scope="module")
def stub(server):
    with grpc.insecure_channel(server.grpc_address) as channel:
        yield prediction_service_pb2_grpc.PredictionServiceStub(channel)


def predict_request(name: str, value, alias: str = "x", **model_spec) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    for key, spec_value in model_spec.items():
        if key == "version":
            request.model_spec.version.value = spec_value
        else:
            setattr(request.model_spec, key, spec_value)
    request.inputs[alias].CopyFrom(make_tensor_proto(np.asarray(value)))
    return request


def spec_of(response) -> tuple:
    return response.model_spec.name, response.model_spec.version.value, response.model_spec.signature_name


def add_examples(request, *xs: float, context: dict | None = None):
    target = request.input.example_list
    if context is not None:
        target = request.input.example_list_with_context
        for key, value in context.items():
            target.context.features.feature[key].float_list.value.append(value)
    for x in xs:
        target.examples.add().features.feature["x"].float_list.value.append(x)
    return request


def rest(
    server, path: str, body: dict | None = None, context: ssl.SSLContext | None = None
) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    try:
        with urllib.request.urlopen(
            f"{server.rest_url}{path}", data=data, timeout=30, context=context
        ) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_predict_serves_every_version_with_tf_servings_model_spec_and_typed_fields(stub):
    response = stub.Predict(predict_request("half_plus_two", np.float32([[1.0], [3.0]])), 30)
    assert spec_of(response) == ("half_plus_two", 123, "serving_default")
    assert list(response.outputs["y"].float_val) == [2.5, 3.5] and not response.outputs["y"].tensor_content
    assert [d.size for d in response.outputs["y"].tensor_shape.dim] == [2, 1]
    # TF Serving's C++ Session checks a feed's dtype, not its shape against the placeholder's
    response = stub.Predict(predict_request("half_plus_two", np.float32([1.0, 3.0])), 30)
    assert make_ndarray(response.outputs["y"]).tolist() == [2.5, 3.5]

    x = np.float32([1.0, 2.0])
    assert spec_of(stub.Predict(predict_request("tf2", x), 30))[1] == 2  # latest = highest
    assert spec_of(stub.Predict(predict_request("tf2", x, version=1), 30))[1] == 1
    labelled = stub.Predict(predict_request("tf2", x, version_label="stable"), 30)
    assert spec_of(labelled)[1] == 1 and make_ndarray(labelled.outputs["y"]).tolist() == [2.5, 3.0]
    other = stub.Predict(predict_request("tf2", x, alias="x2", signature_name="x2_to_y3"), 30)
    assert spec_of(other) == ("tf2", 2, "x2_to_y3") and make_ndarray(other.outputs["y3"]).tolist() == [
        3.5,
        4.0,
    ]

    request = predict_request("keras_mlp", np.ones((2, 4), np.float32), alias="features")
    request.output_filter.append("output_0")
    probabilities = make_ndarray(stub.Predict(request, 30).outputs["output_0"])
    assert probabilities.shape == (2, 3) and np.allclose(probabilities.sum(axis=1), 1.0)


def test_classify_regress_and_multi_inference_feed_serialized_examples(stub):
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name, request.model_spec.signature_name = "half_plus_two", "classify_x_to_y"
    response = stub.Classify(add_examples(request, 2.0, 4.0), 30)
    assert spec_of(response) == ("half_plus_two", 123, "classify_x_to_y")
    assert [[(c.label, c.score) for c in cl.classes] for cl in response.result.classifications] == [
        [("", 3.0)],
        [("", 4.0)],
    ]

    request = regression_pb2.RegressionRequest()
    request.model_spec.name, request.model_spec.signature_name = "half_plus_two", "regress_x2_to_y3"
    response = stub.Regress(add_examples(request, 1.0, context={"x2": 4.0}), 30)
    assert [r.value for r in response.result.regressions] == [5.0]  # 0.5 * x2 (from the context) + 3

    request = inference_pb2.MultiInferenceRequest()
    for signature, method in (("classify_x_to_y", CLASSIFY), ("regress_x_to_y2", REGRESS)):
        task = request.tasks.add(method_name=method)
        task.model_spec.name, task.model_spec.signature_name = "half_plus_two", signature
    results = stub.MultiInference(add_examples(request, 2.0), 30).results
    assert results[0].classification_result.classifications[0].classes[0].score == 3.0
    assert results[1].regression_result.regressions[0].value == 4.0
    assert [spec_of(r) for r in results] == [
        ("half_plus_two", 123, "classify_x_to_y"),
        ("half_plus_two", 123, "regress_x_to_y2"),
    ]


def test_metadata_packs_a_signature_def_map_and_status_lists_versions_newest_first(server, stub):
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "half_plus_two"
    response = stub.GetModelMetadata(request, 30)
    assert (response.model_spec.name, response.model_spec.version.value) == ("half_plus_two", 123)
    assert (
        response.metadata["signature_def"].type_url
        == "type.googleapis.com/tensorflow.serving.SignatureDefMap"
    )
    signatures = get_model_metadata_pb2.SignatureDefMap()
    assert response.metadata["signature_def"].Unpack(signatures)
    assert {"serving_default", "classify_x_to_y", "regress_x_to_y"} <= set(signatures.signature_def)
    assert signatures.signature_def["classify_x_to_y"].method_name == CLASSIFY

    with grpc.insecure_channel(server.grpc_address) as channel:
        model_service = model_service_pb2_grpc.ModelServiceStub(channel)
        status = model_service.GetModelStatus(
            get_model_status_pb2.GetModelStatusRequest(model_spec={"name": "tf2"}), 30
        )
        assert [
            (s.version, s.state, s.status.error_code, s.status.error_message)
            for s in status.model_version_status
        ] == [
            (2, get_model_status_pb2.ModelVersionStatus.AVAILABLE, 0, ""),
            (1, get_model_status_pb2.ModelVersionStatus.AVAILABLE, 0, ""),
        ]
        with pytest.raises(grpc.RpcError) as e:
            model_service.GetModelStatus(
                get_model_status_pb2.GetModelStatusRequest(
                    model_spec={"name": "tf2", "version": {"value": 5}}
                ),
                30,
            )
        assert (e.value.code(), e.value.details()) == (
            grpc.StatusCode.NOT_FOUND,
            "Could not find version 5 of model tf2",
        )


INVALID, NOT_FOUND, FAILED_PRECONDITION = (
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
)
X = np.float32([[1.0]])


@pytest.mark.parametrize(
    ("request_", "code", "details"),
    [
        (predict_request("nope", X), NOT_FOUND, "Servable not found for request: Latest(nope)"),
        (
            predict_request("half_plus_two", X, version=7),
            NOT_FOUND,
            "Servable not found for request: Specific(half_plus_two, 7)",
        ),
        (
            predict_request("tf2", X, version_label="canary"),
            INVALID,
            "Unrecognized servable version label: canary",
        ),
        (
            predict_request("half_plus_two", X, signature_name="nope"),
            FAILED_PRECONDITION,
            'Serving signature key "nope" not found.',
        ),
        (
            predict_request("half_plus_two", np.int32([[1]])),
            INVALID,
            "Expects arg[0] to be float but int32 is provided",
        ),
        (
            predict_request("half_plus_two", X, alias="z"),
            INVALID,
            "Signature input alias: x(feed name: x:0) not found",
        ),
        (predict_pb2.PredictRequest(), INVALID, "Missing ModelSpec"),
    ],
    ids=[
        "unknown-model",
        "unknown-version",
        "unknown-label",
        "unknown-signature",
        "wrong-dtype",
        "wrong-alias",
        "no-spec",
    ],
)
def test_grpc_errors_carry_tf_servings_codes_and_texts(stub, request_, code, details):
    with pytest.raises(grpc.RpcError) as e:
        stub.Predict(request_, 30)
    assert e.value.code() == code and e.value.details().startswith(details), e.value.details()


def test_rest_status_and_metadata_are_printed_as_tf_serving_prints_them(server):
    available = {"state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
    assert rest(server, "/v1/models/half_plus_two") == (
        200,
        {"model_version_status": [{"version": "123", **available}]},
    )
    assert rest(server, "/v1/models/tf2/versions/1")[1] == {
        "model_version_status": [{"version": "1", **available}]
    }
    assert [
        s["version"] for s in rest(server, "/v1/models/tf2/labels/stable")[1]["model_version_status"]
    ] == ["2", "1"]

    status, metadata = rest(server, "/v1/models/tf2/labels/stable/metadata")
    assert status == 200 and metadata["model_spec"] == {"name": "tf2", "signature_name": "", "version": "1"}
    x = metadata["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"]["x"]
    assert x == {
        "dtype": "DT_FLOAT",
        "tensor_shape": {"dim": [{"size": "-1", "name": ""}], "unknown_rank": False},
        "name": "serving_default_x:0",
    }


def test_rest_predict_rows_columns_and_b64(server):
    assert rest(server, "/v1/models/half_plus_two:predict", {"instances": [[1.0], [3]]}) == (
        200,
        {"predictions": [[2.5], [3.5]]},
    )
    assert rest(server, "/v1/models/tf2/versions/1:predict", {"inputs": [1.0, 0.1]}) == (
        200,
        {"outputs": [2.5, 2.05]},
    )
    body = {"signature_name": "x2_to_y3", "instances": [{"x2": 1.0}, {"x2": 3.0}]}
    assert rest(server, "/v1/models/tf2/labels/stable:predict", body) == (200, {"predictions": [3.5, 4.5]})

    example = example_pb2.Example()
    example.features.feature["x"].float_list.value.append(6.0)
    b64 = {"b64": base64.b64encode(example.SerializeToString()).decode()}
    # Predict on a regress signature, as TF Serving allows: the string input takes {"b64": ...}
    body = {"signature_name": "regress_x_to_y", "instances": [b64]}
    assert rest(server, "/v1/models/half_plus_two:predict", body) == (200, {"predictions": [[5.0]]})

    status, reply = rest(server, "/v1/models/keras_mlp:predict", {"instances": [[1, 2, 3, 4], [0, 0, 0, 0]]})
    assert status == 200 and np.allclose(np.sum(reply["predictions"], axis=1), 1.0, atol=1e-6)


def test_rest_classify_and_regress_take_json_examples_and_context(server):
    body = {"signature_name": "classify_x_to_y", "examples": [{"x": 2.0}, {"x": [4.0]}]}
    assert rest(server, "/v1/models/half_plus_two:classify", body) == (
        200,
        {"results": [[["", 3.0]], [["", 4.0]]]},
    )
    body = {
        "signature_name": "regress_x2_to_y3",
        "context": {"x2": 4.0},
        "examples": [{"x": 1.0}, {"x": 1.0, "x2": 2.0}],
    }
    assert rest(server, "/v1/models/half_plus_two/versions/123:regress", body) == (
        200,
        {"results": [5.0, 4.0]},
    )


@pytest.mark.parametrize(
    ("path", "body", "code", "error"),
    [
        ("/v1/models/nope", None, 404, "Could not find any versions of model nope"),
        (
            "/v1/models/nope:predict",
            {"instances": [1.0]},
            404,
            "Servable not found for request: Latest(nope)",
        ),
        (
            "/v1/models/half_plus_two:predict",
            {"signature_name": "zz", "instances": [1.0]},
            400,
            'Serving signature name: "zz" not found in signature def',
        ),
        (
            "/v1/models/half_plus_two:predict",
            {"instances": [["a"]]},
            400,
            "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: \"a\" Type: String is not of expected type: float",
        ),
        ("/v1/models/half_plus_two:predict", {"x": 1}, 400, "Missing 'inputs' or 'instances' key"),
        (
            "/v1/models/half_plus_two:regress",
            {"signature_name": "nope", "examples": [{"x": 1.0}]},
            400,
            "No signature was found with the name: nope",
        ),
    ],
    ids=[
        "status-unknown-model",
        "predict-unknown-model",
        "unknown-signature",
        "wrong-type",
        "no-inputs",
        "regress-unknown-signature",
    ],
)
def test_rest_errors_are_json_with_tf_servings_http_status(server, path, body, code, error):
    assert rest(server, path, body) == (code, {"error": error})


def write_pki(directory: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    paths: dict[str, Path] = {}

    def issue(name: str, issuer_name, issuer_key, *, ca: bool, usage=None, san=None):
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer_name or subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if usage:
            builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        cert = builder.sign(issuer_key or key, hashes.SHA256())
        paths[f"{name}_cert"] = directory / f"{name}.crt"
        paths[f"{name}_key"] = directory / f"{name}.key"
        paths[f"{name}_cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        paths[f"{name}_key"].write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return cert, key

    ca_cert, ca_key = issue("ca", None, None, ca=True)
    san = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    issue("server", ca_cert.subject, ca_key, ca=False, usage=ExtendedKeyUsageOID.SERVER_AUTH, san=san)
    issue("client", ca_cert.subject, ca_key, ca=False, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    return paths


def test_tls_with_client_certificates_on_both_transports(tfs_reference, tmp_path):
    pki = write_pki(tmp_path)
    tls = {"cert": pki["server_cert"], "key": pki["server_key"], "ca": pki["ca_cert"]}
    server = tfs_reference({"tf2": MODELS / "half_plus_two_tf2"}, tls=tls)
    assert server.rest_url.startswith("https://")
    ca, client_key, client_cert = (pki[k].read_bytes() for k in ("ca_cert", "client_key", "client_cert"))

    with grpc.secure_channel(
        server.grpc_address, grpc.ssl_channel_credentials(ca, client_key, client_cert)
    ) as channel:
        response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
            predict_request("tf2", np.float32([2.0])), 30
        )
        assert make_ndarray(response.outputs["y"]).tolist() == [3.0]
    with grpc.secure_channel(server.grpc_address, grpc.ssl_channel_credentials(ca)) as channel:
        with pytest.raises(grpc.RpcError) as e:
            prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
                predict_request("tf2", np.float32([2.0])), 10
            )
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE

    context = ssl.create_default_context(cafile=str(pki["ca_cert"]))
    context.load_cert_chain(pki["client_cert"], pki["client_key"])
    assert rest(server, "/v1/models/tf2:predict", {"instances": [2.0]}, context) == (
        200,
        {"predictions": [3.0]},
    )
    without_client_cert = ssl.create_default_context(cafile=str(pki["ca_cert"]))
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        rest(server, "/v1/models/tf2", None, without_client_cert)
    assert server.stop() == 0, server.output()
