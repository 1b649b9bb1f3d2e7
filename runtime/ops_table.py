"""``OPS.md``: the op support table, generated from the registries; never edited by hand.

    python -m runtime.ops_table            # rewrite OPS.md at the repo root
    python -m runtime.ops_table --check    # exit 1 when OPS.md is not current

Every op that has a numpy kernel, has an ONNX converter or is seen in real exports gets one row:

- **numpy kernel**: registered in ``runtime.kernels.KERNELS`` (forbidden ops never count);
- **ONNX converter**: registered in ``runtime.onnx.CONVERTERS``, imported here on demand only, so
  that onnxruntime stays out of the runtime's own import path;
- **tested**: checked against TensorFlow's outputs by a test, i.e. either the op of a record in an
  oracle model's ``records.json`` (``op_records``, ``breadth_records``, ``image_models``: each record
  is replayed by a test), or an op type that a SavedModel of the oracle catalog needs to run one of
  its signatures, its init op or its restore op (``runtime.execution.signature_check.needed_op_types``; the
  conformance tests load and run every one);
- **seen**: how many of the exports in ``ops-seen-in-exports.md`` reach the op from a serving
  signature or the init op ("serving" column). The table is kept beside this module, so that the
  generator (and the test that checks ``OPS.md``) needs nothing outside a clone.

Known deviations from TensorFlow are registry data too: a kernel module's ``DEVIATIONS`` dict
(op -> text). The "tested" column needs the oracle cache (``python -m tests.oracle build``); this
is a repository tool, the only runtime module that reads ``tests/``, and only when it runs.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import json
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from google.protobuf import text_format

from apis.tensorflow.core.protobuf import saved_model_pb2
from runtime import kernels
from runtime.execution import signature_check

REPO_ROOT = Path(__file__).resolve().parents[1]
OPS_MD = REPO_ROOT / "OPS.md"
DEFAULT_SEEN = Path(__file__).resolve().with_name("ops-seen-in-exports.md")


def kernel_ops() -> set[str]:
    """TF ops with a numpy kernel from a module of ``runtime/kernels`` (not the delegation's own
    ``_OrtCluster``, nor kernels a test registered)."""
    return {
        op
        for op, definition in kernels.load_all().items()
        if signature_check.has_kernel(op) and definition.fn.__module__.startswith("runtime.kernels.")
    }


def converter_ops() -> set[str]:
    return set(importlib.import_module("runtime.onnx").CONVERTERS)


def deviations() -> dict[str, str]:
    """Op -> known deviation, from every kernel module's ``DEVIATIONS``."""
    found = {}
    for name, module in sorted(sys.modules.items()):
        if name.startswith("runtime.kernels.") and isinstance(getattr(module, "DEVIATIONS", None), dict):
            found.update(module.DEVIATIONS)
    return found


