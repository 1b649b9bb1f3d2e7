"""Resident memory of ``model_server`` over large Predict requests, REST and gRPC.

    .venv/bin/python benchmarks/large_requests.py [--floats 4000000] [--sequential 100]
        [--concurrent 16] [--server-flag=--max_request_bytes_in_flight=...]

Serves ``models/half_plus_two`` and sends it requests of ``--floats`` float32 values (4 million:
a 16 MB JSON body over REST, 16 MB of tensor content over gRPC): first ``--sequential`` one after
another on each transport, then ``--concurrent`` at once, three rounds. It prints the server's
RSS before, its highest value (sampled every 10 ms) and after each phase, and the answers by
status: a request past ``--max_request_bytes_in_flight`` is answered RESOURCE_EXHAUSTED (429),
which a client retries. A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import grpc

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e.conftest import free_port  # noqa: E402
from tests.e2e.test_large_requests import grpc_request, rest_body, rss_mib  # noqa: E402

PREDICT = "/tensorflow.serving.PredictionService/Predict"


class Peak:
    """The highest RSS of ``pid`` while it runs (sampled every 10 ms)."""

    def __init__(self, pid: int) -> None:
        self._pid, self.value, self._stop = pid, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.value = max(self.value, rss_mib(self._pid))
            time.sleep(0.01)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.value


def send_rest(port: int, body: bytes) -> str:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/models/half_plus_two:predict", data=body, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            response.read()
            return str(response.status)
    except urllib.error.HTTPError as e:
        e.read()
        return str(e.code)
    except OSError as e:
        return type(e).__name__


def send_grpc(call, data: bytes) -> str:
    try:
        call(data, timeout=300)
        return "OK"
    except grpc.RpcError as e:
        return e.code().name


def phase(name: str, pid: int, sends: list) -> None:
    before, peak = rss_mib(pid), Peak(pid)
    results: collections.Counter = collections.Counter()
    threads = [threading.Thread(target=lambda s=s: results.update([s()])) for s in sends]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - start
    time.sleep(0.5)
    highest, after = peak.stop(), rss_mib(pid)
    time.sleep(2.0)  # the heap's trim runs at most once a second
    settled = rss_mib(pid)
    answers = ", ".join(f"{k}: {v}" for k, v in sorted(results.items()))
    print(
        f"{name:34s} RSS before {before:5.0f} MiB, peak {highest:5.0f}, after {after:5.0f}"
        f" (2 s later {settled:5.0f})"
        f" ({elapsed:5.1f} s; {answers})",
        flush=True,
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--floats", type=int, default=4_000_000)
    parser.add_argument("--sequential", type=int, default=100)
    parser.add_argument("--concurrent", type=int, default=16)
    parser.add_argument("--server-flag", action="append", default=[], help="more model_server flags")
    args = parser.parse_args(argv)
    port, rest_port = free_port(), free_port()
    command = [sys.executable, "-m", "serving", f"--port={port}", f"--rest_api_port={rest_port}"]
    command += ["--grpc_bind_address=127.0.0.1"]
    command += ["--model_name=half_plus_two", f"--model_base_path={REPO / 'models' / 'half_plus_two'}"]
    command += ["--grpc_max_threads=64", "--rest_api_num_threads=32"]
    command += args.server_flag
    log = tempfile.NamedTemporaryFile(prefix="large-requests-", suffix=".log", delete=False)  # noqa: SIM115
    env = dict(os.environ, PYTHONPATH=str(REPO))
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    body, data = rest_body(args.floats), grpc_request(args.floats)
    print(f"REST body {len(body) / 1e6:.1f} MB, gRPC request {len(data) / 1e6:.1f} MB")
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=options)
    call = channel.unary_unary(PREDICT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{rest_port}/v1/models/half_plus_two") as r:
                    if b"AVAILABLE" in r.read():
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"model_server did not start; see {log.name}")
            time.sleep(0.2)
        time.sleep(1)
        print(f"server started: RSS {rss_mib(server.pid):.0f} MiB; flags {' '.join(args.server_flag) or '-'}")
        for transport, send in (
            ("REST", lambda: send_rest(rest_port, body)),
            ("gRPC", lambda: send_grpc(call, data)),
        ):
            before, peak = rss_mib(server.pid), Peak(server.pid)
            results: collections.Counter = collections.Counter()
            samples = []
            for i in range(args.sequential):
                results.update([send()])
                if i + 1 in (1, 2, 5, 10, 50, 100) or i + 1 == args.sequential:
                    samples.append(f"{i + 1}: {rss_mib(server.pid):.0f}")
            highest = peak.stop()
            answers = ", ".join(f"{k}: {v}" for k, v in sorted(results.items()))
            print(
                f"{transport} {args.sequential} sequential: RSS before {before:.0f} MiB, after request "
                f"{'; '.join(samples)}; peak {highest:.0f} ({answers})",
                flush=True,
            )
        for round_ in range(1, 4):
            for transport, send in (
                ("REST", lambda: send_rest(rest_port, body)),
                ("gRPC", lambda: send_grpc(call, data)),
            ):
                phase(
                    f"{transport} {args.concurrent} concurrent, round {round_}",
                    server.pid,
                    [send] * args.concurrent,
                )
        print(f"server alive: {server.poll() is None}; RSS at the end {rss_mib(server.pid):.0f} MiB")
    finally:
        channel.close()
        server.send_signal(signal.SIGTERM)
        server.wait(60)
        log.close()


if __name__ == "__main__":
    main()
