"""savedmodel_client's high-level client against ``model_server`` as a process, over gRPC and REST.

One server serves the bundled ``half_plus_two`` (TF Serving's test model: predict, classify,
regress signatures; a version label through the model config) and the oracle's
``open_inference_dtypes`` (an input and output of every dtype the REST API can carry). Every call
answers the same over both transports, with TensorFlow's values; errors are one ``ServingError``
with TF Serving's code and text; messages over 4 MiB pass by default; TLS with a client
certificate over gRPC; a call made before the server is up is retried until it answers; a
deadline ends a call that gets no answer.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time

import numpy as np
import pytest
from savedmodel_client import Client, ServingError

from apis.tensorflow.core.framework import tensor_pb2
from serving.inference import tensor_codec
from tests.e2e.conftest import MODELS_DIR, free_port
from tests.oracle import corpus

TRANSPORTS = ("grpc", "rest")


@pytest.fixture
def served(model_server, tmp_path):
    manifest = corpus.load_manifest("open_inference_dtypes")
    dtypes_base = tmp_path / "dtypes"
    shutil.copytree(manifest["export_path"], dtypes_base / "1")
    half_base = tmp_path / "half"
    shutil.copytree(MODELS_DIR / "half_plus_two" / "00000123", half_base / "123")
    config = tmp_path / "models.config"
    config.write_text(
        "model_config_list {\n"
        f'  config {{ name: "dtypes" base_path: "{dtypes_base}" model_platform: "tensorflow" }}\n'
        f'  config {{ name: "half_plus_two" base_path: "{half_base}" model_platform: "tensorflow"\n'
        '    version_labels { key: "stable" value: 123 } }\n'
        "}\n"
    )
    rest_port = free_port()
    server = model_server(
        f"--model_config_file={config}",
        f"--rest_api_port={rest_port}",
        "--allow_version_labels_for_unavailable_models",
    )
    clients = {
        "grpc": Client(server.address, timeout=30),
        "rest": Client(f"127.0.0.1:{rest_port}", "rest", timeout=30),
    }
    yield server, clients, manifest
    for client in clients.values():
        client.close()


def oracle_case(manifest: dict, index: int) -> tuple[dict, dict]:
    case = manifest["cases"][index]

    def read(relative):
        return tensor_codec.decode(
            tensor_pb2.TensorProto.FromString((manifest["dir"] / relative).read_bytes())
        )

    return {k: read(v) for k, v in case["inputs"].items()}, {k: read(v) for k, v in case["outputs"].items()}


def assert_equal_outputs(got: dict, expected: dict) -> None:
    assert sorted(got) == sorted(expected)
    for name, want in expected.items():
        value = got[name]
        assert value.shape == want.shape, name
        if want.dtype == object:
            assert value.dtype == object and value.tolist() == want.tolist(), name
        else:
            assert value.dtype == want.dtype, (name, value.dtype, want.dtype)
            np.testing.assert_allclose(
                value.astype(np.float64), want.astype(np.float64), rtol=1e-2, atol=1e-2, err_msg=name
            )


def test_predict_every_dtype_as_tensorflow(served):
    _, clients, manifest = served
    inputs, expected = oracle_case(manifest, 0)
    assert_equal_outputs(clients["grpc"].predict("dtypes", inputs), expected)
    # TF Serving's REST API reads no bfloat16 from JSON: everything else, as TensorFlow answers
    with pytest.raises(ServingError) as caught:
        clients["rest"].predict("dtypes", inputs)
    assert caught.value.code == "UNIMPLEMENTED" and "bfloat16" in caught.value.message


def test_predict_signature_output_filter_version_and_label(served):
    _, clients, manifest = served
    inputs, expected = oracle_case(manifest, 1)
    answers = {}
    for transport, client in clients.items():
        answers[transport] = client.predict("dtypes", inputs, signature_name="arithmetic", version=1)
        assert_equal_outputs(answers[transport], expected)
        only = client.predict("dtypes", inputs, signature_name="arithmetic", output_filter=["product"])
        assert list(only) == ["product"]
        np.testing.assert_array_equal(only["product"], expected["product"])
        for spec in ({}, {"version": 123}, {"label": "stable"}):
            y = client.predict("half_plus_two", {"x": [[1.0], [2.0], [5.0]]}, **spec)["y"]
            assert y.dtype == np.float32 and y.tolist() == [[2.5], [3.0], [4.5]], (transport, spec)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_classify_regress(served, transport):
    _, clients, _ = served
    client = clients[transport]
    examples = [{"x": 1.0}, {"x": 2.0}]
    assert client.regress("half_plus_two", examples, signature_name="regress_x_to_y").tolist() == [2.5, 3.0]
    assert client.classify("half_plus_two", examples, signature_name="classify_x_to_y") == [
        [("", 2.5)],
        [("", 3.0)],
    ]
    with_context = client.regress(
        "half_plus_two", [{}, {}], context={"x": 4.0}, signature_name="regress_x_to_y"
    )
    assert with_context.tolist() == [4.0, 4.0]


def test_multi_inference_over_grpc_and_not_over_rest(served):
    _, clients, _ = served
    results = clients["grpc"].multi_inference(
        "half_plus_two", [{"x": 2.0}], [("regress", "regress_x_to_y"), ("classify", "classify_x_to_y")]
    )
    assert results[0].tolist() == [3.0] and results[1] == [[("", 3.0)]]
    with pytest.raises(ServingError) as caught:
        clients["rest"].multi_inference("half_plus_two", [{"x": 2.0}], [("regress", "regress_x_to_y")])
    assert caught.value.code == "UNIMPLEMENTED"


def test_metadata_and_status_are_the_same_over_both_transports(served):
    _, clients, _ = served
    grpc_meta, rest_meta = (c.metadata("half_plus_two") for c in (clients["grpc"], clients["rest"]))
    assert grpc_meta == rest_meta
    assert grpc_meta["model_spec"]["name"] == "half_plus_two" and grpc_meta["model_spec"]["version"] == "123"
    signature = grpc_meta["signature_def"]["serving_default"]
    assert signature["inputs"]["x"]["dtype"] == "DT_FLOAT"
    assert {"serving_default", "classify_x_to_y", "regress_x_to_y"} <= set(grpc_meta["signature_def"])
    for client in clients.values():
        assert client.status("half_plus_two") == [
            {"version": 123, "state": "AVAILABLE", "error_code": "OK", "error_message": ""}
        ]
        assert client.status("half_plus_two", label="stable")[0]["version"] == 123


def test_errors_carry_tf_servings_codes_and_texts(served):
    _, clients, _ = served
    cases = [
        (
            lambda c: c.predict("nope", {"x": np.float32([1])}),
            "NOT_FOUND",
            404,
            "Servable not found for request: Latest(nope)",
        ),
        (
            lambda c: c.predict("half_plus_two", {"x": np.float32([1])}, version=7),
            "NOT_FOUND",
            404,
            "Servable not found for request: Specific(half_plus_two, 7)",
        ),
        (lambda c: c.status("nope"), "NOT_FOUND", 404, None),
        (
            lambda c: c.predict("half_plus_two", {"x": np.float32([[1]])}, signature_name="nope"),
            "FAILED_PRECONDITION",
            400,
            'Serving signature key "nope" not found.',
        ),
        (lambda c: c.predict("half_plus_two", {"z": np.float32([[1]])}), "INVALID_ARGUMENT", 400, None),
    ]
    for transport, client in clients.items():
        for call, code, http_status, message in cases:
            with pytest.raises(ServingError) as caught:
                call(client)
            error = caught.value
            if transport == "grpc":
                assert error.code == code and error.http_status is None
            else:  # REST has only the HTTP status: 400 reads as INVALID_ARGUMENT
                assert error.http_status == http_status
                assert error.code == ("INVALID_ARGUMENT" if http_status == 400 else code)
            if transport == "rest" and message == 'Serving signature key "nope" not found.':
                message = 'Serving signature name: "nope" not found in signature def'  # REST's own text
            if message is not None:
                assert error.message == message, (transport, error.message)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_messages_over_4_mib_pass_by_default(served, transport):
    _, clients, _ = served
    x = np.arange(3 * 2**20, dtype=np.float32).reshape(-1, 1)  # 12 MiB each way
    y = clients[transport].predict("half_plus_two", {"x": x}, timeout=120)["y"]
    np.testing.assert_array_equal(y, x * 0.5 + 2)


def test_a_call_before_the_server_is_up_is_retried_until_it_answers(model_server, model_dir):
    port = free_port()
    client = Client(f"127.0.0.1:{port}", retries=60, backoff=0.2, max_backoff=0.5, timeout=60)
    answers = []
    caller = threading.Thread(target=lambda: answers.append(client.status("half_plus_two")))
    caller.start()
    time.sleep(1.0)
    model_server(
        f"--model_base_path={model_dir('half_plus_two')}", "--model_name=half_plus_two", f"--port={port}"
    )
    caller.join(60)
    assert answers and answers[0][0]["state"] == "AVAILABLE"
    client.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_without_retries_a_closed_port_is_unavailable_at_once(transport):
    client = Client(f"127.0.0.1:{free_port()}", transport, retries=0)
    started = time.monotonic()
    with pytest.raises(ServingError) as caught:
        client.status("m", timeout=20)
    assert caught.value.code == "UNAVAILABLE"
    assert time.monotonic() - started < 10
    client.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_deadline_ends_a_call_that_gets_no_answer(transport):
    """A server that accepts connections and never answers: DEADLINE_EXCEEDED at the deadline."""
    listener = socket.create_server(("127.0.0.1", 0))
    held = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    client = Client(f"127.0.0.1:{listener.getsockname()[1]}", transport, retries=0)
    started = time.monotonic()
    with pytest.raises(ServingError) as caught:
        client.status("m", timeout=1.0)
    elapsed = time.monotonic() - started
    stop.set()
    thread.join()
    for s in held:
        s.close()
    listener.close()
    client.close()
    assert caught.value.code == "DEADLINE_EXCEEDED"
    assert 0.9 <= elapsed < 5


def make_certificates(tmp_path):
    """A CA, a server certificate for 127.0.0.1 and a client certificate, both signed by the CA;
    and a second CA's client certificate (refused)."""

    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=tmp_path)

    for ca in ("ca", "other_ca"):
        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.pem",
            "-days", "1", "-subj", f"/CN={ca}")  # fmt: skip
    (tmp_path / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, ca in (("server", "ca"), ("client", "ca"), ("stranger", "other_ca")):
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={name}")  # fmt: skip
        extra = ["-extfile", "server.ext"] if name == "server" else []
        run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "1", *extra)  # fmt: skip
    return {p.stem + p.suffix.replace(".", "_"): p for p in tmp_path.iterdir()}