def seen_ops(path: Path) -> dict[str, int]:
    """Op -> its "serving" count in the seen-ops table."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the seen-ops table (give its path with --seen)")
    rows = re.findall(r"^\| *([A-Za-z0-9_]+) *\| *(\d+) *\| *(\d+) *\|", path.read_text(), re.M)
    return {op: int(serving) for op, serving, _ in rows}


def tested_ops() -> set[str]:
    """Op types a test compares with TensorFlow (definition in the module docstring)."""
    from tests.oracle import catalog, corpus  # repository data, read only when generating

    tested: set[str] = set()
    for entry in catalog.discover():
        manifest = corpus.load_manifest(entry.name)
        records = manifest["dir"] / "records.json"
        if records.is_file():
            tested |= {r["op"] for r in json.loads(records.read_text())["records"].values()}
        export_dir = manifest["export_path"]
        has_variables = (export_dir / "variables" / "variables.index").is_file()
        for meta_graph in _saved_model(export_dir).meta_graphs:
            tested |= set(_needed(meta_graph, has_variables))
    return tested


def _saved_model(export_dir: Path) -> saved_model_pb2.SavedModel:
    """``saved_model.pb`` or ``.pbtxt`` (the runtime must not import the loader to read it)."""
    binary = export_dir / "saved_model.pb"
    if binary.is_file():
        return saved_model_pb2.SavedModel.FromString(binary.read_bytes())
    return text_format.Parse((export_dir / "saved_model.pbtxt").read_text(), saved_model_pb2.SavedModel())


def _needed(meta_graph, has_variables: bool) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    index = signature_check.GraphIndex(meta_graph.graph_def)
    for signature in meta_graph.signature_def.values():
        fetches = [i.name for i in signature.outputs.values() if i.name]
        feeds = [i.name for i in signature.inputs.values() if i.name]
        counts += signature_check.needed_op_types(index, fetches, feeds)
    for key in ("saved_model_main_op", "legacy_init_op"):
        if key in meta_graph.collection_def:
            counts += signature_check.needed_op_types(index, meta_graph.collection_def[key].node_list.value)
    saver = meta_graph.saver_def
    if has_variables and saver.restore_op_name:
        counts += signature_check.needed_op_types(
            index, [saver.restore_op_name], [saver.filename_tensor_name]
        )
    return counts


def render(
    kernel: set[str],
    converter: set[str],
    tested: set[str],
    seen: Mapping[str, int],
    known: Mapping[str, str],
) -> str:
    serving = {op for op, n in seen.items() if n > 0}
    missing = sorted(serving - kernel, key=lambda op: (-seen[op], op))
    unserved = sorted(set(seen) - serving - kernel)
    ops = sorted(kernel | converter | set(seen))
    lines = [
        "# Op support",
        "",
        "Generated by `python -m runtime.ops_table` from the numpy kernel registry (`runtime/kernels`), the",
        "ONNX converter registry (`runtime/onnx`) and the oracle corpus; `tests/runtime/test_ops_table.py`",
        "fails when this file is not current. Do not edit it by hand. Definitions: `runtime/ops_table.py`.",
        "",
        "## Summary",
        "",
        f"- {len(kernel)} ops with a numpy kernel, {len(converter)} with an ONNX converter,"
        f" {len(tested & kernel)} of the kernels tested against TensorFlow.",
        f"- Ops seen in real exports, reachable from a serving signature or init op: {len(serving)};"
        f" with a numpy kernel: {len(serving & kernel)} of {len(serving)}.",
        f"- Seen anywhere in those exports (function libraries included): {len(seen)};"
        f" with a numpy kernel: {len(set(seen) & kernel)} of {len(seen)}.",
        f"- Seen in serving graphs and still missing ({len(missing)}): {_listed(missing, seen)}.",
        f"- Seen only outside serving graphs (gradients, training, summaries) and missing: {', '.join(unserved) or 'none'}.",
        "- PyFunc, PyFuncStateless and EagerPyFunc run Python code of the exporting process: refused by",
        "  design. A signature needing one (or any op without a kernel) is reported when the model loads",
        "  and answers UNIMPLEMENTED; the model's other signatures serve (`runtime/execution/signature_check.py`).",
        "",
        "## Columns",
        "",
        "- numpy kernel: registered in `runtime.kernels.KERNELS` by a module of `runtime/kernels`.",
        "- ONNX converter: registered in `runtime.onnx.CONVERTERS` (onnxruntime delegation).",
        "- tested: compared with TensorFlow 2.x outputs by a test: the op of a record in an oracle",
        "  model's `records.json` (op, breadth and image records), or needed by a signature, the init op",
        "  or the restore op of a SavedModel in the oracle corpus (all of which the conformance tests run).",
        "- exports reaching it from serving: of the exports in `ops-seen-in-exports.md`, how many reach",
        "  the op from a serving signature or the init op (0: seen only in function libraries).",
        "",
        "## Known deviations from TensorFlow",
        "",
    ]
    lines += [f"- **{op}**: {text}" for op, text in sorted(known.items())] or ["None recorded."]
    lines += [
        "",
        "## All ops",
        "",
        "| op | numpy kernel | ONNX converter | tested | exports reaching it from serving |",
        "|---|---|---|---|---|",
    ]
    yes = {True: "yes", False: "no"}
    for op in ops:
        row = [
            op,
            yes[op in kernel],
            yes[op in converter],
            yes[op in tested and op in kernel],
            str(seen.get(op, "")),
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _listed(ops: list[str], seen: Mapping[str, int]) -> str:
    return ", ".join(f"{op} ({seen[op]})" for op in ops) or "none"


def generate(seen_path: Path | None = None) -> str:
    """The current OPS.md text."""
    path = seen_path or DEFAULT_SEEN
    converter = converter_ops()  # first: the same registry state whether runtime.onnx was loaded or not
    return render(kernel_ops(), converter, tested_ops(), seen_ops(path), deviations())


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runtime.ops_table", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if OPS.md is not current")
    parser.add_argument("--seen", type=Path, help=f"seen-ops table (default {DEFAULT_SEEN})")
    args = parser.parse_args(None if argv is None else list(argv))
    text = generate(args.seen)
    if args.check:
        current = OPS_MD.is_file() and OPS_MD.read_text() == text
        print("OPS.md is current" if current else "OPS.md is stale: run `python -m runtime.ops_table`")
        return 0 if current else 1
    OPS_MD.write_text(text)
    print(f"wrote {OPS_MD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
