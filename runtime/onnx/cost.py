"""What an op costs, for deciding what to delegate and for the report: a FLOPs estimate.

FLOPs are estimated from static shapes (``_output_shapes``, placeholder shapes; an unknown
dimension counts as 1, i.e. batch 1): matrix products and convolutions by their multiply-adds,
elementwise ops and reductions by their element counts. Bookkeeping (constants, variables,
identities) and data movement (reshapes, slices, gathers) cost nothing: the partitioner keeps a
cluster of only those native, and the report never lists them as native work.
"""

from __future__ import annotations

import math

from runtime.execution.signature_check import called_functions
from runtime.graph.function_def import instantiate
from runtime.graph.graph import Operation
from runtime.kernels import lookup
from runtime.onnx.converter import CONVERTERS

# Ops that move or describe data without computing: a cluster of only these stays native.
DATA_MOVEMENT = frozenset(
    {
        "Identity", "StopGradient", "PreventGradient", "Snapshot", "Reshape", "Squeeze", "ExpandDims",
        "Shape", "Size", "StridedSlice", "Slice", "Pack", "ConcatV2", "Transpose", "Cast", "Fill",
        "ZerosLike", "OnesLike", "GatherV2", "Tile", "BroadcastTo", "Split", "Pad", "PadV2", "Range",
        "Unpack", "ReverseV2", "IdentityN", "NoOp",
    }
)  # fmt: skip
# Ops that are bookkeeping, not work: never listed as "stayed native".
BOOKKEEPING = frozenset(
    {
        "Const", "Identity", "IdentityN", "NoOp", "Placeholder", "PlaceholderWithDefault", "_Arg",
        "_Retval", "VarHandleOp", "ReadVariableOp", "VariableV2", "Variable", "StopGradient",
    }
)  # fmt: skip
_ELEMENTWISE_COST = {"Softmax": 5, "LogSoftmax": 5, "Erf": 4, "Erfc": 4, "Tanh": 4, "Sigmoid": 4, "Exp": 2}


def _elements(shape) -> int:
    if shape is None:
        return 1
    return math.prod(d if d is not None and d >= 0 else 1 for d in shape)


def estimate_flops(op: Operation) -> float:
    """Multiply-adds x2 for products and convolutions, element counts for arithmetic, 0 for data
    movement and bookkeeping; an op running functions (While, If, calls) counts its bodies'
    arithmetic ops once each at its first output's size."""
    if op.type in BOOKKEEPING or op.type in DATA_MOVEMENT or not op.outputs:
        return 0.0
    out = op.outputs[0].shape
    functions = called_functions(op.node_def, op.graph.functions)
    if functions:  # its bodies' own native arithmetic, once each (iteration counts are unknown)
        return sum(_function_flops(op.graph.functions, f) for f in functions)
    if op.type not in CONVERTERS and op.type not in _NATIVE_ARITHMETIC and not _arithmetic_kernel(op.type):
        return 0.0
    if op.type in ("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"):
        a = op.inputs[0].shape
        transposed = op.attrs.get("transpose_a") or op.attrs.get("adj_x")
        inner = (a[-2] if transposed else a[-1]) if a and len(a) >= 2 else None  # None: unknown rank
        return 2.0 * _elements(out) * (inner if inner and inner > 0 else 1)
    if op.type in ("Conv2D", "DepthwiseConv2dNative"):
        w = op.inputs[1].shape
        per_output = _elements(w[:3]) if w and op.type == "Conv2D" else _elements(w[:2] if w else None)
        return 2.0 * _elements(out) * per_output
    if op.type == "Einsum":
        shapes = [t.shape for t in op.inputs]
        return 2.0 * max(_elements(s) for s in shapes) * _elements(out) ** 0.5
    if op.type in ("Sum", "Mean", "Max", "Min", "Prod"):
        return float(_elements(op.inputs[0].shape))
    return float(_elements(out)) * _ELEMENTWISE_COST.get(op.type, 1)


_NATIVE_ARITHMETIC = frozenset(
    {"SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN", "SparseMatMul"}
)


_ARITHMETIC_FAMILIES = frozenset(
    f"runtime.kernels.{m}"
    for m in (
        "math_ops",
        "nn_ops",
        "conv_ops",
        "reduction_ops",
        "special_math_ops",
        "linalg_ops",
        "image_ops",
        "image_color_ops",
        "non_max_suppression_ops",
    )
)


def _arithmetic_kernel(op_type: str) -> bool:
    """Whether the op's numpy kernel lives in an arithmetic family file (math, nn, conv, ...)."""
    definition = lookup(op_type)
    return definition is not None and definition.fn.__module__ in _ARITHMETIC_FAMILIES


def _function_flops(library, name: str, depth: int = 0) -> float:
    if depth > 4:
        return 0.0
    try:
        body = instantiate(library[name], {}, library)
    except Exception:  # noqa: BLE001 - a polymorphic body: no estimate
        return 0.0
    stack = [t.op for t in body.rets] + list(body.control_rets)
    seen = set(stack)
    while stack:  # only what runs: a fused body keeps its clusters' members, unreachable
        for pred in [t.op for t in stack.pop().inputs]:
            if pred not in seen:
                seen.add(pred)
                stack.append(pred)
    return sum(estimate_flops(op) for op in seen)
