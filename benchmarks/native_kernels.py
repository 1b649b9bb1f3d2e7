"""The numpy kernels without delegation, op family by op family, against TF's on the same models.

For each model (default: the oracle zoo) at one batch size (default 32: the case's inputs
repeated), ours runs with every op native (``delegation=False``) and TF's session (oracle venv
``tf221``, grappler on, as TF Serving runs it) runs the same signature, each side in a fresh
process of its own per model, both traced
(``RunOptions(trace_level=FULL_TRACE)``: each op's time in ``step_stats``). The time of each op
family is summed per run; the median over ``--runs`` traced runs (after a warm-up) is printed:

- convolutions: ``Conv2D`` (TF: also ``_FusedConv2D``, which adds the bias and activation);
- depthwise: ``DepthwiseConv2dNative`` (TF: ``_FusedDepthwiseConv2dNative``);
- matmul: ``MatMul``, ``BatchMatMul*``, ``Einsum`` (TF: ``_FusedMatMul``);
- pooling: ``MaxPool``, ``AvgPool``;
- on TF's side, a function call around one family's ops counts for it: Keras runs a grouped
  convolution (ConvNeXt's depthwise ``groups``) as a jit-compiled function, a ``PartitionedCall``.

The aim: each family within 3x of TF's time (``--aim``). Ours uses ``--blas-threads`` BLAS
threads (default 1, as ``model_server`` without ``--tensorflow_intra_op_parallelism``) and runs
one op at a time; TF gets as many intra-op threads and one op at a time (``--tf-threads``), so
the ratio is the kernels' and not the thread count's. ``--tf-threads 0`` gives TF its default
pools (a thread per core, independent ops side by side), as an untuned TF Serving runs. Tracing costs both sides a little per op; the families timed here are the heavy
ones, where that is noise.

    python benchmarks/native_kernels.py [--only zoo_mobilenet_saved ...] [--batch 32] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
from concurrent import futures
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from apis.tensorflow.core.protobuf import config_pb2  # noqa: E402
from benchmarks.onnx_delegation import QUIET_TF, TF_PYTHON, prepare  # noqa: E402
from loader import load_saved_model  # noqa: E402
from runtime.kernels.blas import set_blas_threads  # noqa: E402
from tests.oracle import catalog  # noqa: E402

FAMILIES = {
    "conv": ("Conv2D", "_FusedConv2D"),
    "depthwise": ("DepthwiseConv2dNative", "_FusedDepthwiseConv2dNative"),
    "matmul": ("MatMul", "_FusedMatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum"),
    "pooling": ("MaxPool", "AvgPool", "MaxPoolV2"),
}
_OP = re.compile(r"= ([A-Za-z0-9_]+)\(")

TF_SIDE = textwrap.dedent(
    """
    import json, re, statistics, sys
    import tensorflow as tf
    from tensorflow.core.framework import tensor_pb2
    v1 = tf.compat.v1
    job, families = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    family_of = {op: f for f, ops in families.items() for op in ops}
    op_re = re.compile(r"= ([A-Za-z0-9_]+)\\(")
    graph = tf.Graph()
    config = v1.ConfigProto()
    if job["threads"]:  # one op at a time on that many threads, as ours; 0: TF's default pools
        config.intra_op_parallelism_threads, config.inter_op_parallelism_threads = job["threads"], 1
    session = v1.Session(graph=graph, config=config)
    with graph.as_default():
        v1.saved_model.loader.load(session, job["tags"], job["export_dir"])
    feeds = {
        job["input_names"][key]: tf.make_ndarray(tensor_pb2.TensorProto.FromString(open(path, "rb").read()))
        for key, path in job["files"].items()
    }
    for _ in range(2):
        session.run(job["fetches"], feeds)
    library = {f.signature.name: f for f in graph.as_graph_def().library.function}

    def wrapped(partition_graphs):
        # A call of a function around one family's ops (Keras runs a grouped convolution as a
        # jit-compiled function: a PartitionedCall node) counts for that family.
        calls = {}
        for partition in partition_graphs:
            functions = {**library, **{f.signature.name: f for f in partition.library.function}}
            for node in partition.node:
                body = functions.get(node.attr["f"].func.name) if "f" in node.attr else None
                kinds = {family_of[n.op] for n in body.node_def if n.op in family_of} if body else set()
                if len(kinds) == 1:
                    calls[node.name] = kinds.pop()
        return calls

    runs = []
    for _ in range(job["runs"]):
        options = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE, output_partition_graphs=True)
        metadata = v1.RunMetadata()
        session.run(job["fetches"], feeds, options=options, run_metadata=metadata)
        calls = wrapped(metadata.partition_graphs)
        totals = dict.fromkeys(families, 0.0)
        for device in metadata.step_stats.dev_stats:
            for node in device.node_stats:
                match = op_re.search(node.timeline_label)
                family = family_of.get(match.group(1)) if match else None
                family = family or calls.get(node.node_name)
                if family is not None:
                    totals[family] += node.all_end_rel_micros / 1000
        runs.append(totals)
    print(json.dumps({f: statistics.median(r[f] for r in runs) for f in families}))
    """
)


def family_of(label: str) -> str | None:
    match = _OP.search(label)
    if match is None:
        return None
    return next((f for f, ops in FAMILIES.items() if match.group(1) in ops), None)


def ours(job: dict, batch: str, runs: int) -> dict[str, float]:
    """Median ms per family over traced native runs."""
    bundle = load_saved_model(job["export_dir"], job["tags"], delegation=False)
    try:
        signature = bundle.signature_defs[job["signature"]]
        fetches = [info.name for info in signature.outputs.values()]
        job["fetches"] = fetches
        job["input_names"] = {k: v.name for k, v in signature.inputs.items()}
        feeds = {signature.inputs[k].name: v for k, v in job["batched"][batch].items()}
        bundle.session.run(fetches, feeds)
        totals = []
        for _ in range(runs):
            options = config_pb2.RunOptions(trace_level=config_pb2.RunOptions.FULL_TRACE)
            metadata = config_pb2.RunMetadata()
            bundle.session.run(fetches, feeds, options=options, run_metadata=metadata)
            run = dict.fromkeys(FAMILIES, 0.0)
            for device in metadata.step_stats.dev_stats:
                for node in device.node_stats:
                    family = family_of(node.timeline_label)
                    if family is not None:
                        run[family] += node.all_end_rel_micros / 1000
            totals.append(run)
        medians = {f: statistics.median(r[f] for r in totals) for f in FAMILIES}
        return {**medians, "fetches": job["fetches"], "input_names": job["input_names"]}
    finally:
        bundle.close()


def ours_alone(job: dict, batch: str, runs: int, blas_threads: int) -> dict[str, float]:
    """``ours`` in a process of its own, as TF's side runs: a process that loaded and dropped the
    models before (the heap grown and cut up by them) times memory-bound kernels up to 1.3x
    slower (Xception's pooling after ten zoo models: 9.8 against 8.0 ms on its own)."""
    context = multiprocessing.get_context("spawn")
    with futures.ProcessPoolExecutor(
        1, mp_context=context, initializer=set_blas_threads, initargs=(blas_threads,)
    ) as pool:
        result = pool.submit(ours, job, batch, runs).result()
    job["fetches"], job["input_names"] = result.pop("fetches"), result.pop("input_names")
    return result


def theirs(job: dict, batch: str, runs: int, threads: int) -> dict[str, float]:
    request = {k: job[k] for k in ("tags", "export_dir", "fetches", "input_names")}
    request.update(files=job["feeds"][batch], runs=runs, threads=threads)
    result = subprocess.run(
        [str(TF_PYTHON), "-c", TF_SIDE, json.dumps(request), json.dumps(FAMILIES)],
        capture_output=True,
        text=True,
        env={**QUIET_TF, "PATH": "/usr/bin:/bin"},
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-2000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="*", help="model names (default: every zoo model)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--aim", type=float, default=3.0, help="ours / TF per family, at most")
    parser.add_argument(
        "--blas-threads", type=int, default=1, help="ours: model_server's default (runtime/kernels/blas.py)"
    )
    parser.add_argument(
        "--tf-threads",
        type=int,
        help="TF's intra-op threads, one op at a time (default: --blas-threads, the same as ours); "
        "0: TF's default pools (one thread per core, ops side by side)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    set_blas_threads(args.blas_threads)
    names = args.only or [e.name for e in catalog.discover() if e.family == "zoo"]
    batch = str(args.batch)
    tf_threads = args.blas_threads if args.tf_threads is None else args.tf_threads
    print(
        f"native kernels at batch {batch}, ms per run (median of {args.runs} traced runs): ours / TF; "
        f"ours {args.blas_threads} BLAS thread(s), TF "
        + (f"{tf_threads} intra-op thread(s), one op at a time" if tf_threads else "default pools")
    )
    print(f"{'model':<34}" + "".join(f"{f:>26}" for f in FAMILIES))
    misses = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            job = prepare(name, [args.batch], Path(tmp))
            mine = ours_alone(job, batch, args.runs, args.blas_threads)
            tf = theirs(job, batch, args.runs, tf_threads)
            cells = []
            for family in FAMILIES:
                if not tf[family] and not mine[family]:
                    cells.append("-".rjust(26))
                    continue
                ratio = mine[family] / tf[family] if tf[family] else float("inf")
                cells.append(f"{mine[family]:9.2f} /{tf[family]:8.2f} {ratio:5.2f}x")
                if ratio > args.aim:
                    misses.append(f"{name} {family}: {ratio:.1f}x")
            print(f"{name:<34}" + "".join(cells), flush=True)
    print(f"\nfamilies over {args.aim:g}x TF: {len(misses)}" + "".join(f"\n  {m}" for m in misses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
