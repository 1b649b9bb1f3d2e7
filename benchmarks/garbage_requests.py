"""Resident memory of ``model_server`` over 100,000 requests that do not parse, next to a bare
grpcio server that lets grpc deserialize (the reference that leaks), in the same run.

    .venv/bin/python benchmarks/garbage_requests.py [--requests 100000]

The garbage is tests/e2e/test_garbage_requests.py's: seeded random bytes, truncated and
bit-flipped real requests, spread over every unary method model_server offers (the bare server
has Predict only). Prints RSS before, every 20,000 requests, and after, per server. A benchmark,
not a test: it asserts nothing (the test asserts flatness over 12,000 requests).
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time
from concurrent import futures
from pathlib import Path

import grpc
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from apis.tensorflow_serving.apis import predict_pb2  # noqa: E402
from runtime.tensor_util import make_tensor_proto  # noqa: E402
from tests.e2e.conftest import free_port, server_command  # noqa: E402
from tests.e2e.test_garbage_requests import METHODS, rss_mb, send  # noqa: E402

STEP = 20_000


def good_request() -> bytes:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "half_plus_two"
    request.inputs["x"].CopyFrom(make_tensor_proto(np.float32([[1.0], [2.0]])))
    return request.SerializeToString()


def drive(name: str, pid: int, channel, methods, total: int) -> None:
    rng, good = random.Random(17), good_request()
    start = rss_mb(pid)
    print(f"{name}: RSS {start:.1f} MB before", flush=True)
    done, began = 0, time.monotonic()
    while done < total:
        codes = send(channel, methods, rng, good, min(STEP, total - done))
        done += min(STEP, total - done)
        print(f"{name}: {done:>7} requests  RSS {rss_mb(pid):7.1f} MB  {codes}", flush=True)
    end = rss_mb(pid)
    print(
        f"{name}: RSS {start:.1f} -> {end:.1f} MB (+{end - start:.1f}) in {time.monotonic() - began:.0f} s\n"
    )


def bare_server_main(port: int) -> None:
    """A grpcio server whose Predict has grpc deserialize the request (the leaking setup)."""
    handler = grpc.unary_unary_rpc_method_handler(
        lambda request, context: b"", request_deserializer=predict_pb2.PredictRequest.FromString
    )
    server = grpc.server(futures.ThreadPoolExecutor(8))
    generic = grpc.method_handlers_generic_handler(
        "tensorflow.serving.PredictionService", {"Predict": handler}
    )
    server.add_generic_rpc_handlers((generic,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    server.wait_for_termination()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--bare-server", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_server:
        bare_server_main(args.bare_server)
        return
    ours_port, bare_port = free_port(), free_port()
    ours = subprocess.Popen(
        [
            *server_command(),
            f"--port={ours_port}",
            "--grpc_bind_address=127.0.0.1",
            "--model_name=half_plus_two",
            f"--model_base_path={REPO / 'models' / 'half_plus_two'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    bare = subprocess.Popen([sys.executable, __file__, f"--bare-server={bare_port}"])
    try:
        for name, proc, port, methods in (
            ("model_server", ours, ours_port, METHODS),
            ("bare grpcio (grpc deserializes)", bare, bare_port, METHODS[:1]),
        ):
            channel = grpc.insecure_channel(f"127.0.0.1:{port}")
            grpc.channel_ready_future(channel).result(timeout=120)
            time.sleep(1.0)
            drive(name, proc.pid, channel, methods, args.requests)
            channel.close()
    finally:
        for proc in (ours, bare):
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
