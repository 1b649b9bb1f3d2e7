"""Resident memory of ``model_server`` over many version swaps under load.

    .venv/bin/python benchmarks/version_swaps.py [--model zoo_mobilenet_v2_saved] [--swaps 100]
        [--clients 4] [--policy availability_preserving --policy resource_preserving]

Serves one SavedModel (an oracle-built export, or a ``models/`` directory) from a fresh base path,
then writes ``--swaps`` new versions one after the other, each under a temporary name and renamed
into the base path (as a deploy tool does), while ``--clients`` threads send Predict. After each
swap (the new version answering, the old one unloaded) it prints the server's RSS, and at the end
the reference the issue names: RSS after the last swap against RSS after the third, the highest
RSS seen during a swap (sampled every 20 ms), its median rise above the RSS before the swap (the
memory a swap costs: one more copy of the model with availability_preserving, none with
resource_preserving) and the number of failed requests (resource_preserving: the requests of the
gap between unload and load, NOT_FOUND as for a model not loaded). A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from apis.tensorflow_serving.apis import (  # noqa: E402
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
)
from tests.e2e.conftest import free_port  # noqa: E402
from tests.e2e.test_version_pickup import export_of, request_of  # noqa: E402

PREDICT = "/tensorflow.serving.PredictionService/Predict"


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class Load:
    """Closed-loop Predict clients; counts sent and failed."""

    def __init__(self, address: str, request: predict_pb2.PredictRequest, clients: int) -> None:
        self._data = request.SerializeToString()
        self.sent = self.failed = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(address,), daemon=True) for _ in range(clients)
        ]
        for thread in self._threads:
            thread.start()

    def _run(self, address: str) -> None:
        channel = grpc.insecure_channel(address)
        call = channel.unary_unary(PREDICT)
        while not self._stop.is_set():
            try:
                call(self._data, timeout=30)
            except grpc.RpcError as e:
                self.failed += 1
                self.failures.append(f"{e.code().name}: {e.details()}"[:200])
            self.sent += 1
        channel.close()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


def available(stub, model: str) -> list[int]:
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = model
    try:
        response = stub.GetModelStatus(request, timeout=5)
    except grpc.RpcError:
        return []
    return sorted(s.version for s in response.model_version_status if s.state == 30)  # AVAILABLE


SETTLE_SECONDS = 1.0  # after a swap: the old version's memory given back (serving/resources/memory.py)


def run(model: str, swaps: int, clients: int, policy: str, server_flags: list[str]) -> dict:
    """One server, ``swaps`` swaps under load; prints per swap, returns the figures."""
    source = export_of(model)
    work = Path(tempfile.mkdtemp(prefix="version-swaps-"))
    base = work / model
    base.mkdir()
    shutil.copytree(source, base / "1")
    port = free_port()
    command = [sys.executable, "-m", "serving", f"--port={port}", "--grpc_bind_address=127.0.0.1"]
    command += [f"--model_base_path={base}", f"--model_name={model}", "--file_system_poll_wait_seconds=1"]
    command += [f"--aspired_version_policy={policy}"] if policy else []
    command += server_flags
    log = open(work / "server.log", "wb")  # noqa: SIM115 - closed at the end
    env = dict(os.environ, PYTHONPATH=str(REPO))
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = model_service_pb2_grpc.ModelServiceStub(channel)
    try:
        deadline = time.monotonic() + 120
        while available(stub, model) != [1]:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"model_server did not serve version 1; see {work / 'server.log'}")
            time.sleep(0.2)
        load = Load(f"127.0.0.1:{port}", request_of(model), clients)
        time.sleep(2)
        after = [rss_mib(server.pid)]
        peaks, rises = [], []  # the highest RSS during each swap, and its rise above the RSS before
        print(f"{model}: version 1 served, RSS {after[0]:.0f} MiB, policy {policy or 'default'}", flush=True)
        for version in range(2, swaps + 2):
            staging = work / f".staging-{version}"
            shutil.copytree(source, staging)
            before = rss_mib(server.pid)
            os.rename(staging, base / str(version))
            peak = before
            deadline = time.monotonic() + 120
            while available(stub, model) != [version]:
                peak = max(peak, rss_mib(server.pid))
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"swap to version {version} did not finish; see {work / 'server.log'}")
                time.sleep(0.02)
            settled = time.monotonic() + SETTLE_SECONDS
            while time.monotonic() < settled:
                peak = max(peak, rss_mib(server.pid))
                time.sleep(0.02)
            shutil.rmtree(base / str(version - 1))
            after.append(rss_mib(server.pid))
            peaks.append(peak)
            rises.append(peak - before)
            print(
                f"swap {version - 1:3d}: RSS {after[-1]:6.0f} MiB (peak {peak:.0f}, +{peak - before:.0f}), "
                f"{load.sent} requests, {load.failed} failed",
                flush=True,
            )
        load.stop()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
        log.close()
        channel.close()
    shutil.rmtree(work, ignore_errors=True)
    third, last = after[min(3, len(after) - 1)], after[-1]
    print(
        f"RSS after swap 3: {third:.0f} MiB; after swap {len(after) - 1}: {last:.0f} MiB; ratio {last / third:.3f} (aim <= 1.10)"
    )
    marks = [n for n in (1, 3, 10, 50, 100) if n < len(after)]
    print("RSS after swaps " + ", ".join(f"{n}: {after[n]:.0f}" for n in marks) + " MiB")
    if len(after) > 20:  # one sample catches a collection or not: medians of ten say the trend
        early, late = sorted(after[3:13])[5], sorted(after[-10:])[5]
        print(
            f"median RSS of swaps 3-12: {early:.0f} MiB; of the last 10: {late:.0f} MiB; ratio {late / early:.3f}"
        )
    median_peak, median_rise = sorted(peaks)[len(peaks) // 2], sorted(rises)[len(rises) // 2]
    print(f"highest RSS during a swap: {max(peaks):.0f} MiB (median of per-swap peaks {median_peak:.0f})")
    print(f"median rise of RSS during a swap above the RSS before it: {median_rise:.0f} MiB")
    print(f"requests: {load.sent}, failed: {load.failed}{' ' + load.failures[0] if load.failures else ''}")
    return {"peak": median_peak, "rise": median_rise, "failed": load.failed, "sent": load.sent}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="zoo_mobilenet_v2_saved")
    parser.add_argument("--swaps", type=int, default=100)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument(
        "--policy",
        action="append",
        default=[],
        help="an --aspired_version_policy value; repeat to compare policies in one run (default: the server's)",
    )
    parser.add_argument("--server-flag", action="append", default=[], help="more model_server flags")
    args = parser.parse_args(argv)
    results = {p: run(args.model, args.swaps, args.clients, p, args.server_flag) for p in args.policy or [""]}
    if len(results) > 1:
        print("\npolicy                     median peak  median rise  failed/sent")
        for policy, r in results.items():
            print(
                f"{policy or 'default':26s} {r['peak']:8.0f} MiB {r['rise']:8.0f} MiB  {r['failed']}/{r['sent']}"
            )
        (first, a), (second, b) = list(results.items())[:2]
        print(
            f"peak ratio {second} / {first}: {b['peak'] / a['peak']:.2f}; rise ratio {b['rise'] / a['rise']:.2f}"
        )


if __name__ == "__main__":
    main()
