"""Predict QPS and latency of ``model_server`` against a bare grpcio server, in the same run.

    .venv/bin/python benchmarks/predict_qps.py [--duration 5] [--concurrency 1,8,32]
        [--models tiny,mlp] [--client-procs N] [--server-threads N] [--bare-pool workerpool]

Starts two processes on loopback: ``model_server`` serving ``models/half_plus_two`` ("tiny":
y = 0.5x + 2), ``models/keras_mlp`` ("mlp": 4-16-8-3) or the oracle's ``keras_mlp_784`` ("mlp784":
784-512-256-10, the issue's; ``python -m tests.oracle build``), and a bare grpcio server whose
PredictionService.Predict returns a canned PredictResponse (the very bytes model_server answers
for the same request, so both serialize the same message) with as many threads and the same
message limits. The bare server is grpcio's stock one, its calls run by a ``ThreadPoolExecutor``;
``--bare-pool workerpool`` gives it model_server's own executor (``serving.worker_pool``), to
separate what that saves from the rest. Closed-loop clients (grpc.aio, spread over
``--client-procs`` processes) keep ``concurrency`` requests in flight for ``--duration`` seconds
per server, in rounds alternating between the two servers (so drift in the machine's load hits
both alike); the table gives the median QPS over rounds, p50 and p99 per server, each server's
CPU time per request (Linux), and the ratios ours/bare. On small machines both servers are pinned to the same core and the
clients to the others (``--server-cpus``). This is a benchmark, not a test: it asserts nothing.
The issue's aim is ours/bare QPS >= 0.8 for the tiny model.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent import futures
from pathlib import Path

import grpc
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from apis.tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc  # noqa: E402
from serving.inference import tensor_codec  # noqa: E402
from tests.e2e.conftest import free_port  # noqa: E402

MAX_MESSAGE = 2**31 - 1
GRPC_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE),
    ("grpc.max_receive_message_length", MAX_MESSAGE),
]
MODELS = {
    # name: (models/ dir, signature input, request value)
    "tiny": ("half_plus_two", "x", np.float32([[2.0]])),
    "tiny_tf2": ("half_plus_two_tf2", "x", np.float32([2.0])),
    "mlp": ("keras_mlp", "features", np.float32([[0.5, -1.0, 2.0, 0.25]])),
    # the oracle's (python -m tests.oracle build): the Keras MLP, 784-512-256-10
    "mlp784": ("oracle:keras_mlp_784", "features", np.linspace(0, 1, 784, dtype=np.float32)[None, :]),
}


def base_path(work: Path, model: str) -> Path:
    """``model``'s base path: its ``models/`` directory, or an oracle export copied as version 1."""
    where = MODELS[model][0]
    if not where.startswith("oracle:"):
        return latest_version(where)
    from tests.oracle import corpus  # (only for the oracle's models)

    base = work / model
    if not base.exists():
        shutil.copytree(corpus.load_manifest(where.partition(":")[2])["export_path"], base / "1")
    return base


