"""``DelegationReport``: what a model runs in onnxruntime, what stays native and why.

FLOPs are estimated from static shapes (``_output_shapes``, placeholder shapes; an unknown
dimension counts as 1, i.e. batch 1): matrix products and convolutions by their multiply-adds,
elementwise ops and reductions by their element counts. Constants, variables, identities and
other bookkeeping ops are neither delegated nor counted as native work.
"""

from __future__ import annotations

import collections
import math
import threading
from dataclasses import dataclass, field

from runtime.execution.signature_check import called_functions
from runtime.graph.graph import Operation

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
    from runtime.onnx.converter import CONVERTERS
    from runtime.onnx.partition import DATA_MOVEMENT

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
    from runtime.kernels import lookup

    definition = lookup(op_type)
    return definition is not None and definition.fn.__module__ in _ARITHMETIC_FAMILIES


def _function_flops(library, name: str, depth: int = 0) -> float:
    from runtime.execution.function import instantiate

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


@dataclass
class ClusterSummary:
    name: str
    ops: tuple[str, ...]
    op_types: dict[str, int]
    flops: float


@dataclass
class DelegationReport:
    """Per model: clusters delegated, ops kept native (with reasons), FLOPs shares, fallbacks.

    ``fallbacks`` grows at run time (a cluster failing conversion or validation); the rest is
    fixed at load. Thread-safe to read; ``record_fallback`` takes a lock.
    """

    clusters: list[ClusterSummary] = field(default_factory=list)
    native: dict[str, tuple[str, str]] = field(default_factory=dict)  # op name -> (type, reason)
    native_op_flops: dict[str, float] = field(default_factory=dict)  # native op name -> FLOPs
    native_flops: float = 0.0
    frozen_variables: int = 0
    variables_note: str = ""
    fallbacks: dict[str, str] = field(default_factory=dict)
    enabled: bool = True
    from_cache: bool = False  # read from the cluster cache (cluster_cache.py), not computed
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def delegated_ops(self) -> int:
        return sum(len(c.ops) for c in self.clusters if c.name not in self.fallbacks)

    @property
    def delegated_flops(self) -> float:
        return sum(c.flops for c in self.clusters if c.name not in self.fallbacks)

    @property
    def flops_share(self) -> float:
        """Share of the estimated FLOPs that run in onnxruntime (1.0 when there is no work)."""
        fallen = sum(c.flops for c in self.clusters if c.name in self.fallbacks)
        total = self.delegated_flops + self.native_flops + fallen
        return self.delegated_flops / total if total else 1.0

    def native_by_reason(self) -> collections.Counter:
        """(op type, reason) -> count of ops that stayed native."""
        return collections.Counter(self.native.values())

    def native_compute_ops_with_flops(self) -> list[str]:
        """Native ops doing arithmetic (a FLOPs estimate above 0): the ones that matter for speed."""
        return sorted(name for name, flops in self.native_op_flops.items() if flops > 0)

    def record_fallback(self, cluster: str, why: str) -> None:
        with self._lock:
            self.fallbacks[cluster] = why

    def summary(self) -> str:
        if not self.enabled:
            return "onnxruntime delegation: off"
        lines = [
            f"onnxruntime delegation: {len(self.clusters)} clusters, {self.delegated_ops} ops, "
            f"{100 * self.flops_share:.1f}% of estimated FLOPs; {len(self.native)} ops native; "
            f"{self.frozen_variables} variables frozen{'; ' + self.variables_note if self.variables_note else ''}"
            f"{'; read from the cluster cache' if self.from_cache else ''}"
        ]
        for cluster in self.clusters:
            kinds = ", ".join(f"{k} x{n}" for k, n in sorted(cluster.op_types.items()))
            lines.append(f"  {cluster.name}: {len(cluster.ops)} ops ({kinds})")
        for (kind, why), count in sorted(self.native_by_reason().items()):
            lines.append(f"  native: {kind} x{count}: {why}")
        for name, why in sorted(self.fallbacks.items()):
            lines.append(f"  fell back: {name}: {why}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def to_json(self) -> dict:
        """What delegation decided (not ``fallbacks``, which runs add), as JSON values."""
        return {
            "clusters": [[c.name, list(c.ops), c.op_types, c.flops] for c in self.clusters],
            "native": {name: list(kind_why) for name, kind_why in self.native.items()},
            "native_op_flops": self.native_op_flops,
            "native_flops": self.native_flops,
            "frozen_variables": self.frozen_variables,
            "variables_note": self.variables_note,
        }

    @classmethod
    def from_json(cls, data: dict) -> DelegationReport:
        """The report ``to_json`` wrote (a cached delegation's, ``cluster_cache.py``)."""
        return cls(
            clusters=[
                ClusterSummary(str(name), tuple(ops), dict(kinds), float(flops))
                for name, ops, kinds, flops in data["clusters"]
            ],
            native={name: (kind, why) for name, (kind, why) in data["native"].items()},
            native_op_flops={name: float(f) for name, f in data["native_op_flops"].items()},
            native_flops=float(data["native_flops"]),
            frozen_variables=int(data["frozen_variables"]),
            variables_note=str(data["variables_note"]),
            from_cache=True,
        )
