"""What TLS, bearer tokens, the access log and tracing each cost per gRPC Predict, against the
plain server, in one run.

    .venv/bin/python benchmarks/security_overhead.py [--duration 6] [--rounds 3] [--concurrency 8]

Starts five ``model_server`` processes serving ``models/half_plus_two`` (the model costs almost
nothing, so what is measured is the server's own work): plain; ``--ssl_config_file`` (TLS, the
client with the CA); ``--auth_token_file`` (the client sending its bearer token); ``--access_log``
to a file; and tracing on (``OTEL_TRACES_EXPORTER=otlp`` to a receiver in this process that
drops what it gets). Closed-loop clients keep ``--concurrency`` calls in flight against one
server at a time, servers alternating round by round so that drift hits all alike. The table
gives median QPS over rounds, p50, the server's CPU time per request, and each feature's QPS and
CPU against the plain server's. A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent import futures
from pathlib import Path

import grpc
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import predict_qps as grpc_bench  # noqa: E402

from apis.tensorflow_serving.apis import prediction_service_pb2_grpc  # noqa: E402
from tests.e2e.certificates import Authority, ssl_config_text  # noqa: E402

TOKEN = "benchmark-token-0123456789"
VARIANTS = ("plain", "tls", "auth", "access_log", "tracing")


def start_receiver() -> tuple[grpc.Server, int]:
    """An OTLP TraceService that drops what it receives."""
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    class Sink(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):  # noqa: N802
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Sink(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def start(work: Path, variant: str, threads: int, receiver_port: int, ca: Authority):
    config = grpc_bench.write_model_config(work, ["tiny"])
    port = grpc_bench.free_port()
    args = [f"--port={port}", "--grpc_bind_address=127.0.0.1", f"--model_config_file={config}",
            f"--grpc_max_threads={threads}"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(grpc_bench.REPO))
    if variant == "tls":
        cert, key, _ = ca.issue("server", server=True)
        (work / "ssl.config").write_text(ssl_config_text(cert, key))
        args.append(f"--ssl_config_file={work / 'ssl.config'}")
    elif variant == "auth":
        (work / "tokens").write_text(f"other-token\n{TOKEN} tiny\n")
        args.append(f"--auth_token_file={work / 'tokens'}")
    elif variant == "access_log":
        args.append(f"--access_log={work / 'access.log'}")
    elif variant == "tracing":
        env.update(
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{receiver_port}",
            OTEL_SERVICE_NAME="benchmark",
        )
    log = open(work / "model_server.log", "wb")  # noqa: SIM115 - lives as long as the process
    proc = subprocess.Popen([*grpc_bench.model_server_command(), *args], stdout=log, stderr=subprocess.STDOUT,
                            cwd=grpc_bench.REPO, env=env)  # fmt: skip
    return proc, port


def channel_for(variant: str, port: int, ca: Authority):
    options = [*grpc_bench.GRPC_OPTIONS, ("grpc.ssl_target_name_override", "localhost")]
    if variant == "tls":
        credentials = grpc.ssl_channel_credentials(ca.cert_path.read_bytes())
        return grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials, options=options)
    return grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=grpc_bench.GRPC_OPTIONS)


async def closed_loop(variant, port, ca, concurrency, warmup, duration):
    request = grpc_bench.make_request("tiny")
    metadata = (("authorization", f"Bearer {TOKEN}"),) if variant == "auth" else None
    latencies: list[float] = []
    answered = [0]
    async with channel_for(variant, port, ca) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        await stub.Predict(request, timeout=60, metadata=metadata, wait_for_ready=True)
        start = time.perf_counter()
        measure_from, stop_at = start + warmup, start + warmup + duration

        async def worker():
            while True:
                t0 = time.perf_counter()
                if t0 >= stop_at:
                    return
                await stub.Predict(request, timeout=30, metadata=metadata)
                t1 = time.perf_counter()
                answered[0] += 1
                if t0 >= measure_from:
                    latencies.append(t1 - t0)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, answered[0]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=6.0, help="seconds per variant and round")
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--server-cpus", default="auto", help="as in predict_qps.py")
    parser.add_argument("--server-threads", type=int, default=4 * (os.cpu_count() or 1))
    args = parser.parse_args(argv)
    cpus = grpc_bench.server_cpus(args.server_cpus)
    if cpus:
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)) - cpus or cpus)
    receiver, receiver_port = start_receiver()
    with tempfile.TemporaryDirectory() as tmp:
        ca = Authority(Path(tmp), "ca")
        servers = {}
        try:
            for variant in VARIANTS:
                work = Path(tmp) / variant
                work.mkdir()
                proc, port = start(work, variant, args.server_threads, receiver_port, ca)
                grpc_bench.pin(proc, cpus)
                servers[variant] = (proc, port)
            samples = {v: ([], [], []) for v in VARIANTS}
            for r in range(args.rounds):
                order = VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS))
                for variant in order:
                    proc, port = servers[variant]
                    before = grpc_bench.cpu_seconds(proc.pid)
                    latencies, answered = asyncio.run(
                        closed_loop(variant, port, ca, args.concurrency, args.warmup, args.duration)
                    )
                    after = grpc_bench.cpu_seconds(proc.pid)
                    qps, lat, cpu = samples[variant]
                    qps.append(len(latencies) / args.duration)
                    lat.extend(latencies)
                    if before is not None and after is not None and answered:
                        cpu.append((after - before) / answered * 1e6)
        finally:
            for proc, _ in servers.values():
                grpc_bench.stop(proc)
            receiver.stop(0)
    print(
        f"gRPC Predict (half_plus_two), concurrency {args.concurrency}, {args.rounds} alternating rounds of "
        f"{args.duration:.0f}s, {os.cpu_count()} CPUs, servers on CPUs {sorted(cpus) if cpus else 'all'}"
    )
    print(
        f"{'variant':12} {'QPS':>8} {'p50 ms':>7} {'CPU us/req':>11} {'QPS/plain':>10} {'CPU/plain':>10} {'+CPU us':>8}"
    )
    results = {}
    for variant, (qps, lat, cpu) in samples.items():
        results[variant] = (
            statistics.median(qps),
            float(np.percentile(np.array(lat) * 1e3, 50)),
            statistics.median(cpu),
        )
    plain = results["plain"]
    for variant, (qps, p50, cpu) in results.items():
        print(f"{variant:12} {qps:>8.0f} {p50:>7.2f} {cpu:>11.0f} {qps / plain[0]:>10.2f} {cpu / plain[2]:>10.2f} "
              f"{cpu - plain[2]:>8.0f}")  # fmt: skip
    print("tls: TLS on the gRPC port; auth: a bearer token checked per call; access_log: a JSON line per call to a "
          "file; tracing: spans exported over OTLP/gRPC")  # fmt: skip


if __name__ == "__main__":
    main()
