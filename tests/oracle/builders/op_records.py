"""TensorFlow's outputs for the op records of ``tests/runtime/op_records.py``.

Runs inside the oracle venv named by ``VENV`` (``python -m tests.oracle build --only op_records``).
Each record becomes a one-node ``tf.Graph``: one placeholder of unknown shape per input tensor (a
list input gets one per element) feeding the op, built with the op's own arg and attr names. The
graph is run with the record's inputs fed, and TF's outputs, or the error TF raised, are stored
beside the model under ``<cache>/op_records/records/``::

    records.json                  {"records_sha256", "tf_version", "records": {name: entry}}
    records/<name>/graph.pb       the GraphDef (placeholders ``in_<i>`` and the node ``op``)
    records/<name>/in_<i>.pb      inputs, flattened in TF's input order (TensorProtos)
    records/<name>/out_<i>.pb     outputs, in TF's output order (TensorProtos)

An entry is ``{"op", "args": [[input indices of arg 0], ...], "list_args": [bool, ...],
"outputs": [paths]}`` or, where TF raised, ``{"op", "args", "list_args", "error": {"class",
"message", "stage"}}`` with ``stage`` "build" (graph construction) or "run". An NCHW record of an
op whose CPU kernel takes NHWC only is evaluated as transpose -> NHWC op -> transpose (what TF's
layout rewrite does on GPU-exported graphs) and marked ``"via": "NHWC"``. The SavedModel the
catalog requires holds every other record TF ran (all of whose outputs are meaningful: not those
with ``compare``, whose other outputs are TF-internal or uninitialised) as one signature (inputs
``<arg>_<j>``, outputs ``output_<i>``), so the conformance suite replays them through the loader.

``records_sha256`` is the sha256 of ``tests/runtime/op_records.py``: the catalog hashes builder
modules only, so ``test_op_records`` compares it and asks for ``--force`` when the records changed.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2
from tensorflow.python.framework import op_def_library, op_def_registry

from tests.oracle import REPO_ROOT
from tests.oracle.tfside import Case, model
from tests.runtime import op_records

VENV = "tf221"
FAMILY = "op_records"
DEPENDS = ["tests/runtime/op_records.py"]
RECORDS_FILE = REPO_ROOT / "tests" / "runtime" / "op_records.py"


def _tf_attr(value):
    if isinstance(value, op_records.DType):
        return tf.as_dtype(str(value))
    return value


def _default(value):
    kind = value.WhichOneof("value")
    if kind == "list":
        items = value.list
        for field in ("s", "i", "f", "b", "type", "shape"):
            if getattr(items, field):
                return [_scalar(field, v) for v in getattr(items, field)]
        return []
    return _scalar(kind, getattr(value, kind))


def _scalar(kind, value):
    if kind == "s":
        return value.decode()
    if kind == "type":
        return tf.as_dtype(value)
    if kind == "shape":
        return tf.TensorShape(value)
    return value


def _with_defaults(op_def, kwargs: dict) -> dict:
    """Adds every attr default TF's op builder would not infer from the inputs itself."""
    inferred = set()
    for arg in op_def.input_arg:
        inferred.update(a for a in (arg.type_attr, arg.number_attr, arg.type_list_attr) if a)
    for attr in op_def.attr:
        if attr.name not in kwargs and attr.name not in inferred and attr.HasField("default_value"):
            kwargs[attr.name] = _default(attr.default_value)
    return kwargs


def _placeholder(value: np.ndarray, name: str, known_shape: bool = False):
    dtype = tf.string if value.dtype == object else tf.as_dtype(value.dtype)
    return tf.compat.v1.placeholder(dtype, shape=value.shape if known_shape else None, name=name)


def _write(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tf.make_tensor_proto(value).SerializeToString())


def _message(error: BaseException) -> str:
    text = getattr(error, "message", None) or str(error)
    text = text.split("Node: 'op'\n")[-1]
    text = text.split("\n\t [[")[0]
    return re.sub(r"\s*\[\[\{\{node op\}\}.*", "", text, flags=re.S).strip()


