"""The interpreter's overhead per node: a 1,000-node graph of cheap ops, ours against TF's session.

Three graphs of 1,000 nodes each, written once as GraphDef bytes and run by both sessions in the same
run: a chain of ``Identity`` ops (our plans forward an Identity without a step, so this is the cost
of a graph TF runs node by node), a chain of ``Neg`` ops (dispatch plus a trivial numpy call per
node) and a chain alternating ``Identity`` and ``AddV2`` on a scalar. Our ``runtime.Session`` runs in this
process; TensorFlow's ``tf.compat.v1.Session`` runs in the oracle venv (``tf221``) as a subprocess
reading the same bytes. Medians over repeated runs, printed per node and as ratios (ours / TF).

    python benchmarks/session_overhead.py [--nodes 1000] [--seconds 2]

The aim (issue 4): under 5 microseconds per node.
"""

from __future__ import annotations

import argparse
import json
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

from apis.tensorflow.core.framework import graph_pb2, types_pb2  # noqa: E402
from runtime import Graph, Session  # noqa: E402

TF_PYTHON = REPO_ROOT / ".oracle" / "tf221" / "bin" / "python"
QUIET_TF = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0", "CUDA_VISIBLE_DEVICES": ""}

TF_SIDE = textwrap.dedent(
    """
    import json, statistics, sys, time
    import numpy as np
    import tensorflow as tf
    v1 = tf.compat.v1
    results = {}
    for name, path in json.loads(sys.argv[1]).items():
        graph_def = tf.compat.v1.GraphDef.FromString(open(path, "rb").read())
        graph = tf.Graph()
        with graph.as_default():
            tf.graph_util.import_graph_def(graph_def, name="")
        with v1.Session(graph=graph) as sess:
            feeds = {"x:0": np.float32(1.0)}
            for _ in range(20):
                sess.run("out:0", feeds)
            times, start = [], time.perf_counter()
            while time.perf_counter() - start < float(sys.argv[2]) or len(times) < 20:
                t0 = time.perf_counter()
                sess.run("out:0", feeds)
                times.append(time.perf_counter() - t0)
            results[name] = statistics.median(times)
    print(json.dumps(results))
    """
)


def chain(nodes: int, ops: tuple[str, ...]) -> graph_pb2.GraphDef:
    """x -> op_0 -> op_1 -> ... -> out, cycling through ``ops``; AddV2 adds its input to itself."""
    graph_def = graph_pb2.GraphDef()
    x = graph_def.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = types_pb2.DT_FLOAT
    previous = "x"
    for index in range(nodes):
        op = ops[index % len(ops)]
        node = graph_def.node.add(name="out" if index == nodes - 1 else f"n{index}", op=op)
        node.input.extend([previous] * (2 if op == "AddV2" else 1))
        node.attr["T"].type = types_pb2.DT_FLOAT
        previous = node.name
    return graph_def


def ours(graph_def: graph_pb2.GraphDef, seconds: float) -> float:
    session = Session(graph=Graph.from_graph_def(graph_def))
    feeds = {"x:0": np.float32(1.0)}
    for _ in range(20):
        session.run("out:0", feeds)
    times, start = [], time.perf_counter()
    while time.perf_counter() - start < seconds or len(times) < 20:
        t0 = time.perf_counter()
        session.run("out:0", feeds)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    graphs = {
        "Identity chain": chain(args.nodes, ("Identity",)),
        "Neg chain": chain(args.nodes, ("Neg",)),
        "Identity/AddV2 chain": chain(args.nodes, ("Identity", "AddV2")),
    }
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for name, graph_def in graphs.items():
            paths[name] = str(Path(tmp) / f"{len(paths)}.pb")
            Path(paths[name]).write_bytes(graph_def.SerializeToString())
        ours_s = {name: ours(graph_def, args.seconds) for name, graph_def in graphs.items()}
        tf_run = subprocess.run(
            [str(TF_PYTHON), "-c", TF_SIDE, json.dumps(paths), str(args.seconds)],
            capture_output=True,
            text=True,
            env=QUIET_TF,
            check=True,
        )
        tf_s = json.loads(tf_run.stdout.strip().splitlines()[-1])
    print(f"{'graph':24} {'ours us/node':>13} {'TF us/node':>11} {'ours/TF':>8}")
    for name in graphs:
        ours_node = ours_s[name] / args.nodes * 1e6
        tf_node = tf_s[name] / args.nodes * 1e6
        print(f"{name:24} {ours_node:13.3f} {tf_node:11.3f} {ours_node / tf_node:8.2f}")


if __name__ == "__main__":
    main()
