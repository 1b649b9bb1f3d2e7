"""TLS on both ports of ``model_server``: HTTPS on the REST port (``--rest_api_ssl_config_file``,
ours), client certificates required where the SSLConfig says ``client_verify`` (REST and gRPC),
a rotated certificate served without a restart, and a bad key refused at start-up.

Clients: Python's ``http.client`` over ``ssl`` with the CA (what curl does with ``--cacert``),
grpcio's SSL channel credentials, and savedmodel_client over both transports.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time

import grpc
import numpy as np
import pytest
from savedmodel_client import Client, ServingError

from apis.tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from runtime.tensor_util import make_ndarray, make_tensor_proto
from tests.e2e.certificates import Authority, serial_of, ssl_config_text
from tests.e2e.conftest import free_port

BODY = json.dumps({"instances": [[1.0], [2.0]]}).encode()


@pytest.fixture
def pki(tmp_path):
    ca = Authority(tmp_path, "ca")
    stranger_ca = Authority(tmp_path, "stranger_ca")
    return {
        "ca": ca,
        "server": ca.issue("server", server=True),
        "rotated": ca.issue("rotated", server=True),
        "client": ca.issue("client", server=False),
        "stranger": stranger_ca.issue("stranger", server=False),
    }


def start(model_server, model_dir, tmp_path, pki, *, client_verify=False, grpc_tls=True, wait=True):
    cert, key, _ = pki["server"]
    config = tmp_path / "ssl.config"
    config.write_text(ssl_config_text(cert, key, pki["ca"].cert_path, client_verify))
    rest_port = free_port()
    flags = [
        f"--model_base_path={model_dir('half_plus_two')}",
        "--model_name=half_plus_two",
        f"--rest_api_port={rest_port}",
        f"--rest_api_ssl_config_file={config}",
    ]
    if grpc_tls:
        flags.append(f"--ssl_config_file={config}")
    server = model_server(*flags, wait=False)
    return server, rest_port, config


def context(pki, client: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki["ca"].cert_path))
    if client is not None:
        cert, key, _ = pki[client]
        ctx.load_cert_chain(cert, key)
    return ctx


def https_predict(port: int, ctx: ssl.SSLContext) -> tuple[int, dict, int]:
    """(status, JSON body, serial of the server's certificate) of a REST predict over HTTPS."""
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    try:
        connection.request("POST", "/v1/models/half_plus_two:predict", BODY)
        response = connection.getresponse()
        body = json.loads(response.read())
        return response.status, body, serial_of(connection.sock.getpeercert(binary_form=True))
    finally:
        connection.close()


def wait_for_https(port: int, ctx: ssl.SSLContext, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if https_predict(port, ctx)[0] == 200:
                return
        except (OSError, ssl.SSLError, http.client.HTTPException):
            pass
        if time.monotonic() > deadline:
            raise AssertionError("the HTTPS port did not answer")
        time.sleep(0.2)


def grpc_serial(port: int, pki) -> int:
    """The serial of the certificate the gRPC port presents (a TLS handshake with ALPN h2)."""
    ctx = context(pki)
    ctx.set_alpn_protocols(["h2"])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            return serial_of(tls.getpeercert(binary_form=True))


def grpc_predict(address: str, credentials) -> list:
    with grpc.secure_channel(address, credentials) as channel:
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "half_plus_two"
        request.inputs["x"].CopyFrom(make_tensor_proto(np.float32([[1.0]])))
        response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request, timeout=10)
        return make_ndarray(response.outputs["y"]).tolist()


def test_https_on_the_rest_port(model_server, model_dir, tmp_path, pki):
    server, rest_port, _ = start(model_server, model_dir, tmp_path, pki, grpc_tls=False)
    server.wait_ready()
    wait_for_https(rest_port, context(pki))
    status, body, serial = https_predict(rest_port, context(pki))
    assert (status, body, serial) == (200, {"predictions": [[2.5], [3.0]]}, pki["server"][2])
    # plain HTTP on the HTTPS port gets no answer
    plain = http.client.HTTPConnection("127.0.0.1", rest_port, timeout=10)
    with pytest.raises((http.client.HTTPException, OSError)):
        plain.request("GET", "/v1/models/half_plus_two")
        plain.getresponse().read()
    plain.close()
    # a client that does not trust the CA refuses the server
    with pytest.raises(ssl.SSLCertVerificationError):
        https_predict(rest_port, ssl.create_default_context())
    # savedmodel_client over HTTPS
    client = Client(
        f"https://127.0.0.1:{rest_port}", "rest", root_certificates=pki["ca"].cert_path, timeout=10
    )
    assert client.predict("half_plus_two", {"x": [[4.0]]})["y"].tolist() == [[4.0]]
    client.close()
    assert "Exporting HTTP/REST API" in server.output()
    assert server.stop() == 0


def test_client_certificates_are_required_on_both_ports(model_server, model_dir, tmp_path, pki):
    server, rest_port, _ = start(model_server, model_dir, tmp_path, pki, client_verify=True)
    wait_for_https(rest_port, context(pki, "client"))
    assert https_predict(rest_port, context(pki, "client"))[:2] == (200, {"predictions": [[2.5], [3.0]]})
    for refused in (context(pki), context(pki, "stranger")):
        with pytest.raises((ssl.SSLError, OSError, http.client.HTTPException)):
            https_predict(rest_port, refused)
    ca = pki["ca"].cert_path.read_bytes()
    cert, key, _ = pki["client"]
    trusted = grpc.ssl_channel_credentials(ca, key.read_bytes(), cert.read_bytes())
    assert grpc_predict(server.address, trusted) == [[2.5]]
    stranger_cert, stranger_key, _ = pki["stranger"]
    for credentials in (
        grpc.ssl_channel_credentials(ca),
        grpc.ssl_channel_credentials(ca, stranger_key.read_bytes(), stranger_cert.read_bytes()),
    ):
        with pytest.raises(grpc.RpcError) as caught:
            grpc_predict(server.address, credentials)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    # savedmodel_client with its client certificate, both transports
    for transport, address in (("grpc", server.address), ("rest", f"https://127.0.0.1:{rest_port}")):
        client = Client(
            address,
            transport,
            root_certificates=pki["ca"].cert_path,
            certificate_chain=cert,
            private_key=key,
            timeout=10,
        )
        assert client.status("half_plus_two")[0]["state"] == "AVAILABLE"
        client.close()
        refused = Client(address, transport, root_certificates=pki["ca"].cert_path, retries=0, timeout=10)
        with pytest.raises(ServingError) as caught:
            refused.status("half_plus_two")
        assert caught.value.code == "UNAVAILABLE", transport
        refused.close()
    assert server.stop() == 0


def test_a_rotated_certificate_is_served_without_a_restart(model_server, model_dir, tmp_path, pki):
    server, rest_port, config = start(model_server, model_dir, tmp_path, pki)
    wait_for_https(rest_port, context(pki))
    grpc_port = int(server.address.rsplit(":", 1)[1])
    old, new = pki["server"][2], pki["rotated"][2]
    assert https_predict(rest_port, context(pki))[2] == old
    assert grpc_serial(grpc_port, pki) == old
    kept = http.client.HTTPSConnection("127.0.0.1", rest_port, context=context(pki), timeout=10)
    kept.request("GET", "/v1/models/half_plus_two")
    kept.getresponse().read()
    pid = server.proc.pid
    # a broken rotation (half written) keeps the old certificate
    config.write_text('server_key: "-----BEGIN PRIVATE KEY-----\\nnot a key"\n')
    time.sleep(2.5)
    assert https_predict(rest_port, context(pki))[2] == old and grpc_serial(grpc_port, pki) == old
    assert "Keeping the previous TLS certificate" in server.output()
    cert, key, _ = pki["rotated"]
    config.write_text(ssl_config_text(cert, key, pki["ca"].cert_path))
    deadline = time.monotonic() + 10
    while https_predict(rest_port, context(pki))[2] != new:
        assert time.monotonic() < deadline, "REST still presents the old certificate"
        time.sleep(0.2)
    assert grpc_serial(grpc_port, pki) == new
    credentials = grpc.ssl_channel_credentials(pki["ca"].cert_path.read_bytes())
    assert grpc_predict(server.address, credentials) == [[2.5]]
    # the connection opened before the rotation still answers; no restart happened
    kept.request("GET", "/v1/models/half_plus_two")
    assert kept.getresponse().status == 200
    kept.close()
    assert server.proc.pid == pid and server.proc.poll() is None
    assert server.stop() == 0


@pytest.mark.parametrize("flag", ["ssl_config_file", "rest_api_ssl_config_file"])
def test_a_key_that_does_not_match_its_certificate_is_refused_at_start_up(
    model_server, model_dir, tmp_path, pki, flag
):
    cert, _, _ = pki["server"]
    _, other_key, _ = pki["rotated"]
    config = tmp_path / "ssl.config"
    config.write_text(ssl_config_text(cert, other_key))
    server = model_server(
        f"--model_base_path={model_dir('half_plus_two')}", "--model_name=half_plus_two",
        f"--rest_api_port={free_port()}", f"--{flag}={config}", wait=False,
    )  # fmt: skip
    assert server.wait_exit(timeout=60) != 0
    output = server.output()
    assert f"--{flag} ({config}): the server_key does not match the server_cert" in output, output[-2000:]
