"""Predict QPS of a TF Lite model (LiteRT) against the same model as a SavedModel (onnxruntime), in
one ``model_server`` and one run.

    .venv/bin/python benchmarks/tflite_qps.py [--duration 4] [--rounds 2] [--concurrency 1,8]
        [--rows 1,32] [--num_tflite_pools N] [--num_tflite_interpreters_per_pool N]

The oracle's ``tflite_dense`` (two dense layers over 64 features, TF2) is served twice by one
``model_server --prefer_tflite_model=true``: "tflite", its float ``model.tflite`` (LiteRT, a pool
of interpreters), and "saved", the SavedModel it was converted from (no ``model.tflite``: the
SavedModel path, its graph delegated to onnxruntime). Closed-loop gRPC clients keep
``concurrency`` Predicts of ``rows`` x 64 floats in flight, in rounds alternating between the two
models; the table gives median QPS over rounds, p50 and p99 per model, and tflite/saved. A
benchmark, not a test: it asserts nothing. Build the model first: ``python -m tests.oracle build``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from apis.tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc  # noqa: E402
from benchmarks.predict_qps import GRPC_OPTIONS, model_server_command, stop  # noqa: E402
from serving.inference import tensor_codec  # noqa: E402
from tests.e2e.conftest import free_port  # noqa: E402
from tests.oracle import corpus  # noqa: E402

INPUTS = {"tflite": "serving_default_x", "saved": "x"}  # the signature input each model names


def model_bases(work: Path) -> dict[str, Path]:
    manifest = corpus.load_manifest("tflite_dense")
    layouts = json.loads((manifest["dir"] / "tflite.json").read_text())["layouts"]
    bases = {"tflite": work / "tflite", "saved": work / "saved"}
    shutil.copytree(manifest["dir"] / layouts["dense_float"]["base_path"], bases["tflite"])
    shutil.copytree(manifest["export_path"], bases["saved"] / "1")
    return bases


def start(work: Path, args) -> tuple[subprocess.Popen, int]:
    config = work / "models.config"
    entries = "".join(
        f"  config {{ name: '{name}' base_path: '{base}' model_platform: 'tensorflow' }}\n"
        for name, base in model_bases(work).items()
    )
    config.write_text(f"model_config_list {{\n{entries}}}\n")
    port = free_port()
    flags = [
        f"--port={port}",
        "--grpc_bind_address=127.0.0.1",
        f"--model_config_file={config}",
        "--prefer_tflite_model=true",
        f"--num_tflite_interpreters_per_pool={args.num_tflite_interpreters_per_pool}",
    ]
    if args.num_tflite_pools:
        flags.append(f"--num_tflite_pools={args.num_tflite_pools}")
    log = open(work / "model_server.log", "wb")  # noqa: SIM115 - lives as long as the process
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [*model_server_command(), *flags], stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env
    )
    return proc, port


def make_request(model: str, rows: int) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    value = np.random.default_rng(rows).normal(0, 1, (rows, 64)).astype(np.float32)
    tensor_codec.encode_content_into(request.inputs[INPUTS[model]], value)
    return request


def wait_ready(port: int, proc: subprocess.Popen, log: Path) -> dict[str, np.ndarray]:
    """Each model's answer to the same rows, once both answer."""
    stub = prediction_service_pb2_grpc.PredictionServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    deadline = time.monotonic() + 120
    answers: dict[str, np.ndarray] = {}
    while len(answers) < len(INPUTS):
        if proc.poll() is not None:
            raise SystemExit(
                f"model_server exited with {proc.returncode}:\n{log.read_text(errors='replace')}"
            )
        for model in INPUTS:
            try:
                response = stub.Predict(make_request(model, 4), timeout=5)
                (tensor,) = response.outputs.values()
                answers[model] = tensor_codec.decode(tensor)
            except grpc.RpcError as e:
                if time.monotonic() > deadline:
                    raise SystemExit(f"{model}: {e.details()}\n{log.read_text(errors='replace')}") from e
                time.sleep(0.2)
    return answers


async def closed_loop(port: int, model: str, rows: int, concurrency: int, warmup: float, duration: float):
    request = make_request(model, rows)
    latencies: list[float] = []
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        start = time.perf_counter()
        measure_from, stop_at = start + warmup, start + warmup + duration

        async def worker():
            while (t0 := time.perf_counter()) < stop_at:
                await stub.Predict(request, timeout=30)
                if t0 >= measure_from:
                    latencies.append(time.perf_counter() - t0)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


def measure(args, port: int, rows: int, concurrency: int) -> dict[str, tuple[float, float, float]]:
    duration = args.duration / args.rounds
    qps: dict[str, list[float]] = {m: [] for m in INPUTS}
    latencies: dict[str, list[float]] = {m: [] for m in INPUTS}
    for _ in range(args.rounds):
        for model in INPUTS:
            got = asyncio.run(closed_loop(port, model, rows, concurrency, args.warmup, duration))
            qps[model].append(len(got) / duration)
            latencies[model].extend(got)
    out = {}
    for model in INPUTS:
        ms = np.array(latencies[model] or [np.nan]) * 1e3
        out[model] = (float(np.median(qps[model])), np.percentile(ms, 50), np.percentile(ms, 99))
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--duration", type=float, default=4.0, help="seconds per model per level, over all rounds"
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=float, default=0.3)
    parser.add_argument("--concurrency", default="1,8")
    parser.add_argument("--rows", default="1,32")
    parser.add_argument("--num_tflite_pools", type=int, default=0, help="0: the server's default (CPUs)")
    parser.add_argument("--num_tflite_interpreters_per_pool", type=int, default=1)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tflite-qps-") as tmp:
        work = Path(tmp)
        proc, port = start(work, args)
        try:
            answers = wait_ready(port, proc, work / "model_server.log")
            gap = float(np.max(np.abs(answers["tflite"] - answers["saved"])))
            print(f"model_server pid {proc.pid}; tflite and saved answers differ by at most {gap:.2e}")
            print(
                f"{'rows':>4} {'conc':>4} | {'tflite qps':>10} {'p50 ms':>7} {'p99 ms':>7} | "
                f"{'saved qps':>10} {'p50 ms':>7} {'p99 ms':>7} | {'tflite/saved':>12}"
            )
            for rows in (int(r) for r in args.rows.split(",")):
                for concurrency in (int(c) for c in args.concurrency.split(",")):
                    got = measure(args, port, rows, concurrency)
                    (tq, t50, t99), (sq, s50, s99) = got["tflite"], got["saved"]
                    print(
                        f"{rows:>4} {concurrency:>4} | {tq:>10.0f} {t50:>7.2f} {t99:>7.2f} | "
                        f"{sq:>10.0f} {s50:>7.2f} {s99:>7.2f} | {tq / sq:>12.2f}",
                        flush=True,
                    )
        finally:
            stop(proc)


if __name__ == "__main__":
    main()
