"""Pinned TensorFlow virtual environments for the oracle (stdlib only).

Each venv is a list of ``pip install`` steps. The steps are stamped, as JSON, into
``<venv>/sms-requirements.json`` once installed; a venv whose stamp differs from the pins is
rebuilt from scratch. A venv without a stamp whose installed versions already match the pins
(made by hand, or by CI's cache) is adopted rather than downloaded again.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

# tensorflow-serving-api pins a tensorflow (not tensorflow-cpu) dependency: --no-deps keeps
# it from pulling a second TensorFlow next to tensorflow-cpu. tf2onnx (the raw-onnxruntime baseline of
# benchmarks/onnx_delegation.py) is tested with TensorFlow 2.13-2.15; 1.17.0 and onnx 1.17.0 install next
# to TF 2.15 without changing any of its packages (tf2onnx 1.16.1 would downgrade protobuf to 3.20).
VENVS: dict[str, tuple[tuple[str, ...], ...]] = {
    "tf215": (
        ("tensorflow-cpu==2.15.1", "tensorflow-estimator==2.15.0"),
        ("tf2onnx==1.17.0", "onnx==1.17.0"),
    ),
    "tf221": (("tensorflow-cpu==2.21.0",), ("--no-deps", "tensorflow-serving-api==2.21.0")),
    # Third-party Open Inference Protocol (KServe V2) clients, unchanged: NVIDIA's and KServe's. Their
    # generated modules register the protocol's `inference.*` names, as ours do, so they run here.
    "v2clients": (("tritonclient[http,grpc]==2.73.0", "kserve==0.21.0"),),
}
# Venvs the tests use whatever models are stale: `python -m tests.oracle build` makes them too.
CLIENT_VENVS = ("v2clients",)
STAMP = "sms-requirements.json"

_INSTALLED_VERSIONS = (
    "import importlib.metadata as m, json, sys\n"
    "out = {}\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        out[name] = m.version(name)\n"
    "    except m.PackageNotFoundError:\n"
    "        out[name] = None\n"
    "print(json.dumps(out))\n"
)


def venv_python(oracle_dir: Path, name: str) -> Path:
    return oracle_dir / name / "bin" / "python"


def pins(name: str) -> str:
    """The stamp text of venv ``name``; part of every builder hash built in it."""
    return json.dumps([list(step) for step in VENVS[name]])


def ensure_venv(oracle_dir: Path, name: str, log=print) -> Path:
    """Returns the python of venv ``name``, creating or rebuilding the venv when needed."""
    venv = oracle_dir / name
    python = venv_python(oracle_dir, name)
    stamp = venv / STAMP
    wanted = pins(name)
    if stamp.is_file() and stamp.read_text() == wanted and python.exists():
        return python
    if python.exists() and not stamp.exists() and _matches_pins(python, name):
        stamp.write_text(wanted)
        log(f"venv {name}: adopted existing {venv}")
        return python
    log(f"venv {name}: creating {venv} ({wanted})")
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    for step in VENVS[name]:
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *step], check=True)
    stamp.write_text(wanted)
    return python


def _matches_pins(python: Path, name: str) -> bool:
    wanted = {}
    for step in VENVS[name]:
        for arg in step:
            if "==" in arg:
                dist, version = arg.split("==")
                wanted[dist.partition("[")[0]] = version  # (without extras)
    result = subprocess.run(
        [str(python), "-c", _INSTALLED_VERSIONS, *wanted],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        return False
    return json.loads(result.stdout) == wanted