def latest_version(name: str) -> Path:
    base = REPO / "models" / name
    versions = sorted((p for p in base.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    if not versions:
        raise SystemExit(f"models/{name} has no version directory: run `python -m tests.oracle models`")
    return base


def make_request(model: str) -> predict_pb2.PredictRequest:
    _, alias, value = MODELS[model]
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    tensor_codec.encode_content_into(request.inputs[alias], value)
    return request


# --------------------------------------------------------------------------------------------
# servers


class CannedPredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, responses: dict[str, predict_pb2.PredictResponse]):
        self.responses = responses

    def Predict(self, request, context):  # noqa: N802
        return self.responses[request.model_spec.name]


def server_cpus(spec: str) -> set[int] | None:
    count = os.cpu_count() or 1
    if spec == "none" or (spec == "auto" and count > 4):
        return None
    if spec == "auto":
        return {count - 1}
    cpus: set[int] = set()
    for part in spec.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def pin(proc: subprocess.Popen, cpus: set[int] | None) -> None:
    if cpus is not None:
        os.sched_setaffinity(proc.pid, cpus)


def serve_canned(port: int, response_files: list[str], threads: int, bare_pool: str) -> None:
    responses = {}
    for path in response_files:
        name, data = Path(path).stem, Path(path).read_bytes()
        responses[name] = predict_pb2.PredictResponse.FromString(data)
    if bare_pool == "workerpool":
        from serving.worker_pool import WorkerPool

        executor = WorkerPool(threads)
    else:
        executor = futures.ThreadPoolExecutor(max_workers=threads)
    server = grpc.server(executor, options=GRPC_OPTIONS)
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        CannedPredictionService(responses), server
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    signal.signal(signal.SIGTERM, lambda *_: server.stop(0))
    server.wait_for_termination()


def write_model_config(work: Path, models: list[str]) -> Path:
    """A ``--model_config_file`` serving ``models``, each from its latest oracle version."""
    config = work / "models.config"
    entries = "".join(
        f'  config {{ name: "{m}" base_path: "{base_path(work, m)}" model_platform: "tensorflow" }}\n'
        for m in models
    )
    config.write_text(f"model_config_list {{\n{entries}}}\n")
    return config


def model_server_command() -> list[str]:
    """The installed ``model_server`` script, else the package run as a module."""
    script = Path(sys.executable).with_name("model_server")
    return [str(script)] if script.exists() else [sys.executable, "-m", "serving"]


def stop(proc: subprocess.Popen | None, timeout: float = 30) -> None:
    """SIGTERM a server still running (a drain), killing it after ``timeout`` seconds."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_model_server(work: Path, models: list[str], threads: int) -> tuple[subprocess.Popen, int]:
    config = write_model_config(work, models)
    port = free_port()
    args = [f"--port={port}", "--grpc_bind_address=127.0.0.1", f"--model_config_file={config}"]
    args.append(f"--grpc_max_threads={threads}")
    log = open(work / "model_server.log", "wb")  # noqa: SIM115 - lives as long as the process
    env = dict(os.environ, PYTHONPATH=str(REPO))
    command = [*model_server_command(), *args]
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env)
    return proc, port


def wait_for_predict(port: int, models: list[str], proc: subprocess.Popen, log: Path) -> dict[str, bytes]:
    """The serialized response of each model's request, once the server answers."""
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    deadline = time.monotonic() + 120
    answers: dict[str, bytes] = {}
    while len(answers) < len(models):
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}:\n{log.read_text(errors='replace')}")
        for model in models:
            if model in answers:
                continue
            try:
                answers[model] = stub.Predict(make_request(model), timeout=5).SerializeToString()
            except grpc.RpcError as e:
                if time.monotonic() > deadline:
                    raise SystemExit(
                        f"{model}: {e.code()} {e.details()}\n{log.read_text(errors='replace')}"
                    ) from e
                time.sleep(0.2)
    channel.close()
    return answers


# --------------------------------------------------------------------------------------------
# load


async def _closed_loop(
    port: int, model: str, concurrency: int, warmup: float, duration: float
) -> tuple[list[float], int]:
    """Latencies of the requests sent after the warmup, and how many were answered in all."""
    request = make_request(model)
    latencies: list[float] = []
    answered = [0]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        start = time.perf_counter()
        measure_from, stop_at = start + warmup, start + warmup + duration

        async def worker():
            while True:
                t0 = time.perf_counter()
                if t0 >= stop_at:
                    return
                await stub.Predict(request, timeout=30)
                t1 = time.perf_counter()
                answered[0] += 1
                if t0 >= measure_from:
                    latencies.append(t1 - t0)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, answered[0]


def _avoid(cpus: set[int] | None) -> None:
    """Pool initializer: clients stay off the servers' CPUs."""
    if cpus:
        rest = set(range(os.cpu_count() or 1)) - cpus
        if rest:
            os.sched_setaffinity(0, rest)


def _client(args) -> tuple[list[float], int]:
    return asyncio.run(_closed_loop(*args))


