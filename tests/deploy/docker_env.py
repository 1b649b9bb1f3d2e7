"""Docker for the deployment tests, made on this machine from Debian's packages alone.

No image registry is reachable here (nor on CI), so nothing is pulled:

1. ``docker.io`` and ``debootstrap`` come from Debian (``apt-get install``) when missing;
2. ``dockerd`` is started when no daemon answers (it keeps running after the tests, as a
   service would);
3. the base image is a ``debootstrap --variant=minbase`` root file system of Debian bookworm
   with ``python3`` and ``python3-venv``, ``docker import``-ed as ``BASE_IMAGE``. Docker's image
   store is the cache: when ``BASE_IMAGE`` exists it is used as it is (its tag names a hash of
   how it was made, so changing the recipe makes a new one). About five minutes the first time;
4. ``docker/Dockerfile`` is built with BuildKit on the host network (the only way out of a
   build here) with the host's CA bundle as the build secret ``pip_ca``, so that pip inside the
   build reaches the package index. Unchanged layers come from Docker's build cache.

``python -m tests.deploy.docker_env`` does 1-3 (``.ci/run`` calls it before the tests, so their
time and failures show on their own); the tests' session fixture does all four and fails,
never skips, with the reason when a step cannot be done. Requires root (as CI and the
developers' machines run).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEBIAN_SUITE = "bookworm"
DEBOOTSTRAP_PACKAGES = ("python3", "python3-venv")
_RECIPE = f"{DEBIAN_SUITE} minbase {','.join(DEBOOTSTRAP_PACKAGES)} v1"
BASE_IMAGE = f"savedmodel-server-base:{DEBIAN_SUITE}-{hashlib.sha256(_RECIPE.encode()).hexdigest()[:10]}"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
DOCKERD_LOG = Path("/var/log/savedmodel-server-dockerd.log")
APT_PACKAGES = {"docker": "docker.io", "dockerd": "docker.io", "debootstrap": "debootstrap"}


class DockerUnavailable(Exception):
    """A step of making Docker usable failed; the message says which and why."""


def docker_client() -> str:
    """Debian's client (``/usr/bin/docker``): it builds with BuildKit, which the Dockerfile's
    ``RUN --mount`` needs; another ``docker`` on PATH may lack it."""
    if Path("/usr/bin/docker").exists():
        return "/usr/bin/docker"
    found = shutil.which("docker")
    if not found:
        raise DockerUnavailable("no docker client (apt-get install docker.io)")
    return found


def _run(args: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kwargs)


def _log(message: str) -> None:
    sys.stderr.write(f"[docker_env] {message}\n")
    sys.stderr.flush()


def ensure_packages() -> None:
    """``docker.io`` and ``debootstrap`` from Debian, when a command of theirs is missing."""
    missing = sorted({pkg for cmd, pkg in APT_PACKAGES.items() if not _find_command(cmd)})
    if not missing:
        return
    if os.geteuid() != 0:
        raise DockerUnavailable(
            f"{', '.join(missing)} missing and not root: apt-get install {' '.join(missing)}"
        )
    _log(f"apt-get install {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for args in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *missing]):
        result = _run(args, timeout=900, env=env)
        if result.returncode != 0:
            raise DockerUnavailable(
                f"{' '.join(args)} failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
            )


def _find_command(name: str) -> str | None:
    for folder in ("/usr/sbin", "/usr/bin", "/sbin"):  # root's PATH may lack the sbin folders
        if Path(folder, name).exists():
            return str(Path(folder, name))
    return shutil.which(name)


def daemon_answers() -> bool:
    try:
        return _run([docker_client(), "info", "--format", "{{.ServerVersion}}"], timeout=30).returncode == 0
    except (DockerUnavailable, subprocess.TimeoutExpired):
        return False


def ensure_dockerd(timeout: float = 90.0) -> None:
    """A Docker daemon that answers: the running one, else a ``dockerd`` started here."""
    if daemon_answers():
        return
    dockerd = _find_command("dockerd")
    if not dockerd:
        raise DockerUnavailable("no dockerd (apt-get install docker.io)")
    _log(f"starting {dockerd} (log: {DOCKERD_LOG})")
    with open(DOCKERD_LOG, "ab") as log:
        proc = subprocess.Popen(
            [dockerd], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if daemon_answers():
            return
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    tail = DOCKERD_LOG.read_text(errors="replace")[-3000:] if DOCKERD_LOG.exists() else ""
    raise DockerUnavailable(f"dockerd did not start (exit status {proc.poll()}); its log ends:\n{tail}")


def image_exists(name: str) -> bool:
    return _run([docker_client(), "image", "inspect", name], timeout=60).returncode == 0


def ensure_base_image() -> str:
    """``BASE_IMAGE``, made by debootstrap and ``docker import`` unless it exists already."""
    if image_exists(BASE_IMAGE):
        return BASE_IMAGE
    debootstrap = _find_command("debootstrap")
    if not debootstrap:
        raise DockerUnavailable("no debootstrap (apt-get install debootstrap)")
    _log(f"making {BASE_IMAGE} with debootstrap (a few minutes, once)")
    with tempfile.TemporaryDirectory(prefix="debootstrap-", dir="/var/tmp") as tmp:
        rootfs = Path(tmp, "rootfs")
        args = [
            debootstrap,
            "--variant=minbase",
            f"--include={','.join(DEBOOTSTRAP_PACKAGES)}",
            DEBIAN_SUITE,
            str(rootfs),
        ]
        result = _run(args, timeout=1800)
        if result.returncode != 0:
            raise DockerUnavailable(f"debootstrap failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for path in Path(rootfs, cache).glob("*"):
                if path.is_file():
                    path.unlink()
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = _run(
            [docker_client(), "import", "--change", "ENV LANG=C.UTF-8", "-", BASE_IMAGE],
            timeout=600,
            stdin=tar.stdout,
        )
        tar.stdout.close()
        tar.wait()
        if imported.returncode != 0 or tar.returncode != 0:
            raise DockerUnavailable(f"docker import failed:\n{imported.stderr[-3000:]}")
    return BASE_IMAGE


def build_image(tag: str, base_image: str = BASE_IMAGE, timeout: float = 1200) -> None:
    """``docker build`` of ``docker/Dockerfile`` from the repository, as ``tag``; the image the
    tag named before is removed when the build made a new one (runs would pile them up)."""
    previous = _image_id(tag)
    args = [docker_client(), "build", "--network", "host", "-f", "docker/Dockerfile", "-t", tag]
    args += ["--build-arg", f"BASE_IMAGE={base_image}"]
    if Path(CA_BUNDLE).exists():
        args += ["--secret", f"id=pip_ca,src={CA_BUNDLE}"]
    env = dict(os.environ, DOCKER_BUILDKIT="1")
    result = _run([*args, "."], timeout=timeout, cwd=REPO_ROOT, env=env)
    if result.returncode != 0:
        raise DockerUnavailable(f"docker build failed:\n{result.stdout[-4000:]}{result.stderr[-6000:]}")
    if previous and previous != _image_id(tag):
        _run([docker_client(), "rmi", previous], timeout=120)  # fails harmlessly while a container uses it


def _image_id(name: str) -> str:
    result = _run([docker_client(), "image", "inspect", "--format", "{{.Id}}", name], timeout=60)
    return result.stdout.strip() if result.returncode == 0 else ""


def prepare() -> str:
    """Steps 1-3; returns the base image's name."""
    ensure_packages()
    ensure_dockerd()
    return ensure_base_image()


def main() -> int:
    started = time.monotonic()
    try:
        base = prepare()
    except DockerUnavailable as e:
        _log(f"Docker is not usable: {e}")
        return 1
    _log(f"docker ready, base image {base} ({time.monotonic() - started:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
