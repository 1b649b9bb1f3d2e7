"""Where each op of one signature runs after delegation: onnxruntime clusters, native ops, why.

The delegated Session's graph is what a run executes: each ``_OrtCluster`` node is one
onnxruntime cluster (its members named in its ``ops`` attr), members read outside a cluster are
``IdentityN`` shims under the member's own name, everything else runs on the numpy kernels. The
ops one signature runs are those reached back from its outputs, stopping at the tensors it feeds
(``served_region``, the Session's own rule); the delegation report says why each native op
stayed native and how many FLOPs each part is estimated at. Clusters inside a loop's or a
branch's body belong to the signatures whose ops call that function.
"""

from __future__ import annotations

import collections
import importlib
from dataclasses import dataclass, field

from runtime.execution.signature_check import called_functions

# runtime.onnx's own name for the op a cluster becomes. That package (and onnxruntime) is imported
# by name, when a placement is asked for, as the Session imports it: it stays out of the static
# imports of the layers above the runtime (import-linter's contract).
CLUSTER_OP = "_OrtCluster"


def onnx_module(name: str):
    """``runtime.onnx.<name>``, imported on demand."""
    return importlib.import_module(f"runtime.onnx.{name}")


@dataclass
class NativeOp:
    name: str
    type: str
    why: str
    flops: float


@dataclass
class SignaturePlacement:
    """One signature's clusters (``runtime.onnx.report.ClusterSummary``, in graph order) and
    native ops (not bookkeeping ones)."""

    clusters: list = field(default_factory=list)
    native: list[NativeOp] = field(default_factory=list)
    ops: list = field(default_factory=list)  # every op the signature runs, in graph order

    @property
    def delegated_ops(self) -> int:
        return sum(len(c.ops) for c in self.clusters)

    @property
    def flops_share(self) -> float:
        """Share of the estimated FLOPs in onnxruntime (without arithmetic: 0.0 when every op is
        native, else 1.0)."""
        delegated = sum(c.flops for c in self.clusters)
        total = delegated + sum(op.flops for op in self.native)
        if not total:  # no arithmetic: all of it is where the ops are
            return 0.0 if self.native and not self.clusters else 1.0
        return delegated / total

    def native_by_reason(self) -> collections.Counter:
        return collections.Counter((op.type, op.why) for op in self.native)


def signature_io(signature) -> tuple[list[str], list[str]]:
    """(input tensor names, output tensor names) of a SignatureDef."""
    return (
        sorted(i.name for i in signature.inputs.values() if i.name),
        sorted(o.name for o in signature.outputs.values() if o.name),
    )


def is_shim(op) -> bool:
    """An ``IdentityN`` of a cluster's outputs, standing for a member under the member's name."""
    return op.type == "IdentityN" and bool(op.inputs) and all(t.op.type == CLUSTER_OP for t in op.inputs)


def place(session, signature) -> SignaturePlacement:
    """The placement of ``signature``'s ops in ``session`` (delegated or not)."""
    graph = session.graph
    report = getattr(session, "delegation_report", None)  # a runtime.onnx DelegationReport
    region = onnx_module("rewrite").served_region(graph, [signature_io(signature)])
    not_work = onnx_module("cost").BOOKKEEPING | {"NoOp"}
    ops = [op for op in graph.get_operations() if op in region]
    placement = SignaturePlacement(ops=ops)
    summaries = {c.name: c for c in report.clusters} if report is not None else {}
    native_flops = report.native_op_flops if report is not None else {}
    estimate_flops = onnx_module("cost").estimate_flops  # for ops the report does not cover
    for op in ops:
        if op.type == CLUSTER_OP:
            placement.clusters.append(summaries.get(op.name) or _summary(op))
        elif op.type not in not_work and not is_shim(op):
            kind, why = (report.native.get(op.name) if report is not None else None) or (
                op.type,
                "not clustered",
            )
            if report is None or not report.enabled:
                why = "onnxruntime delegation is off"
            flops = native_flops[op.name] if op.name in native_flops else estimate_flops(op)
            placement.native.append(NativeOp(op.name, kind, why, flops))
    for name in _functions_called(ops, graph.functions):  # bodies' clusters (loops, branches)
        placement.clusters += [c for c in summaries.values() if c.name.startswith(name + "/")]
    return placement


def _summary(op):
    """A cluster the report does not list (never expected): read from the node itself."""
    members = tuple(n.decode() for n in op.node_def.attr["ops"].list.s)
    return onnx_module("report").ClusterSummary(op.name, members, {}, op.node_def.attr["flops"].f)


def _functions_called(ops, library) -> list[str]:
    """Library functions the ops run, nested calls included, in first-reached order."""
    found: dict[str, None] = {}
    pending = [name for op in ops for name in called_functions(op.node_def, library)]
    while pending:
        name = pending.pop(0)
        if name not in found:
            found[name] = None
            pending += [n for node in library[name].node_def for n in called_functions(node, library)]
    return list(found)
