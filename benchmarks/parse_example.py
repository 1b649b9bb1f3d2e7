"""tf.Example parsing throughput: our ``ParseExampleV2`` against TensorFlow's, in the same run.

The workload is what an Estimator's Classify/Regress receiver parses: 20 features per Example
(8 float scalars, 4 int64 [1], 4 string scalars, 2 float [5] vectors, 2 variable-length string
lists of 3 values parsed as SparseTensors), in batches of 1 and of 128.

TensorFlow (oracle venv ``tf221``, a subprocess) builds the parse graph with ``tf.io.parse_example``
and times ``Session.run`` of it; it also writes that GraphDef, which our ``runtime.Session`` then
runs on the same serialized batch, so both sides execute the same graph through a session. The
kernel alone (no session) is timed too. Prints examples/s for each and the ratio ours / TF's, with
the machine's load average (the timings are wall-clock: other work on the machine skews both sides).
Batches of 128 take the column-wise fast path of ``runtime/example/fast_path.py``; a batch of 1 its general
path.

    python benchmarks/parse_example.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402

from apis.tensorflow.core.example import example_pb2  # noqa: E402
from apis.tensorflow.core.framework import graph_pb2  # noqa: E402
from runtime import Graph, Session  # noqa: E402

TF_PYTHON = REPO_ROOT / ".oracle" / "tf221" / "bin" / "python"
QUIET_TF = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0", "CUDA_VISIBLE_DEVICES": ""}
BATCHES = (1, 128)

TF_SIDE = textwrap.dedent(
    """
    import json, sys, time, numpy as np, tensorflow as tf
    v1 = tf.compat.v1
    folder, seconds = sys.argv[1], float(sys.argv[2])
    spec = {}
    for i in range(8): spec[f"f{i}"] = tf.io.FixedLenFeature([], tf.float32, 0.0)
    for i in range(4): spec[f"i{i}"] = tf.io.FixedLenFeature([1], tf.int64, [0])
    for i in range(4): spec[f"s{i}"] = tf.io.FixedLenFeature([], tf.string, "")
    for i in range(2): spec[f"v{i}"] = tf.io.FixedLenFeature([5], tf.float32, [0.0] * 5)
    for i in range(2): spec[f"sp{i}"] = tf.io.VarLenFeature(tf.string)
    graph = tf.Graph()
    with graph.as_default():
        serialized = v1.placeholder(tf.string, [None], name="serialized")
        parsed = tf.io.parse_example(serialized, spec)
        fetches = []
        for key in sorted(parsed):
            value = parsed[key]
            fetches += [value.indices, value.values, value.dense_shape] if isinstance(value, tf.SparseTensor) else [value]
    open(f"{folder}/graph.pb", "wb").write(graph.as_graph_def().SerializeToString())
    json.dump([t.name for t in fetches], open(f"{folder}/fetches.json", "w"))
    results = {}
    with v1.Session(graph=graph) as sess:
        for batch in (1, 128):
            raw, rows, pos = open(f"{folder}/batch_{batch}.bin", "rb").read(), [], 0
            while pos < len(raw):
                size = int.from_bytes(raw[pos : pos + 4], "little")
                rows.append(raw[pos + 4 : pos + 4 + size])
                pos += 4 + size
            feed = {serialized: np.array(rows, dtype=object)}
            sess.run(fetches, feed)
            n, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                sess.run(fetches, feed)
                n += 1
            results[batch] = batch * n / (time.perf_counter() - start)
    print(json.dumps(results))
    """
)


def make_example(rng: np.random.Generator) -> bytes:
    example = example_pb2.Example()
    feature = example.features.feature
    for i in range(8):
        feature[f"f{i}"].float_list.value.append(float(rng.normal()))
    for i in range(4):
        feature[f"i{i}"].int64_list.value.append(int(rng.integers(0, 1000)))
    for i in range(4):
        feature[f"s{i}"].bytes_list.value.append(f"word{rng.integers(0, 100)}".encode())
    for i in range(2):
        feature[f"v{i}"].float_list.value.extend(rng.normal(size=5).tolist())
    for i in range(2):
        feature[f"sp{i}"].bytes_list.value.extend(f"tok{rng.integers(0, 50)}".encode() for _ in range(3))
    return example.SerializeToString()


def _rate(fn, batch: int, seconds: float) -> float:
    fn()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        n += 1
    return batch * n / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="timing window per measurement")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    batches = {b: np.array([make_example(rng) for _ in range(b)], dtype=object) for b in BATCHES}
    with tempfile.TemporaryDirectory() as folder:
        for b, data in batches.items():  # length-prefixed records: exact bytes, nothing pickled
            Path(f"{folder}/batch_{b}.bin").write_bytes(
                b"".join(len(x).to_bytes(4, "little") + x for x in data)
            )
        tf_run = subprocess.run(
            [str(TF_PYTHON), "-c", TF_SIDE, folder, str(args.seconds)],
            capture_output=True,
            text=True,
            env={**QUIET_TF, "PATH": "/usr/bin:/bin"},
            check=True,
        )
        tf_rates = {int(k): v for k, v in json.loads(tf_run.stdout.strip().splitlines()[-1]).items()}
        graph_def = graph_pb2.GraphDef.FromString(Path(f"{folder}/graph.pb").read_bytes())
        fetches = json.loads(Path(f"{folder}/fetches.json").read_text())
    graph = Graph.from_graph_def(graph_def)
    (parse_op,) = [op for op in graph.get_operations() if op.type == "ParseExampleV2"]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"ParseExampleV2, 20 features per Example ({args.seconds:.0f} s per measurement)")
    print(f"load average before our side: {load} ({os.cpu_count()} CPUs; TF ran just before)")
    print(f"{'batch':>5} {'TF Session':>14} {'our Session':>14} {'our kernel':>14} {'Session ratio':>14}")
    with Session(graph=graph) as session:
        for b, data in batches.items():
            feed = {"serialized:0": data}
            check_parse_matches(session, fetches, feed)
            ours = _rate(lambda feed=feed: session.run(fetches, feed), b, args.seconds)
            kernel = _kernel_rate(session, parse_op, data, b, args.seconds)
            print(
                f"{b:>5} {tf_rates[b]:>12,.0f}/s {ours:>12,.0f}/s {kernel:>12,.0f}/s {ours / tf_rates[b]:>13.2f}x"
            )
    return 0


def check_parse_matches(session: Session, fetches: list, feed: dict) -> None:
    """Sanity: the fetched outputs have one row per Example."""
    values = session.run(fetches, feed)
    assert all(v is not None for v in values)


def _kernel_rate(session: Session, op, data, batch: int, seconds: float) -> float:
    """The ParseExampleV2 kernel alone, with its constant inputs evaluated once."""
    from runtime import kernels

    definition = kernels.lookup("ParseExampleV2")
    inputs = session.run([t.name for t in op.inputs[1:]], {})
    attrs = definition.select_attrs(op.attrs)
    return _rate(lambda: definition.fn(data, *inputs[:4], inputs[4:], **attrs), batch, seconds)


if __name__ == "__main__":
    sys.exit(main())
