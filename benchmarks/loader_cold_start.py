"""Cold start: a fresh process, imports included, up to the first ``Session.run`` result.

Compares our loader (``loader.load_saved_model`` + ``session.run``, main venv) with TensorFlow's
``tf.saved_model.load`` + a call of its serving signature (oracle venv ``tf221``) on the same
SavedModels, in the same run:

- ``large``: a TF1-style graph of dense layers holding about 200 MB of float32 variables;
- ``small``: y = x W + b with a 4x2 W.

The models are built once by TensorFlow (in the oracle venv) under ``--cache`` (default
``.oracle/bench``). Each (model, side) runs ``--repeats`` times, alternating sides; the median wall
time of each is printed with the ratio TF / ours. Files sit in the page cache after the first run:
this measures process cold start, not a cold disk.

    python benchmarks/loader_cold_start.py [--repeats 5] [--cache DIR] [--rebuild]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TF_PYTHON = REPO_ROOT / ".oracle" / "tf221" / "bin" / "python"
QUIET_TF = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0", "CUDA_VISIBLE_DEVICES": ""}

# (layers, width): 5 x 3200 x 3200 float32 = 205 MB.
MODELS = {"large": (5, 3200), "small": (1, 4)}

BUILD = textwrap.dedent(
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
            h = tf.add(tf.matmul(h, w), b, name=f"h{i}")
        y = tf.identity(h, name="y")
        sess.run(v1.global_variables_initializer())
        builder = v1.saved_model.Builder(export_dir)
        sig = v1.saved_model.signature_def_utils.predict_signature_def({"x": x}, {"y": y})
        builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={"serving_default": sig})
        builder.save()
    """
)

OURS = textwrap.dedent(
    """
    import sys, numpy as np
    from loader import load_saved_model
    export_dir, width = sys.argv[1], int(sys.argv[2])
    bundle = load_saved_model(export_dir, {"serve"})
    sig = bundle.signature_defs["serving_default"]
    out = bundle.session.run(sig.outputs["y"].name, {sig.inputs["x"].name: np.ones((1, width), np.float32)})
    print(float(np.asarray(out).sum()))
    """
)

THEIRS = textwrap.dedent(
    """
    import sys, numpy as np, tensorflow as tf
    export_dir, width = sys.argv[1], int(sys.argv[2])
    model = tf.saved_model.load(export_dir, tags=["serve"])
    out = model.signatures["serving_default"](x=tf.constant(np.ones((1, width), np.float32)))
    print(float(out["y"].numpy().sum()))
    """
)


def build(cache: Path, rebuild: bool) -> dict[str, Path]:
    dirs = {}
    for name, (layers, width) in MODELS.items():
        export_dir = cache / f"{name}_{layers}x{width}"
        if rebuild or not (export_dir / "saved_model.pb").exists():
            subprocess.run(["rm", "-rf", str(export_dir)], check=True)
            env = {**os.environ, **QUIET_TF}
            subprocess.run(
                [str(TF_PYTHON), "-c", BUILD, str(export_dir), str(layers), str(width)], check=True, env=env
            )
        dirs[name] = export_dir
    return dirs


def timed(python: str, code: str, args: list[str], env: dict) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run(
        [python, "-c", code, *args], capture_output=True, text=True, env=env, cwd=REPO_ROOT
    )
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"{python} failed:\n{result.stderr[-3000:]}")
    return elapsed, result.stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=REPO_ROOT / ".oracle" / "bench")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--json", action="store_true", help="print one JSON line of results")
    args = parser.parse_args(argv)
    dirs = build(args.cache, args.rebuild)
    env = {**os.environ, **QUIET_TF, "PYTHONPATH": str(REPO_ROOT)}
    results = {}
    for name, export_dir in dirs.items():
        width = str(MODELS[name][1])
        size = sum(p.stat().st_size for p in (export_dir / "variables").glob("*"))
        ours, theirs = [], []
        for _ in range(args.repeats):
            t, our_out = timed(sys.executable, OURS, [str(export_dir), width], env)
            ours.append(t)
            t, tf_out = timed(str(TF_PYTHON), THEIRS, [str(export_dir), width], env)
            theirs.append(t)
        agree = abs(float(our_out) - float(tf_out)) <= 1e-3 * max(1.0, abs(float(tf_out)))
        results[name] = {
            "variables_mb": round(size / 1e6, 1),
            "ours_s": statistics.median(ours),
            "tf_s": statistics.median(theirs),
            "ratio": statistics.median(theirs) / statistics.median(ours),
            "outputs_agree": agree,
        }
        r = results[name]
        print(
            f"{name:6s} {r['variables_mb']:8.1f} MB  ours {r['ours_s'] * 1000:8.1f} ms  "
            f"tf.saved_model.load {r['tf_s'] * 1000:8.1f} ms  ratio {r['ratio']:5.2f}x  "
            f"(median of {args.repeats}; outputs agree: {agree})"
        )
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
