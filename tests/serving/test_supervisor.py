"""serving.supervisor: worker flags, the checks, the port reservation, and the supervision
policy (restart, failed first start, signal forwarding) on stand-in workers that load nothing.

Stand-in workers are small Python programs given as the supervisor's ``command``; the supervisor
runs in a process of its own (it installs signal handlers, which only a main thread may).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from runtime import errors
from serving import supervisor
from serving.options import ServerOptions
from tests.e2e.conftest import free_port

REPO = Path(__file__).resolve().parents[2]

WORKER_ARGS = {
    "equals": (["--port=9000", "--num_workers=4", "--model_name=m"], [], ["--port=9000", "--model_name=m"]),
    "spaced": (["--num_workers", "4", "--port=9000"], [], ["--port=9000"]),
    "unknown dropped": (["--port=9000", "--bogus", "--num_workers=2"], ["--bogus"], ["--port=9000"]),
    "last": (["--num_workers=2", "--model_config_file=/c"], [], ["--model_config_file=/c"]),
}


@pytest.mark.parametrize("case", WORKER_ARGS, ids=list(WORKER_ARGS))
def test_worker_args(case):
    argv, unknown, expected = WORKER_ARGS[case]
    assert supervisor.worker_args(argv, unknown) == [*expected, "--num_workers=1"]


CHECKS = {
    "zero": (ServerOptions(num_workers=0), "--num_workers must be at least 1; got 0"),
    "unix socket": (
        ServerOptions(num_workers=2, grpc_socket_path="/tmp/s"),
        "--grpc_socket_path cannot be shared by several workers",
    ),
    "no reuseport": (
        ServerOptions(
            num_workers=2, grpc_channel_arguments="grpc.max_connection_age_ms=5,grpc.so_reuseport=0"
        ),
        "grpc.so_reuseport=0 forbids it",
    ),
}


@pytest.mark.parametrize("case", CHECKS, ids=list(CHECKS))
def test_check_options_refuses_what_workers_cannot_share(case):
    options, message = CHECKS[case]
    with pytest.raises(errors.InvalidArgumentError, match=message):
        supervisor.check_options(options)


def test_check_options_accepts_ports():
    supervisor.check_options(ServerOptions(num_workers=3, grpc_channel_arguments="grpc.so_reuseport=1"))


def reuseport_listener(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def test_a_reserved_port_is_shared_by_listeners_and_only_they_get_connections():
    port = free_port()
    reservation = supervisor.reserve_port("127.0.0.1", port)
    listeners = [reuseport_listener(port) for _ in range(2)]
    try:
        accepted = {i: 0 for i in range(2)}
        for _ in range(32):
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                pass
        for i, listener in enumerate(listeners):
            listener.setblocking(False)
            while True:
                try:
                    listener.accept()[0].close()
                except BlockingIOError:
                    break
                accepted[i] += 1
        assert sum(accepted.values()) == 32, accepted  # none went to the reservation
        assert all(accepted.values()), accepted  # the kernel spread them
    finally:
        for sock in (reservation, *listeners):
            sock.close()


def test_a_port_another_process_listens_on_cannot_be_reserved():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(
            errors.InvalidArgumentError, match=f"Failed to BuildAndStart gRPC server: 127.0.0.1:{port}"
        ):
            supervisor.reserve_port("127.0.0.1", port)


def test_a_port_a_grpc_server_shares_cannot_be_reserved():
    """grpc listens with SO_REUSEPORT: another server there would silently share our port."""
    server = grpc.server(futures.ThreadPoolExecutor(1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with pytest.raises(errors.InvalidArgumentError, match="Failed to BuildAndStart gRPC server"):
            supervisor.reserve_port("127.0.0.1", port)
    finally:
        server.stop(None)


def test_describe_exit():
    assert supervisor.describe_exit(0) == "status 0"
    assert supervisor.describe_exit(255) == "status 255"
    assert supervisor.describe_exit(-9) == "signal SIGKILL"


# -- supervision, on stand-in workers ---------------------------------------------------------------

# A stand-in worker: says "serving" on its ready pipe (unless told to fail first), then waits for
# SIGTERM and exits 0; its behaviour comes from files in its working directory.
STAND_IN = textwrap.dedent(
    """
    import os, pathlib, signal, sys, time
    here = pathlib.Path(sys.argv[1])
    index = os.environ["MODEL_SERVER_WORKER"]
    starts = here / f"starts_{index}"
    starts.write_text(starts.read_text() + "x" if starts.exists() else "x")
    (here / f"pid_{index}").write_text(str(os.getpid()))
    fail = here / f"fail_{index}"
    if fail.exists():
        sys.exit(int(fail.read_text()))
    if (here / "metrics").exists():  # as a server's metrics will: imported after the supervisor set the env
        import prometheus_client
        (here / "metrics_dir").write_text(os.environ["PROMETHEUS_MULTIPROC_DIR"])
        prometheus_client.Counter("requests", "stand-in requests").inc(int(index))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    os.write(int(os.environ["MODEL_SERVER_READY_FD"]), b"serving")
    while True:
        time.sleep(0.05)
    """
)

DRIVER = textwrap.dedent(
    """
    import logging, os, sys
    sys.path.insert(0, {repo!r})
    from serving.supervisor import Supervisor
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    here = sys.argv[1]
    command = [sys.executable, os.path.join(here, "stand_in.py")]
    sys.exit(Supervisor(2, [here], dict(os.environ), command=command).run())
    """
)


class Supervised:
    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        (tmp_path / "stand_in.py").write_text(STAND_IN)
        (tmp_path / "driver.py").write_text(DRIVER.format(repo=str(REPO)))
        self.log = open(tmp_path / "supervisor.log", "wb")  # noqa: SIM115 - closed in stop
        self.proc = subprocess.Popen(
            [sys.executable, str(tmp_path / "driver.py"), str(tmp_path)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        self.log.flush()
        return (self.dir / "supervisor.log").read_text()

    def wait_for(self, text: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.output():
                return
            assert self.proc.poll() is None, self.output()
            time.sleep(0.05)
        raise AssertionError(f"{text!r} not in:\n{self.output()}")

    def pid(self, index: int) -> int:
        return int((self.dir / f"pid_{index}").read_text())

    def starts(self, index: int) -> int:
        return len((self.dir / f"starts_{index}").read_text())

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.kill()
        self.log.close()
        return self.proc.wait()


@pytest.fixture
def supervised(tmp_path):
    started = []

    def start() -> Supervised:
        started.append(Supervised(tmp_path))
        return started[-1]

    yield start
    for each in started:
        each.stop()


def test_sigterm_is_forwarded_and_the_supervisor_exits_0_once_all_exited(supervised):
    run = supervised()
    run.wait_for("All 2 workers are serving")
    pids = [run.pid(1), run.pid(2)]
    run.proc.send_signal(signal.SIGTERM)
    assert run.proc.wait(30) == 0
    for pid in pids:
        assert f"(pid {pid}) exited with status 0" in run.output()


def test_a_dead_worker_is_restarted(supervised):
    run = supervised()
    run.wait_for("All 2 workers are serving")
    first = run.pid(2)
    os.kill(first, signal.SIGKILL)
    run.wait_for(f"Worker 2 (pid {first}) exited with signal SIGKILL; starting a new one")
    run.wait_for("Worker 2 (pid", timeout=30)
    deadline = time.monotonic() + 30
    while run.starts(2) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    run.wait_for(f"Worker 2 (pid {run.pid(2)}) is serving")
    assert run.pid(2) != first and run.starts(2) == 2 and run.starts(1) == 1
    run.proc.send_signal(signal.SIGTERM)
    assert run.proc.wait(30) == 0


def test_a_worker_failing_its_first_start_stops_all_with_its_status(supervised, tmp_path):
    (tmp_path / "fail_2").write_text("255")
    run = supervised()
    assert run.proc.wait(30) == 255
    assert "failed to start (status 255); stopping" in run.output()
    assert run.starts(2) == 1  # not restarted


def test_restarts_back_off_while_they_keep_failing(supervised, tmp_path):
    run = supervised()
    run.wait_for("All 2 workers are serving")
    (tmp_path / "fail_2").write_text("3")
    os.kill(run.pid(2), signal.SIGKILL)
    run.wait_for("starting a new one in 0.0s")
    run.wait_for("exited with status 3; starting a new one in 0.5s")
    run.wait_for("exited with status 3; starting a new one in 1.0s")
    assert run.proc.poll() is None  # worker 1 serves on; the supervisor keeps trying
    (tmp_path / "fail_2").unlink()
    run.wait_for("Worker 2 (pid", timeout=30)
    run.proc.send_signal(signal.SIGTERM)
    assert run.proc.wait(30) == 0


def test_workers_write_metrics_that_one_reader_sums(supervised, tmp_path):
    """prometheus-client's multiprocess mode: every worker counts into the supervisor's
    PROMETHEUS_MULTIPROC_DIR, and one collector over that directory sums them (1 + 2)."""
    from prometheus_client import CollectorRegistry, multiprocess

    (tmp_path / "metrics").touch()
    run = supervised()
    run.wait_for("All 2 workers are serving")
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=(tmp_path / "metrics_dir").read_text())
    assert registry.get_sample_value("requests_total") == 3
    run.proc.send_signal(signal.SIGTERM)
    assert run.proc.wait(30) == 0
    assert not Path((tmp_path / "metrics_dir").read_text()).exists()  # removed with the supervisor
