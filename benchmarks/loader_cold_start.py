"""Cold start: a fresh process, imports included, up to the first signature result, and its peak RSS.

For two models, in the same run, four sides each start a fresh process that loads the model and
runs its serving signature once on the same input:

- ``ours cold``: ``loader.load_saved_model`` (delegation on, as by default) with an empty cluster
  cache directory: the graph is rewritten, the clusters converted and validated (and kept);
- ``ours warm``: the same with the cluster cache that an earlier start filled: a restart, or a
  new replica sharing the directory;
- ``ORT alone``: ``onnxruntime.InferenceSession`` on the converted model (the cluster's ``.onnx``
  file the warm cache holds, its weights embedded), default session options, CPU provider;
- ``TF``: ``tf.saved_model.load`` and a call of its serving signature (oracle venv ``tf221``).

Models: ``mlp``, a TF1 graph of dense layers holding about 200 MB of float32 variables (built
once by TensorFlow under ``--cache``), and ``mobilenet_v2``, the oracle zoo's Keras MobileNetV2
(``zoo_mobilenet_v2_saved``: ``tf.saved_model.save``, 32x32 inputs, 2.3 M weights).

Each (model, side) runs ``--repeats`` times, sides alternating; the median time from launch to
the first result (the child's wall clock as it has it, against the parent's at launch; the
process's exit, after freeing the model and joining thread pools, is shown beside) and the
median peak RSS (each child's own ``VmHWM``) are printed, with ratios to ORT alone and the aims:
warm within 2x of ORT alone, cold MobileNetV2 under 0.6 s, RSS under 2x ORT alone. Files sit in
the page cache after the first run: this measures process cold start, not a cold disk. Our
package is byte-compiled first (``compileall``: what installing a wheel does), since this
environment may set ``PYTHONDONTWRITEBYTECODE``.

    python benchmarks/loader_cold_start.py [--repeats 5] [--cache DIR] [--rebuild] [--json]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from tests.oracle import corpus  # noqa: E402

TF_PYTHON = REPO_ROOT / ".oracle" / "tf221" / "bin" / "python"
QUIET_TF = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0", "CUDA_VISIBLE_DEVICES": ""}
MLP = (5, 3200)  # layers, width: 5 x 3200 x 3200 float32 = 205 MB
ZOO_MODEL = "zoo_mobilenet_v2_saved"
SIDES = ("ours cold", "ours warm", "ORT alone", "TF")

BUILD_MLP = textwrap.dedent(
    """
    import sys, numpy as np, tensorflow as tf
    v1 = tf.compat.v1
    export_dir, layers, width = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with tf.Graph().as_default(), v1.Session() as sess:
        x = v1.placeholder(tf.float32, [None, width], name="x")
        h = x
        for i in range(layers):
            scale = np.float32(1.0 / np.sqrt(width))
            # Initializer ops, not constants: the values live only in the checkpoint.
            init = v1.random_normal_initializer(stddev=float(scale), seed=i)
            w = v1.get_variable(f"w{i}", [width, width], initializer=init, use_resource=False)
            b = v1.get_variable(f"b{i}", [width], initializer=v1.zeros_initializer(), use_resource=False)
            h = tf.nn.relu(tf.add(tf.matmul(h, w), b), name=f"h{i}")
        y = tf.identity(h, name="y")
        sess.run(v1.global_variables_initializer())
        builder = v1.saved_model.Builder(export_dir)
        sig = v1.saved_model.signature_def_utils.predict_signature_def({"x": x}, {"y": y})
        builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={"serving_default": sig})
        builder.save()
    """
)

# Each side prints two lines: the sum of its first output (to check the sides agree), then its peak
# RSS in MB. VmHWM, its own image's high-water mark: ru_maxrss of an exec'd child counts the
# parent's memory at the fork.
PEAK = textwrap.dedent(
    """
    import time

    def report(output_sum):  # the first result's sum and wall-clock time, then the peak RSS
        first_result = time.time()
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                print(output_sum, first_result, int(line.split()[1]) / 1024, sep="\\n")
    """
)
OURS = textwrap.dedent(
    """
    import sys, numpy as np
    from loader import load_saved_model
    export_dir, cache, shape = sys.argv[1], sys.argv[2], [int(d) for d in sys.argv[3].split(",")]
    bundle = load_saved_model(export_dir, {"serve"}, cluster_cache=cache)
    sig = bundle.signature_defs["serving_default"]
    (feed,), (fetch,) = sig.inputs.values(), sig.outputs.values()
    out = bundle.session.run(fetch.name, {feed.name: np.linspace(-1, 1, np.prod(shape), dtype=np.float32).reshape(shape)})
    report(float(np.asarray(out).sum()))
    """
)

ORT_ALONE = textwrap.dedent(
    """
    import sys, numpy as np, onnxruntime as ort
    path, shape = sys.argv[1], [int(d) for d in sys.argv[2].split(",")]
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    x = np.linspace(-1, 1, np.prod(shape), dtype=np.float32).reshape(shape)
    report(float(np.asarray(session.run(None, {session.get_inputs()[0].name: x})[0]).sum()))
    """
)

THEIRS = textwrap.dedent(
    """
    import sys, numpy as np, tensorflow as tf
    export_dir, shape = sys.argv[1], [int(d) for d in sys.argv[2].split(",")]
    model = tf.saved_model.load(export_dir, tags=["serve"])
    fn = model.signatures["serving_default"]
    (key,) = fn.structured_input_signature[1]
    x = np.linspace(-1, 1, np.prod(shape), dtype=np.float32).reshape(shape)
    (out,) = fn(**{key: tf.constant(x)}).values()
    report(float(out.numpy().sum()))
    """
)


def build_mlp(cache: Path, rebuild: bool) -> Path:
    layers, width = MLP
    export_dir = cache / f"mlp_{layers}x{width}"
    if rebuild or not (export_dir / "saved_model.pb").exists():
        shutil.rmtree(export_dir, ignore_errors=True)
        subprocess.run(
            [str(TF_PYTHON), "-c", BUILD_MLP, str(export_dir), str(layers), str(width)],
            check=True,
            env={**os.environ, **QUIET_TF},
        )
    return export_dir


def run_child(command: list[str], env: dict) -> tuple[float, float, float, str]:
    """(seconds from launch to the first result, seconds to the process's exit, peak RSS in MB,
    output sum) of one fresh process. The first result is what a restart waits for; the exit
    (freeing the model, joining thread pools) is after it, shown beside."""
    launch = time.time()
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"{command[:3]} failed:\n{result.stderr[-3000:]}")
    output, first_result, peak = result.stdout.strip().splitlines()[-3:]
    return float(first_result) - launch, elapsed, float(peak), output


def onnx_of(cache: Path, folder: Path) -> Path:
    """The converted model the warm cache holds (the model's one cluster) as one ONNX file, its
    weights in it: what a user hands onnxruntime (the cache keeps big weights beside the model)."""
    import onnx

    (model,) = cache.glob("*.onnx")
    alone = folder / f"{model.stem}_alone.onnx"
    onnx.save(onnx.load(model), alone)  # (loads the external data into the model)
    return alone


def commands(name: str, export_dir: Path, shape: str, folder: Path, env: dict) -> dict[str, list[str]]:
    """Each side's command line; fills the warm cache and writes the converted model first."""
    warm = folder / f"{name}_warm"
    run_child([sys.executable, "-c", PEAK + OURS, str(export_dir), str(warm), shape], env)
    cold = folder / f"{name}_cold"
    return {
        "ours cold": [sys.executable, "-c", PEAK + OURS, str(export_dir), str(cold), shape],
        "ours warm": [sys.executable, "-c", PEAK + OURS, str(export_dir), str(warm), shape],
        "ORT alone": [sys.executable, "-c", PEAK + ORT_ALONE, str(onnx_of(warm, folder)), shape],
        "TF": [str(TF_PYTHON), "-c", PEAK + THEIRS, str(export_dir), shape],
    }


def measure(name: str, sides: dict[str, list[str]], repeats: int, env: dict, folder: Path) -> dict:
    runs: dict[str, list[tuple[float, float, float, str]]] = {side: [] for side in sides}
    for _ in range(repeats):
        for side, command in sides.items():
            if side == "ours cold":
                shutil.rmtree(folder / f"{name}_cold", ignore_errors=True)
            runs[side].append(run_child(command, env))
    results = {}
    for side, values in runs.items():
        outputs = {round(float(v[3]), 2) for v in values}
        results[side] = {
            "seconds": statistics.median(v[0] for v in values),
            "exit_seconds": statistics.median(v[1] for v in values),
            "rss_mb": statistics.median(v[2] for v in values),
            "output": sorted(outputs)[0],
        }
    return results


def report(name: str, results: dict, repeats: int) -> None:
    ort_s, ort_mb = results["ORT alone"]["seconds"], results["ORT alone"]["rss_mb"]
    for side in SIDES:
        r = results[side]
        print(
            f"{name:<13} {side:<10} {r['seconds'] * 1000:8.0f} ms {r['seconds'] / ort_s:6.2f}x ORT   "
            f"peak RSS {r['rss_mb']:7.1f} MB {r['rss_mb'] / ort_mb:5.2f}x ORT   output sum {r['output']:.2f}"
            f"   (exit at {r['exit_seconds'] * 1000:.0f} ms)"
        )
    warm, cold = results["ours warm"], results["ours cold"]
    print(
        f"{name:<13} aims (median of {repeats}): warm <= 2x ORT alone: {warm['seconds'] <= 2 * ort_s}; "
        f"RSS <= 2x ORT alone: {max(warm['rss_mb'], cold['rss_mb']) <= 2 * ort_mb}"
        + (f"; cold under 0.6 s: {cold['seconds'] < 0.6}" if name == "mobilenet_v2" else "")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=REPO_ROOT / ".oracle" / "bench")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--only", nargs="*", choices=["mlp", "mobilenet_v2"])
    parser.add_argument("--json", action="store_true", help="print one JSON line of results")
    args = parser.parse_args(argv)
    for package in ("apis", "runtime", "loader"):
        compileall.compile_dir(str(REPO_ROOT / package), quiet=1)
    env = {**os.environ, **QUIET_TF, "PYTHONPATH": str(REPO_ROOT)}
    models = {  # (export dir, input shape), built on demand
        "mlp": (lambda: build_mlp(args.cache, args.rebuild), f"1,{MLP[1]}"),
        "mobilenet_v2": (lambda: corpus.load_manifest(ZOO_MODEL)["export_path"], "1,32,32,3"),
    }
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (export_dir, shape) in models.items():
            if args.only and name not in args.only:
                continue
            sides = commands(name, export_dir(), shape, Path(tmp), env)
            results[name] = measure(name, sides, args.repeats, env, Path(tmp))
            report(name, results[name], args.repeats)
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
