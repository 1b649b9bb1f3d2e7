"""SIGTERM under load: every call received is answered, none ends CANCELLED.

Sixteen closed-loop clients send Predict as fast as they are answered; a client answered
UNAVAILABLE backs off (50 ms doubling to 1 s, jittered), as gRPC retry policies do. Each call is
classified by when it was sent against the signal: those sent before it must all be answered OK
(nothing lost); those sent after it are answered OK (lame duck) or UNAVAILABLE (refused,
retryable); no call anywhere ends CANCELLED. Five rounds, one server each.
"""

from __future__ import annotations

import random
import signal
import threading
import time

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from apis.tensorflow_serving.apis import predict_pb2
from runtime.tensor_util import make_tensor_proto

CLIENTS, ROUNDS, LAME_DUCK = 16, 5, 1.0
PREDICT = "/tensorflow.serving.PredictionService/Predict"


def predict_bytes() -> bytes:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "half_plus_two"
    request.inputs["x"].CopyFrom(make_tensor_proto(np.float32([[1.0]])))
    return request.SerializeToString()


class Load:
    """``CLIENTS`` threads, each on its own channel, recording (sent, code) per call."""

    def __init__(self, address: str) -> None:
        self.records: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._client, args=(address, i)) for i in range(CLIENTS)]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _client(self, address: str, seed: int) -> None:
        rng, data, backoff = random.Random(seed), predict_bytes(), 0.0
        channel = grpc.insecure_channel(address)
        call = channel.unary_unary(PREDICT)
        while not self._stop.is_set():
            sent = time.monotonic()
            try:
                call(data, timeout=10)
                code = "OK"
            except grpc.RpcError as e:
                code = e.code().name
            self.records.append((sent, code))
            backoff = 0.0 if code == "OK" else min(backoff * 2, 1.0) or 0.05
            time.sleep(backoff * rng.uniform(0.8, 1.2))
        channel.close()


def count(records) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, code in records:
        counts[code] = counts.get(code, 0) + 1
    return counts


def test_sigterm_under_load_loses_nothing_and_cancels_nothing(model_server, model_dir):
    base = model_dir("half_plus_two")
    totals = {"before": {}, "after": {}}
    for _ in range(ROUNDS):
        server = model_server(
            f"--model_base_path={base}", "--model_name=half_plus_two", f"--lame_duck_seconds={LAME_DUCK}"
        )
        health = health_pb2_grpc.HealthStub(server.channel())
        with Load(server.address) as load:
            time.sleep(1.0)
            signalled = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            # The lame duck: health says NOT_SERVING while Predict is still answered.
            status = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status
            assert status == health_pb2.HealthCheckResponse.NOT_SERVING
            assert server.channel().unary_unary(PREDICT)(predict_bytes(), timeout=5)
            assert server.wait_exit(timeout=30) == 0
            time.sleep(0.2)
        before = count(r for r in load.records if r[0] < signalled)
        after = count(r for r in load.records if r[0] >= signalled)
        print(f"sent before SIGTERM: {before}; after: {after}")
        assert set(before) == {"OK"}, before  # nothing lost
        assert set(after) <= {"OK", "UNAVAILABLE"}, after  # refused retryably, never CANCELLED
        assert after.get("UNAVAILABLE", 0) > 0, after  # the refusal phase answered the late ones
        for phase, counts in (("before", before), ("after", after)):
            for code, n in counts.items():
                totals[phase][code] = totals[phase].get(code, 0) + n
    print(f"{ROUNDS} rounds: {totals}")
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
