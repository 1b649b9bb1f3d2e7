"""Fixtures of the deployment tests: the image built from ``docker/Dockerfile``, containers.

- ``docker_daemon`` (session): Docker's packages and a running daemon; ``docker_image``
  (session): the base image and the image built from ``docker/Dockerfile`` (``docker_env``).
  When that cannot be done the tests fail with the reason, never skip.
- ``container(*args, env=..., volumes=..., options=...)``: ``docker run -d --network host
  [options] IMAGE [args]`` (loopback ports only, never the bridge network; ``args`` are appended
  to the entrypoint's flags, as ``docker run IMAGE ARGS`` does); returns a ``Container``. Every container
  started is removed (``docker rm -f`` by its id) at teardown.
"""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest

from tests.deploy import docker_env
from tests.e2e.conftest import model_dir  # noqa: F401 - a private copy of models/<name>, as in e2e

IMAGE = "savedmodel-server:test"


def _unusable(e: docker_env.DockerUnavailable):
    pytest.fail(f"the deployment tests need Docker, and it is not usable here: {e}", pytrace=False)


@pytest.fixture(scope="session")
def docker_daemon() -> None:
    try:
        docker_env.ensure_packages()
        docker_env.ensure_dockerd()
    except docker_env.DockerUnavailable as e:
        _unusable(e)


@pytest.fixture(scope="session")
def docker_image(docker_daemon) -> str:
    try:
        docker_env.build_image(IMAGE, docker_env.ensure_base_image())
    except docker_env.DockerUnavailable as e:
        _unusable(e)
    return IMAGE


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [docker_env.docker_client(), *args], capture_output=True, text=True, timeout=timeout
    )
    if check and result.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result


class Container:
    """One container of the image; ``id`` is Docker's."""

    def __init__(self, image: str, args, env: dict, volumes: dict, options, name: str) -> None:
        command = ["run", "-d", "--network", "host", "--name", name, *options]
        for key, value in env.items():
            command += ["-e", f"{key}={value}"]
        for source, target in volumes.items():
            command += ["-v", f"{source}:{target}"]
        self.name = name
        self.id = docker(*command, image, *args).stdout.strip()

    def exec(self, *command: str) -> str:
        return docker("exec", self.id, *command).stdout

    def logs(self) -> str:
        result = docker("logs", self.id, check=False)
        return result.stdout + result.stderr

    def inspect(self, template: str) -> str:
        return docker("inspect", "--format", template, self.id).stdout.strip()

    def running(self) -> bool:
        return self.inspect("{{.State.Running}}") == "true"

    def wait_for_log(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.logs():
                return
            if not self.running():
                raise AssertionError(
                    f"container exited ({self.inspect('{{.State.ExitCode}}')}):\n{self.logs()}"
                )
            time.sleep(0.2)
        raise AssertionError(f"{text!r} not logged after {timeout}s:\n{self.logs()}")

    def health(self) -> str:
        return self.inspect("{{if .State.Health}}{{.State.Health.Status}}{{end}}")

    def wait_healthy(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.health() == "healthy":
                return
            time.sleep(0.5)
        last = self.inspect("{{json .State.Health}}")
        raise AssertionError(f"not healthy after {timeout}s: {last}\n{self.logs()}")

    def stop(self, *args: str) -> int:
        """``docker stop`` (with ``args``, e.g. ``-t 30``); the container's exit code."""
        docker("stop", *args, self.id, timeout=120)
        return int(self.inspect("{{.State.ExitCode}}"))

    def remove(self) -> None:
        docker("rm", "-f", self.id, check=False)


@pytest.fixture
def container(docker_image):
    started: list[Container] = []

    def run(*args: str, env: dict | None = None, volumes: dict | None = None, options=()) -> Container:
        name = f"savedmodel-server-test-{uuid.uuid4().hex[:10]}"
        started.append(Container(docker_image, args, env or {}, volumes or {}, list(options), name))
        return started[-1]

    yield run
    for each in started:
        each.remove()
