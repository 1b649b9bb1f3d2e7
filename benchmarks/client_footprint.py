"""savedmodel-client's footprint against tensorflow-serving-api's: installed size, import time
and memory, for the same client code.

    .venv/bin/python benchmarks/client_footprint.py [--repeats 7]

Installs ``client/`` into a fresh venv (``pip install ./client``, its dependencies from the
configured index) and measures it against the oracle's ``tf221`` venv, which holds
tensorflow-cpu 2.21 and tensorflow-serving-api 2.21: what a TF Serving client installs
(``tensorflow-serving-api`` requires TensorFlow). Size: the venv's site-packages, less pip and
setuptools. Import: a fresh process's wall time for each side's imports of the README's client
(the modules and ``make_tensor_proto`` / ``make_ndarray``, with and without grpc), less an empty
interpreter's start; median over ``--repeats``, sides alternating. Memory: the process's peak RSS
after those imports. A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.oracle import oracle_dir  # noqa: E402
from tests.oracle.venvs import venv_python  # noqa: E402

IMPORTS = {
    "ours": {
        "tensors": "import savedmodel_client as tf",
        "client": "import savedmodel_client as tf; "
        "from savedmodel_client.tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc",
    },
    "tensorflow-serving-api": {
        "tensors": "import tensorflow as tf",
        "client": "import tensorflow as tf; from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc",
    },
}
_NOT_THE_CLIENT = ("pip", "setuptools", "_distutils_hack", "pkg_resources", "wheel")


def site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return Path(out.stdout.strip())


def installed_bytes(directory: Path) -> int:
    total = 0
    for entry in directory.iterdir():
        if entry.name.split("-")[0].split(".")[0] in _NOT_THE_CLIENT:
            continue
        paths = entry.rglob("*") if entry.is_dir() else [entry]
        total += sum(p.stat().st_size for p in paths if p.is_file() and not p.is_symlink())
    return total


def timed(python: Path, code: str) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of a fresh process running ``code``."""
    probe = (
        code
        + "; import resource, sys; sys.stdout.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))"
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "PYTHONNOUSERSITE": "1",
    }
    started = time.perf_counter()
    result = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, env=env, cwd="/")
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-2000:])
    return elapsed, int(result.stdout.strip().splitlines()[-1]) / 1024


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    tf_python = venv_python(oracle_dir(), "tf221")
    if not tf_python.exists():
        sys.exit(f"no oracle venv at {tf_python}: run `python -m tests.oracle build`")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "client"
        venv.create(root, with_pip=True, symlinks=True)
        ours_python = root / "bin" / "python"
        subprocess.run(
            [str(ours_python), "-m", "pip", "install", "--quiet", str(REPO / "client")], check=True, cwd=tmp
        )
        subprocess.run(
            [str(ours_python), "-m", "compileall", "-q", str(site_packages(ours_python))], check=False
        )
        pythons = {"ours": ours_python, "tensorflow-serving-api": tf_python}
        sizes = {side: installed_bytes(site_packages(p)) for side, p in pythons.items()}
        runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
        bare: dict[str, list[float]] = {side: [] for side in pythons}
        for _ in range(args.repeats):
            for side, python in pythons.items():
                bare[side].append(timed(python, "pass")[0])
                for what, code in IMPORTS[side].items():
                    runs.setdefault((side, what), []).append(timed(python, code))
    print(f"client footprint, {args.repeats} alternating runs, {os.cpu_count()} CPUs")
    print(
        f"{'':24} {'installed MB':>12} {'import tensors s':>17} {'import client s':>16} {'peak RSS MiB':>13}"
    )
    medians = {}
    for side in pythons:
        base = statistics.median(bare[side])
        tensors = statistics.median(t for t, _ in runs[(side, "tensors")]) - base
        client = statistics.median(t for t, _ in runs[(side, "client")]) - base
        rss = statistics.median(r for _, r in runs[(side, "client")])
        medians[side] = (sizes[side] / 1e6, tensors, client, rss)
        print(f"{side:24} {sizes[side] / 1e6:>12.1f} {tensors:>17.3f} {client:>16.3f} {rss:>13.0f}")
    ours, theirs = medians["ours"], medians["tensorflow-serving-api"]
    print(
        f"{'ratio ours/theirs':24} {ours[0] / theirs[0]:>12.3f} {ours[1] / theirs[1]:>17.3f} "
        f"{ours[2] / theirs[2]:>16.3f} {ours[3] / theirs[3]:>13.3f}"
    )
    print("import times less an empty interpreter's start; sizes less pip and setuptools")


if __name__ == "__main__":
    main()
