"""``scan``: TF's denylisted-op check, then whether each signature can run here, and where.

First TF's ``saved_model_cli scan`` lines (``--op_denylist``, default WriteFile, ReadFile,
PrintV2; the set printed sorted, where TF's order follows the hash seed). Then, beyond TF, per
MetaGraphDef and per signature, what ``model_server`` would decide at load
(``runtime/execution/signature_check``): a signature needing op types the runtime lacks (or must not run:
PyFunc) "cannot run here", with every missing op type and its count; and for the others, with
onnxruntime delegation on (``--onnx_delegation``, default true), its clusters and native ops, and
why each op stayed native (``placement``). The exit status is 1 when a signature cannot run or the
model cannot load, so ``scan`` can gate a deployment pipeline.
"""

from __future__ import annotations

import logging

from apis.tensorflow.core.protobuf import meta_graph_pb2
from loader import load_saved_model
from loader.bundle import INIT_OP_SIGNATURE_KEY, check_load_ops
from runtime import errors
from runtime.execution import signature_check
from serving.saved_model_cli import placement, reading
from serving.saved_model_cli.show import ops_used_by_graph_def

DEFAULT_OP_DENYLIST = frozenset({"WriteFile", "ReadFile", "PrintV2"})


def _set_repr(items) -> str:
    return "{" + ", ".join(repr(i) for i in sorted(items)) + "}" if items else "set()"


def scan_denylist(meta_graph_def: meta_graph_pb2.MetaGraphDef, denylist: frozenset[str]) -> None:
    """TF's line: the denylisted ops the MetaGraph has, or that it has none of them."""
    tags = list(meta_graph_def.meta_info_def.tags)
    found = denylist & ops_used_by_graph_def(meta_graph_def.graph_def)
    if found:
        print(f"MetaGraph with tag set {tags} contains the following denylisted ops: {_set_repr(found)}")
    else:
        print(
            f"MetaGraph with tag set {tags} does not contain the default denylisted ops: {_set_repr(denylist)}"
        )


def _print_placement(where: placement.SignaturePlacement) -> None:
    clusters = len(where.clusters)
    print(
        f"    onnxruntime: {clusters} cluster{'s' * (clusters != 1)}, {where.delegated_ops} ops, "
        f"{100 * where.flops_share:.1f}% of estimated FLOPs"
    )
    for cluster in where.clusters:
        kinds = ", ".join(f"{k} x{n}" for k, n in sorted(cluster.op_types.items()))
        print(f"      {cluster.name}: {len(cluster.ops)} ops ({kinds})")
    print(f"    native: {len(where.native)} ops")
    for (kind, why), count in sorted(where.native_by_reason().items()):
        print(f"      {kind} x{count}: {why}")


def scan_meta_graph(export_dir: str, meta_graph_def: meta_graph_pb2.MetaGraphDef, delegation: bool) -> bool:
    """Prints the MetaGraphDef's signatures' verdicts; returns whether all of them can run."""
    tags = list(meta_graph_def.meta_info_def.tags)
    print(f"\nMetaGraphDef with tag-set: '{', '.join(tags)}':")
    keys = sorted(k for k in meta_graph_def.signature_def if k != INIT_OP_SIGNATURE_KEY)
    unavailable = signature_check.unavailable_signatures(meta_graph_def)
    try:
        check_load_ops(meta_graph_def, export_dir)
        signature_check.check_some_signature_runs(meta_graph_def, unavailable, export_dir)
        bundle = (
            load_saved_model(export_dir, tags, delegation=delegation)
            if len(unavailable) < len(keys)
            else None
        )
    except errors.OpError as e:
        print(f"  cannot load here: {e.message}")
        _print_unavailable(keys, unavailable)
        return False
    try:
        for key in keys:
            if key in unavailable:
                print(f"  signature_def['{key}']: cannot run here: {_missing(unavailable[key])}")
                continue
            print(f"  signature_def['{key}']: runs here")
            if not delegation:
                print("    onnxruntime delegation: off (--onnx_delegation=false): every op runs natively")
                continue
            _print_placement(placement.place(bundle.session, meta_graph_def.signature_def[key]))
    finally:
        if bundle is not None:
            bundle.close()
    return not unavailable


def _print_unavailable(keys: list[str], unavailable: dict) -> None:
    for key in keys:
        verdict = _missing(unavailable[key]) if key in unavailable else "the model cannot load"
        print(f"  signature_def['{key}']: cannot run here: {verdict}")


def _missing(error: signature_check.UnavailableSignatureError) -> str:
    return "op types not supported: " + ", ".join(f"{t} (x{n})" for t, n in sorted(error.counts.items()))


def scan(args) -> int:
    logging.getLogger("loader").setLevel(logging.ERROR)  # its warnings repeat our verdicts
    saved_model = reading.read(args.dir)
    if args.op_denylist is not None:
        denylist = frozenset(op.strip() for op in args.op_denylist.split(",") if op.strip())
    else:
        denylist = DEFAULT_OP_DENYLIST
    if args.tag_set:
        meta_graphs = [reading.meta_graph(saved_model, args.tag_set)]
    else:
        meta_graphs = list(saved_model.meta_graphs)
    for meta_graph_def in meta_graphs:
        scan_denylist(meta_graph_def, denylist)
    runnable = [scan_meta_graph(args.dir, m, bool(args.onnx_delegation)) for m in meta_graphs]
    if all(runnable):
        print("\nEvery signature can run here.")
        return 0
    print("\nSome signatures cannot run here (see above): model_server would not serve them.")
    return 1