def test_tls_with_a_client_certificate_over_grpc(model_server, model_dir, tmp_path):
    if not shutil.which("openssl"):
        pytest.fail("openssl is needed to make test certificates")
    certs = make_certificates(tmp_path)
    config = tmp_path / "ssl.config"
    config.write_text(
        f"server_key: {_text(certs['server_key'])}\nserver_cert: {_text(certs['server_pem'])}\n"
        f"custom_ca: {_text(certs['ca_pem'])}\nclient_verify: true\n"
    )
    server = model_server(
        f"--model_base_path={model_dir('half_plus_two')}", "--model_name=half_plus_two",
        f"--ssl_config_file={config}", wait=False,
    )  # fmt: skip
    trusted = Client(
        server.address, root_certificates=certs["ca_pem"], certificate_chain=certs["client_pem"],
        private_key=certs["client_key"], retries=50, backoff=0.2, max_backoff=0.5, timeout=60,
    )  # fmt: skip
    assert trusted.predict("half_plus_two", {"x": [1.0]})["y"].tolist() == [2.5]
    for kwargs in (
        {"root_certificates": certs["ca_pem"]},  # no client certificate
        {
            "root_certificates": certs["ca_pem"],
            "certificate_chain": certs["stranger_pem"],
            "private_key": certs["stranger_key"],
        },
        {
            "root_certificates": certs["other_ca_pem"],
            "certificate_chain": certs["client_pem"],
            "private_key": certs["client_key"],
        },
    ):
        refused = Client(server.address, retries=0, timeout=10, **kwargs)
        with pytest.raises(ServingError) as caught:
            refused.predict("half_plus_two", {"x": np.float32([1.0])})
        assert caught.value.code == "UNAVAILABLE", kwargs
        refused.close()
    trusted.close()


def _text(path) -> str:
    import json

    return json.dumps(path.read_text())
