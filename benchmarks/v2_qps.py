"""Open Inference Protocol (KServe V2) QPS against TF Serving's API on the same server, same model.

    .venv/bin/python benchmarks/v2_qps.py [--duration 6] [--concurrency 1,32] [--models tiny,mlp]

Starts one ``model_server`` (both ports, ``serving/open_inference`` on) serving
``models/half_plus_two`` ("tiny") and ``models/keras_mlp`` ("mlp"), and sends the same values
four ways, in alternating rounds (so drift in the machine's load hits all alike): TF Serving's
gRPC Predict, V2 gRPC ModelInfer (raw_input_contents, as tritonclient sends them), TF Serving's
REST ``:predict`` (``{"instances": ...}``) and V2 REST ``/infer`` (JSON ``data``). Closed-loop
clients keep ``concurrency`` requests in flight per transport. The table gives median QPS over
rounds, p50, the server's CPU time per request, and the ratios V2/TF Serving per transport. A
benchmark, not a test: it asserts nothing. The issue's aim is V2 gRPC >= 0.9x Predict.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import predict_qps as grpc_bench  # noqa: E402
import rest_qps  # noqa: E402

from apis.inference import grpc_predict_v2_pb2 as v2  # noqa: E402
from apis.inference import grpc_predict_v2_pb2_grpc as v2_grpc

TRANSPORTS = ("grpc", "v2grpc", "rest", "v2rest")


def infer_request(model: str) -> v2.ModelInferRequest:
    _, alias, value = grpc_bench.MODELS[model]
    request = v2.ModelInferRequest(model_name=model)
    request.inputs.add(name=alias, datatype="FP32", shape=list(value.shape))
    request.raw_input_contents.append(np.ascontiguousarray(value, "<f4").tobytes())
    return request


def v2_rest_request(model: str, port: int) -> bytes:
    _, alias, value = grpc_bench.MODELS[model]
    document = {
        "inputs": [
            {"name": alias, "shape": list(value.shape), "datatype": "FP32", "data": value.ravel().tolist()}
        ]
    }
    body = json.dumps(document).encode()
    head = (
        f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _v2_grpc_loop(port: int, model: str, concurrency: int, warmup: float, duration: float):
    request = infer_request(model)
    latencies: list[float] = []
    answered = [0]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=grpc_bench.GRPC_OPTIONS) as channel:
        stub = v2_grpc.GRPCInferenceServiceStub(channel)
        start = time.perf_counter()
        measure_from, stop_at = start + warmup, start + warmup + duration

        async def worker():
            while True:
                t0 = time.perf_counter()
                if t0 >= stop_at:
                    return
                await stub.ModelInfer(request, timeout=30)
                t1 = time.perf_counter()
                answered[0] += 1
                if t0 >= measure_from:
                    latencies.append(t1 - t0)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, answered[0]


def _client(args) -> tuple[list[float], int]:
    transport, *rest = args
    if transport == "grpc":
        return asyncio.run(grpc_bench._closed_loop(*rest))
    if transport == "v2grpc":
        return asyncio.run(_v2_grpc_loop(*rest))
    if transport == "rest":
        return asyncio.run(rest_qps._rest_closed_loop(*rest))
    return asyncio.run(rest_qps._rest_closed_loop(*rest, v2_rest_request))


def measure(args, pool, pid: int, ports: dict[str, int], model: str, concurrency: int) -> dict:
    """Per transport: (median QPS, p50 ms, server CPU us per request)."""
    duration = args.duration / args.rounds
    procs = max(1, min(args.client_procs, concurrency))
    shares = [concurrency // procs + (i < concurrency % procs) for i in range(procs)]
    samples = {t: ([], [], []) for t in TRANSPORTS}
    for _ in range(args.rounds):
        for transport in TRANSPORTS:
            port = ports["rest" if "rest" in transport else "grpc"]
            before = grpc_bench.cpu_seconds(pid)
            work = [(transport, port, model, share, args.warmup, duration) for share in shares]
            results = pool.map(_client, work)
            after = grpc_bench.cpu_seconds(pid)
            got, answered = [x for r, _ in results for x in r], sum(n for _, n in results)
            qps, latencies, cpu = samples[transport]
            qps.append(len(got) / duration)
            latencies.extend(got)
            if before is not None and after is not None and answered:
                cpu.append((after - before) / answered * 1e6)
    out = {}
    for transport, (qps, latencies, cpu) in samples.items():
        lat_ms = np.array(latencies) * 1e3 if latencies else np.array([np.nan])
        out[transport] = (
            float(np.median(qps)),
            float(np.percentile(lat_ms, 50)),
            float(np.median(cpu)) if cpu else float("nan"),
        )
    return out


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
        proc, grpc_port, rest_port = rest_qps.start_server(work, models, args.server_threads)
        grpc_bench.pin(proc, cpus)
        try:
            grpc_bench.wait_for_predict(grpc_port, models, proc, work / "model_server.log")
            rest_qps.wait_for_rest(rest_port, models, proc, work / "model_server.log")
            run(args, models, levels, proc.pid, {"grpc": grpc_port, "rest": rest_port}, cpus)
        finally:
            grpc_bench.stop(proc)


def run(args, models, levels, pid, ports, cpus) -> None:
    print(
        f"V2 against TF Serving's API on one model_server, {args.duration:.0f}s per point and transport in "
        f"{args.rounds} alternating rounds, {args.client_procs} client process(es), {os.cpu_count()} CPUs, "
        f"server on CPUs {sorted(cpus) if cpus else 'all'}"
    )
    header = f"{'model':6} {'conc':>4} |"
    for name in ("Predict", "ModelInfer", "REST v1", "REST v2"):
        header += f" {name + ' QPS':>15} {'p50':>6} {'CPU us':>6} |"
    header += f" {'gRPC v2/v1':>10} {'REST v2/v1':>10}"
    print(header)
    print("-" * len(header))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(args.client_procs, initializer=grpc_bench._avoid, initargs=(cpus,)) as pool:
        for model in models:
            for concurrency in levels:
                r = measure(args, pool, pid, ports, model, concurrency)
                line = f"{model:6} {concurrency:>4} |"
                for transport in TRANSPORTS:
                    qps, p50, cpu = r[transport]
                    line += f" {qps:>15.0f} {p50:>6.2f} {cpu:>6.0f} |"
                line += f" {r['v2grpc'][0] / r['grpc'][0]:>10.2f} {r['v2rest'][0] / r['rest'][0]:>10.2f}"
                print(line, flush=True)
    print(
        "ratios: V2 QPS / TF Serving API QPS on the same transport. p50 in ms. CPU us: server CPU per request."
    )


if __name__ == "__main__":
    main()
