"""Converter for TF2's functional ``If``: both branches become the subgraphs of one ONNX ``If``.

Natively an ``If`` is an interpreter step plus a function call; as one ONNX ``If`` it joins the
cluster around it (or the ``Loop`` body of a While holding it: TF1 conds in loops, raised by
``raise_conds``). TF's predicate is truthy where a scalar is non-zero or a tensor has elements;
ONNX's is a boolean scalar, computed from TF's. The branches read the outer values directly
(ONNX subgraphs take no inputs) and must give each output one element type; where their ranks
differ the output's rank is unknown. Guards a branch adds (``Builder.guard``) are computed only
when it runs: their minimum is one more ``If`` output (0 from a branch without guards), a margin
of the graph around it.

``if_reason`` checks statically that both branches hold only convertible ops and no resources;
the partitioner asks it through the converter's ``check``.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from runtime.graph.graph import Operation
from runtime.onnx.control_flow_ops import (
    body_outputs,
    convert_function,
    function_body,
    functions_reason,
)
from runtime.onnx.converter import Builder, NotConvertible, TFNode, Value, converter

IF_OPS = frozenset({"If", "StatelessIf"})
_BRANCHES = ("then_branch", "else_branch")


def if_reason(op: Operation) -> str | None:
    """Why ``op`` (an If) cannot become one ONNX ``If``, judged from its branches alone."""
    return branches_reason(op.node_def, op.graph.functions)


def branches_reason(node, library) -> str | None:
    """``if_reason`` of an If NodeDef whose branch functions are in ``library``."""
    if node.op not in IF_OPS:
        return f"{node.op} is not an If"
    return functions_reason(node, library, _BRANCHES)


def _predicate(node: TFNode, b: Builder) -> str:
    """TF's truthiness of input 0 as an ONNX boolean scalar."""
    cond, rank = node.inputs[0], node.rank(0)
    if rank > 0:  # TF: any element at all, whatever the values
        size = b.op("Size", [cond], rank=0, elem_type=TensorProto.INT64)
        return b.op("Greater", [size, b.int64s(0)], rank=0, elem_type=TensorProto.BOOL)
    if node.elem_type(0) == TensorProto.BOOL:
        return cond
    zero = b.const(np.zeros((), helper.tensor_dtype_to_np_dtype(node.elem_type(0))), "zero")
    return b.op("Not", [b.op("Equal", [cond, zero], elem_type=TensorProto.BOOL)], elem_type=TensorProto.BOOL)


def _branch(b: Builder, node: TFNode, key: str) -> tuple[Builder, list[str]]:
    """A child builder holding branch ``key`` converted, and the ONNX value of each result."""
    body = function_body(b, node.attr(key))
    if len(body.args) != len(node.inputs) - 1:
        raise NotConvertible(f"{key} takes {len(body.args)} args, not {len(node.inputs) - 1}")
    sb = b.child()
    mapped = convert_function(sb, body, dict(enumerate(node.inputs[1:])), [*body.rets])
    return sb, [mapped[t.name] for t in body.rets]


def _with_guards(branches: list[tuple[Builder, list[str]]]) -> bool:
    """Appends each branch's guard margin to its results, where any branch has guards."""
    if not any(sb.margins for sb, _ in branches):
        return False
    for sb, results in branches:
        if not sb.margins:
            results.append(sb.int64s(0, "margin"))
        elif len(sb.margins) == 1:
            results.append(sb.margins[0])
        else:
            results.append(sb.op("Min", sb.margins, rank=0))
    return True


@converter("If", "StatelessIf", num_outputs=None, check=if_reason)
def if_(node: TFNode, b: Builder) -> list[str]:
    """One ONNX ``If`` (see the module docstring)."""
    predicate = _predicate(node, b)
    branches = [_branch(b, node, key) for key in _BRANCHES]
    guarded = _with_guards(branches)
    (then_b, then_results), (else_b, else_results) = branches
    outputs = []
    for then_value, else_value in zip(then_results, else_results):
        elem = then_b.elem_type(then_value)
        if else_b.elem_type(else_value) != elem:
            raise NotConvertible(f"{node.name}: branches give different element types")
        ranks = {then_b.rank(then_value), else_b.rank(else_value)}
        outputs.append((b.fresh("if"), Value(elem, ranks.pop() if len(ranks) == 1 else None)))
    graphs = {
        key: helper.make_graph(sb.nodes, b.fresh(f"{node.name}_{key}"), [], body_outputs(sb, results))
        for key, (sb, results) in zip(("then_branch", "else_branch"), branches)
    }
    names = [name for name, _ in outputs]
    b.nodes.append(helper.make_node("If", [predicate], names, **graphs))
    for name, value in outputs:
        b.values[name] = value
    if guarded:
        b.margins.append(names.pop())
    return names
