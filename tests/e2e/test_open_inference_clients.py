"""The Open Inference Protocol (KServe V2) on ``model_server``, driven by NVIDIA's ``tritonclient``
(HTTP and gRPC) and KServe's Python client (REST and gRPC), unchanged, from the v2clients venv.

One server serves the oracle's ``open_inference_dtypes`` (a signature with an input and output
of every V2 datatype; another selected by the ``signature_name`` parameter) and the bundled
``half_plus_two``. Every output of every client (HTTP JSON and binary data, gRPC raw contents)
equals TensorFlow's; health, readiness and metadata say what the server serves; each error is
TF Serving's code and text on both transports; a request is counted under API "ModelInfer".
With ``--enable_open_inference_protocol=false`` neither port speaks V2.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
from pathlib import Path

import grpc
import numpy as np
import pytest

from apis.inference import grpc_predict_v2_pb2 as v2
from apis.inference import grpc_predict_v2_pb2_grpc as v2_grpc
from apis.tensorflow.core.framework import tensor_pb2
from serving.inference import tensor_codec
from serving.rest_api.server import NOT_FOUND_PAGE
from tests.e2e.conftest import MODELS_DIR, free_port
from tests.e2e.test_batching_server import queue_summary
from tests.oracle import corpus, oracle_dir
from tests.oracle.venvs import venv_python

DRIVER = Path(__file__).resolve().parent / "v2_clients" / "drive.py"
DATATYPES = {
    "bool": "BOOL", "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64",
    "int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64", "float16": "FP16",
    "float32": "FP32", "float64": "FP64", "bfloat16": "BF16", "string": "BYTES",
}  # fmt: skip
CLIENTS = {
    "triton_http_binary", "triton_http_json", "triton_grpc", "kserve_rest_json", "kserve_rest_binary",
    "kserve_grpc",
}  # fmt: skip


def clients_python() -> Path:
    python = venv_python(oracle_dir(), "v2clients")
    if not python.exists():
        pytest.fail(f"the v2clients venv is missing ({python}): {corpus.BUILD_HINT}", pytrace=False)
    return python


def oracle_case(manifest: dict, index: int) -> tuple[dict, dict, dict]:
    case = manifest["cases"][index]

    def read(relative):
        return tensor_codec.decode(
            tensor_pb2.TensorProto.FromString((manifest["dir"] / relative).read_bytes())
        )

    return (
        case,
        {k: read(v) for k, v in case["inputs"].items()},
        {k: read(v) for k, v in case["outputs"].items()},
    )


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
        f'  config {{ name: "half_plus_two" base_path: "{half_base}" model_platform: "tensorflow" }}\n'
        "}\n"
    )
    monitoring = tmp_path / "monitoring.config"
    monitoring.write_text("prometheus_config { enable: true }\n")
    rest_port = free_port()
    server = model_server(
        f"--model_config_file={config}",
        f"--rest_api_port={rest_port}",
        f"--monitoring_config_file={monitoring}",
    )
    return server, rest_port, manifest


def write_plan(tmp_path: Path, server, rest_port: int, manifest: dict) -> tuple[dict, dict]:
    """The driver's plan, and per case id TensorFlow's outputs (as the client asked for them)."""
    npy = tmp_path / "inputs"
    npy.mkdir()
    cases, expected = [], {}

    def add(case_id, model, inputs, datatypes, outputs, tf_outputs, version="", parameters=None):
        specs = {}
        for name, array in inputs.items():
            path = npy / f"{case_id}_{name}.npy"
            np.save(path, array.view(np.uint16) if datatypes[name] == "BF16" else array, allow_pickle=True)
            specs[name] = {"datatype": datatypes[name], "npy": str(path)}
        cases.append(
            {
                "id": case_id,
                "model": model,
                "version": version,
                "inputs": specs,
                "outputs": outputs,
                "parameters": parameters,
            }  # fmt: skip
        )
        expected[case_id] = tf_outputs

    case, inputs, outputs = oracle_case(manifest, 0)
    assert case["signature"] == "serving_default" and sorted(inputs) == sorted(DATATYPES)
    add("all_dtypes", "dtypes", inputs, DATATYPES, None, outputs, version="1")
    case, inputs, outputs = oracle_case(manifest, 1)
    assert case["signature"] == "arithmetic"
    asked = ["sum", "any_positive"]
    add(
        "arithmetic", "dtypes", inputs, {"a": "FP32", "b": "FP32"}, asked, {k: outputs[k] for k in asked},
        parameters={"signature_name": "arithmetic"},
    )  # fmt: skip
    x = np.float32([[1.0], [2.0], [5.0]])
    add("half", "half_plus_two", {"x": x}, {"x": "FP32"}, None, {"y": 0.5 * x + 2})

    def bad(
        case_id,
        model="half_plus_two",
        version="",
        name="x",
        datatype="FP32",
        value=None,
        outputs=None,
        parameters=None,
    ):
        path = npy / f"{case_id}.npy"
        np.save(path, np.float32([[1.0]]) if value is None else value)
        return {"id": case_id, "model": model, "version": version, "inputs": {name: {"datatype": datatype, "npy": str(path)}},
                "outputs": outputs, "parameters": parameters}  # fmt: skip

    errors = [
        bad("unknown_model", model="no_such_model"),
        bad("unknown_version", version="7"),
        bad("wrong_datatype", datatype="FP64", value=np.float64([[1.0]])),
        bad("unknown_input", name="nope"),
        bad("unknown_output", outputs=["nope"]),
        bad("unknown_signature", parameters={"signature_name": "nope"}),
        {"id": "metadata_unknown_model", "call": "ready", "model": "no_such_model"},
        {"id": "metadata_unknown_version", "call": "ready", "model": "half_plus_two", "version": "9"},
    ]
    plan = {
        "http": f"127.0.0.1:{rest_port}",
        "grpc": server.address,
        "ready_model": "half_plus_two",
        "ready_version": "123",
        "metadata_models": ["dtypes", "half_plus_two"],
        "cases": cases,
        "errors": errors,
    }
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    return plan, expected


def drive(tmp_path: Path) -> tuple[dict, dict]:
    """What tritonclient and KServe's client got (one process each), merged."""
    results: dict = {"cases": {}, "versions": {}, "errors": {}}
    arrays: dict = {}
    for family in ("triton", "kserve"):
        out = tmp_path / f"out_{family}"
        out.mkdir()
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        result = subprocess.run(
            [str(clients_python()), str(DRIVER), family, str(tmp_path / "plan.json"), str(out)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, f"{family}: {result.stderr[-6000:]}"
        got = json.loads((out / "results.json").read_text())
        for key in ("cases", "versions", "errors"):
            for case_id, by_client in got.pop(key).items():
                results[key].setdefault(case_id, {}).update(by_client)
        results.update(got)
        with np.load(out / "outputs.npz", allow_pickle=True) as saved:
            arrays.update(saved)
    return results, arrays


def same_values(got: np.ndarray, want: np.ndarray, where: str) -> None:
    if want.dtype == object:
        assert [bytes(v) for v in got.reshape(-1)] == list(want.reshape(-1)), where
        assert got.shape == want.shape, where
        return
    if want.dtype.name == "bfloat16":
        want = want.astype(np.float32)
    assert got.shape == want.shape, where
    assert got.dtype == want.dtype, where
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, err_msg=where)
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


def test_third_party_clients_get_tensorflows_outputs_and_tf_servings_errors(served, tmp_path):
    server, rest_port, manifest = served
    plan, expected = write_plan(tmp_path, server, rest_port, manifest)
    results, arrays = drive(tmp_path)

    for kind in ("http", "grpc"):
        health = results[kind]
        assert (health["live"], health["ready"], health["model_ready"], health["version_ready"]) == (
            True,
        ) * 4
        assert health["server_metadata"]["name"] == "savedmodel-server"
        assert "binary_tensor_data" in health["server_metadata"]["extensions"]
        half = health["model_metadata"]["half_plus_two"]
        assert half["versions"] == ["123"] and half["platform"] == "tensorflow_savedmodel"
        shape = [int(d) for d in half["inputs"][0]["shape"]]
        assert (half["inputs"][0]["name"], half["inputs"][0]["datatype"], shape) == ("x", "FP32", [-1, 1])
        dtypes_meta = health["model_metadata"]["dtypes"]
        assert {t["name"]: t["datatype"] for t in dtypes_meta["inputs"]} == DATATYPES
        assert {t["name"]: t["datatype"] for t in dtypes_meta["outputs"]} == {
            f"{k}_out": v for k, v in DATATYPES.items()
        }
        assert all([int(d) for d in t["shape"]] == [-1, 2] for t in dtypes_meta["inputs"])
    assert results["kserve"] | {"version": ""} == {
        "rest_live": True, "rest_ready": True, "rest_model_ready": True, "rest_unknown_ready": False,
        "grpc_live": True, "grpc_ready": True, "grpc_model_ready": True, "version": "",
    }  # fmt: skip

    compared = 0
    for case_id, want in expected.items():
        by_client = results["cases"][case_id]
        bf16 = case_id == "all_dtypes"
        # BF16 has no JSON form, and KServe's client makes no BF16 tensor from numpy
        assert set(by_client) == ({"triton_http_binary", "triton_grpc"} if bf16 else CLIENTS), case_id
        for client, described in by_client.items():
            names = [name for name, _, _ in described]
            asked = next(c["outputs"] for c in plan["cases"] if c["id"] == case_id)
            assert names == (asked if asked is not None else sorted(want)), (case_id, client)
            for name, datatype, shape in described:
                where = f"{client} {case_id} {name}"
                assert [int(d) for d in shape] == list(want[name].shape), where
                same_values(arrays[f"{client}/{case_id}/{name}"], want[name], where)
                if case_id == "all_dtypes":
                    assert datatype == DATATYPES[name.removesuffix("_out")], where
                compared += 1
        versions = {c: v for c, v in results["versions"][case_id].items() if not c.startswith("kserve_rest")}
        assert set(versions.values()) == {"123" if case_id == "half" else "1"}, versions  # (KServe's REST
        # client reads no model_version from an answer; tritonclient's HTTP client shows the one sent)
    assert compared == 2 * 14 + 6 * 2 + 6 * 1  # every client, case and output

    errors = results["errors"]
    expected_codes = {
        "unknown_model": ("404", "NOT_FOUND", "Servable not found for request: Latest(no_such_model)"),
        "unknown_version": ("404", "NOT_FOUND", "Servable not found for request: Specific(half_plus_two, 7)"),
        "wrong_datatype": ("400", "INVALID_ARGUMENT", "Expects arg[0] to be float but double is provided"),
        "unknown_input": (
            "400",
            "INVALID_ARGUMENT",
            "Signature input alias: x(feed name: x:0) not found in request",
        ),
        "unknown_output": ("400", "INVALID_ARGUMENT", "output tensor alias not found in signature: nope"),
        "unknown_signature": ("400", "FAILED_PRECONDITION", 'Serving signature key "nope" not found.'),
        "metadata_unknown_model": (
            "404",
            "NOT_FOUND",
            "Servable not found for request: Latest(no_such_model)",
        ),
        "metadata_unknown_version": (
            "404",
            "NOT_FOUND",
            "Servable not found for request: Specific(half_plus_two, 9)",
        ),
    }
    for case_id, (http_status, grpc_code, text) in expected_codes.items():
        got = errors[case_id]
        assert got["http"]["status"] == http_status, (case_id, got)
        assert got["grpc"]["status"] == f"StatusCode.{grpc_code}", (case_id, got)
        for kind in ("http", "grpc"):
            assert got[kind]["message"].startswith(text), (case_id, kind, got)

    metrics = http_get(rest_port, "/monitoring/prometheus/metrics")[1].decode()
    infer_lines = [
        line
        for line in metrics.splitlines()
        if 'API="ModelInfer"' in line and "request_latency_count" in line
    ]
    assert any('model_name="dtypes"' in line and 'entrypoint="GRPC"' in line for line in infer_lines), (
        infer_lines
    )
    assert any(
        'model_name="half_plus_two"' in line and 'entrypoint="REST"' in line for line in infer_lines
    ), infer_lines
    assert server.stop() == 0


def http_get(port: int, path: str, method: str = "GET", body: bytes | None = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request(method, path, body=body)
    response = connection.getresponse()
    return response.status, response.read()


def test_the_flag_turns_the_protocol_off_on_both_ports(model_server, model_dir):
    rest_port = free_port()
    server = model_server(
        f"--model_base_path={model_dir('half_plus_two')}",
        "--model_name=half_plus_two",
        f"--rest_api_port={rest_port}",
        "--enable_open_inference_protocol=false",
    )
    for path in ("/v2/health/live", "/v2/models/half_plus_two", "/v2"):
        assert http_get(rest_port, path) == (404, NOT_FOUND_PAGE), path  # as any path off /v1
    assert http_get(rest_port, "/v1/models/half_plus_two")[0] == 200
    stub = v2_grpc.GRPCInferenceServiceStub(server.channel())
    with pytest.raises(grpc.RpcError) as caught:
        stub.ServerLive(v2.ServerLiveRequest(), timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert server.stop() == 0


def test_raw_http_answers_and_errors(served):
    """What the clients do not show: the JSON error body, health codes, the binary extension's
    headers, a body that lies about its JSON length, and a version that is no number."""
    server, rest_port, _ = served
    assert http_get(rest_port, "/v2/health/live") == (200, b'{"live":true}')
    assert http_get(rest_port, "/v2/health/ready") == (200, b'{"ready":true}')
    status, body = http_get(rest_port, "/v2/models/no_such_model/ready")
    assert (status, set(json.loads(body))) == (404, {"error"})
    request = {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [[3.0]]}]}
    status, body = http_get(rest_port, "/v2/models/half_plus_two/infer", "POST", json.dumps(request).encode())
    assert (status, json.loads(body)["outputs"][0]["data"]) == (200, [3.5])
    status, body = http_get(
        rest_port, "/v2/models/half_plus_two/versions/abc/infer", "POST", json.dumps(request).encode()
    )
    assert status == 404 and "Specific(half_plus_two, abc)" in json.loads(body)["error"]
    for broken in (b"{", b"[]", b'{"inputs": 3}', b'{"inputs": [{"name": "x"}]}'):
        status, body = http_get(rest_port, "/v2/models/half_plus_two/infer", "POST", broken)
        assert status == 400 and set(json.loads(body)) == {"error"}, broken
    connection = http.client.HTTPConnection("127.0.0.1", rest_port, timeout=30)
    header = json.dumps(
        {
            "inputs": [
                {"name": "x", "shape": [2, 1], "datatype": "FP32", "parameters": {"binary_data_size": 8}}
            ],
            "outputs": [{"name": "y", "parameters": {"binary_data": True}}],
        }  # fmt: skip
    ).encode()
    for length, status_wanted in ((len(header), 200), (len(header) + 100, 400), (len(header) - 1, 400)):
        connection.request(
            "POST",
            "/v2/models/half_plus_two/infer",
            body=header + np.float32([1, 2]).tobytes(),
            headers={"Inference-Header-Content-Length": str(length)},
        )
        response = connection.getresponse()
        data = response.read()
        assert response.status == status_wanted, (length, data)
    connection.request(
        "POST", "/v2/models/half_plus_two/infer", body=header + np.float32([1, 2]).tobytes(),
        headers={"Inference-Header-Content-Length": str(len(header))},
    )  # fmt: skip
    response = connection.getresponse()
    data = response.read()
    json_length = int(response.getheader("Inference-Header-Content-Length"))
    assert response.getheader("Content-Type") == "application/octet-stream"
    answer = json.loads(data[:json_length])
    assert answer["outputs"][0]["parameters"] == {"binary_data_size": 8}
    assert np.frombuffer(data[json_length:], np.float32).tolist() == [2.5, 3.0]


def test_v2_requests_are_batched_and_logged_as_predicts_are(model_server, tmp_path):
    """One request path: with --enable_batching, concurrent ModelInfer calls run several to a
    batch with TensorFlow's answers and the batch limit's refusal; with the request log on, each
    answered ModelInfer is a PredictLog (which warmup replays)."""
    from concurrent import futures

    from apis.tensorflow_serving.apis import prediction_log_pb2
    from serving.observability import tfrecord
    from tests.e2e.test_batching_server import mlp_case, write_config

    _, case, features, key, expected = mlp_case()
    config, batching = write_config(tmp_path)
    log_dir = tmp_path / "requests"
    server = model_server(
        f"--model_config_file={config}",
        "--enable_batching",
        f"--batching_parameters_file={batching}",
        f"--request_log_dir={log_dir}",
        "--request_log_sampling_rate=1",
    )
    stub = v2_grpc.GRPCInferenceServiceStub(server.channel())

    def infer(rows: np.ndarray) -> np.ndarray:
        request = v2.ModelInferRequest(model_name="mlp")
        request.inputs.add(name="features", datatype="FP32", shape=list(rows.shape))
        request.raw_input_contents.append(np.ascontiguousarray(rows, np.float32).tobytes())
        response = stub.ModelInfer(request, timeout=30)
        (output,) = response.outputs
        assert output.name == key
        return np.frombuffer(response.raw_output_contents[0], np.float32).reshape(tuple(output.shape))

    rows = list(range(len(features))) * 6
    with futures.ThreadPoolExecutor(16) as pool:
        got = list(pool.map(lambda i: infer(features[i : i + 1]), rows))
    for i, value in zip(rows, got, strict=True):
        np.testing.assert_allclose(value, expected[i : i + 1], rtol=case["rtol"], atol=case["atol"])
    with pytest.raises(grpc.RpcError) as raised:
        infer(np.concatenate([features, features[:1]]))
    assert (raised.value.code(), raised.value.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "Task size 9 is larger than maximum input batch size 8",
    )
    assert server.stop() == 0
    tasks, batches, refused = queue_summary(server.output())
    assert (tasks, refused) == (len(rows), 1) and batches < tasks / 2
    (log,) = sorted(log_dir.iterdir())
    with open(log, "rb") as f:
        records = [
            prediction_log_pb2.PredictionLog.FromString(r)
            for r in tfrecord.read_records(f, log.stat().st_size)
        ]
    assert len(records) == len(rows) and {r.WhichOneof("log_type") for r in records} == {"predict_log"}
    assert {r.log_metadata.model_spec.name for r in records} == {"mlp"}
    assert {r.predict_log.response.model_spec.version.value for r in records} == {1}
    assert all(list(r.predict_log.request.inputs) == ["features"] for r in records)
