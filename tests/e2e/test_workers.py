"""``--num_workers 2`` as real processes: one supervisor, two workers sharing the gRPC port.

Which worker answers a client is read from the kernel (``tests/e2e/sockets.py``: the server end
of each client's connection and the process holding it), so nothing changes in what clients see.
Sixteen clients, each with a connection of its own, as in ``test_drain.py``.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import time

import grpc
import numpy as np

from apis.tensorflow_serving.apis import predict_pb2
from runtime.tensor_util import make_tensor_proto
from tests.e2e import sockets
from tests.e2e.grpc_load import OWN_CONNECTION, PREDICT, PredictLoad, count

ALL_SERVING = re.compile(r"All 2 workers are serving \(pids (\d+), (\d+)\)")


def predict_bytes() -> bytes:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "half_plus_two"
    request.inputs["x"].CopyFrom(make_tensor_proto(np.float32([[1.0]])))
    return request.SerializeToString()


def wait_for_output(server, pattern: re.Pattern, timeout: float = 90.0, after: int = 0) -> re.Match:
    """The first match of ``pattern`` in the server's output past offset ``after``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = pattern.search(server.output(), after)
        if found:
            return found
        if server.proc.poll() is not None:
            raise AssertionError(f"model_server exited with {server.proc.returncode}:\n{server.output()}")
        time.sleep(0.1)
    raise AssertionError(f"{pattern.pattern!r} not in the output after {timeout}s:\n{server.output()}")


def start_two_workers(model_server, model_dir, *flags):
    server = model_server(
        f"--model_base_path={model_dir('half_plus_two')}",
        "--model_name=half_plus_two",
        "--num_workers=2",
        *flags,
    )
    pids = [int(p) for p in wait_for_output(server, ALL_SERVING).groups()]
    assert sorted(pids) == sockets.children(server.proc.pid)
    return server, pids


def owners(load: PredictLoad, pids: list[int]) -> dict[int, int | None]:
    """client index -> the worker pid holding its connection."""
    by_port = sockets.connection_owners(load.port, load.client_ports, pids)
    return {i: by_port[port] for i, port in enumerate(load.client_ports)}


def test_requests_spread_over_both_workers(model_server, model_dir):
    server, pids = start_two_workers(model_server, model_dir)
    with PredictLoad(server.address, predict_bytes()) as load:
        worker_of = owners(load, pids)
        time.sleep(2.0)
    assert set(worker_of.values()) == set(pids), worker_of  # every client is on one of the two
    answered = {
        pid: sum(1 for c in load.calls if c.code == "OK" and worker_of[c.client] == pid) for pid in pids
    }
    print(f"calls answered per worker pid: {answered}; all calls: {count(load.calls)}")
    assert count(load.calls).keys() == {"OK"}
    assert all(n > 0 for n in answered.values()), answered
    assert server.stop() == 0


def test_a_killed_worker_is_replaced_and_only_its_calls_in_flight_fail(model_server, model_dir):
    server, pids = start_two_workers(model_server, model_dir, "--lame_duck_seconds=0.5")
    log_offset = len(server.output())
    with PredictLoad(server.address, predict_bytes()) as load:
        worker_of = owners(load, pids)
        victim = next(pid for pid in pids if list(worker_of.values()).count(pid) > 0)
        time.sleep(1.0)
        killed = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        while not sockets.is_dead(victim):
            time.sleep(0.001)
        dead = time.monotonic()
        replaced = wait_for_output(
            server, re.compile(r"Worker (\d) \(pid (\d+)\) is serving"), after=log_offset
        )
        time.sleep(1.0)
    new_pid = int(replaced.group(2))
    assert new_pid not in pids and new_pid in sockets.children(server.proc.pid)
    assert f"(pid {victim}) exited with signal SIGKILL; starting a new one" in server.output()
    failed = [c for c in load.calls if c.code != "OK"]
    print(f"killed {victim} ({killed:.3f}), dead at +{dead - killed:.3f}s; failed calls: {failed}")
    print(
        f"all calls: {count(load.calls)}; clients on the killed worker: {list(worker_of.values()).count(victim)}"
    )
    for call in failed:
        # In flight on the killed worker: its client's connection was there, it was sent before
        # the worker was gone (50 ms for the client to see its connection closed) and ended after the kill.
        assert worker_of[call.client] == victim, call
        assert call.sent < dead + 0.05 and call.done >= killed, call
    assert len({c.client for c in failed}) == len(failed)  # at most one per client: the one in flight
    late = [c for c in load.calls if c.sent > dead + 0.05]
    assert late and all(c.code == "OK" for c in late)  # the killed worker's clients reconnected
    # The new worker serves: new connections reach it (the kernel spreads them over both).
    assert any(_answered_by(server, new_pid) for _ in range(64)), f"no connection reached {new_pid}"
    assert server.stop() == 0


def _answered_by(server, pid: int) -> bool:
    before = sockets.own_connections(server.port)
    with grpc.insecure_channel(server.address, options=OWN_CONNECTION) as channel:
        channel.unary_unary(PREDICT)(predict_bytes(), timeout=10)
        (port,) = sockets.own_connections(server.port) - before
        return sockets.connection_owners(server.port, [port], [pid])[port] == pid


def test_sigterm_under_load_drains_every_worker_and_loses_nothing(model_server, model_dir):
    server, pids = start_two_workers(model_server, model_dir, "--lame_duck_seconds=1")
    with PredictLoad(server.address, predict_bytes()) as load:
        worker_of = owners(load, pids)
        time.sleep(1.0)
        signalled = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        assert server.wait_exit(timeout=30) == 0
        time.sleep(0.2)
    before = count(c for c in load.calls if c.sent < signalled)
    after = count(c for c in load.calls if c.sent >= signalled)
    print(f"sent before SIGTERM: {before}; after: {after}")
    assert set(before) == {"OK"}, before  # nothing lost
    assert set(after) <= {"OK", "UNAVAILABLE"}, after  # refused retryably, never CANCELLED
    assert set(worker_of.values()) == set(pids)  # both workers had clients to drain
    output = server.output()
    for pid in pids:
        assert f"(pid {pid}) exited with status 0" in output
        assert f"pid {pid}: Lame duck" in output and f"pid {pid}: Server stopped" in output
    assert not sockets.children(server.proc.pid)


def test_a_failed_first_start_stops_the_server_with_tf_servings_status(model_server, tmp_path):
    (tmp_path / "m" / "1").mkdir(parents=True)  # a version directory with no SavedModel in it
    server = model_server(
        f"--model_base_path={tmp_path / 'm'}", "--num_workers=2", "--max_num_load_retries=0", wait=False
    )
    assert server.wait_exit(timeout=60) == 255
    output = server.output()
    assert output.count("Failed to start server. Error: UNKNOWN: 1 servable(s) did not become available") >= 1
    assert "failed to start (status 255); stopping" in output


def test_a_taken_port_fails_before_any_worker_starts(model_server, model_dir):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = model_server(
            f"--port={port}", f"--model_base_path={model_dir('half_plus_two')}", "--num_workers=2", wait=False
        )
        assert server.wait_exit(timeout=60) == 255
    output = server.output()
    assert (
        f"Failed to start server. Error: INVALID_ARGUMENT: Failed to BuildAndStart gRPC server: 127.0.0.1:{port}"
        in output
    )
    assert "Started worker" not in output
