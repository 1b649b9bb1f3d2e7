"""``--num_workers=N``: N server processes sharing the ports, under one supervisor.

A Python process runs Python on one core at a time (the GIL), so one model_server uses about
one core however many threads it has. With ``--num_workers=N`` (ours; the default 1 runs the
server in this process, as TF Serving does) ``model_server`` becomes a supervisor that:

- runs the start-up checks and reads the model config once (``serving.server``), so bad flags
  and configs fail with TF Serving's texts and exit status 255 before any worker starts;
- reserves ``--port`` and ``--rest_api_port``: it fails as a taken port does when another
  process listens there, then holds a bound, never listening socket with SO_REUSEPORT for its
  whole life, so no other program can take a port while its workers restart (a socket that
  does not listen receives no connections);
- starts N workers, each ``python -m serving`` with the same flags and ``--num_workers=1``: a
  whole server that loads every model and listens on the ports with SO_REUSEPORT (grpcio's
  default; the REST server's too), so the kernel spreads new connections over the workers;
- restarts a worker that dies once the server has started (every worker serving once), with a
  back-off while restarts keep failing; a worker that exits before then stops the server with
  the worker's exit status, as a failed start of a single server would;
- forwards SIGTERM and SIGINT to every worker (each drains as ``serving.resources.drain`` says; workers
  run in a session of their own, so a terminal's Ctrl-C reaches them once, through here) and
  exits 0 once every worker has drained and exited 0.

Workers learn what they need from their environment (``serving.cli`` reads it): their index
(``WORKER_ENV``, for their log lines), the pipe on which they say "serving" (``READY_FD_ENV``)
and the supervisor's pid (``PARENT_PID_ENV``: a worker whose supervisor dies gets SIGTERM and
drains, Linux's PR_SET_PDEATHSIG). ``PROMETHEUS_MULTIPROC_DIR`` is set to a fresh directory
per supervisor, before any worker imports prometheus-client, so that metrics written by every
worker can be read and summed by whichever worker answers a scrape (prometheus-client's
multiprocess mode); the files of a worker that exits are marked dead.

Single-threaded: the supervisor's state changes only in its loop; signal handlers set flags.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from runtime import errors
from serving.options import ServerOptions

logger = logging.getLogger(__name__)

WORKER_ENV = "MODEL_SERVER_WORKER"
READY_FD_ENV = "MODEL_SERVER_READY_FD"
PARENT_PID_ENV = "MODEL_SERVER_SUPERVISOR_PID"
METRICS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
RESTART_DELAYS = (0.0, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)  # after 0, 1, 2, ... failed restarts in a row
STABLE_SECONDS = 10.0  # a worker serving this long resets the back-off
_PR_SET_PDEATHSIG = 1


def worker_args(argv: Sequence[str], unknown: Sequence[str]) -> list[str]:
    """A worker's flags: the supervisor's, without ``--num_workers`` (either spelling) and
    the arguments it already reported as unknown, then ``--num_workers=1``."""
    args, skip, dropped = [], False, list(unknown)
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--num_workers":
            skip = True
            continue
        if arg.startswith("--num_workers="):
            continue
        if arg in dropped:
            dropped.remove(arg)
            continue
        args.append(arg)
    return [*args, "--num_workers=1"]


def check_options(options: ServerOptions) -> None:
    """What ``--num_workers`` needs of the other flags: ports every worker can share."""
    if options.num_workers < 1:
        raise errors.InvalidArgumentError(
            None, None, f"--num_workers must be at least 1; got {options.num_workers}"
        )
    if options.grpc_socket_path:
        raise errors.InvalidArgumentError(
            None,
            None,
            "--grpc_socket_path cannot be shared by several workers; use --port with --num_workers",
        )
    for item in options.grpc_channel_arguments.split(","):
        key, _, value = item.partition("=")
        if key.strip() == "grpc.so_reuseport" and value.strip() == "0":
            raise errors.InvalidArgumentError(
                None, None, "--num_workers shares --port with SO_REUSEPORT; grpc.so_reuseport=0 forbids it"
            )


def reserve_port(host: str, port: int) -> socket.socket:
    """A socket bound to (host, port) with SO_REUSEPORT that never listens: the port stays
    ours while workers come and go. Fails as a taken port does when another process holds it
    (a probe without SO_REUSEPORT, which any other listener, sharing or not, refuses)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as e:
            raise errors.InvalidArgumentError(
                None, None, f"Failed to BuildAndStart gRPC server: {host}:{port}: {e.strerror}"
            ) from None
    reservation = socket.socket(family, kind, proto)
    reservation.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    reservation.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    reservation.bind(address)
    return reservation


