"""Session latency per oracle model: delegation, native kernels, TF's session and raw onnxruntime.

For each oracle model (its first case: tag set, signature and inputs) and each batch size (1 and
32: the case's inputs repeated or cut along axis 0), four sessions run the same signature on the
same feeds in the same run:

- ours with every op native, and ours with ``delegation=True``;
- TensorFlow's ``tf.compat.v1.Session`` over ``saved_model.loader.load`` (oracle venv ``tf221``, a
  subprocess, ``TFSide``; feeds cross as TensorProto files, nothing pickled);
- raw onnxruntime on tf2onnx's conversion of the whole signature (``tf2onnx_baseline.py``: tf2onnx
  1.17 in the oracle venv ``tf215``, opset 17, cached under ``.oracle/bench/tf2onnx``), with our
  delegation's session options and its per-cluster thread rule applied to the whole model (one
  intra-op thread below ``small_cluster_flops`` at batch 1, or ``small_kernel_flops`` per matmul
  or convolution; onnxruntime's default pool above).
  Its outputs must match our native kernels' (the case's tolerance, at least our delegation's
  validation tolerance) before it is timed. A model tf2onnx cannot convert or onnxruntime cannot
  run, or whose outputs differ, shows "-" and one line saying why.

Sessions run the signature through ``Session.make_callable`` (ours and TF's alike): names are
resolved once, as model_server runs a signature. Each is warmed up (delegated clusters compile and
validate on their first run), then timed call by call for ``--seconds`` cut in five slices: our
two sessions, raw onnxruntime and TF's session (in its subprocess, which times a slice when asked)
alternate slice by slice. The latency printed is the lowest of the five slice medians (robust to
bursts of load from other processes), with the ratios, the share of estimated FLOPs delegated,
and a summary: how many models beat TF, and how many are within ``--ort-margin`` of raw
onnxruntime.

    python benchmarks/onnx_delegation.py [--seconds 1] [--only keras_mlp ... | --family zoo]
        [--batches 1 32] [--json FILE]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
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
from benchmarks import tf2onnx_baseline  # noqa: E402
from loader import load_saved_model  # noqa: E402
from runtime import tensor_util  # noqa: E402
from runtime.kernels.blas import set_blas_threads  # noqa: E402
from runtime.onnx.options import DelegationOptions  # noqa: E402
from runtime.onnx.partition import HEAVY  # noqa: E402
from tests.oracle import catalog, corpus  # noqa: E402

TF_PYTHON = REPO_ROOT / ".oracle" / "tf221" / "bin" / "python"
QUIET_TF = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0", "CUDA_VISIBLE_DEVICES": ""}
SLICES = 5  # each measurement's window is cut in this many slices; the lowest slice median counts

TF_SIDE = textwrap.dedent(
    """
    import json, statistics, sys, time
    import tensorflow as tf
    from tensorflow.core.framework import tensor_pb2
    v1 = tf.compat.v1
    session, runs = None, {}
    for line in sys.stdin:  # one JSON request per line, one JSON answer per line
        request = json.loads(line)
        if "load" in request:
            job = request["load"]
            if session is not None:
                session.close()
            graph = tf.Graph()
            session = v1.Session(graph=graph)
            with graph.as_default():
                v1.saved_model.loader.load(session, job["tags"], job["export_dir"])
            runs = {}
            for batch, files in job["feeds"].items():
                feeds = {
                    job["input_names"][key]: tf.make_ndarray(tensor_pb2.TensorProto.FromString(open(path, "rb").read()))
                    for key, path in files.items()
                }
                names = list(feeds)
                run, values = session.make_callable(job["fetches"], names), [feeds[n] for n in names]
                for _ in range(3):
                    run(*values)
                runs[batch] = (run, values)
            answer = {"loaded": job["export_dir"]}
        else:
            run, values = runs[request["time"]]
            times, start = [], time.perf_counter()
            while time.perf_counter() - start < request["seconds"] or len(times) < 5:
                t0 = time.perf_counter()
                run(*values)
                times.append(time.perf_counter() - t0)
            answer = {"median": statistics.median(times)}
        print(json.dumps(answer), flush=True)
    """
)


class TFSide:
    """TensorFlow's ``tf.compat.v1.Session`` over the same SavedModels, in one ``tf221``
    subprocess that loads a model and times one slice when asked: TF's slices alternate with
    ours, so a burst of load from elsewhere falls on both sides alike. Feeds cross as TensorProto
    files, answers as JSON lines; nothing is pickled."""

    def __init__(self, folder: Path):
        self._log = open(folder / "tf_side.log", "w+")  # noqa: SIM115 - closed in close()
        self._process = subprocess.Popen(
            [str(TF_PYTHON), "-c", TF_SIDE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env={**QUIET_TF, "PATH": "/usr/bin:/bin"},
        )

    def _ask(self, request: dict) -> dict:
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        for line in self._process.stdout:  # (anything TF prints itself is not an answer)
            if line.startswith("{"):
                return json.loads(line)
        self._log.seek(0)
        raise SystemExit(f"TensorFlow's side ended: {self._log.read()[-3000:]}")

    def load(self, job: dict) -> None:
        self._ask({"load": {k: job[k] for k in ("tags", "export_dir", "feeds", "fetches", "input_names")}})

    def slicer(self, batch: str):
        """A slice timer (see ``interleaved_medians``) for TF's session at ``batch``."""
        return lambda seconds: self._ask({"time": batch, "seconds": seconds})["median"]

    def close(self) -> None:
        self._process.stdin.close()
        self._process.wait(timeout=60)
        self._log.close()


