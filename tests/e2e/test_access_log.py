"""``--access_log``: one JSON line per request on both ports, checked field by field against
what concurrent clients sent and received; the request id taken from ``x-request-id`` or made,
and returned; ``--access_log_sampling_rate``; stderr."""

from __future__ import annotations

import http.client
import json
import threading
import uuid

import grpc
import numpy as np

from apis.inference import grpc_predict_v2_pb2 as v2
from apis.tensorflow_serving.apis import predict_pb2
from runtime.tensor_util import make_tensor_proto
from tests.e2e.conftest import free_port

PREDICT = "/tensorflow.serving.PredictionService/Predict"
MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"


def predict_bytes(model: str = "half_plus_two", signature: str = "") -> bytes:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    request.inputs["x"].CopyFrom(make_tensor_proto(np.float32([[1.0], [2.0]])))
    return request.SerializeToString()


def infer_bytes() -> bytes:
    request = v2.ModelInferRequest(model_name="half_plus_two")
    request.inputs.add(name="x", datatype="FP32", shape=[1, 1])
    request.raw_input_contents.append(np.float32([[3.0]]).tobytes())
    return request.SerializeToString()


def start(model_server, model_dir, *flags):
    rest_port = free_port()
    server = model_server(
        f"--model_base_path={model_dir('half_plus_two')}", "--model_name=half_plus_two",
        f"--rest_api_port={rest_port}", *flags,
    )  # fmt: skip
    return server, rest_port


class Sent:
    """What the clients sent and got: per call, the fields its log line must have."""

    def __init__(self):
        self.calls: list[dict] = []
        self._lock = threading.Lock()

    def add(self, **call):
        with self._lock:
            self.calls.append(call)


def grpc_client(address: str, sent: Sent, index: int, rounds: int) -> None:
    with grpc.insecure_channel(address) as channel:
        cases = [
            (PREDICT, predict_bytes(), "OK", "half_plus_two", "serving_default"),
            (PREDICT, predict_bytes("nope"), "NOT_FOUND", "nope", ""),
            (PREDICT, predict_bytes(signature="nope"), "FAILED_PRECONDITION", "half_plus_two", "nope"),
            (MODEL_INFER, infer_bytes(), "OK", "half_plus_two", "serving_default"),
        ]
        for i in range(rounds):
            method, body, status, model, signature = cases[(index + i) % len(cases)]
            given = f"client-{index}-{i}" if i % 2 else None
            metadata = (("x-request-id", given),) if given else ()
            call = channel.unary_unary(method)
            try:
                answer, state = call.with_call(body, timeout=30, metadata=metadata)
                got_status, response_bytes = "OK", len(answer)
                initial = dict(state.trailing_metadata())
            except grpc.RpcError as e:
                got_status, response_bytes = e.code().name, 0
                initial = dict(e.trailing_metadata() or ())
            assert got_status == status
            returned = initial.get("x-request-id")
            assert returned and (given is None or returned == given)
            add = {
                "transport": "grpc",
                "method": method,
                "status": status,
                "model": model,
                "signature": signature,
            }
            sent.add(request_id=returned, request_bytes=len(body), response_bytes=response_bytes, **add)


def rest_client(port: int, sent: Sent, index: int, rounds: int) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    cases = [
        ("POST", "/v1/models/half_plus_two:predict", {"instances": [[1.0]]}, "200", "half_plus_two"),
        ("POST", "/v1/models/nope:predict", {"instances": [[1.0]]}, "404", "nope"),
        ("GET", "/v1/models/half_plus_two", None, "200", "half_plus_two"),
        ("POST", "/v2/models/half_plus_two/infer",
         {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}]}, "200", "half_plus_two"),
    ]  # fmt: skip
    for i in range(rounds):
        method, path, document, status, model = cases[(index + i) % len(cases)]
        body = json.dumps(document).encode() if document is not None else None
        given = str(uuid.uuid4()) if i % 2 else None
        connection.request(method, path, body, {"x-request-id": given} if given else {})
        response = connection.getresponse()
        data = response.read()
        assert str(response.status) == status, (path, response.status, data)
        returned = response.getheader("x-request-id")
        assert returned and (given is None or returned == given)
        sent.add(
            transport="rest", method=f"{method} {path}", status=status, model=model, request_id=returned,
            request_bytes=len(body or b""), response_bytes=len(data),
        )  # fmt: skip
    connection.close()


def read_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_request_is_one_line_with_what_the_client_saw(model_server, model_dir, tmp_path):
    log = tmp_path / "access.log"
    server, rest_port = start(model_server, model_dir, f"--access_log={log}")
    sent = Sent()
    threads = [threading.Thread(target=grpc_client, args=(server.address, sent, i, 40)) for i in range(6)]
    threads += [threading.Thread(target=rest_client, args=(rest_port, sent, i, 30)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert server.stop() == 0
    lines = [line for line in read_lines(log) if "Health" not in line["method"]]
    by_id = {line["request_id"]: line for line in lines}
    assert len(by_id) == len(lines) == len(sent.calls) == 6 * 40 + 4 * 30
    fields = {"time", "transport", "method", "model", "version", "signature", "status", "latency_ms",
              "request_bytes", "response_bytes", "peer", "request_id"}  # fmt: skip
    for call in sent.calls:
        line = by_id[call["request_id"]]
        assert set(line) == fields
        for key in ("transport", "method", "status", "model", "request_bytes", "response_bytes"):
            assert line[key] == call[key], (key, line, call)
        if call["transport"] == "grpc":
            assert line["signature"] == call["signature"], (line, call)
            assert line["peer"].startswith("ipv4:127.0.0.1:")
        else:
            assert line["peer"] == "127.0.0.1"
        inference = "GET" not in call["method"]
        served = call["status"] in ("OK", "200")
        assert line["version"] == (123 if served and inference else None), (line, call)
        assert 0 < line["latency_ms"] < 30_000
        assert line["time"].endswith("+00:00") and "T" in line["time"]


def test_sampling_and_stderr(model_server, model_dir, tmp_path):
    server, rest_port = start(
        model_server, model_dir, "--access_log=stderr", "--access_log_sampling_rate=0.5"
    )
    sent = Sent()
    rest_client(rest_port, sent, 0, 200)
    output = server.output()
    assert server.stop() == 0
    lines = [json.loads(line) for line in output.splitlines() if line.startswith('{"time"')]
    lines = [line for line in lines if line["transport"] == "rest"]  # (not the fixture's health checks)
    ids = {line["request_id"] for line in lines}
    assert ids <= {call["request_id"] for call in sent.calls}  # each answer had its id, logged or not
    assert 50 <= len(lines) <= 150, len(lines)


def test_an_access_log_that_cannot_be_opened_fails_the_start(model_server, model_dir, tmp_path):
    server = model_server(
        f"--model_base_path={model_dir('half_plus_two')}", "--model_name=half_plus_two",
        f"--access_log={tmp_path / 'no' / 'such' / 'dir.log'}", wait=False,
    )  # fmt: skip
    assert server.wait_exit(timeout=60) != 0
    assert "--access_log: cannot open" in server.output()