def die_with_parent(parent_pid: int) -> None:
    """In a worker: SIGTERM when the supervisor dies (Linux), so a worker never outlives it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the supervisor's own stop still reaches us
        return
    if os.getppid() != parent_pid:  # it died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


def describe_exit(status: int) -> str:
    if status < 0:
        try:
            return f"signal {signal.Signals(-status).name}"
        except ValueError:
            return f"signal {-status}"
    return f"status {status}"


@dataclass
class Worker:
    """One worker process and what the supervisor knows of it."""

    index: int
    proc: subprocess.Popen
    ready_fd: int
    started: float
    ready_at: float | None = None


@dataclass
class _Slot:
    """A worker's place: its current process (None while waiting to restart) and back-off."""

    index: int
    worker: Worker | None = None
    failures: int = 0
    restart_at: float = 0.0


@dataclass
class Supervisor:
    """Runs ``num_workers`` workers until a signal, then drains them; see the module docstring."""

    num_workers: int
    args: list[str]
    env: Mapping[str, str]
    command: list[str] = field(default_factory=lambda: [sys.executable, "-m", "serving"])
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self._slots = [_Slot(i) for i in range(1, self.num_workers + 1)]
        self._signals: list[int] = []
        self._stopping = False
        self._exit_status = 0
        self._started = False
        self._metrics_dir = ""

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> int:
        """Starts the workers and supervises them until they have all exited; the exit status."""
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        old_wakeup = signal.set_wakeup_fd(wake_w)
        handlers = {
            s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD)
        }
        self._metrics_dir = tempfile.mkdtemp(prefix="model_server_metrics_")
        try:
            for slot in self._slots:
                self._start(slot)
            while any(slot.worker for slot in self._slots) or not self._stopping:
                self._wait(wake_r)
                self._handle_signals()
                self._reap()
                self._restart_due()
            logger.info("Every worker has exited; exit status %d", self._exit_status)
            return self._exit_status
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
            signal.set_wakeup_fd(old_wakeup)
            os.close(wake_r)
            os.close(wake_w)
            shutil.rmtree(self._metrics_dir, ignore_errors=True)

    def _on_signal(self, signum, frame) -> None:
        if signum != signal.SIGCHLD:
            self._signals.append(signum)

    def _wait(self, wake_r: int) -> None:
        fds = [wake_r] + [s.worker.ready_fd for s in self._slots if s.worker and s.worker.ready_fd >= 0]
        try:
            readable, _, _ = select.select(fds, [], [], 0.5)
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for clarity
            return
        for fd in readable:
            if fd == wake_r:
                os.read(wake_r, 512)
            else:
                self._on_ready_pipe(fd)

    def _on_ready_pipe(self, fd: int) -> None:
        slot = next(s for s in self._slots if s.worker and s.worker.ready_fd == fd)
        worker = slot.worker
        data = os.read(fd, 64)
        if data and worker.ready_at is None:
            worker.ready_at = self.clock()
            logger.info("Worker %d (pid %d) is serving", worker.index, worker.proc.pid)
            self._log_all_ready()
        if not data:  # the worker closed it or exited: nothing more will come
            os.close(fd)
            worker.ready_fd = -1

    def _log_all_ready(self) -> None:
        if not self._started and all(s.worker and s.worker.ready_at for s in self._slots):
            self._started = True
            pids = ", ".join(str(s.worker.proc.pid) for s in self._slots)
            logger.info("All %d workers are serving (pids %s)", self.num_workers, pids)

    # -- workers -------------------------------------------------------------------------------

    def _start(self, slot: _Slot) -> None:
        ready_r, ready_w = os.pipe()
        env = dict(self.env)
        env.update(
            {
                WORKER_ENV: str(slot.index),
                READY_FD_ENV: str(ready_w),
                PARENT_PID_ENV: str(os.getpid()),
                METRICS_DIR_ENV: self._metrics_dir,
            }
        )
        try:
            proc = subprocess.Popen(
                [*self.command, *self.args], env=env, pass_fds=(ready_w,), start_new_session=True
            )
        finally:
            os.close(ready_w)
        slot.worker = Worker(slot.index, proc, ready_r, self.clock())
        logger.info("Started worker %d (pid %d)", slot.index, proc.pid)

    def _reap(self) -> None:
        for slot in self._slots:
            worker = slot.worker
            if worker is None or worker.proc.poll() is None:
                continue
            if worker.ready_fd >= 0:
                self._drain_ready_pipe(slot)
            slot.worker = None
            self._mark_metrics_dead(worker.proc.pid)
            self._on_exit(slot, worker, worker.proc.returncode)

    def _drain_ready_pipe(self, slot: _Slot) -> None:
        while slot.worker.ready_fd >= 0:
            self._on_ready_pipe(slot.worker.ready_fd)

    def _on_exit(self, slot: _Slot, worker: Worker, status: int) -> None:
        how = describe_exit(status)
        if self._stopping:
            log = logger.info if status == 0 else logger.error
            log("Worker %d (pid %d) exited with %s", worker.index, worker.proc.pid, how)
            if status != 0 and self._exit_status == 0:
                self._exit_status = 1  # a worker did not drain cleanly
            return
        if not self._started:
            # The first start failed (a model that does not load, a port taken): the server
            # has started only once every worker has; as a single server's failed start, the
            # whole server fails with the worker's status.
            logger.error(
                "Worker %d (pid %d) failed to start (%s); stopping", worker.index, worker.proc.pid, how
            )
            self._exit_status = status if status > 0 else 1
            self._stop_all(signal.SIGTERM)
            return
        if worker.ready_at is not None and self.clock() - worker.ready_at >= STABLE_SECONDS:
            slot.failures = 0
        delay = RESTART_DELAYS[min(slot.failures, len(RESTART_DELAYS) - 1)]
        slot.failures += 1
        slot.restart_at = self.clock() + delay
        logger.warning(
            "Worker %d (pid %d) exited with %s; starting a new one in %.1fs",
            worker.index,
            worker.proc.pid,
            how,
            delay,
        )

    def _restart_due(self) -> None:
        if self._stopping:
            return
        now = self.clock()
        for slot in self._slots:
            if slot.worker is None and now >= slot.restart_at:
                self._start(slot)

    def _mark_metrics_dead(self, pid: int) -> None:
        """prometheus-client's multiprocess mode: a dead worker's live gauges stop counting."""
        try:
            from prometheus_client import multiprocess
        except ImportError:  # pragma: no cover - a dependency; nothing to mark without it
            return
        multiprocess.mark_process_dead(pid, self._metrics_dir)

    # -- stopping ------------------------------------------------------------------------------

    def _handle_signals(self) -> None:
        while self._signals:
            signum = self._signals.pop(0)
            first = not self._stopping
            logger.info(
                "Received signal %d; %s", signum, "stopping the workers" if first else "passing it on"
            )
            self._stopping = True
            self._stop_all(signum)

    def _stop_all(self, signum: int) -> None:
        self._stopping = True
        for slot in self._slots:
            if slot.worker is not None:
                try:
                    slot.worker.proc.send_signal(signum)
                except OSError as e:  # it exited meanwhile; the loop reaps it
                    if e.errno != errno.ESRCH:
                        raise


def run_supervisor(options: ServerOptions, args: list[str], env: Mapping[str, str]) -> int:
    """``model_server --num_workers=N`` (N > 1): checks, reserves the ports, supervises."""
    from serving import server  # grpc and the config reader, only when a server runs

    try:
        check_options(options)
        server.check_options(options)
        server.initial_config(options)
        ports = [p for p in (options.port, options.rest_api_port) if p]
        reservations = [reserve_port(options.grpc_bind_address, port) for port in ports]
    except errors.OpError as e:
        return server.fail_to_start(e)
    logger.info(
        "Starting %d workers sharing %s",
        options.num_workers,
        " and ".join(f"port {p}" for p in ports),
    )
    try:
        return Supervisor(options.num_workers, args, env).run()
    finally:
        for reservation in reservations:
            reservation.close()
