"""``DelegationReport``: what a model runs in onnxruntime, what stays native and why.

FLOPs shares come from ``runtime/onnx/cost.py``'s estimate; bookkeeping ops (constants,
variables, identities) are neither delegated nor counted as native work.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field


@dataclass
class ClusterSummary:
    """One delegated cluster in the report: its ops, by type, and their estimated FLOPs."""

    name: str
    ops: tuple[str, ...]
    op_types: dict[str, int]
    flops: float


@dataclass
class DelegationReport:
    """Per model: clusters delegated, ops kept native (with reasons), FLOPs shares, fallbacks.

    ``fallbacks`` grows at run time (a cluster failing conversion or validation; "signature ..."
    for a signature the original graph answers, ``native_fallback.py``; "graph" where the rewrite
    itself failed and every op is native); the rest is
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
            why = self.fallbacks.get("graph")
            return f"onnxruntime delegation: off ({why})" if why else "onnxruntime delegation: off"
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