def _build_graph(record):
    """The record's one-node graph: (graph, flat input values, arg layout, output tensors).

    Placeholders have unknown shapes, so that TF's kernel (not its shape function) judges the
    inputs; a few shape functions insist on known ranks, and get known shapes on a second try.
    """
    try:
        return (*_build_graph_with(record, known_shape=False), False)
    except ValueError:
        return (*_build_graph_with(record, known_shape=True), True)


def _build_graph_with(record, known_shape: bool):
    op_def = op_def_registry.get(record.op)
    if op_def is None:
        raise KeyError(f"no TF op {record.op}")
    graph = tf.Graph()
    flat, args, list_args, feeds = [], [], [], {}
    with graph.as_default():
        kwargs = {}
        for arg, value in zip(op_def.input_arg, record.inputs):
            is_list = isinstance(value, list)
            values = value if is_list else [value]
            tensors = []
            for v in values:
                v = np.asarray(v)
                t = _placeholder(v, f"in_{len(flat)}", known_shape)
                feeds[t] = v
                tensors.append(t)
                flat.append(v)
            args.append(list(range(len(flat) - len(values), len(flat))))
            list_args.append(is_list)
            kwargs[arg.name] = tensors if is_list else tensors[0]
        if len(record.inputs) != len(op_def.input_arg):
            raise ValueError(f"{record.name}: {len(record.inputs)} inputs for {len(op_def.input_arg)} args")
        kwargs.update({k: _tf_attr(v) for k, v in record.attrs.items()})
        if record.op == "EnsureShape" and kwargs.get("shape") is None:
            kwargs["shape"] = tf.TensorShape(None)
        _, _, op, _ = op_def_library._apply_op_helper(record.op, name="op", **_with_defaults(op_def, kwargs))
    return graph, flat, args, list_args, feeds, list(op.outputs)


def _run_record(record, out: Path) -> dict:
    entry: dict = {"op": record.op}
    try:
        graph, flat, args, list_args, feeds, outputs, known_shape = _build_graph(record)
    except Exception as error:  # noqa: BLE001 - TF's verdict is the data
        flat = [
            np.asarray(v) for value in record.inputs for v in (value if isinstance(value, list) else [value])
        ]
        for i, v in enumerate(flat):
            _write(out / f"in_{i}.pb", v)
        entry["error"] = {"class": type(error).__name__, "message": _message(error), "stage": "build"}
        return entry
    entry.update(args=args, list_args=list_args)
    (out / "graph.pb").parent.mkdir(parents=True, exist_ok=True)
    (out / "graph.pb").write_bytes(graph.as_graph_def().SerializeToString())
    for i, v in enumerate(flat):
        _write(out / f"in_{i}.pb", v)
    config = tf.compat.v1.ConfigProto(
        graph_options=tf.compat.v1.GraphOptions(
            rewrite_options=rewriter_config_pb2.RewriterConfig(disable_meta_optimizer=True)
        )
    )
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        try:
            results = sess.run(outputs, feed_dict=feeds)
        except tf.errors.OpError as error:
            if record.attrs.get("data_format") != "NCHW":
                entry["error"] = {"class": type(error).__name__, "message": _message(error), "stage": "run"}
                return entry
            try:
                results = _run_via_nhwc(record)
                entry["via"] = "NHWC"
            except tf.errors.OpError as nhwc_error:
                entry["error"] = {
                    "class": type(nhwc_error).__name__,
                    "message": _message(nhwc_error),
                    "stage": "run",
                }
                return entry
    entry["outputs"] = []
    for i, value in enumerate(results):
        _write(out / f"out_{i}.pb", value)
        entry["outputs"].append(f"out_{i}.pb")
    entry["_feeds"] = (args, list_args, flat, known_shape)
    return entry


# TF's CPU kernels of these ops take NHWC only (TF relies on GPU or layout rewrites for NCHW); their
# NCHW records are evaluated as transpose -> NHWC op -> transpose. Values: (inputs that are NCHW
# tensors, inputs that are per-dimension vectors in NCHW order).
_LAYOUT_INPUTS = {"Conv2DBackpropInput": ((2,), (0,)), "MaxPoolV2": ((0,), (1, 2))}
_TO_NHWC = [0, 2, 3, 1]


