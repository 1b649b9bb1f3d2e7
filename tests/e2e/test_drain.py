"""SIGTERM under load: every call received is answered, none ends CANCELLED.

Sixteen closed-loop gRPC clients (``grpc_load.PredictLoad``) and eight REST clients (keep-alive connections) send Predict as
fast as they are answered; a client refused backs off (50 ms doubling to 1 s, jittered), as gRPC
retry policies do. Each call is classified by when it was sent against the signal: those sent
before it must all be answered OK (nothing lost); those sent after it are answered OK (lame
duck) or refused in a way clients retry: UNAVAILABLE over gRPC; 503, or a connection refused
once the port is closed, over REST. No gRPC call ends CANCELLED, and no REST request that was
sent loses its connection before its answer. Five rounds, one server each; and two rounds of
the same with the Open Inference Protocol's ModelInfer on both ports (V2 requests take the same
path, so the same drain).
"""

from __future__ import annotations

import http.client
import json
import random
import signal
import threading
import time

import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from apis.inference import grpc_predict_v2_pb2 as v2
from apis.tensorflow_serving.apis import predict_pb2
from runtime.tensor_util import make_tensor_proto
from tests.e2e.grpc_load import PREDICT, Call, PredictLoad, count

CLIENTS, REST_CLIENTS, ROUNDS, LAME_DUCK = 16, 8, 5, 1.0
REST_BODY = json.dumps({"instances": [[1.0]]}).encode()
REST_PATH = "/v1/models/half_plus_two:predict"
MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"
V2_REST_BODY = json.dumps(
    {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}]}
).encode()
V2_REST_PATH = "/v2/models/half_plus_two/infer"


def predict_bytes() -> bytes:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "half_plus_two"
    request.inputs["x"].CopyFrom(make_tensor_proto(np.float32([[1.0]])))
    return request.SerializeToString()


class RestLoad:
    """``REST_CLIENTS`` threads of keep-alive POSTs, each recorded as a ``grpc_load.Call``
    whose code is the HTTP status, "refused" when no connection could be made (the port is
    closed), or "lost" when a request was sent and its connection died before the answer."""

    def __init__(self, port: int, path: str = REST_PATH, body: bytes = REST_BODY) -> None:
        self.path, self.body = path, body
        self.calls: list[Call] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._client, args=(port, i)) for i in range(REST_CLIENTS)]

    def __enter__(self) -> RestLoad:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _client(self, port: int, index: int) -> None:
        rng, backoff, connection = random.Random(index), 0.0, None
        while not self._stop.is_set():
            sent = time.monotonic()
            if connection is None:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                try:
                    connection.connect()
                except OSError:
                    connection, code = None, "refused"
            if connection is not None:
                try:
                    connection.request("POST", self.path, self.body)
                    response = connection.getresponse()
                    response.read()
                    code = str(response.status)
                    if response.getheader("Connection", "").lower() == "close":
                        connection.close()
                        connection = None
                except (OSError, http.client.HTTPException):
                    connection.close()
                    connection, code = None, "lost"
            self.calls.append(Call(index, sent, time.monotonic(), code))
            backoff = 0.0 if code == "200" else min(backoff * 2, 1.0) or 0.05
            time.sleep(backoff * rng.uniform(0.8, 1.2))
        if connection is not None:
            connection.close()


def model_infer_bytes() -> bytes:
    request = v2.ModelInferRequest(model_name="half_plus_two")
    request.inputs.add(name="x", datatype="FP32", shape=[1, 1])
    request.raw_input_contents.append(np.float32([[1.0]]).tobytes())
    return request.SerializeToString()


def test_sigterm_under_load_loses_nothing_and_cancels_nothing(model_server, model_dir, free_port):
    drain_under_load(
        model_server, model_dir, free_port, ROUNDS, PREDICT, predict_bytes(), REST_PATH, REST_BODY
    )


def test_sigterm_under_open_inference_load_loses_nothing_and_cancels_nothing(
    model_server, model_dir, free_port
):
    drain_under_load(
        model_server, model_dir, free_port, 2, MODEL_INFER, model_infer_bytes(), V2_REST_PATH, V2_REST_BODY
    )


def drain_under_load(model_server, model_dir, free_port, rounds, method, request, rest_path, rest_body):
    base = model_dir("half_plus_two")
    totals = {"before": {}, "after": {}, "rest before": {}, "rest after": {}}
    for _ in range(rounds):
        rest_port = free_port()
        server = model_server(
            f"--model_base_path={base}",
            "--model_name=half_plus_two",
            f"--lame_duck_seconds={LAME_DUCK}",
            f"--rest_api_port={rest_port}",
        )
        health = health_pb2_grpc.HealthStub(server.channel())
        with (
            PredictLoad(server.address, request, CLIENTS, method=method) as load,
            RestLoad(rest_port, rest_path, rest_body) as rest,
        ):
            time.sleep(1.0)
            signalled = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            # The lame duck: health says NOT_SERVING while Predict is still answered.
            status = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status
            assert status == health_pb2.HealthCheckResponse.NOT_SERVING
            assert server.channel().unary_unary(method)(request, timeout=5)
            assert server.wait_exit(timeout=30) == 0
            time.sleep(0.2)
        before = count(c for c in load.calls if c.sent < signalled)
        after = count(c for c in load.calls if c.sent >= signalled)
        rest_before = count(c for c in rest.calls if c.sent < signalled)
        rest_after = count(c for c in rest.calls if c.sent >= signalled)
        print(
            f"sent before SIGTERM: {before}; after: {after}; REST before: {rest_before}; after: {rest_after}"
        )
        assert set(before) == {"OK"}, before  # nothing lost
        assert set(after) <= {"OK", "UNAVAILABLE"}, after  # refused retryably, never CANCELLED
        assert after.get("UNAVAILABLE", 0) > 0, after  # the refusal phase answered the late ones
        assert set(rest_before) == {"200"}, rest_before
        assert set(rest_after) <= {"200", "503", "refused"}, rest_after  # never "lost"
        assert rest_after.get("503", 0) > 0, rest_after
        phases = (
            ("before", before),
            ("after", after),
            ("rest before", rest_before),
            ("rest after", rest_after),
        )
        for phase, counts in phases:
            for code, n in counts.items():
                totals[phase][code] = totals[phase].get(code, 0) + n
    print(f"{rounds} rounds: {totals}")
    log = server.output()
    assert "Lame duck" in log and "No longer accepting requests" in log


def test_sigint_skips_the_lame_duck(model_server, model_dir):
    server = model_server(
        f"--model_base_path={model_dir('half_plus_two')}",
        "--model_name=half_plus_two",
        "--lame_duck_seconds=60",
    )
    started = time.monotonic()
    assert server.stop(signal.SIGINT) == 0
    assert time.monotonic() - started < 30
    assert "Lame duck" not in server.output()
