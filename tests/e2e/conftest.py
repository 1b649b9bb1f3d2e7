"""End-to-end fixtures: ``model_server`` started as a real process on loopback, always stopped.

Usage::

    def test_predict(model_server, model_dir):
        base = model_dir("half_plus_two")               # a private copy under tmp_path
        server = model_server(f"--model_base_path={base}", "--model_name=half_plus_two")
        stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel())
        ...
        assert server.stop() == 0                        # SIGTERM; returns the exit status

- ``model_server(*flags, wait=True, timeout=60)`` starts ``model_server`` (the console script
  next to this Python when installed, else ``python -m serving``) with ``--port=<free port>``
  and ``--grpc_bind_address=127.0.0.1`` and ``--lame_duck_seconds=0`` added (pass your own
  ``--port=...`` or ``--lame_duck_seconds=...`` to override),
  waits until the health service answers SERVING (``wait=False``: don't), and returns a
  ``ModelServerProcess``: ``.port``, ``.address``, ``.channel()`` (cached, closed on stop),
  ``.new_channel(target=None, options=None)`` (another channel, e.g. with raised message
  limits), ``.unix_channel(path)``, ``.stop(sig=SIGTERM)`` (returns the exit status),
  ``.wait_exit()``, ``.wait_ready(target=...)``, ``.output()`` (stdout and stderr so far),
  ``.proc``. Every process is stopped (SIGTERM, then SIGKILL) at teardown if still alive.
- ``model_dir(name, versions=None, dest=None)`` copies ``models/<name>`` (optionally only
  some version directories, optionally renamed: ``versions={"00000123": "1"}``) to a fresh
  base path under ``tmp_path`` and returns it as a string.
- ``s3`` starts moto's S3 server on loopback behind a proxy a test can take down; yields
  (file system, proxy).
- ``free_port()`` returns a free loopback port, never one it returned before in this process
  (two picks for one server's ``--port`` and ``--rest_api_port`` must differ).
- ``requires_model(name)`` fails the test unless ``models/<name>`` exists and our loader
  loads it in-process (so the suite stays green while the loader and runtime grow).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from tests.e2e.tfs_reference import tfs_reference  # noqa: F401 - a reference TF Serving (TensorFlow)

REPO_ROOT = Path(__file__).resolve().parents[2]
MODELS_DIR = REPO_ROOT / "models"


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A port the kernel just gave and took back. The kernel may give the same one twice in a
    row; a server given it as both ``--port`` and ``--rest_api_port`` would skip REST (as TF
    Serving does) and an HTTP client would meet gRPC. So no port is handed out twice."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def server_command() -> list[str]:
    script = Path(sys.executable).with_name("model_server")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "serving"]


def version_dirs(name: str) -> list[Path]:
    base = MODELS_DIR / name
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if p.is_dir() and p.name.strip().isdigit())


_LOADABLE: dict[str, str | None] = {}


def model_load_problem(name: str) -> str | None:
    """None when ``models/<name>`` exists and our loader loads its latest version, else why not."""
    if name not in _LOADABLE:
        versions = version_dirs(name)
        if not versions:
            _LOADABLE[name] = f"models/{name} has no version directory yet"
        else:
            try:
                from loader import load_saved_model

                bundle = load_saved_model(str(versions[-1]), tags={"serve"}, delegation=False)
                close = getattr(getattr(bundle, "session", None), "close", None)
                if close:
                    close()
                _LOADABLE[name] = None
            except Exception as e:  # noqa: BLE001 - any failure means "not yet"
                _LOADABLE[name] = f"our loader cannot load models/{name} yet: {type(e).__name__}: {e}"
    return _LOADABLE[name]


def requires_model(name: str) -> None:
    problem = model_load_problem(name)
    if problem:
        pytest.fail(problem)


class ModelServerProcess:
    """One running ``model_server``; see the module docstring."""

    def __init__(self, args: list[str], log_path: Path, port: int | None):
        self.args = args
        self.port = port
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            args, cwd=REPO_ROOT, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
        self._channels: list[grpc.Channel] = []

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def channel(self) -> grpc.Channel:
        if not self._channels:
            self._channels.append(grpc.insecure_channel(self.address))
        return self._channels[0]

    def new_channel(self, target: str | None = None, options=None) -> grpc.Channel:
        channel = grpc.insecure_channel(target or self.address, options=options)
        self._channels.append(channel)
        return channel

    def unix_channel(self, path: str) -> grpc.Channel:
        return self.new_channel(f"unix:{path}")

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 60.0, target: str | None = None) -> None:
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        channel = self.new_channel(target) if target else self.channel()
        stub = health_pb2_grpc.HealthStub(channel)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"model_server exited with {self.proc.returncode}:\n{self.output()}")
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"model_server not ready after {timeout}s:\n{self.output()}")

    def wait_exit(self, timeout: float = 30.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"model_server still running after {timeout}s:\n{self.output()}") from None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        """Sends ``sig`` and waits; kills after ``timeout``. Returns the exit status."""
        for channel in self._channels:
            channel.close()
        self._channels.clear()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self._log.closed:
            self._log.close()
        return self.proc.returncode


@pytest.fixture
def model_server(tmp_path):
    started: list[ModelServerProcess] = []

    def start(*flags: str, wait: bool = True, timeout: float = 60.0) -> ModelServerProcess:
        flags = list(flags)
        port = None
        if not any(f.startswith("--port=") or f == "--port" for f in flags):
            port = free_port()
            flags.insert(0, f"--port={port}")
        else:
            for i, f in enumerate(flags):
                if f.startswith("--port="):
                    port = int(f.split("=", 1)[1])
                elif f == "--port":
                    port = int(flags[i + 1])
        if not any(f.startswith("--grpc_bind_address") for f in flags):
            flags.insert(1, "--grpc_bind_address=127.0.0.1")
        if not any(f.startswith("--lame_duck_seconds") for f in flags):
            flags.insert(1, "--lame_duck_seconds=0")  # tests stop servers often; drain tests set it
        log = tmp_path / f"model_server_{len(started)}.log"
        server = ModelServerProcess([*server_command(), *flags], log, port or None)
        started.append(server)
        if wait:
            server.wait_ready(timeout)
        return server

    yield start
    for server in started:
        server.stop(timeout=10)


@pytest.fixture
def model_dir(tmp_path):
    counter = iter(range(1000))

    def copy(name: str, versions=None, dest: str | os.PathLike | None = None) -> str:
        source = MODELS_DIR / name
        if not version_dirs(name):
            pytest.fail(f"models/{name} has no version directory")
        base = Path(dest) if dest else tmp_path / f"{name}_{next(counter)}"
        base.mkdir(parents=True, exist_ok=True)
        if isinstance(versions, dict):
            chosen = versions
        else:
            names = [p.name for p in version_dirs(name)]
            chosen = {v: v for v in (versions or names)}
        for src_name, dst_name in chosen.items():
            shutil.copytree(source / src_name, base / dst_name)
        return str(base)

    return copy


@pytest.fixture
def s3(monkeypatch):
    """moto's S3 server, a proxy in front of it, the bucket ``s3_server.BUCKET``, and the
    server's credentials in the environment. Yields (the file system, straight to moto; the
    proxy): point ``AWS_ENDPOINT_URL`` at ``proxy.url`` for the server."""
    import s3fs

    from tests.e2e.s3_server import BUCKET, CREDENTIALS, MotoServer, Proxy

    moto = MotoServer()
    proxy = Proxy(moto.port)
    for key, value in {**CREDENTIALS, "AWS_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    fs = s3fs.S3FileSystem(endpoint_url=moto.url)
    fs.mkdir(BUCKET)
    yield fs, proxy
    proxy.close()
    moto.stop()


@pytest.fixture(name="free_port")
def free_port_fixture():
    return free_port
