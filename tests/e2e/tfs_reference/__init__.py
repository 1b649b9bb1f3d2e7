"""A reference TF Serving backed by real TensorFlow, started as a process for tests.

``server.py`` (run in the oracle's tf221 venv: TensorFlow 2.21 and ``tensorflow-serving-api``)
serves SavedModels through TF Serving's gRPC and REST APIs, so a client can be tested against
"TF Serving itself" as well as against ``model_server``. This module, imported by the main venv,
only starts and stops it; it never imports TensorFlow. Usage::

    def test_client(tfs_reference):
        server = tfs_reference({"half_plus_two": "models/half_plus_two"}, labels={"half_plus_two": {"stable": 123}})
        channel = grpc.insecure_channel(server.grpc_address)     # "127.0.0.1:<port>"
        urllib.request.urlopen(f"{server.rest_url}/v1/models/half_plus_two")  # "http://127.0.0.1:<port>"

- ``tfs_reference(models, labels=None, tls=None, timeout=120)``: the fixture, a factory; every
  server it started is stopped at teardown.
- ``start_reference(tmp_path, models, labels=None, tls=None, timeout=120)``: the same without
  pytest, e.g. for a module-scoped fixture (``tmp_path_factory.mktemp(...)``); call ``.stop()``.
- ``models``: name -> base path (numeric version directories; all are served, latest = highest).
  ``labels``: name -> {label: version}. ``tls``: ``{"cert": PEM path, "key": PEM path}``, plus
  ``"ca"`` to require client certificates on both transports (``rest_url`` is then https).
- ``ReferenceServer``: ``.grpc_address``, ``.grpc_port``, ``.rest_url``, ``.rest_port``,
  ``.proc``, ``.output()`` (its stderr so far), ``.stop()`` (SIGTERM, then SIGKILL after 30 s;
  returns the exit status, 0 when it stopped cleanly).

Start fails the test (never skips) with the process's stderr when it dies or is not READY in
time, and with how to build the venv when the oracle venv is missing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.oracle import oracle_dir

SERVER = Path(__file__).resolve().with_name("server.py")
REPO_ROOT = Path(__file__).resolve().parents[3]


def oracle_python() -> Path:
    python = oracle_dir() / "tf221" / "bin" / "python"
    if not python.exists():
        pytest.fail(f"no oracle venv at {python}: run `python -m tests.oracle build`")
    return python


class ReferenceServer:
    """One running ``server.py``; see the module docstring. Not thread-safe."""

    def __init__(self, args: list[str], log_dir: Path, grpc_port: int, rest_port: int, https: bool):
        self.grpc_port, self.rest_port = grpc_port, rest_port
        self.grpc_address = f"127.0.0.1:{grpc_port}"
        self.rest_url = f"{'https' if https else 'http'}://127.0.0.1:{rest_port}"
        self._stdout_path, self._stderr_path = log_dir / "stdout.log", log_dir / "stderr.log"
        # Files, not pipes: nobody has to drain them, and READY is read back from the file.
        with open(self._stdout_path, "wb") as out, open(self._stderr_path, "wb") as err:
            env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
            env.pop("PYTHONPATH", None)  # the oracle venv must not see the package under test
            self.proc = subprocess.Popen(
                args, cwd=REPO_ROOT, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env
            )

    def output(self) -> str:
        return self._stderr_path.read_text(errors="replace")

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "READY" in self._stdout_path.read_text(errors="replace").split():
                return
            if self.proc.poll() is not None:
                pytest.fail(f"tfs_reference server exited with {self.proc.returncode}:\n{self.output()}")
            time.sleep(0.1)
        self.stop()
        pytest.fail(f"tfs_reference server not READY after {timeout}s:\n{self.output()}")

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def start_reference(
    tmp_path: Path,
    models: Mapping[str, str | os.PathLike],
    labels: Mapping[str, Mapping[str, int]] | None = None,
    tls: Mapping[str, str | os.PathLike] | None = None,
    timeout: float = 120.0,
) -> ReferenceServer:
    """Starts ``server.py`` on two fresh loopback ports and waits for its READY line."""
    from tests.e2e.conftest import free_port  # here, not at the top: conftest imports this module

    grpc_port, rest_port = free_port(), free_port()
    args = [str(oracle_python()), str(SERVER), "--port", str(grpc_port), "--rest_api_port", str(rest_port)]
    for name, base_path in models.items():
        args += ["--model", f"{name}={Path(base_path).resolve()}"]
    for name, by_label in (labels or {}).items():
        for label, version in by_label.items():
            args += ["--label", f"{name}:{label}={version}"]
    for key in ("cert", "key", "ca"):
        if tls and tls.get(key):
            args += [f"--ssl_{key}", str(tls[key])]
    log_dir = Path(tmp_path) / f"tfs_reference_{grpc_port}"
    log_dir.mkdir(parents=True, exist_ok=True)
    server = ReferenceServer(args, log_dir, grpc_port, rest_port, https=bool(tls))
    server.wait_ready(timeout)
    return server


@pytest.fixture
def tfs_reference(tmp_path):
    """A factory: ``tfs_reference(models, labels=None, tls=None)`` -> a READY ReferenceServer."""
    started: list[ReferenceServer] = []

    def start(models, labels=None, tls=None, timeout: float = 120.0) -> ReferenceServer:
        started.append(start_reference(tmp_path, models, labels, tls, timeout))
        return started[-1]

    yield start
    for server in started:
        server.stop()
