"""Variables frozen for delegation: where nothing the served signatures run can write a variable,
its reads are constants of the clusters (step 3 of ``delegate.py``).

``writes_variables`` finds a writer (``Assign*``, ``Scatter*``, ``*Apply*``, in the graph or a
function it calls); ``freeze_variables`` reads the current value (after restore and init) of each
``ReadVariableOp`` of a ``VarHandleOp`` and ``Identity`` of a ``VariableV2`` of the served region;
``loop_variable_values`` the values of the variables While loops take as inputs.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from runtime.execution.interpreter import run_plan
from runtime.execution.plan import call_kernel
from runtime.execution.planner import build_plan
from runtime.graph.graph import Graph, Operation
from runtime.onnx.control_flow_ops import WHILE_OPS

_WRITE_PREFIXES = ("Assign", "ResourceScatter", "Scatter", "ResourceApply", "Apply", "ResourceSparseApply")


def writes_variables(ops: Iterable[Operation], library) -> str | None:
    """The first op (or called function) that can write a variable, or None."""
    pending = []
    for op in ops:
        if op.type.startswith(_WRITE_PREFIXES):
            return f"{op.type} {op.name}"
        for value in op.node_def.attr.values():
            if value.WhichOneof("value") == "func":
                pending.append(value.func.name)
        if op.type in library:
            pending.append(op.type)
    seen = set()
    while pending:
        name = pending.pop()
        if name in seen or name not in library:
            continue
        seen.add(name)
        for node in library[name].node_def:
            if node.op.startswith(_WRITE_PREFIXES):
                return f"{node.op} in function {name}"
            pending += [v.func.name for v in node.attr.values() if v.WhichOneof("value") == "func"]
            if node.op in library:
                pending.append(node.op)
    return None


def loop_variable_values(region: list[Operation], library, resources) -> dict[str, np.ndarray]:
    """VarHandleOp name -> current value, for the variables the served While loops (in
    ``region``) take as inputs, where nothing served can write a variable (as
    ``freeze_variables``); else {}."""
    if writes_variables(region, library) is not None:
        return {}
    handles = list(
        {t.op: None for op in region if op.type in WHILE_OPS for t in op.inputs if t.op.type == "VarHandleOp"}
    )
    try:
        plan = build_plan((), [op.outputs[0] for op in handles], (), resources, None)
        found = [resources.get(h) for h in run_plan(plan, [])]
    except Exception:  # noqa: BLE001 - an unreadable variable keeps its loop as it is
        return {}
    return {op.name: var.value for op, var in zip(handles, found) if getattr(var, "value", None) is not None}


def variable_reads(ops: Iterable[Operation]) -> list[Operation]:
    """``ReadVariableOp`` of a ``VarHandleOp`` and ``Identity`` of a ``VariableV2``."""
    found = []
    for op in ops:
        source = op.inputs[0].op if op.inputs else None
        if source is None:
            continue
        if (op.type == "ReadVariableOp" and source.type == "VarHandleOp") or (
            op.type == "Identity" and source.type in ("VariableV2", "Variable")
        ):
            found.append(op)
    return found


def freeze_variables(graph: Graph, region: list[Operation], resources) -> tuple[dict[str, np.ndarray], str]:
    """Current values of the region's variable reads, or ({}, why not)."""
    writer = writes_variables(region, graph.functions)
    if writer is not None:
        return {}, f"variables read natively: the served graph can write them ({writer})"
    reads = variable_reads(region)
    if not reads:
        return {}, ""
    try:
        values = _read_directly(reads, resources)
    except Exception:  # noqa: BLE001 - the plan below says what is wrong, in the plan's words
        values = None
    try:
        if values is None:
            values = run_plan(build_plan((), [op.outputs[0] for op in reads], (), resources, None), [])
    except Exception as exc:  # noqa: BLE001 - an unreadable variable keeps its reads native
        return {}, f"variables read natively: {type(exc).__name__}: {exc}"
    return {op.name: np.asarray(v) for op, v in zip(reads, values)}, ""


def _read_directly(reads: list[Operation], resources) -> list | None:
    """Each read's value from the kernels of the ``VarHandleOp`` and the ``ReadVariableOp`` on
    their nodes where every read is such a pair and nothing else (a plan of a few hundred of them
    cost a cold start more than the reads); None otherwise (TF1 variables: the plan reads them)."""
    for op in reads:
        if op.type != "ReadVariableOp" or len(op.node_def.input) != 1 or op.inputs[0].value_index:
            return None
        if op.inputs[0].op.type != "VarHandleOp" or op.inputs[0].op.node_def.input:
            return None
    return [call_kernel(op, [call_kernel(op.inputs[0].op, [], resources)], resources) for op in reads]