def _run_via_nhwc(record):
    tensors, vectors = _LAYOUT_INPUTS.get(record.op, ((0,), ()))
    graph = tf.Graph()
    feeds = {}
    with graph.as_default():
        op_def = op_def_registry.get(record.op)
        kwargs = {}
        for i, (arg, value) in enumerate(zip(op_def.input_arg, record.inputs)):
            value = np.asarray(value)
            if i in vectors:
                value = value[_TO_NHWC]
            t = _placeholder(value, f"in_{i}")
            feeds[t] = value
            kwargs[arg.name] = tf.transpose(t, _TO_NHWC) if i in tensors else t
        for name, value in record.attrs.items():
            if name in ("strides", "ksize", "dilations") and len(value) == 4:
                value = [value[j] for j in _TO_NHWC]
            elif name == "explicit_paddings" and len(value) == 8:
                value = [v for j in _TO_NHWC for v in value[2 * j : 2 * j + 2]]
            elif name == "data_format":
                value = "NHWC"
            kwargs[name] = _tf_attr(value)
        _, _, op, _ = op_def_library._apply_op_helper(record.op, name="op", **_with_defaults(op_def, kwargs))
        outputs = [tf.transpose(op.outputs[0], [0, 3, 1, 2])] + list(op.outputs[1:])
    with tf.compat.v1.Session(graph=graph) as sess:
        return sess.run(outputs, feed_dict=feeds)


def _export(export_dir: str, records, entries) -> list[Case]:
    """One SavedModel, one signature per record TF ran; returns the cases that replay them."""
    cases = []
    graph = tf.Graph()
    with graph.as_default():
        signatures = {}
        for record in records:
            entry = entries[record.name]
            if "error" in entry or "via" in entry or record.compare is not None:
                continue
            args, list_args, flat, known_shape = entry["_feeds"]
            op_def = op_def_registry.get(record.op)
            kwargs, inputs, case_inputs = {}, {}, {}
            with tf.name_scope(record.name.replace(".", "_")):
                for arg, indices, is_list in zip(op_def.input_arg, args, list_args):
                    tensors = []
                    for j, index in enumerate(indices):
                        key = f"{arg.name}_{j}"
                        t = _placeholder(flat[index], key, known_shape)
                        tensors.append(t)
                        inputs[key] = tf.compat.v1.saved_model.build_tensor_info(t)
                        case_inputs[key] = flat[index]
                    kwargs[arg.name] = tensors if is_list else tensors[0]
                kwargs.update({k: _tf_attr(v) for k, v in record.attrs.items()})
                if record.op == "EnsureShape" and kwargs.get("shape") is None:
                    kwargs["shape"] = tf.TensorShape(None)
                _, _, op, _ = op_def_library._apply_op_helper(
                    record.op, name="op", **_with_defaults(op_def, kwargs)
                )
            outputs = {
                f"output_{i}": tf.compat.v1.saved_model.build_tensor_info(t) for i, t in enumerate(op.outputs)
            }
            signatures[record.name] = tf.compat.v1.saved_model.build_signature_def(
                inputs, outputs, "tensorflow/serving/predict"
            )
            tol = _tolerance(record)
            cases.append(Case(record.name, case_inputs, rtol=tol[0], atol=tol[1]))
        builder = tf.compat.v1.saved_model.Builder(export_dir)
        with tf.compat.v1.Session(graph=graph) as sess:
            builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map=signatures)
        builder.save()
    return cases


def _tolerance(record) -> tuple[float, float]:
    if record.rtol is not None:
        return record.rtol, record.atol if record.atol is not None else record.rtol
    return 1e-5, 1e-6


@model("op_records")
def build_op_records(export_dir: str) -> list[Case]:
    out = Path(export_dir).parent
    records = op_records.RECORDS
    entries = {}
    for record in records:
        entries[record.name] = _run_record(record, out / "records" / record.name)
    cases = _export(export_dir, records, entries)
    for entry in entries.values():
        entry.pop("_feeds", None)
    manifest = {
        "records_sha256": hashlib.sha256(RECORDS_FILE.read_bytes()).hexdigest(),
        "tf_version": tf.__version__,
        "records": entries,
    }
    (out / "records.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return cases


if __name__ == "__main__":
    # Standalone: evaluate the records into DIR without the catalog (debugging aid).
    import sys

    target = Path(sys.argv[1])
    print(len(build_op_records(str(target / "saved_model"))), "cases")
