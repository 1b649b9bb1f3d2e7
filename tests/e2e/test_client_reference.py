"""savedmodel_client against TF Serving's API served by TensorFlow itself (``tfs_reference``: a
server in the oracle's tf221 venv that answers with TensorFlow), and against ``model_server``:
every call, over gRPC and REST, answers alike from both; TLS with client certificates on both
transports of the reference (``model_server``'s REST port has no TLS yet).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from savedmodel_client import Client, ServingError

from tests.e2e.conftest import MODELS_DIR, free_port
from tests.e2e.test_tfs_reference import write_pki
from tests.e2e.tfs_reference import start_reference

TRANSPORTS = ("grpc", "rest")
MLP_INPUT = np.random.default_rng(3).random((3, 4), dtype=np.float32)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("client_reference")
    models = {"half_plus_two": MODELS_DIR / "half_plus_two", "keras_mlp": MODELS_DIR / "keras_mlp"}
    server = start_reference(tmp, models, labels={"half_plus_two": {"stable": 123}})
    yield server
    assert server.stop() == 0, server.output()


def clients_of(grpc_address: str, rest_address: str) -> dict[str, Client]:
    return {"grpc": Client(grpc_address, timeout=60), "rest": Client(rest_address, "rest", timeout=60)}


def calls(client: Client, transport: str) -> dict:
    """Every call the client makes, its answer in plain values (or its error)."""
    examples = [{"x": 1.0}, {"x": 2.0}, {"x": -4.5}]
    plan = {
        "predict": lambda: client.predict("half_plus_two", {"x": [[1.0], [2.0], [5.0]]}),
        "predict_array": lambda: client.predict("half_plus_two", {"x": np.float32([[0.25]])}, version=123),
        "predict_label": lambda: client.predict("half_plus_two", {"x": [[3.0]]}, label="stable"),
        "predict_mlp": lambda: client.predict("keras_mlp", {next(iter(mlp_inputs(client))): MLP_INPUT}),
        "regress": lambda: client.regress("half_plus_two", examples, signature_name="regress_x_to_y"),
        "regress_context": lambda: client.regress(
            "half_plus_two", [{}, {}], context={"x": 8.0}, signature_name="regress_x_to_y"
        ),
        "classify": lambda: client.classify("half_plus_two", examples, signature_name="classify_x_to_y"),
        "status": lambda: client.status("half_plus_two"),
        "metadata_signatures": lambda: sorted(client.metadata("half_plus_two")["signature_def"]),
        "metadata_inputs": lambda: client.metadata("half_plus_two")["signature_def"]["serving_default"][
            "inputs"
        ],
        "unknown_model": lambda: client.predict("nope", {"x": np.float32([1.0])}),
        "unknown_version": lambda: client.status("half_plus_two", version=9),
    }
    if transport == "grpc":
        plan["multi_inference"] = lambda: client.multi_inference(
            "half_plus_two", examples, [("regress", "regress_x_to_y"), ("classify", "classify_x_to_y")]
        )
    out = {}
    for name, call in plan.items():
        try:
            out[name] = ("ok", plain(call()))
        except ServingError as error:
            out[name] = ("error", error.code, error.message, error.http_status)
    return out


def mlp_inputs(client: Client) -> dict:
    return client.metadata("keras_mlp")["signature_def"]["serving_default"]["inputs"]


def plain(value):
    if isinstance(value, np.ndarray):
        return (str(value.dtype), value.shape, np.round(value.astype(np.float64), 4).tolist())
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, float):
        return round(value, 4)
    return value


def test_every_call_answers_alike_from_tensorflow_and_from_model_server(reference, model_server, tmp_path):
    for name in ("half_plus_two", "keras_mlp"):
        shutil.copytree(MODELS_DIR / name, tmp_path / name, ignore=shutil.ignore_patterns("*.py"))
    config = tmp_path / "models.config"
    config.write_text(
        "model_config_list {\n"
        f'  config {{ name: "half_plus_two" base_path: "{tmp_path / "half_plus_two"}" model_platform: "tensorflow"\n'
        '    version_labels { key: "stable" value: 123 } }\n'
        f'  config {{ name: "keras_mlp" base_path: "{tmp_path / "keras_mlp"}" model_platform: "tensorflow" }}\n'
        "}\n"
    )
    rest_port = free_port()
    ours = model_server(
        f"--model_config_file={config}",
        f"--rest_api_port={rest_port}",
        "--allow_version_labels_for_unavailable_models",
    )
    theirs = clients_of(reference.grpc_address, reference.rest_url)
    mine = clients_of(ours.address, f"127.0.0.1:{rest_port}")
    for transport in TRANSPORTS:
        expected = calls(theirs[transport], transport)
        got = calls(mine[transport], transport)
        assert sorted(got) == sorted(expected)
        for name in expected:
            assert got[name] == expected[name], (transport, name, got[name], expected[name])
        # and the answers are the right ones, not merely alike
        assert expected["predict"] == ("ok", {"y": ("float32", (3, 1), [[2.5], [3.0], [4.5]])})
        assert expected["regress"] == ("ok", ("float32", (3,), [2.5, 3.0, -0.25]))
        assert expected["unknown_model"][1:3] == ("NOT_FOUND", "Servable not found for request: Latest(nope)")
    for client in (*theirs.values(), *mine.values()):
        client.close()


def test_grpc_and_rest_answer_alike(reference):
    clients = clients_of(reference.grpc_address, reference.rest_url)
    grpc_calls, rest_calls = calls(clients["grpc"], "grpc"), calls(clients["rest"], "rest")
    for name, value in rest_calls.items():
        if value[0] == "ok":
            assert grpc_calls[name] == value, name
        else:  # REST knows only the HTTP status; the texts are TF Serving's on both
            assert grpc_calls[name][0] == "error" and value[3] in (400, 404), (name, value)
    for client in clients.values():
        client.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_tls_with_a_client_certificate(tfs_reference, tmp_path, transport):
    pki = write_pki(tmp_path)
    server = tfs_reference(
        {"half_plus_two": MODELS_DIR / "half_plus_two"},
        tls={"cert": pki["server_cert"], "key": pki["server_key"], "ca": pki["ca_cert"]},
    )
    address = server.grpc_address if transport == "grpc" else server.rest_url
    trusted = Client(
        address, transport, root_certificates=pki["ca_cert"], certificate_chain=pki["client_cert"],
        private_key=pki["client_key"], timeout=30,
    )  # fmt: skip
    assert trusted.predict("half_plus_two", {"x": [[1.0]]})["y"].tolist() == [[2.5]]
    assert trusted.status("half_plus_two")[0]["state"] == "AVAILABLE"
    trusted.close()
    for kwargs in ({"root_certificates": pki["ca_cert"]}, {}):  # no client certificate; no CA either
        refused = Client(address, transport, tls=True, retries=0, timeout=10, **kwargs)
        with pytest.raises(ServingError) as caught:
            refused.status("half_plus_two")
        assert caught.value.code == "UNAVAILABLE", (kwargs, caught.value)
        refused.close()
    assert server.stop() == 0
