"""The first live request after a load, with and without a warmup file, against the steady state.

    .venv/bin/python benchmarks/warmup_first_request.py [--rounds 3] [--model keras_mlp]

For each round, two fresh ``model_server`` processes serve a copy of ``models/<model>``: one
without ``assets.extra/tf_serving_warmup_requests``, one whose warmup file holds the request
below. Each gets a health check (connection and thread set-up), then the same Predict request 101 times,
then one more after ``IDLE_SECONDS`` of quiet ("after idle"). The table gives the first request's
latency, the median of requests 2-101 ("steady"), the request after idle, and the ratios, each the
median over rounds. Back to back, a request finds the server's threads awake; the first live
request, like any request after a pause, wakes them, so "after idle" is the fair reference for a
warmed-up model's first request. A benchmark, not a test: it asserts nothing. Aim: with warmup,
first / after idle about 1 (first / steady is printed too).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e.conftest import free_port, server_command  # noqa: E402
from tests.e2e.test_warmup import predict_log, predict_request, write_warmup  # noqa: E402

IDLE_SECONDS = 0.5


def measure(model: str, warm: bool) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as work:
        base = Path(work) / model
        shutil.copytree(REPO / "models" / model, base, ignore=shutil.ignore_patterns("*.py"))
        if warm:
            for version in base.iterdir():
                write_warmup(version, [predict_log()])
        port = free_port()
        proc = subprocess.Popen(
            [
                *server_command(),
                f"--port={port}",
                "--grpc_bind_address=127.0.0.1",
                f"--model_name={model}",
                f"--model_base_path={base}",
                "--lame_duck_seconds=0",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            channel = grpc.insecure_channel(f"127.0.0.1:{port}")
            grpc.channel_ready_future(channel).result(timeout=120)
            call = channel.unary_unary("/tensorflow.serving.PredictionService/Predict")
            data = predict_request().SerializeToString()
            # The connection and a server thread are set up by a call that is not Predict, so
            # the first Predict measures the model's state only.
            channel.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=30)
            times = []
            for _ in range(101):
                start = time.perf_counter()
                call(data, timeout=30)
                times.append(time.perf_counter() - start)
            time.sleep(IDLE_SECONDS)
            start = time.perf_counter()
            call(data, timeout=30)
            after_idle = time.perf_counter() - start
            channel.close()
        finally:
            proc.terminate()
            proc.wait()
    return times[0], statistics.median(times[1:]), after_idle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", default="keras_mlp")
    args = parser.parse_args()
    results = {False: [], True: []}
    for _ in range(args.rounds):
        for warm in (False, True):
            results[warm].append(measure(args.model, warm))
    print(f"{args.model}, {args.rounds} rounds (medians):")
    print(
        f"{'':>16} {'first ms':>9} {'steady ms':>10} {'after idle ms':>14} {'first/steady':>13} "
        f"{'first/after idle':>17}"
    )
    for warm in (False, True):
        first, steady, idle = (statistics.median(r[i] for r in results[warm]) * 1e3 for i in range(3))
        to_steady = statistics.median(r[0] / r[1] for r in results[warm])
        to_idle = statistics.median(r[0] / r[2] for r in results[warm])
        print(
            f"{'with warmup' if warm else 'without warmup':>16} {first:9.3f} {steady:10.3f} {idle:14.3f} "
            f"{to_steady:13.2f} {to_idle:17.2f}"
        )


if __name__ == "__main__":
    main()