def read_tensor(manifest: dict, relative: str) -> np.ndarray:
    return tensor_util.make_ndarray(
        tensor_pb2.TensorProto.FromString((manifest["dir"] / relative).read_bytes())
    )


def batched(value: np.ndarray, batch: int) -> np.ndarray:
    """``value`` with ``batch`` rows: its rows repeated or cut (0-d values unchanged)."""
    if value.ndim == 0 or value.shape[0] == 0:
        return value
    return value[np.arange(batch) % value.shape[0]]


def local_slicer(fn):
    """A slice timer for an in-process call, warmed up: the median latency (s) of calls made for
    ``seconds`` (at least five)."""
    for _ in range(3):
        fn()

    def time_slice(seconds: float) -> float:
        times, start = [], time.perf_counter()
        while time.perf_counter() - start < seconds or len(times) < 5:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    return time_slice


def interleaved_medians(slicers: dict[str, object], seconds: float) -> dict[str, float]:
    """Each side's latency in ms: the lowest median of ``SLICES`` slices of ``seconds / SLICES``.

    The sides' slices alternate (TF's in its subprocess too), so that their ratios hold on a
    machine whose load drifts; the lowest slice median drops slices that a burst of load from
    elsewhere hit.
    """
    medians: dict[str, list[float]] = {name: [] for name in slicers}
    for _ in range(SLICES):
        for name, time_slice in slicers.items():
            medians[name].append(time_slice(seconds / SLICES))
    return {name: min(values) * 1e3 for name, values in medians.items()}


def short(text: str, limit: int = 150) -> str:
    """The first line of ``text``, cut to ``limit`` characters."""
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def prepare(name: str, batches: list[int], folder: Path) -> dict:
    """The model's first case as a job: feeds per batch, in memory and as TensorProto files."""
    manifest = corpus.load_manifest(name)
    case = manifest["cases"][0]
    job = {"model": name, "tags": case["tags"], "export_dir": str(manifest["export_path"]), "feeds": {}}
    job["signature"] = case["signature"]
    job["case"], job["manifest"] = case, manifest
    inputs = {k: read_tensor(manifest, p) for k, p in case["inputs"].items()}
    job["batched"] = {str(b): {k: batched(v, b) for k, v in inputs.items()} for b in batches}
    for batch, values in job["batched"].items():
        files = {}
        for key, value in values.items():
            path = folder / f"{name}_{batch}_{len(files)}.pb"
            path.write_bytes(tensor_util.make_tensor_proto(value).SerializeToString())
            files[key] = str(path)
        job["feeds"][batch] = files
    return job


