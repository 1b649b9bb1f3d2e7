"""``run``: a SignatureDef run on our loader and runtime, printed as TF's ``saved_model_cli run``.

TF loads the MetaGraphDef into a Python ``tf.compat.v1.Session`` and runs every output, sorted by
key, with the inputs fed by tensor name; so does this, on ``loader.load_saved_model`` (with
onnxruntime delegation as ``model_server`` has it, unless ``--onnx_delegation=false``). Feeds are
checked as TF's Python Session checks them (shape against the placeholder's static shape; dtype
by conversion). Each result prints as ``str(ndarray)`` under numpy's default print options, which
TF's CLI leaves as they are; ``--outdir`` saves ``<key>.npy`` files as TF does.

Beyond TF: ``--benchmark N`` times N more runs of the same feeds (through ``make_callable``, as a
server runs them) and prints latency percentiles.
"""

from __future__ import annotations

import os
import time

import numpy as np

from loader import load_saved_model
from runtime.tensor_util import conforms
from serving.saved_model_cli import inputs, reading
from serving.saved_model_cli.errors import CliError

# numpy's defaults, which TF's saved_model_cli prints with (it never changes them).
PRINT_OPTIONS = {
    "edgeitems": 3, "threshold": 1000, "floatmode": "maxprec", "precision": 8, "suppress": False,
    "linewidth": 75, "nanstr": "nan", "infstr": "inf", "sign": "-", "formatter": None, "legacy": False,
}  # fmt: skip
PERCENTILES = (50, 90, 99)


def run(args) -> int:
    values = inputs.feeds(args)
    saved_model = reading.read(args.dir)
    meta_graph_def = reading.meta_graph(saved_model, args.tag_set)
    signature = reading.signature_def(meta_graph_def, args.signature_def)
    for key in values:
        if key not in signature.inputs:
            listed = '"' + '", "'.join(sorted(signature.inputs)) + '"'
            raise CliError(
                f'"{key}" is not a valid input key. Please choose from {listed}, or use --show option.'
            )
    if args.benchmark < 0:
        raise CliError(f"--benchmark {args.benchmark}: the number of runs cannot be negative")
    output_keys = sorted(signature.outputs)
    fetches = [signature.outputs[key].name for key in output_keys]
    bundle = load_saved_model(
        args.dir, reading.parse_tags(args.tag_set), delegation=bool(args.onnx_delegation)
    )
    try:
        bundle.check_signature(args.signature_def)
        feed_dict = {signature.inputs[key].name: value for key, value in values.items()}
        _check_feed_shapes(bundle.session.graph, feed_dict)
        outputs = bundle.session.run(fetches, feed_dict=feed_dict)
        _print_results(output_keys, outputs, args.outdir, args.overwrite)
        if args.benchmark:
            _benchmark(bundle.session, fetches, feed_dict, args)
    finally:
        bundle.close()
    return 0


def _check_feed_shapes(graph, feed_dict: dict) -> None:
    """TF's Python Session refuses a feed whose shape contradicts the placeholder's static shape."""
    for name, value in feed_dict.items():
        shape = graph.get_tensor_by_name(name).shape
        actual = np.shape(value) if not isinstance(value, np.ndarray) else value.shape
        if not conforms(shape, actual):
            raise CliError(
                f"Cannot feed value of shape {tuple(actual)} for Tensor {name}, which has shape {tuple(shape)}"
            )


def _print_results(output_keys: list[str], outputs: list, outdir: str | None, overwrite: bool) -> None:
    for key, output in zip(output_keys, outputs):
        with np.printoptions(**PRINT_OPTIONS):
            print(f"Result for output key {key}:\n{output}")
        if outdir:
            os.makedirs(outdir, exist_ok=True)
            path = os.path.join(outdir, key + ".npy")
            if not overwrite and os.path.exists(path):
                raise CliError(
                    f'Output file {path} already exists. Add "--overwrite" to overwrite the existing output files.'
                )
            np.save(path, output)
            print(f"Output {key} is saved to {path}")


def _benchmark(session, fetches: list[str], feed_dict: dict, args) -> None:
    """N timed runs after the printed one (which built the plan and validated any clusters)."""
    names = list(feed_dict)
    call = session.make_callable(fetches, feed_list=names)
    feeds = [feed_dict[n] for n in names]
    call(*feeds)
    times = np.empty(args.benchmark)
    for i in range(args.benchmark):
        start = time.perf_counter()
        call(*feeds)
        times[i] = time.perf_counter() - start
    milliseconds = times * 1e3
    report = getattr(session, "delegation_report", None)
    where = "onnxruntime delegation " + ("on" if report is not None and report.enabled else "off")
    print(f"Benchmark: {args.benchmark} runs of signature_def['{args.signature_def}'] ({where}), in ms:")
    stats = [f"p{p} {np.percentile(milliseconds, p):.3f}" for p in PERCENTILES]
    stats += [
        f"min {milliseconds.min():.3f}",
        f"max {milliseconds.max():.3f}",
        f"mean {milliseconds.mean():.3f}",
    ]
    print("  " + ", ".join(stats))
