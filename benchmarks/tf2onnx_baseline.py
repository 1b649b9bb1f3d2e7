"""The raw-onnxruntime baseline of ``onnx_delegation.py``: tf2onnx's conversion of a whole SavedModel.

``convert`` runs ``python -m tf2onnx.convert`` in the oracle venv ``tf215`` (tf2onnx 1.17 is tested
with TensorFlow 2.13-2.15) on one signature of one SavedModel, and caches the ``.onnx`` file, or the
reason it could not be made, under ``.oracle/bench/tf2onnx/`` by the model's builder hash, the
venv's pins and the conversion's environment. ``RawSession`` runs that file with a plain
``onnxruntime.InferenceSession``, fed by the signature's input keys, answering by its output keys.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import numpy as np
import onnxruntime as ort

from runtime.onnx.options import DelegationOptions, session_options
from tests.oracle.venvs import pins

REPO_ROOT = Path(__file__).resolve().parents[1]
VENV = "tf215"
TF_PYTHON = REPO_ROOT / ".oracle" / VENV / "bin" / "python"
CACHE = REPO_ROOT / ".oracle" / "bench" / "tf2onnx"
OPSET = 17
# Log level 2 keeps TF's C++ errors: the reason tf2onnx gives for some failures is only there. One
# hash seed: tf2onnx's loop rewriter succeeds or fails on the same graph depending on set order.
TF_ENV = {
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "CUDA_VISIBLE_DEVICES": "",
    "PYTHONHASHSEED": "0",
}
TIMEOUT_S = 600


def convert(name: str, manifest: dict, case: dict) -> Path | str:
    """The ``.onnx`` file of ``case``'s signature, or one line saying why tf2onnx cannot make it."""
    if len(case["tags"]) != 1:
        return f"tag set {case['tags']}: tf2onnx's --tag takes one tag"
    key = hashlib.sha256(
        f"{manifest['builder_hash']} {case['tags']} {case['signature']} {OPSET} {pins(VENV)} {TF_ENV}".encode()
    ).hexdigest()[:16]
    onnx_path, failure = CACHE / f"{name}-{key}.onnx", CACHE / f"{name}-{key}.failed"
    if onnx_path.is_file():
        return onnx_path
    if failure.is_file():
        return failure.read_text()
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = onnx_path.with_suffix(".partial")
    command = [
        str(TF_PYTHON), "-m", "tf2onnx.convert", "--saved-model", str(manifest["export_path"]),
        "--tag", case["tags"][0], "--signature_def", case["signature"], "--opset", str(OPSET),
        "--output", str(partial),
    ]  # fmt: skip
    try:
        run = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env={**TF_ENV, "PATH": "/usr/bin:/bin"},
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return f"tf2onnx ran past {TIMEOUT_S}s"  # not cached: a busy machine may be the cause
    reason = _failure_reason(run)
    if reason:
        partial.unlink(missing_ok=True)
        failure.write_text(reason)
        return reason
    partial.rename(onnx_path)
    return onnx_path


def _failure_reason(run: subprocess.CompletedProcess) -> str | None:
    """tf2onnx's own complaint in one line; None for a complete conversion.

    tf2onnx exits 0 even when it leaves TF ops it cannot convert in the graph: those are a failure
    too, since onnxruntime cannot run them. Otherwise the reason is the exception that ended it,
    with the tf2onnx function that raised it, or TF's C++ error when the exception only points at
    TF's error log (grappler's metagraph import).
    """
    unsupported = re.search(r"Unsupported ops: Counter\((\{.*\})\)", run.stderr)
    if unsupported:
        return f"unsupported ops {unsupported.group(1)}"
    if run.returncode == 0:
        return None
    traceback = run.stderr[run.stderr.rfind("Traceback (most recent call last):") :].splitlines()[1:]
    message = " ".join(" ".join(line for line in traceback if line and not line[0].isspace()).split())
    cpp_errors = re.findall(r" E \S+\] (.*)", run.stderr)  # kept by TF_CPP_MIN_LOG_LEVEL=2
    frames = re.findall(r"site-packages/(tf2onnx/\S+)\", line \d+, in (\S+)", run.stderr)
    if "check error log" in message and cpp_errors:
        reason = f"TensorFlow: {cpp_errors[-1]}"
    elif message:
        reason = message + (f" (in {frames[-1][0]} {frames[-1][1]})" if frames else "")
    else:
        reason = f"exit status {run.returncode}"
    return reason if len(reason) <= 160 else reason[:157] + "..."


class RawSession:
    """One ``onnxruntime.InferenceSession`` over a tf2onnx model, keyed like the SignatureDef.

    Session options are our delegation's (``session_options`` with default ``DelegationOptions``:
    sequential execution, every graph optimization, spinning off) with the thread rule our
    delegation applies per cluster (``single_threaded``) applied to the whole model's estimated
    FLOPs and matmuls and convolutions at batch 1: one intra-op thread below ``small_cluster_flops``
    in all or ``small_kernel_flops`` per matmul or convolution, onnxruntime's default pool otherwise.
    """

    def __init__(self, path: Path, signature, flops: float, heavy_ops: int = 0):
        self.session = ort.InferenceSession(
            str(path),
            session_options(DelegationOptions(), flops, heavy_ops),
            providers=["CPUExecutionProvider"],
        )
        self.input_names = _by_key(signature.inputs, [i.name for i in self.session.get_inputs()])
        outputs = _by_key(signature.outputs, [o.name for o in self.session.get_outputs()])
        self.output_keys = {name: key for key, name in outputs.items()}
        self.output_names = list(self.output_keys)

    def feeds(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """ONNX input name -> value, from signature input key -> value."""
        return {self.input_names[key]: value for key, value in inputs.items()}

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.session.run(self.output_names, feeds)

    def outputs(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Signature output key -> value."""
        return {self.output_keys[name]: value for name, value in zip(self.output_names, self.run(feeds))}


def _by_key(infos, onnx_names: list[str]) -> dict[str, str]:
    """Signature key -> ONNX name: tf2onnx names tensors by key (TF2) or by tensor name (TF1)."""
    pairs = {}
    for key, info in infos.items():
        candidates = (key, info.name, info.name.split(":")[0])
        match = next((name for name in candidates if name in onnx_names), None)
        if match is None:
            raise KeyError(f"no ONNX tensor for signature key {key!r} ({info.name}) among {onnx_names}")
        pairs[key] = match
    return pairs