def time_model(job: dict, converted: Path | str, seconds: float, tf_side: TFSide) -> None:
    """Times ours native, ours delegated, raw onnxruntime and TF's session, alternating, at each batch.

    Sets ``job["native"]``, ``job["delegated"]``, ``job["tf"]`` (ms by batch), ``job["report"]``,
    and ``job["raw_ort"]``: ms by batch, or why raw onnxruntime is not timed.
    """
    with contextlib.ExitStack() as stack:
        native = load_saved_model(job["export_dir"], job["tags"], delegation=False)
        stack.callback(native.close)
        delegated = load_saved_model(job["export_dir"], job["tags"], delegation=True)
        stack.callback(delegated.close)
        signature = native.signature_defs[job["signature"]]
        keys = sorted(signature.outputs, key=lambda key: signature.outputs[key].name)
        fetches = [signature.outputs[key].name for key in keys]
        job["fetches"], job["input_names"] = fetches, {k: v.name for k, v in signature.inputs.items()}
        tf_side.load(job)
        medians, raw = {}, None
        for batch, values in job["batched"].items():
            names = [signature.inputs[key].name for key in values]
            feeds = list(values.values())
            run_native = native.session.make_callable(fetches, names)
            run_delegated = delegated.session.make_callable(fetches, names)
            calls = {
                "native": lambda run=run_native, feeds=feeds: run(*feeds),
                "delegated": lambda run=run_delegated, feeds=feeds: run(*feeds),
            }
            ours = dict(zip(keys, calls["native"]()))
            calls["delegated"]()  # delegated clusters compile and validate on their first run
            if raw is None:
                raw = raw_session(signature, converted, delegated.session.delegation_report)
            if not isinstance(raw, str):
                why = check_raw(raw, values, ours, job["case"])
                if why:
                    raw = f"tf2onnx's model at batch {batch}: {why}"
                else:
                    raw_feeds = raw.feeds(values)
                    calls["raw_ort"] = lambda raw=raw, raw_feeds=raw_feeds: raw.run(raw_feeds)
            slicers = {name: local_slicer(fn) for name, fn in calls.items()}
            slicers["tf"] = tf_side.slicer(batch)
            medians[batch] = interleaved_medians(slicers, seconds)
        job["report"] = delegated.session.delegation_report
        for side in ("native", "delegated", "raw_ort", "tf"):
            job[side] = {batch: m[side] for batch, m in medians.items() if side in m}
        if isinstance(raw, str):
            job["raw_ort"] = raw


def raw_session(signature, converted: Path | str, report) -> tf2onnx_baseline.RawSession | str:
    """Raw onnxruntime on tf2onnx's model, or why there is none."""
    if isinstance(converted, str):
        return f"tf2onnx: {converted}"
    flops = sum(c.flops for c in report.clusters) + report.native_flops  # at batch 1
    heavy = sum(n for c in report.clusters for t, n in c.op_types.items() if t in HEAVY)
    heavy += sum(t in HEAVY for t, _ in report.native.values())
    try:
        return tf2onnx_baseline.RawSession(converted, signature, flops, heavy)
    except Exception as exc:  # noqa: BLE001 - tf2onnx's model is not ours to fix
        return f"onnxruntime cannot load tf2onnx's model: {short(str(exc))}"


def check_raw(raw, values: dict[str, np.ndarray], ours: dict[str, np.ndarray], case: dict) -> str | None:
    """Why raw onnxruntime's outputs are not our native kernels', or None when they match."""
    try:
        got = raw.outputs(raw.feeds(values))
    except Exception as exc:  # noqa: BLE001
        return f"onnxruntime fails: {short(str(exc))}"
    rtol = max(case["rtol"], DelegationOptions.rtol)
    atol = max(case["atol"], DelegationOptions.atol)
    return mismatch(got, ours, rtol, atol)


def mismatch(got: dict[str, np.ndarray], want: dict[str, np.ndarray], rtol: float, atol: float) -> str | None:
    """Why raw onnxruntime's outputs are not ours, or None when they match."""
    for key, expected in want.items():
        actual = np.asarray(got[key])
        if actual.shape != expected.shape:
            return f"{key}: shape {actual.shape}, ours {expected.shape}"
        if expected.dtype.kind in "fc":
            if not np.allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True):
                return f"{key}: max abs difference {np.max(np.abs(actual - expected)):.3g}"
        elif expected.dtype == object:
            text = [v.decode() if isinstance(v, bytes) else v for v in expected.ravel()]
            if [v.decode() if isinstance(v, bytes) else v for v in actual.ravel()] != text:
                return f"{key}: strings differ"
        elif not np.array_equal(actual, expected):
            return f"{key}: values differ"
    return None


