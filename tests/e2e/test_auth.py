"""``--auth_token_file``: bearer tokens on both ports of ``model_server``, accepted and refused
(UNAUTHENTICATED / 401 without a token or with an unknown one, PERMISSION_DENIED / 403 for a
model the token may not call), probes exempt, the metrics page as ``--auth_metrics`` says, the
file re-read when it changes, and no token ever in the server's output."""

from __future__ import annotations

import http.client
import json
import time

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from savedmodel_client import Client, ServingError

from apis.inference import grpc_predict_v2_pb2 as v2
from apis.inference import grpc_predict_v2_pb2_grpc as v2_grpc
from apis.tensorflow_serving.apis import (
    get_model_status_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)
from runtime.tensor_util import make_tensor_proto
from tests.e2e.conftest import free_port

TOKENS = """# who may call what
tok-all-1234
tok-half-5678 half_plus_two
tok-other-9012 other_model, another
"""
SECRETS = ("tok-all-1234", "tok-half-5678", "tok-other-9012", "tok-new-3456", "tok-wrong-0000")


@pytest.fixture
def served(model_server, model_dir, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(TOKENS)
    monitoring = tmp_path / "monitoring.config"
    monitoring.write_text("prometheus_config { enable: true }\n")
    rest_port = free_port()
    server = model_server(
        f"--model_base_path={model_dir('half_plus_two')}", "--model_name=half_plus_two",
        f"--rest_api_port={rest_port}", f"--auth_token_file={tokens}", f"--monitoring_config_file={monitoring}",
        "--access_log=stderr",
    )  # fmt: skip
    return server, rest_port, tokens


def bearer(token):
    return (("authorization", f"Bearer {token}"),) if token else ()


def grpc_predict(channel, token, model="half_plus_two"):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.inputs["x"].CopyFrom(make_tensor_proto(np.float32([[1.0]])))
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    try:
        stub.Predict(request, timeout=10, metadata=bearer(token))
        return "OK"
    except grpc.RpcError as e:
        return e.code().name, e.details()


def rest(port, method, path, token=None, body=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    connection.request(method, path, json.dumps(body).encode() if body is not None else None, headers)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, dict(response.getheaders()), data


def test_tokens_on_grpc(served):
    server, _, _ = served
    channel = server.channel()
    assert grpc_predict(channel, None) == (
        "UNAUTHENTICATED", "Missing bearer token: send 'authorization: Bearer <token>'"
    )  # fmt: skip
    assert grpc_predict(channel, "tok-wrong-0000") == ("UNAUTHENTICATED", "Invalid bearer token")
    assert grpc_predict(channel, "tok-all-1234") == "OK"
    assert grpc_predict(channel, "tok-half-5678") == "OK"
    assert grpc_predict(channel, "tok-other-9012") == (
        "PERMISSION_DENIED", "This token may not call model 'half_plus_two'"
    )  # fmt: skip
    # health and the V2 probes need no token; everything else does
    health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    inference = v2_grpc.GRPCInferenceServiceStub(channel)
    assert inference.ServerLive(v2.ServerLiveRequest(), timeout=10).live
    assert inference.ModelReady(v2.ModelReadyRequest(name="half_plus_two"), timeout=10).ready
    with pytest.raises(grpc.RpcError) as caught:
        inference.ServerMetadata(v2.ServerMetadataRequest(), timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    models = model_service_pb2_grpc.ModelServiceStub(channel)
    status = get_model_status_pb2.GetModelStatusRequest()
    status.model_spec.name = "half_plus_two"
    assert models.GetModelStatus(status, timeout=10, metadata=bearer("tok-half-5678")).model_version_status
    with pytest.raises(grpc.RpcError) as caught:  # a call that names no model: unrestricted tokens only
        models.HandleReloadConfigRequest(
            model_management_pb2.ReloadConfigRequest(), timeout=10, metadata=bearer("tok-half-5678")
        )
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_tokens_on_rest(served):
    _, port, _ = served
    path, body = "/v1/models/half_plus_two:predict", {"instances": [[1.0]]}
    status, headers, data = rest(port, "POST", path, None, body)
    assert (status, headers["WWW-Authenticate"]) == (401, "Bearer")
    assert json.loads(data) == {"error": "Missing bearer token: send 'authorization: Bearer <token>'"}
    assert rest(port, "POST", path, "tok-wrong-0000", body)[0] == 401
    assert rest(port, "POST", path, "tok-half-5678", body)[0] == 200
    status, _, data = rest(port, "POST", path, "tok-other-9012", body)
    assert (status, json.loads(data)) == (403, {"error": "This token may not call model 'half_plus_two'"})
    for probe in (
        "/healthz",
        "/readyz",
        "/v2/health/live",
        "/v2/health/ready",
        "/v2/models/half_plus_two/ready",
    ):
        assert rest(port, "GET", probe)[0] == 200, probe
    assert rest(port, "GET", "/v2/models/half_plus_two", None)[0] == 401
    assert rest(port, "GET", "/v1/models", "tok-half-5678")[0] == 403  # names no model
    assert rest(port, "GET", "/v1/models", "tok-all-1234")[0] == 200
    assert rest(port, "GET", "/monitoring/prometheus/metrics")[0] == 401  # --auth_metrics: true
    assert rest(port, "GET", "/monitoring/prometheus/metrics", "tok-all-1234")[0] == 200


def test_the_client_sends_its_token_on_both_transports(served):
    server, port, _ = served
    for transport, address in (("grpc", server.address), ("rest", f"127.0.0.1:{port}")):
        with Client(address, transport, auth_token="tok-half-5678", timeout=10) as client:
            assert client.predict("half_plus_two", {"x": [[2.0]]})["y"].tolist() == [[3.0]]
        with Client(address, transport, retries=0, timeout=10) as client:
            with pytest.raises(ServingError) as caught:
                client.predict("half_plus_two", {"x": np.float32([[2.0]])})
            assert caught.value.code == "UNAUTHENTICATED", transport


def test_the_file_is_reread_and_no_token_is_ever_logged(served):
    server, port, tokens = served
    channel = server.channel()
    assert grpc_predict(channel, "tok-all-1234") == "OK"
    tokens.write_text("tok-new-3456 half_plus_two\n")
    deadline = time.monotonic() + 10
    while grpc_predict(channel, "tok-all-1234") == "OK":
        assert time.monotonic() < deadline, "the revoked token is still accepted"
        time.sleep(0.2)
    assert grpc_predict(channel, "tok-all-1234")[0] == "UNAUTHENTICATED"
    assert grpc_predict(channel, "tok-new-3456") == "OK"
    assert (
        rest(port, "POST", "/v1/models/half_plus_two:predict", "tok-new-3456", {"instances": [[1.0]]})[0]
        == 200
    )
    output = server.output()
    assert '"status":"UNAUTHENTICATED"' in output  # refused calls are logged
    assert not [secret for secret in SECRETS if secret in output], "a token reached the server's output"
    assert server.stop() == 0


def test_the_metrics_page_can_be_left_open(model_server, model_dir, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("tok-all-1234\n")
    monitoring = tmp_path / "monitoring.config"
    monitoring.write_text("prometheus_config { enable: true }\n")
    rest_port = free_port()
    model_server(
        f"--model_base_path={model_dir('half_plus_two')}", "--model_name=half_plus_two",
        f"--rest_api_port={rest_port}", f"--auth_token_file={tokens}", f"--monitoring_config_file={monitoring}",
        "--auth_metrics=false",
    )  # fmt: skip
    assert rest(rest_port, "GET", "/monitoring/prometheus/metrics")[0] == 200
    assert rest(rest_port, "GET", "/v1/models/half_plus_two")[0] == 401
