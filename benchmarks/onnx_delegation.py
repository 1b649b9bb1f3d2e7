"""Session.run latency per oracle model with onnxruntime delegation, without it, and TF's own session.

For each oracle model (its first case: tag set, signature and inputs) and each batch size (1 and
32: the case's inputs repeated or cut along axis 0), three sessions run the same signature on the
same feeds in the same run: ours with every op native, ours with ``delegation=True``, and
TensorFlow's ``tf.compat.v1.Session`` over ``saved_model.loader.load`` (oracle venv ``tf221``, a
subprocess; feeds cross as TensorProto files, nothing pickled). Each is warmed up (delegated
clusters compile and validate on their first run), then timed call by call for ``--seconds``;
medians are printed with the ratios, and the share of estimated FLOPs delegated.

    python benchmarks/onnx_delegation.py [--seconds 1] [--only keras_mlp ...] [--batches 1 32]

tf2onnx is not compared: tf2onnx 1.17 does not support TensorFlow 2.21 (the oracle's TF).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402

from apis.tensorflow.core.framework import tensor_pb2  # noqa: E402
from loader import load_saved_model  # noqa: E402
from runtime import tensor_util  # noqa: E402
from tests.oracle import catalog, corpus  # noqa: E402

TF_PYTHON = REPO_ROOT / ".oracle" / "tf221" / "bin" / "python"
QUIET_TF = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0", "CUDA_VISIBLE_DEVICES": ""}

TF_SIDE = textwrap.dedent(
    """
    import json, statistics, sys, time
    import tensorflow as tf
    from tensorflow.core.framework import tensor_pb2
    v1 = tf.compat.v1
    plan = json.load(open(sys.argv[1]))
    seconds = float(sys.argv[2])
    results = {}
    for job in plan:
        graph = tf.Graph()
        with v1.Session(graph=graph) as sess:
            v1.saved_model.loader.load(sess, job["tags"], job["export_dir"])
            for batch, files in job["feeds"].items():
                feeds = {
                    job["input_names"][key]: tf.make_ndarray(tensor_pb2.TensorProto.FromString(open(path, "rb").read()))
                    for key, path in files.items()
                }
                fetches = job["fetches"]
                for _ in range(3):
                    sess.run(fetches, feeds)
                times, start = [], time.perf_counter()
                while time.perf_counter() - start < seconds or len(times) < 5:
                    t0 = time.perf_counter()
                    sess.run(fetches, feeds)
                    times.append(time.perf_counter() - t0)
                results[f"{job['model']}/{batch}"] = statistics.median(times) * 1e3
    print(json.dumps(results))
    """
)


def read_tensor(manifest: dict, relative: str) -> np.ndarray:
    return tensor_util.make_ndarray(
        tensor_pb2.TensorProto.FromString((manifest["dir"] / relative).read_bytes())
    )


def batched(value: np.ndarray, batch: int) -> np.ndarray:
    """``value`` with ``batch`` rows: its rows repeated or cut (0-d values unchanged)."""
    if value.ndim == 0 or value.shape[0] == 0:
        return value
    return value[np.arange(batch) % value.shape[0]]


def median_ms(fn, seconds: float) -> float:
    for _ in range(3):
        fn()
    times, start = [], time.perf_counter()
    while time.perf_counter() - start < seconds or len(times) < 5:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def prepare(name: str, batches: list[int], folder: Path) -> dict | None:
    """The model's first case as a job: feeds per batch written as TensorProto files."""
    manifest = corpus.load_manifest(name)
    case = manifest["cases"][0]
    job = {"model": name, "tags": case["tags"], "export_dir": str(manifest["export_path"]), "feeds": {}}
    job["signature"] = case["signature"]
    job["inputs"] = {k: read_tensor(manifest, p) for k, p in case["inputs"].items()}
    job["manifest"] = manifest
    for batch in batches:
        files = {}
        for key, value in job["inputs"].items():
            path = folder / f"{name}_{batch}_{len(files)}.pb"
            path.write_bytes(tensor_util.make_tensor_proto(batched(value, batch)).SerializeToString())
            files[key] = str(path)
        job["feeds"][str(batch)] = files
    return job


def run_ours(job: dict, delegation, seconds: float) -> tuple[dict[str, float], object]:
    bundle = load_saved_model(job["export_dir"], job["tags"], delegation=delegation)
    try:
        signature = bundle.signature_defs[job["signature"]]
        fetches = sorted(info.name for info in signature.outputs.values())
        job["fetches"] = fetches
        job["input_names"] = {key: info.name for key, info in signature.inputs.items()}
        results = {}
        for batch, files in job["feeds"].items():
            feeds = {
                signature.inputs[key].name: tensor_util.make_ndarray(
                    tensor_pb2.TensorProto.FromString(Path(path).read_bytes())
                )
                for key, path in files.items()
            }
            results[batch] = median_ms(lambda feeds=feeds: bundle.session.run(fetches, feeds), seconds)
        return results, bundle.session.delegation_report
    finally:
        bundle.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=1.0, help="timing window per measurement")
    parser.add_argument("--only", nargs="*", help="model names (default: every oracle model)")
    parser.add_argument("--batches", nargs="*", type=int, default=[1, 32])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    names = args.only or [e.name for e in catalog.discover() if e.family != "op_records"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        jobs = [prepare(name, args.batches, folder) for name in names]
        ours = {}
        for job in jobs:
            try:
                native, _ = run_ours(job, None, args.seconds)
                delegated, report = run_ours(job, True, args.seconds)
            except Exception as exc:  # noqa: BLE001 - a model the runtime cannot run yet
                print(f"{job['model']}: skipped, runs natively with an error: {type(exc).__name__}: {exc}")
                job["skip"] = True
                continue
            ours[job["model"]] = (native, delegated, report)
        plan = [
            {k: job[k] for k in ("model", "tags", "export_dir", "feeds", "fetches", "input_names")}
            for job in jobs
            if not job.get("skip")
        ]
        (folder / "plan.json").write_text(json.dumps(plan))
        tf_run = subprocess.run(
            [str(TF_PYTHON), "-c", TF_SIDE, str(folder / "plan.json"), str(args.seconds)],
            capture_output=True,
            text=True,
            env={**QUIET_TF, "PATH": "/usr/bin:/bin"},
        )
        if tf_run.returncode != 0:
            print(tf_run.stderr[-3000:])
            return 1
        tf_ms = json.loads(tf_run.stdout.strip().splitlines()[-1])
    header = (
        f"{'model':<32} {'batch':>5} {'TF ms':>8} {'native ms':>10} {'deleg ms':>9} "
        f"{'deleg/TF':>9} {'native/deleg':>12} {'FLOPs in ORT':>12}"
    )
    print(f"Session.run median latency ({args.seconds:g} s per measurement)")
    print(header)
    for name, (native, delegated, report) in ours.items():
        for batch in native:
            tf = tf_ms[f"{name}/{batch}"]
            rows.append((name, batch, tf, native[batch], delegated[batch]))
            print(
                f"{name:<32} {batch:>5} {tf:>8.3f} {native[batch]:>10.3f} {delegated[batch]:>9.3f} "
                f"{delegated[batch] / tf:>8.2f}x {native[batch] / delegated[batch]:>11.2f}x "
                f"{100 * report.flops_share:>11.0f}%"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