def fmt(value: float | None, spec: str, width: int, suffix: str = "") -> str:
    return f"{value:{spec}}{suffix}".rjust(width) if value is not None else "-".rjust(width)


def print_table(jobs: list[dict], seconds: float, margin: float) -> None:
    print(f"Session.run latency: lowest of {SLICES} slice medians ({seconds:g} s per measurement)")
    print(
        "raw ORT runs with our clusters' session options: sequential execution, every graph "
        "optimization, spinning off, onnxruntime's default intra-op pool (one thread below "
        f"{DelegationOptions.small_cluster_flops:g} estimated FLOPs at batch 1, or "
        f"{DelegationOptions.small_kernel_flops:g} per matmul or convolution)"
    )
    print(
        f"{'model':<32} {'batch':>5} {'TF ms':>8} {'native ms':>10} {'deleg ms':>9} {'raw ORT ms':>10} "
        f"{'deleg/TF':>9} {'deleg/ORT':>9} {'FLOPs in ORT':>12}"
    )
    wins: dict[str, list[int]] = {}  # batch -> [timed, deleg < TF, with raw ORT, deleg <= margin x ORT]
    for job in jobs:
        raw = job["raw_ort"] if isinstance(job["raw_ort"], dict) else {}
        for batch, deleg in job["delegated"].items():
            tf, ort_ms = job["tf"][batch], raw.get(batch)
            counts = wins.setdefault(batch, [0, 0, 0, 0])
            counts[0] += 1
            counts[1] += deleg < tf
            if ort_ms is not None:
                counts[2] += 1
                counts[3] += deleg <= margin * ort_ms
            print(
                f"{job['model']:<32} {batch:>5} {tf:>8.3f} {job['native'][batch]:>10.3f} {deleg:>9.3f} "
                f"{fmt(ort_ms, '.3f', 10)} {deleg / tf:>8.2f}x {fmt(ort_ms and deleg / ort_ms, '.2f', 8, 'x')} "
                f"{100 * job['report'].flops_share:>11.0f}%"
            )
    print()
    for job in jobs:
        if isinstance(job["raw_ort"], str):
            print(f"raw ORT - {job['model']}: {job['raw_ort']}")
    for batch, (timed, beat_tf, with_ort, near_ort) in wins.items():
        print(
            f"batch {batch}: deleg < TF on {beat_tf}/{timed} models; "
            f"deleg <= {margin:g}x raw ORT on {near_ort}/{with_ort} models tf2onnx converts"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=1.0, help="timing window per measurement")
    parser.add_argument("--only", nargs="*", help="model names (default: every oracle model)")
    parser.add_argument("--family", help="the oracle models of one family (zoo: the Keras zoo)")
    parser.add_argument("--json", type=Path, help="also write the latencies (ms) to this file")
    parser.add_argument("--batches", nargs="*", type=int, default=[1, 32])
    parser.add_argument("--ort-margin", type=float, default=1.2, help="target deleg / raw ORT ratio")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    set_blas_threads(1)  # our native kernels as model_server runs them (runtime/kernels/blas.py)
    names = args.only or [
        e.name
        for e in catalog.discover()
        if e.family != "op_records" and (args.family is None or e.family == args.family)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        jobs = [prepare(name, args.batches, folder) for name in names]
        # Conversions (TensorFlow subprocesses, cached) all finish before anything is timed.
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            converted = list(
                pool.map(
                    lambda job: tf2onnx_baseline.convert(job["model"], job["manifest"], job["case"]), jobs
                )
            )
        timed = []
        tf_side = TFSide(folder)
        try:
            for job, onnx_model in zip(jobs, converted):
                try:
                    time_model(job, onnx_model, args.seconds, tf_side)
                except Exception as exc:  # noqa: BLE001 - a model the runtime cannot run yet
                    print(
                        f"{job['model']}: skipped, runs natively with an error: {type(exc).__name__}: {exc}"
                    )
                    continue
                timed.append(job)
        finally:
            tf_side.close()
    print_table(timed, args.seconds, args.ort_margin)
    if args.json:
        sides = ("tf", "native", "delegated", "raw_ort")
        args.json.write_text(
            json.dumps({j["model"]: {s: j[s] for s in sides if isinstance(j[s], dict)} for j in timed})
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
