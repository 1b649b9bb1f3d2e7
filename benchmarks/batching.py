"""Request batching: Predict QPS and p50/p99 of ``model_server`` with batching off, on and adaptive.

    .venv/bin/python benchmarks/batching.py [--duration 6] [--rounds 3] [--concurrency 1,8,32,64]
        [--models mlp,cnn] [--configs off,on,t1000,t2000,t5000,adaptive] [--server-cpus auto]

Serves two models of the oracle corpus (``python -m tests.oracle build``): "mlp",
``batching_mlp`` (512 -> 1024 -> 1024 -> 1024 -> 10, float32: about 0.9 ms a run of one row, 80 us
a row in batches of 32, so batching pays) and "cnn", ``batching_cnn`` (28x28x1, conv 16 + pool,
conv 32 + pool, dense 64 -> 10: 50 us a row alone, 15 us in batches). One ``model_server`` per
configuration, all started at once, each serving both:

- ``off``: no batching;
- ``on``: ``--enable_batching`` with TF Serving's documented CPU starting point
  (``num_batch_threads`` = the server's CPUs, ``max_batch_size`` high (256),
  ``batch_timeout_micros`` 0, ``max_enqueued_batches`` high while measuring);
- ``tN``: the same with ``batch_timeout_micros`` N (TF's advice: then try 1000 to 10000);
- ``adaptive``: ``on`` plus ``--adaptive_batch_timeout`` (ours): each queue picks its timeout.

As in ``predict_qps.py``, on machines of 4 CPUs or fewer the servers share the last CPU and the
clients get the others (``--server-cpus``). Closed-loop grpc.aio clients keep ``concurrency``
Predict calls of one row in flight; each point runs ``--rounds`` rounds alternating over the
configurations (so drift in the machine's load hits all alike), each round measured after a
``--warmup`` of the same load (where the adaptive timeout settles). The table gives median QPS over
rounds, p50 and p99 over every request, the server's CPU time per request, and each
configuration's QPS as a ratio of ``off`` measured in the same rounds (median over rounds).
Every server gets ``--grpc_max_threads`` large enough for every call in flight to reach the
batcher (TF Serving's advice: about twice ``max_batch_size`` client threads). At the end each
server's log gives what its queues did (mean batch size, batch run time, queuing). A benchmark,
not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from apis.tensorflow_serving.apis import predict_pb2  # noqa: E402
from serving.inference import tensor_codec  # noqa: E402
from tests.oracle import corpus  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))
from predict_qps import _avoid, cpu_seconds, free_port, server_cpus, stop  # noqa: E402

GRPC_OPTIONS = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
MODELS = {
    # name: (oracle model, signature input, one row)
    "mlp": ("batching_mlp", "features", (1, 512)),
    "cnn": ("batching_cnn", "image", (1, 28, 28, 1)),
}
BASE_PARAMS = "max_batch_size {{ value: 256 }}\nbatch_timeout_micros {{ value: {timeout} }}\n"
BASE_PARAMS += "max_enqueued_batches {{ value: 1000 }}\nnum_batch_threads {{ value: {threads} }}\n"


def request_bytes(model: str) -> bytes:
    _, alias, shape = MODELS[model]
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    value = np.random.default_rng(0).uniform(0, 1, size=shape).astype(np.float32)
    tensor_codec.encode_content_into(request.inputs[alias], value)
    return request.SerializeToString()


def config_flags(config: str, work: Path, cores: int) -> list[str]:
    """model_server flags of one configuration; ``cores``: the CPUs the server runs on."""
    if config == "off":
        return []
    name, _, threads = config.partition("/")  # "t2000/1": one batch thread
    timeout = int(name[1:]) if re.fullmatch(r"t\d+", name) else 0
    params = work / f"batching_{config.replace('/', '_')}.pbtxt"
    params.write_text(BASE_PARAMS.format(timeout=timeout, threads=threads or cores))
    flags = ["--enable_batching", f"--batching_parameters_file={params}"]
    if name == "adaptive":
        flags.append("--adaptive_batch_timeout")
    return flags


class Server:
    def __init__(self, config: str, work: Path, models: list[str], threads: int, cpus: set[int] | None):
        self.config, self.port = config, free_port()
        model_config = work / "models.config"
        if not model_config.exists():
            entries = ""
            for m in models:
                base = work / "models" / m
                base.mkdir(parents=True)
                (base / "1").symlink_to(corpus.load_manifest(MODELS[m][0])["export_path"])
                entries += f'  config {{ name: "{m}" base_path: "{base}" model_platform: "tensorflow" }}\n'
            model_config.write_text(f"model_config_list {{\n{entries}}}\n")
        script = Path(sys.executable).with_name("model_server")
        command = [str(script)] if script.exists() else [sys.executable, "-m", "serving"]
        args = [f"--port={self.port}", "--grpc_bind_address=127.0.0.1", f"--model_config_file={model_config}"]
        cores = len(cpus or os.sched_getaffinity(0))
        args += [f"--grpc_max_threads={threads}", *config_flags(config, work, cores)]
        self.log = work / f"server_{config.replace('/', '_')}.log"
        env = dict(os.environ, PYTHONPATH=str(REPO))
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [*command, *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                env=env,
                preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus),
            )

    def wait_ready(self, models: list[str]) -> None:
        channel = grpc.insecure_channel(f"127.0.0.1:{self.port}", options=GRPC_OPTIONS)
        call = channel.unary_unary("/tensorflow.serving.PredictionService/Predict")
        deadline = time.monotonic() + 180
        for model in models:
            while True:
                if self.proc.poll() is not None:
                    raise SystemExit(f"{self.config}: server exited:\n{self.log.read_text(errors='replace')}")
                try:
                    call(request_bytes(model), timeout=10)
                    break
                except grpc.RpcError as e:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"{self.config}: {e.details()}") from e
                    time.sleep(0.3)
        channel.close()

    def stop(self) -> str:
        stop(self.proc, timeout=60)
        return self.log.read_text(errors="replace")


async def _closed_loop(port: int, model: str, concurrency: int, warmup: float, duration: float):
    payload = request_bytes(model)
    latencies: list[float] = []
    errors = [0]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS) as channel:
        call = channel.unary_unary("/tensorflow.serving.PredictionService/Predict")
        start = time.perf_counter()
        measure_from, stop_at = start + warmup, start + warmup + duration

        async def worker():
            while True:
                t0 = time.perf_counter()
                if t0 >= stop_at:
                    return
                try:
                    await call(payload, timeout=30)
                except grpc.aio.AioRpcError:
                    errors[0] += 1
                    continue
                if t0 >= measure_from:
                    latencies.append(time.perf_counter() - t0)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, errors[0]


def _client(args):
    return asyncio.run(_closed_loop(*args))


def measure(pool, procs: int, port: int, model: str, concurrency: int, warmup: float, duration: float):
    procs = max(1, min(procs, concurrency))
    shares = [concurrency // procs + (i < concurrency % procs) for i in range(procs)]
    results = pool.map(_client, [(port, model, share, warmup, duration) for share in shares])
    return [x for r, _ in results for x in r], sum(e for _, e in results)


def run(args, servers: list[Server], models: list[str], levels: list[int], cpus: set[int] | None) -> None:
    duration = args.duration / args.rounds
    configs = [s.config for s in servers]
    print(
        f"Predict of one row, {args.duration:.0f}s per point and configuration in {args.rounds} alternating "
        f"rounds, {os.cpu_count()} CPUs, servers on CPUs {sorted(cpus) if cpus else 'all'}, "
        f"--grpc_max_threads={args.grpc_threads}, {args.client_procs} client process(es); "
        "QPS ratio: to 'off' in the same rounds"
    )
    header = (
        f"{'model':5} {'conc':>4} {'config':>8} | {'QPS':>7} {'p50 ms':>7} {'p99 ms':>7} {'CPU us':>7} | "
    )
    header += f"{'QPS/off':>7}"
    print(header)
    print("-" * len(header))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(args.client_procs, initializer=_avoid, initargs=(cpus,)) as pool:
        for model in models:
            for concurrency in levels:
                qps: dict[str, list[float]] = {c: [] for c in configs}
                lat: dict[str, list[float]] = {c: [] for c in configs}
                failed = dict.fromkeys(configs, 0)
                cpu: dict[str, list[float]] = {c: [] for c in configs}
                for _ in range(args.rounds):
                    for server in servers:
                        before = cpu_seconds(server.proc.pid)
                        got, errors = measure(
                            pool, args.client_procs, server.port, model, concurrency, args.warmup, duration
                        )
                        after = cpu_seconds(server.proc.pid)
                        if before is not None and after is not None and got:
                            # the warmup's requests cost CPU too: counted at the measured rate
                            cpu[server.config].append(
                                (after - before) / (len(got) * (1 + args.warmup / duration))
                            )
                        qps[server.config].append(len(got) / duration)
                        lat[server.config].extend(got)
                        failed[server.config] += errors
                for config in configs:
                    ratios = [q / o for q, o in zip(qps[config], qps["off"])] if "off" in qps else [np.nan]
                    ms = np.array(lat[config] or [np.nan]) * 1e3
                    note = f"  ({failed[config]} failed)" if failed[config] else ""
                    cpu_us = np.median(cpu[config]) * 1e6 if cpu[config] else np.nan
                    print(
                        f"{model:5} {concurrency:>4} {config:>8} | {np.median(qps[config]):>7.0f} "
                        f"{np.percentile(ms, 50):>7.2f} {np.percentile(ms, 99):>7.2f} {cpu_us:>7.0f} | "
                        f"{np.median(ratios):>7.2f}{note}",
                        flush=True,
                    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=6.0, help="seconds per point and configuration")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--warmup",
        type=float,
        default=1.5,
        help="seconds of each round not measured, for every configuration: an adaptive queue climbs "
        "to its timeout here (at a new concurrency it starts from the last one's)",
    )
    parser.add_argument("--concurrency", default="1,8,32,64")
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--configs", default="off,on,t1000,t2000,t5000,adaptive")
    parser.add_argument("--grpc-threads", type=int, default=128)
    parser.add_argument("--client-procs", type=int, default=1)
    parser.add_argument(
        "--server-cpus",
        default="auto",
        help="CPUs every server is pinned to, e.g. '1' or '8-15' ('auto': the last CPU on machines with 4 "
        "CPUs or fewer; 'none'); batching's num_batch_threads is their number, as TF Serving advises",
    )
    args = parser.parse_args(argv)
    models = args.models.split(",")
    levels = [int(c) for c in args.concurrency.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cpus = server_cpus(args.server_cpus)
        servers = [
            Server(config, work, models, args.grpc_threads, cpus) for config in args.configs.split(",")
        ]
        try:
            for server in servers:
                server.wait_ready(models)
            run(args, servers, models, levels, cpus)
        finally:
            logs = {server.config: server.stop() for server in servers}
        print("\nWhat each server's batching queues did over the whole run (from its log):")
        for config, log in logs.items():
            for model, summary in re.findall(
                r"Batching of \{name: (\w+) version: \d+\} \{[^}]*\}: (.*)", log
            ):
                print(f"{config:>8} {model:5} {summary}")


if __name__ == "__main__":
    main()
