"""Clusters as they form, each to run as ONE node: which joins keep the contracted graph acyclic.

A cluster runs as one ``_OrtCluster`` node, which needs all its inputs before it gives any output.
So a partition is sound only when the graph with every cluster contracted to a node has no
cycle, which asks more than each cluster being convex on its own: with ``a -> native -> b`` and
``d -> e``, the clusters {a, e} and {d, b} are each convex, yet {a, e} waits for {d, b} (through
``native``) and {d, b} for {a, e} (``d -> e``). ``Contraction.reaches`` therefore walks the graph
backwards with every other cluster taken whole: reaching one member of a cluster continues from
the inputs of all its members.

The walk skips ops ordered before a bound (``_bound``): a topological index below which nothing is
reachable from the group even through clusters, found from the index spans of the clusters that
reach back across it. ``contraction_cycle`` checks a finished partition the same way, in one
pass (Kahn's algorithm over the contracted graph): ``propose_clusters`` runs it on every
partition it returns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


class Contraction:
    """Members of the clusters being formed over a topological order (``index``; ``preds``: each
    op's producers and control inputs, sources left out). Not thread-safe: one partition's state."""

    def __init__(self, preds: Mapping[str, Sequence[str]], index: Mapping[str, int]):
        self.preds, self.index = preds, index
        self.members: dict[int, set[str]] = {}
        self.cluster_of: dict[str, int] = {}
        self._spans: dict[int, tuple[int, int]] = {}  # clusters of 2+ members: (lowest, highest) index

    def new(self, cluster: int, name: str) -> None:
        self.members[cluster] = {name}
        self.cluster_of[name] = cluster

    def add(self, cluster: int, name: str) -> None:
        self.members[cluster].add(name)
        self.cluster_of[name] = cluster
        self._widen(cluster, [name])

    def merge(self, target: int, other: int) -> None:
        """Moves ``other``'s members into ``target``."""
        names = self.members.pop(other)
        self._spans.pop(other, None)
        for name in names:
            self.cluster_of[name] = target
        self.members[target] |= names
        self._widen(target, names)

    def _widen(self, cluster: int, names: Iterable[str]) -> None:
        members = self.members[cluster]
        if len(members) < 2:
            return
        indices = [self.index[n] for n in names]
        low, high = self._spans.get(cluster) or (min(self.index[n] for n in members), -1)
        self._spans[cluster] = (min(low, *indices), max(high, *indices))

    def reaches(self, group: Iterable[int], start: Iterable[str]) -> bool:
        """Whether a path from the clusters ``group`` (taken as one) to the ops ``start`` leaves
        the group, every other cluster contracted. With ``start`` the group's own members: whether
        merging the group would close a cycle."""
        group = set(group)
        names = set().union(*(self.members[c] for c in group))
        bound = self._bound(min(self.index[n] for n in names), group)
        preds, index, cluster_of = self.preds, self.index, self.cluster_of
        stack = [p for s in start for p in preds[s] if p not in names and p in index]
        seen = set(stack)
        expanded: set[int] = set()
        while stack:
            name = stack.pop()
            if index[name] < bound:
                continue
            cluster = cluster_of.get(name)
            if cluster in group:
                return True
            if cluster is None:
                froms = preds[name]
            elif cluster in expanded:
                continue
            else:  # the whole cluster waits for every input of every member
                expanded.add(cluster)
                froms = [p for member in self.members[cluster] for p in preds[member]]
            for pred in froms:
                if pred not in seen and pred in index:
                    seen.add(pred)
                    stack.append(pred)
        return False

    def _bound(self, low: int, group: set[int]) -> int:
        """An index below which no op is reachable from the group: paths go up in index, except a
        jump within a cluster, from any member to any other; so lowered to the start of each
        cluster whose span reaches back across it."""
        bound, changed = low, True
        while changed:
            changed = False
            for cluster, (first, last) in self._spans.items():
                if first < bound <= last and cluster not in group:
                    bound, changed = first, True
        return bound


def contraction_cycle(
    clusters: Sequence[Sequence[str]], preds: Mapping[str, Sequence[str]]
) -> list[int] | None:
    """The indices of the clusters on (or behind) a cycle of the graph with each cluster contracted
    to one node, or None when it has none. ``preds``: every op's producers and control inputs."""
    node_of: dict[str, object] = {name: name for name in preds}
    for number, names in enumerate(clusters):
        for name in names:
            node_of[name] = number
    inputs: dict[object, set[object]] = {}
    for name, producers in preds.items():
        target = node_of[name]
        edges = inputs.setdefault(target, set())
        edges.update(node_of[p] for p in producers if p in node_of and node_of[p] != target)
    consumers: dict[object, list[object]] = {}
    for target, sources in inputs.items():
        for source in sources:
            consumers.setdefault(source, []).append(target)
    pending = {node: len(sources) for node, sources in inputs.items()}
    ready = [node for node, count in pending.items() if count == 0]
    while ready:
        for consumer in consumers.get(ready.pop(), ()):
            pending[consumer] -= 1
            if pending[consumer] == 0:
                ready.append(consumer)
    stuck = sorted(n for n, count in pending.items() if count and isinstance(n, int))
    return stuck or None
