"""TensorFlow side of the oracle: runs inside an oracle venv, never in the main venv.

``python -m tests.oracle.tfside <builder module> --cache DIR --model NAME=HASH ...`` imports the
builder module once and, for each named model, calls its builder to write the SavedModel, then
does the part common to every model:

1. computes reference outputs through TensorFlow's own loader path: for each tag set the cases
   name, ``tf.compat.v1.saved_model.loader.load`` in a fresh ``tf.Graph`` and ``Session``,
   then ``Session.run`` of every output tensor of the signature with every input tensor fed;
2. dumps every tensor of ``variables/variables`` through ``tf.train.load_checkpoint``;
3. writes ``manifest.json`` (format in ``tests/oracle/__init__.py``).

A model is built in ``<cache>/.<name>.tmp`` and renamed into place, so a failed build leaves
no manifest behind. Every signature of every MetaGraphDef needs at least one case (the
``__saved_model_init_op`` pseudo-signature excepted): an untested signature fails the build.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import importlib
import json
import os
import re
import shutil
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.python.saved_model import loader_impl

from tests.oracle import REPO_ROOT
from tests.oracle.build import RESULT_PREFIX


@dataclasses.dataclass(frozen=True)
class Case:
    """Fixed inputs for one signature; the oracle records every output TF computes for them."""

    signature: str
    inputs: Mapping[str, Any]
    tags: tuple[str, ...] = ("serve",)
    rtol: float = 1e-5
    atol: float = 1e-6


Builder = Callable[[str], Sequence[Case]]


@dataclasses.dataclass(frozen=True)
class Model:
    name: str
    family: str
    build: Builder
    committed: str | None


REGISTRY: dict[str, Model] = {}


def model(name: str, *, family: str | None = None, committed: str | None = None):
    """Registers a builder: ``fn(export_dir) -> [Case, ...]``.

    The builder writes a SavedModel to ``export_dir`` (which does not exist yet), unless
    ``committed`` names a repo-relative export under ``models/``: then ``export_dir`` is that
    directory and the builder only supplies cases. Arguments must be literals (the main venv
    reads them with ``ast``).
    """

    def register(fn: Builder) -> Builder:
        module = sys.modules[fn.__module__]
        default_family = getattr(module, "FAMILY", fn.__module__.rsplit(".", 1)[-1])
        REGISTRY[name] = Model(name, family or default_family, fn, committed)
        return fn

    return register


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def examples(rows: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """A batch of serialized ``tf.train.Example``: floats, ints and strings/bytes by type."""
    out = []
    for row in rows:
        feature = {}
        for key, value in row.items():
            values = list(value) if isinstance(value, (list, tuple, np.ndarray)) else [value]
            feature[key] = _feature(values)
        example = tf.train.Example(features=tf.train.Features(feature=feature))
        out.append(example.SerializeToString())
    return np.array(out, dtype=object)


def _feature(values: list) -> tf.train.Feature:
    if all(isinstance(v, (str, bytes)) for v in values):
        data = [v.encode() if isinstance(v, str) else v for v in values]
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=data))
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in values]))


def every_signature(
    export_dir: str, batches: Sequence[np.ndarray], tags: Sequence[str] = ("serve",), **tolerance
) -> list[Case]:
    """Each batch through every signature of one MetaGraphDef whose signatures all take one
    input (e.g. an Estimator's tf.Example receiver)."""
    (meta_graph,) = [
        mg
        for mg in loader_impl.parse_saved_model(export_dir).meta_graphs
        if set(mg.meta_info_def.tags) == set(tags)
    ]
    cases = []
    for key, signature in sorted(meta_graph.signature_def.items()):
        if _is_internal(key):
            continue
        (input_key,) = signature.inputs
        cases += [Case(key, {input_key: b}, tuple(tags), **tolerance) for b in batches]
    return cases


def _file_key(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key)


def _write_tensor(out: Path, relative: str, value: Any, dtype: tf.dtypes.DType) -> str:
    """Writes ``value`` as a serialized TensorProto at ``out/relative``; returns ``relative``."""
    path = out / relative
    if path.exists():  # two keys sanitized to one file name
        raise FileExistsError(f"{path}: rename a signature key")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tf.make_tensor_proto(value, dtype=dtype).SerializeToString())
    return relative


def _feed_value(value: Any, info) -> np.ndarray:
    dtype = tf.as_dtype(info.dtype)
    if dtype == tf.string:
        return np.asarray(value, dtype=object)
    return np.asarray(value, dtype=dtype.as_numpy_dtype)


def _is_internal(signature_key: str) -> bool:
    # tf.saved_model.save stores its init op as a pseudo-signature, never served.
    return signature_key.startswith("__saved_model")


def compute_cases(export_dir: Path, cases: Sequence[Case], out: Path) -> list[dict]:
    """Runs every case through TF's v1 loader; writes inputs and outputs under ``out``."""
    by_tags: dict[tuple[str, ...], list[int]] = collections.defaultdict(list)
    for index, case in enumerate(cases):
        by_tags[tuple(case.tags)].append(index)
    records: list[dict | None] = [None] * len(cases)
    config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    for tags, indices in by_tags.items():
        with tf.Graph().as_default() as graph, tf.compat.v1.Session(graph=graph, config=config) as sess:
            meta_graph = tf.compat.v1.saved_model.loader.load(sess, list(tags), str(export_dir))
            for index in indices:
                records[index] = _run_case(sess, meta_graph.signature_def, cases[index], index, out)
    return [r for r in records if r is not None]