def measure_once(pool, procs: int, port: int, model: str, concurrency: int, warmup: float, duration: float):
    """The measured latencies of every client process, and the requests answered in all."""
    procs = max(1, min(procs, concurrency))
    shares = [concurrency // procs + (i < concurrency % procs) for i in range(procs)]
    results = pool.map(_client, [(port, model, share, warmup, duration) for share in shares])
    return [x for r, _ in results for x in r], sum(n for _, n in results)


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of a process so far (Linux's /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_pair(args, pool, servers: tuple[tuple[int, int], ...], model: str, concurrency: int):
    """(QPS, p50 ms, p99 ms, server CPU us per request) of each (port, pid); rounds alternate
    between them so that drift in the machine's load hits both alike. QPS and CPU per request
    are medians over rounds, latencies are pooled. CPU per request counts the server process's
    own time, which time taken by other processes on its CPU does not inflate."""
    duration = args.duration / args.rounds
    qps: tuple[list[float], ...] = tuple([] for _ in servers)
    latencies: tuple[list[float], ...] = tuple([] for _ in servers)
    cpu: tuple[list[float], ...] = tuple([] for _ in servers)
    for _ in range(args.rounds):
        for i, (port, pid) in enumerate(servers):
            before = cpu_seconds(pid)
            got, answered = measure_once(
                pool, args.client_procs, port, model, concurrency, args.warmup, duration
            )
            after = cpu_seconds(pid)
            qps[i].append(len(got) / duration)
            latencies[i].extend(got)
            if before is not None and after is not None and answered:
                cpu[i].append((after - before) / answered * 1e6)
    out = []
    for q, lat, c in zip(qps, latencies, cpu):
        lat_ms = np.array(lat) * 1e3 if lat else np.array([np.nan])
        cpu_us = float(np.median(c)) if c else float("nan")
        out.append((float(np.median(q)), np.percentile(lat_ms, 50), np.percentile(lat_ms, 99), cpu_us))
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=6.0, help="seconds per point and server")
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per point")
    parser.add_argument(
        "--server-cpus",
        default="auto",
        help="CPUs both servers are pinned to, e.g. '1' or '8-15' ('auto': the last CPU on "
        "machines with 4 CPUs or fewer, so that clients and server do not share a core; 'none')",
    )
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--models", default="tiny,mlp")
    parser.add_argument("--client-procs", type=int, default=max(1, (os.cpu_count() or 2) // 4))
    parser.add_argument("--server-threads", type=int, default=4 * (os.cpu_count() or 1))
    parser.add_argument(
        "--bare-pool",
        choices=("threadpool", "workerpool"),
        default="threadpool",
        help="the bare server's executor: grpcio's usual ThreadPoolExecutor, or model_server's own",
    )
    parser.add_argument("--serve-canned", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_canned:
        serve_canned(int(args.serve_canned[0]), args.serve_canned[1:], args.server_threads, args.bare_pool)
        return
    models = args.models.split(",")
    levels = [int(c) for c in args.concurrency.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cpus = server_cpus(args.server_cpus)
        ours, ours_port = start_model_server(work, models, args.server_threads)
        pin(ours, cpus)
        bare = None
        try:
            answers = wait_for_predict(ours_port, models, ours, work / "model_server.log")
            files = []
            for model, data in answers.items():
                (work / f"{model}.pb").write_bytes(data)
                files.append(str(work / f"{model}.pb"))
            bare_port = free_port()
            bare = subprocess.Popen(
                [sys.executable, __file__, "--server-threads", str(args.server_threads)]
                + ["--bare-pool", args.bare_pool, "--serve-canned"]
                + [str(bare_port), *files]
            )
            pin(bare, cpus)
            wait_for_predict(bare_port, models, bare, work / "model_server.log")
            run(args, models, levels, (bare_port, bare.pid), (ours_port, ours.pid), cpus)
        finally:
            for proc in (ours, bare):
                stop(proc)


def run(args, models: list[str], levels: list[int], bare: tuple, ours: tuple, cpus) -> None:
    print(
        f"Predict, {args.duration:.0f}s per point and server in {args.rounds} alternating rounds, "
        f"{args.client_procs} client process(es), {os.cpu_count()} CPUs, servers on CPUs "
        f"{sorted(cpus) if cpus else 'all'}, {args.server_threads} server threads, bare server's "
        f"executor: {args.bare_pool}"
    )
    header = f"{'model':8} {'conc':>4} | {'bare QPS':>9} {'p50 ms':>7} {'p99 ms':>7} {'CPU us':>7} | "
    header += f"{'ours QPS':>9} {'p50 ms':>7} {'p99 ms':>7} {'CPU us':>7} | {'QPS ratio':>9} {'p50 ratio':>9}"
    print(header)
    print("-" * len(header))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(args.client_procs, initializer=_avoid, initargs=(cpus,)) as pool:
        for model in models:
            for concurrency in levels:
                b, o = measure_pair(args, pool, (bare, ours), model, concurrency)
                print(
                    f"{model:8} {concurrency:>4} | {b[0]:>9.0f} {b[1]:>7.2f} {b[2]:>7.2f} {b[3]:>7.0f} | "
                    f"{o[0]:>9.0f} {o[1]:>7.2f} {o[2]:>7.2f} {o[3]:>7.0f} | {o[0] / b[0]:>9.2f} {o[1] / b[1]:>9.2f}",
                    flush=True,
                )
    print(
        "CPU us: the server process's CPU time per answered request (its own cost; other work on "
        "its CPU slows its QPS, not this)"
    )


if __name__ == "__main__":
    main()
