"""REST Predict QPS and latency of ``model_server`` next to its own gRPC Predict, in one run.

    .venv/bin/python benchmarks/rest_qps.py [--duration 6] [--concurrency 1,32]
        [--models tiny,mlp] [--client-procs N] [--server-threads N] [--server-cpus auto]

Starts one ``model_server`` with ``--port`` and ``--rest_api_port`` serving
``models/half_plus_two`` ("tiny": y = 0.5x + 2) and ``models/keras_mlp`` ("mlp": 4-16-8-3).
Closed-loop clients keep ``concurrency`` requests in flight for ``--duration`` seconds per
transport, in rounds alternating between REST and gRPC (so drift in the machine's load hits
both alike): REST through a small HTTP/1.1 keep-alive client on uvloop (one connection per
request in flight, the request's bytes built once, the answer read by its Content-Length: a
few microseconds a request, so the server is what is measured), gRPC through grpc.aio as in
``predict_qps.py``. Both send the same values (REST as ``{"instances": ...}``). The table gives
the median QPS over rounds, p50 and p99, the server's CPU time per request (Linux), and the
ratios REST/gRPC. On small machines the server is pinned to one core and the clients to the
others (``--server-cpus``). A benchmark, not a test: it asserts nothing. The issue's aim is
REST QPS >= 0.7x gRPC's at concurrency 32.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import predict_qps as grpc_bench  # noqa: E402  (the gRPC side: its models, requests, client)

REPO = grpc_bench.REPO


def start_server(work: Path, models: list[str], threads: int) -> tuple[subprocess.Popen, int, int]:
    config = grpc_bench.write_model_config(work, models)
    grpc_port, rest_port = grpc_bench.free_port(), grpc_bench.free_port()
    command = grpc_bench.model_server_command()
    args = [
        f"--port={grpc_port}",
        f"--rest_api_port={rest_port}",
        "--grpc_bind_address=127.0.0.1",
        f"--model_config_file={config}",
        f"--grpc_max_threads={threads}",
        f"--rest_api_num_threads={threads}",
    ]
    log = open(work / "model_server.log", "wb")  # noqa: SIM115 - lives as long as the process
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([*command, *args], stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env)
    return proc, grpc_port, rest_port


def rest_request(model: str, port: int) -> bytes:
    """The bytes of one REST Predict request (row form) carrying the gRPC request's values."""
    _, _, value = grpc_bench.MODELS[model]
    body = json.dumps({"instances": value.tolist()}).encode()
    head = (
        f"POST /v1/models/{model}:predict HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _read_reply(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    return status, await reader.readexactly(length)


async def _rest_closed_loop(
    port: int, model: str, concurrency: int, warmup: float, duration: float, make_request=None
):
    """``make_request(model, port)``: the request's bytes (default ``rest_request``)."""
    request = (make_request or rest_request)(model, port)
    latencies: list[float] = []
    answered = [0]
    start = time.perf_counter()
    measure_from, stop_at = start + warmup, start + warmup + duration

    async def worker():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while True:
                t0 = time.perf_counter()
                if t0 >= stop_at:
                    return
                writer.write(request)
                status, body = await _read_reply(reader)
                if status != 200:
                    raise RuntimeError(f"REST answered {status}: {body[:200]!r}")
                t1 = time.perf_counter()
                answered[0] += 1
                if t0 >= measure_from:
                    latencies.append(t1 - t0)
        finally:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, answered[0]


def _client(args) -> tuple[list[float], int]:
    transport, *rest = args
    if transport == "grpc":
        return asyncio.run(grpc_bench._closed_loop(*rest))
    try:
        import uvloop

        return uvloop.run(_rest_closed_loop(*rest))
    except ImportError:  # pragma: no cover
        return asyncio.run(_rest_closed_loop(*rest))


def measure_once(pool, procs: int, transport: str, port: int, model: str, concurrency: int, args):
    procs = max(1, min(procs, concurrency))
    shares = [concurrency // procs + (i < concurrency % procs) for i in range(procs)]
    duration = args.duration / args.rounds
    work = [(transport, port, model, share, args.warmup, duration) for share in shares]
    results = pool.map(_client, work)
    return [x for r, _ in results for x in r], sum(n for _, n in results)


def measure(args, pool, pid: int, ports: dict[str, int], model: str, concurrency: int) -> dict:
    """Per transport: (median QPS, p50 ms, p99 ms, server CPU us per request)."""
    duration = args.duration / args.rounds
    samples = {t: ([], [], []) for t in ports}
    for _ in range(args.rounds):
        for transport, port in ports.items():
            before = grpc_bench.cpu_seconds(pid)
            got, answered = measure_once(pool, args.client_procs, transport, port, model, concurrency, args)
            after = grpc_bench.cpu_seconds(pid)
            qps, latencies, cpu = samples[transport]
            qps.append(len(got) / duration)
            latencies.extend(got)
            if before is not None and after is not None and answered:
                cpu.append((after - before) / answered * 1e6)
    out = {}
    for transport, (qps, latencies, cpu) in samples.items():
        lat_ms = np.array(latencies) * 1e3 if latencies else np.array([np.nan])
        cpu_us = float(np.median(cpu)) if cpu else float("nan")
        out[transport] = (float(np.median(qps)), np.percentile(lat_ms, 50), np.percentile(lat_ms, 99), cpu_us)
    return out


def wait_for_rest(port: int, models: list[str], proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    for model in models:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"server exited with {proc.returncode}:\n{log.read_text(errors='replace')}")
            try:
                latencies, _ = asyncio.run(_rest_closed_loop(port, model, 1, 0.0, 0.05))
                if latencies:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"REST never answered {model}:\n{log.read_text(errors='replace')}")
            time.sleep(0.2)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=6.0, help="seconds per point and transport")
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per point")
    parser.add_argument("--server-cpus", default="auto", help="as in predict_qps.py")
    parser.add_argument("--concurrency", default="1,32")
    parser.add_argument("--models", default="tiny,mlp")
    parser.add_argument("--client-procs", type=int, default=max(1, (os.cpu_count() or 2) // 4))
    parser.add_argument("--server-threads", type=int, default=4 * (os.cpu_count() or 1))
    args = parser.parse_args(argv)
    models = args.models.split(",")
    levels = [int(c) for c in args.concurrency.split(",")]
    cpus = grpc_bench.server_cpus(args.server_cpus)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        proc, grpc_port, rest_port = start_server(work, models, args.server_threads)
        grpc_bench.pin(proc, cpus)
        try:
            grpc_bench.wait_for_predict(grpc_port, models, proc, work / "model_server.log")
            wait_for_rest(rest_port, models, proc, work / "model_server.log")
            run(args, models, levels, proc.pid, {"grpc": grpc_port, "rest": rest_port}, cpus)
        finally:
            grpc_bench.stop(proc)


def run(args, models: list[str], levels: list[int], pid: int, ports: dict[str, int], cpus) -> None:
    print(
        f"Predict on one model_server, {args.duration:.0f}s per point and transport in {args.rounds} "
        f"alternating rounds, {args.client_procs} client process(es), {os.cpu_count()} CPUs, server on "
        f"CPUs {sorted(cpus) if cpus else 'all'}, {args.server_threads} server threads per transport"
    )
    header = f"{'model':6} {'conc':>4} | {'gRPC QPS':>9} {'p50 ms':>7} {'p99 ms':>7} {'CPU us':>7} | "
    header += f"{'REST QPS':>9} {'p50 ms':>7} {'p99 ms':>7} {'CPU us':>7} | {'QPS ratio':>9} {'p50 ratio':>9}"
    print(header)
    print("-" * len(header))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(args.client_procs, initializer=grpc_bench._avoid, initargs=(cpus,)) as pool:
        for model in models:
            for concurrency in levels:
                result = measure(args, pool, pid, ports, model, concurrency)
                g, r = result["grpc"], result["rest"]
                print(
                    f"{model:6} {concurrency:>4} | {g[0]:>9.0f} {g[1]:>7.2f} {g[2]:>7.2f} {g[3]:>7.0f} | "
                    f"{r[0]:>9.0f} {r[1]:>7.2f} {r[2]:>7.2f} {r[3]:>7.0f} | {r[0] / g[0]:>9.2f} {r[1] / g[1]:>9.2f}",
                    flush=True,
                )
    print("QPS ratio: REST/gRPC. CPU us: the server process's CPU time per answered request.")


if __name__ == "__main__":
    main()