def _run_case(sess, signatures, case: Case, index: int, out: Path) -> dict:
    if case.signature not in signatures:
        raise KeyError(f"signature {case.signature!r} not in {sorted(signatures)}")
    signature = signatures[case.signature]
    if set(case.inputs) != set(signature.inputs):
        raise ValueError(
            f"{case.signature}: case inputs {sorted(case.inputs)} != signature inputs"
            f" {sorted(signature.inputs)}"
        )
    feeds, inputs = {}, {}
    for key, info in signature.inputs.items():
        value = _feed_value(case.inputs[key], info)
        feeds[info.name] = value
        relative = f"cases/{index}/{_file_key(key)}.pb"
        inputs[key] = _write_tensor(out, relative, value, tf.as_dtype(info.dtype))
    fetches = {key: info.name for key, info in signature.outputs.items()}
    results = sess.run(fetches, feed_dict=feeds)
    outputs = {}
    for key, info in signature.outputs.items():
        relative = f"cases/{index}/out_{_file_key(key)}.pb"
        outputs[key] = _write_tensor(out, relative, results[key], tf.as_dtype(info.dtype))
    return {
        "tags": list(case.tags),
        "signature": case.signature,
        "method_name": signature.method_name,
        "inputs": inputs,
        "outputs": outputs,
        "rtol": case.rtol,
        "atol": case.atol,
    }


def dump_variables(export_dir: Path, out: Path) -> dict[str, str]:
    """Every checkpoint tensor (slices of partitioned variables come back whole)."""
    prefix = export_dir / "variables" / "variables"
    if not prefix.with_suffix(".index").exists():
        return {}
    reader = tf.train.load_checkpoint(str(prefix))
    dtypes = reader.get_variable_to_dtype_map()
    variables = {}
    for n, name in enumerate(sorted(dtypes)):
        variables[name] = _write_tensor(out, f"variables/{n}.pb", reader.get_tensor(name), dtypes[name])
    return variables


def meta_graph_tags(export_dir: Path, cases: Sequence[Case]) -> list[list[str]]:
    """Tag sets of every MetaGraphDef, checking that cases cover each of their signatures."""
    if not cases:
        raise ValueError("the builder returned no cases")
    covered = {(frozenset(case.tags), case.signature) for case in cases}
    tag_sets = []
    for meta_graph in loader_impl.parse_saved_model(str(export_dir)).meta_graphs:
        tags = list(meta_graph.meta_info_def.tags)
        uncovered = sorted(
            key
            for key in meta_graph.signature_def
            if (frozenset(tags), key) not in covered and not _is_internal(key)
        )
        if uncovered:
            raise ValueError(f"tags {tags}: no case for signature(s) {uncovered}")
        tag_sets.append(tags)
    return tag_sets


def build_model(entry: Model, cache: Path, builder_hash: str) -> None:
    final = cache / entry.name
    tmp = cache / f".{entry.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        _build_into(entry, tmp, final, builder_hash)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)


def _build_into(entry: Model, tmp: Path, final: Path, builder_hash: str) -> None:
    if entry.committed:
        export_dir = REPO_ROOT / entry.committed
        if not (export_dir / "saved_model.pb").exists():
            raise FileNotFoundError(f"{export_dir}: run `python -m tests.oracle models`")
    else:
        export_dir = tmp / "saved_model"
    cases = entry.build(str(export_dir))
    manifest = {
        "name": entry.name,
        "family": entry.family,
        "tf_version": tf.__version__,
        "builder_hash": builder_hash,
        "export_dir": os.path.relpath(export_dir.resolve(), final.resolve())
        if entry.committed
        else "saved_model",
        "meta_graphs": meta_graph_tags(export_dir, cases),
        "cases": compute_cases(export_dir, cases, tmp),
        "variables": dump_variables(export_dir, tmp),
    }
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.oracle.tfside")
    parser.add_argument("module")
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--model", action="append", default=[], metavar="NAME=HASH")
    args = parser.parse_args(argv)
    importlib.import_module(args.module)
    failures = 0
    for spec in args.model:
        name, builder_hash = spec.split("=", 1)
        start = time.monotonic()
        result: dict[str, Any] = {"name": name, "ok": True}
        try:
            build_model(REGISTRY[name], args.cache, builder_hash)
        except Exception as error:  # reported per model; the module's other models still build
            traceback.print_exc()
            failures += 1
            result.update(ok=False, error=f"{type(error).__name__}: {error}"[:500])
        result["seconds"] = round(time.monotonic() - start, 2)
        sys.stdout.flush()
        print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    # Run the canonical module's main: builders register into tests.oracle.tfside.REGISTRY,
    # not into this __main__ copy.
    sys.exit(importlib.import_module("tests.oracle.tfside").main())
