"""Predict QPS of ``model_server --num_workers 1`` against ``--num_workers 2``, in the same run.

    .venv/bin/python benchmarks/workers.py [--duration 6] [--rounds 3] [--concurrency 32]
        [--models tiny,mlp] [--client-procs 2] [--connections 16]

Starts two servers on loopback, each serving ``models/half_plus_two`` ("tiny") and
``models/keras_mlp`` ("mlp") from one model config: one with ``--num_workers=1`` (one process)
and one with ``--num_workers=2`` (a supervisor and two workers sharing the port). Closed-loop
clients (grpc.aio in ``--client-procs`` processes) keep ``concurrency`` requests in flight over
``--connections`` TCP connections in all (SO_REUSEPORT spreads connections, not requests, over
the workers), in rounds alternating between the two servers so that drift in the machine's load
hits both alike. The table gives, per model and server, the median QPS over rounds, p50 and p99,
and the server's CPU time per answered request (supervisor and workers together, from /proc),
then the ratio of the two servers' QPS. The clients run on the same machine: on a machine with
few cores they take CPU the workers would use, so the QPS ratio is a floor of what a second core
gives; CPU per request says what a request costs whatever the machine. A benchmark, not a test:
it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np

BENCHMARKS = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS))
sys.path.insert(0, str(BENCHMARKS.parent))

import predict_qps  # noqa: E402 - the models, requests and /proc readings of the Predict benchmark

from apis.tensorflow_serving.apis import prediction_service_pb2_grpc  # noqa: E402

CHANNEL_OPTIONS = [*predict_qps.GRPC_OPTIONS, ("grpc.use_local_subchannel_pool", 1)]


def start_server(work: Path, models: list[str], workers: int) -> tuple[subprocess.Popen, int, Path]:
    config = predict_qps.write_model_config(work, models)
    port = predict_qps.free_port()
    command = predict_qps.model_server_command()
    args = [f"--port={port}", "--grpc_bind_address=127.0.0.1", f"--model_config_file={config}"]
    args += [f"--num_workers={workers}", "--lame_duck_seconds=0"]
    log_path = work / f"model_server_{workers}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - lives as long as the process
    env = dict(os.environ, PYTHONPATH=str(BENCHMARKS.parent))
    proc = subprocess.Popen([*command, *args], stdout=log, stderr=subprocess.STDOUT, env=env)
    return proc, port, log_path


def wait_all_workers(proc: subprocess.Popen, log: Path, workers: int, timeout: float = 180) -> None:
    """Until every worker serves (the supervisor says so); a single server is ready at once."""
    if workers == 1:
        return
    deadline = time.monotonic() + timeout
    while f"All {workers} workers are serving" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"server with {workers} workers not ready:\n{log.read_text(errors='replace')}")
        time.sleep(0.2)


def tree_pids(pid: int) -> list[int]:
    """``pid`` and its children (the workers of a supervisor)."""
    pids = [pid]
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                pids.append(int(name))
    return pids


def tree_cpu_seconds(pid: int) -> float:
    return sum(predict_qps.cpu_seconds(p) or 0.0 for p in tree_pids(pid))


async def _closed_loop(
    port: int, model: str, concurrency: int, connections: int, warmup: float, duration: float
):
    """Latencies after the warmup and the count answered in all, over ``connections`` channels."""
    request = predict_qps.make_request(model)
    latencies: list[float] = []
    answered = [0]
    channels = [
        grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS) for _ in range(connections)
    ]
    stubs = [prediction_service_pb2_grpc.PredictionServiceStub(c) for c in channels]
    start = time.perf_counter()
    measure_from, stop_at = start + warmup, start + warmup + duration

    async def client(stub):
        while True:
            t0 = time.perf_counter()
            if t0 >= stop_at:
                return
            await stub.Predict(request, timeout=30)
            answered[0] += 1
            if t0 >= measure_from:
                latencies.append(time.perf_counter() - t0)

    await asyncio.gather(*(client(stubs[i % len(stubs)]) for i in range(concurrency)))
    for channel in channels:
        await channel.close()
    return latencies, answered[0]


def _client(args) -> tuple[list[float], int]:
    return asyncio.run(_closed_loop(*args))


def measure(args, pool, port: int, pid: int, model: str) -> tuple[float, list[float], float]:
    """(QPS, latencies, server CPU us per request) of one round against one server."""
    procs = max(1, min(args.client_procs, args.concurrency))
    shares = [args.concurrency // procs + (i < args.concurrency % procs) for i in range(procs)]
    links = [max(1, args.connections // procs)] * procs
    duration = args.duration / args.rounds
    before = tree_cpu_seconds(pid)
    results = pool.map(
        _client, [(port, model, share, link, args.warmup, duration) for share, link in zip(shares, links)]
    )
    cpu = tree_cpu_seconds(pid) - before
    latencies = [x for r, _ in results for x in r]
    answered = sum(n for _, n in results)
    return len(latencies) / duration, latencies, cpu / answered * 1e6 if answered else float("nan")


def run(args, models: list[str], servers: dict[int, tuple[int, int]]) -> None:
    print(
        f"Predict over gRPC, {args.duration:.0f}s per model and server in {args.rounds} alternating rounds, "
        f"concurrency {args.concurrency} over {args.connections} connections, {args.client_procs} client "
        f"process(es), {os.cpu_count()} CPUs (clients and servers share them)"
    )
    header = f"{'model':6} {'workers':>7} | {'QPS':>7} {'p50 ms':>7} {'p99 ms':>7} {'CPU us/req':>10}"
    print(header)
    print("-" * len(header))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(args.client_procs) as pool:
        for model in models:
            qps = {n: [] for n in servers}
            latencies = {n: [] for n in servers}
            cpu = {n: [] for n in servers}
            for _ in range(args.rounds):
                for n, (port, pid) in servers.items():
                    q, lat, c = measure(args, pool, port, pid, model)
                    qps[n].append(q)
                    latencies[n].extend(lat)
                    cpu[n].append(c)
            for n in servers:
                lat_ms = np.array(latencies[n] or [np.nan]) * 1e3
                print(
                    f"{model:6} {n:>7} | {np.median(qps[n]):>7.0f} {np.percentile(lat_ms, 50):>7.2f} "
                    f"{np.percentile(lat_ms, 99):>7.2f} {np.median(cpu[n]):>10.0f}",
                    flush=True,
                )
            one, two = (np.median(qps[n]) for n in sorted(servers))
            print(f"{model:6} {'2 / 1':>7} | {two / one:>7.2f}x QPS", flush=True)
    print("CPU us/req: the server's CPU time (supervisor and workers) per answered request")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=6.0, help="seconds per model and server")
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--connections", type=int, default=16, help="TCP connections in all")
    parser.add_argument("--client-procs", type=int, default=2)
    parser.add_argument("--models", default="tiny,mlp")
    args = parser.parse_args(argv)
    models = args.models.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        started: dict[int, tuple[subprocess.Popen, int, Path]] = {}
        try:
            for workers in (1, 2):
                (work / str(workers)).mkdir()
                started[workers] = start_server(work / str(workers), models, workers)
            for workers, (proc, port, log) in started.items():
                predict_qps.wait_for_predict(port, models, proc, log)
                wait_all_workers(proc, log, workers)
            run(args, models, {n: (port, proc.pid) for n, (proc, port, _) in started.items()})
        finally:
            for proc, _, _ in started.values():
                predict_qps.stop(proc)


if __name__ == "__main__":
    main()
