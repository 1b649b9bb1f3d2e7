"""Map-shaped ``While`` loops (``tf.map_fn``, TF1 loops raised to ``While``) run item by item.

Run as written, every iteration of a ``While`` calls ``cond`` and then ``body``, and the body
spends steps on its bookkeeping: the counters' ``+ 1``, the ``TensorListSetItem`` that appends
the step's result. Where the loop has ``map_fn``'s shape that bookkeeping is known in advance:

- counters: loop variables the body returns as ``arg + 1`` (integer scalars);
- ``cond``: a conjunction of ``counter < bound`` with bounds the body returns unchanged, so the
  number of steps is ``min(bound - start)`` (at least 0), as the loop would count it;
- outputs: lists the body returns as ``TensorListSetItem(arg, counter, item)``, which nothing else
  in the body reads; every other loop variable is returned unchanged.

``MapLoop`` then runs, per step, only the body ops computing the items (a plan of the body with
the items as its fetches, the counters fed as ``start + step``), and writes the items afterwards
in one ``list_ops.set_items``, which checks them in step order as ``TensorListSetItem`` does: the
same values and, for a failing step, the same error at the same step (and a list of one-shaped
items held stacked, for ``TensorListStack``). A body holding a stateful op (whose effects could
be ordered against the bookkeeping) is not map-shaped. The analysis happens once per While node.

The body's constants are computed once, and its steps run op by op with same-shaped items batched
(``runtime/execution/map_batching.py``, bit-identical); where that gives up, they run step by step.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from runtime import tensor_util
from runtime.execution import map_batching
from runtime.execution.interpreter import RUN_STATE
from runtime.graph.function_def import FunctionBody
from runtime.graph.graph import Operation, Tensor
from runtime.kernels import list_ops, lookup

_ALIASES = frozenset({"Identity", "Snapshot", "StopGradient"})
# Steps run together by ``runtime.execution.map_batching``: their items are held at once (TF's map_fn holds
# ``parallel_iterations``, 10 by default); more adds memory and saves little.
STEPS_IN_FLIGHT = 32
_PURE = frozenset({"_Arg", "_OrtCluster"})  # args; a delegated cluster (stateless numerics)


@dataclass(frozen=True)
class MapLoop:
    """What a map-shaped loop's run needs (see the module docstring)."""

    counters: tuple[int, ...]
    bounds: tuple[tuple[int, int], ...]  # (counter, bound) loop variable indices
    writes: tuple[tuple[int, int, Callable], ...]  # (list, index counter, list_ops.set_items)
    items: Callable  # (*loop values) -> the items written this step, in ``writes`` order

    def __call__(self, values: tuple) -> tuple | None:
        """The loop's outputs, or None where the values do not fit the shape (run it as written)."""
        starts = {}
        for k in self.counters:
            value = np.asarray(values[k])
            if value.ndim != 0 or value.dtype.kind not in "iu":
                return None
            starts[k] = value
        limits = [np.asarray(values[b]) for _, b in self.bounds]
        if any(v.ndim != 0 or v.dtype.kind not in "iu" for v in limits):
            return None
        steps = max(0, min(int(limit) - int(starts[c]) for (c, _), limit in zip(self.bounds, limits)))
        # Every step's counter values at once: what ``(start + step).astype(dtype)`` gives per step.
        counts = {k: (starts[k] + np.arange(steps)).astype(starts[k].dtype) for k in self.counters}
        columns = self._batched(values, counts, steps) if steps > 1 else None
        if columns is None:
            current = list(values)
            columns = [[] for _ in self.writes]
            for step in range(steps):
                for k in self.counters:
                    current[k] = counts[k][step]
                for column, item in zip(columns, self.items(*current)):
                    column.append(item)
        results = list(values)
        for k in self.counters:
            results[k] = (starts[k] + steps).astype(starts[k].dtype)
        for column, (target, index, set_items) in zip(columns, self.writes):
            results[target] = set_items(results[target], counts[index], column)
        return tuple(results)

    def _batched(self, values: tuple, counts: dict, steps: int) -> list | None:
        """Per write, every step's item from ``runtime.execution.map_batching``, ``STEPS_IN_FLIGHT`` steps at
        a time (None: run step by step)."""
        state = RUN_STATE.get()
        if state is not None and state[1] is not None:  # a traced run reports every step's ops
            return None
        consts = getattr(self.items, "consts", None)
        if consts is None:
            return None
        shared = [map_batching.shared(v) for v in (*values, *consts)]
        columns: list | None = None
        for start in range(0, steps, STEPS_IN_FLIGHT):
            end = min(start + STEPS_IN_FLIGHT, steps)
            feeds = [counts[k][start:end] if k in counts else v for k, v in enumerate(shared)]
            chunk = map_batching.run_columns(self.items.plan, feeds, end - start, state[0] if state else None)
            if chunk is None:
                return None
            columns = chunk if columns is None else [[*a, *b] for a, b in zip(columns, chunk)]
        return columns


def _source(tensor: Tensor) -> Tensor:
    while tensor.op.type in _ALIASES:
        tensor = tensor.op.inputs[0]
    return tensor


def _arg_index(body: FunctionBody, tensor: Tensor) -> int | None:
    name = _source(tensor).name
    return next((i for i, a in enumerate(body.args) if a.name == name), None)


def _counter(body: FunctionBody, k: int) -> bool:
    op = _source(body.rets[k]).op
    if op.type not in ("AddV2", "Add") or len(op.inputs) != 2:
        return False
    a, c = op.inputs
    if _arg_index(body, a) != k:
        a, c = c, a
    one = _source(c).op
    if _arg_index(body, a) != k or one.type != "Const":
        return False
    value = tensor_util.make_ndarray(one.node_def.attr["value"].tensor)
    return value.shape == () and value.dtype.kind in "iu" and int(value) == 1


def _readers(body: FunctionBody, tensor: Tensor) -> list[Operation]:
    return [
        op for op in body.graph.get_operations() if any(_source(t).name == tensor.name for t in op.inputs)
    ]


def _bounds(cond: FunctionBody, counters: set[int], invariants: set[int]) -> list[tuple[int, int]] | None:
    """(counter, bound) per ``Less`` of the cond's conjunction, or None where it is another shape."""
    pending, bounds = [_source(cond.rets[0]).op], []
    while pending:
        op = pending.pop()
        if op.type == "LogicalAnd":
            pending += [_source(t).op for t in op.inputs]
            continue
        if op.type != "Less":
            return None
        counter, bound = (_arg_index(cond, t) for t in op.inputs)
        if counter not in counters or bound not in invariants:
            return None
        bounds.append((counter, bound))
    return bounds


def analyze(cond: FunctionBody, body: FunctionBody, plan_items: Callable) -> MapLoop | None:
    """The loop as a MapLoop, or None where it is not map-shaped. ``plan_items(tensors)``: a callable
    running ``body`` up to ``tensors`` (its args fed)."""
    for op in body.graph.get_operations():
        definition = lookup(op.type)
        if op.type not in _PURE and (definition is None or definition.stateful):
            return None
    counters, invariants, writers = [], set(), {}
    for k, ret in enumerate(body.rets):
        op = _source(ret).op
        if _arg_index(body, ret) == k:
            invariants.add(k)
        elif _counter(body, k):
            counters.append(k)
        elif op.type == "TensorListSetItem" and _arg_index(body, op.inputs[0]) == k:
            if _readers(body, body.args[k]) != [op] or op.attrs.get("resize_if_index_out_of_bounds"):
                return None
            writers[k] = op
        else:
            return None
    bounds = _bounds(cond, set(counters), invariants) if len(cond.rets) == 1 else None
    if not bounds or not writers:
        return None
    writes = []
    for k, op in writers.items():
        index = _arg_index(body, op.inputs[1])
        if index not in counters:
            return None
        attrs = lookup("TensorListSetItem").select_attrs(op.attrs)
        writes.append((k, index, functools.partial(list_ops.set_items, element_dtype=attrs["element_dtype"])))
    items = plan_items([op.inputs[2] for op in writers.values()])
    return MapLoop(tuple(counters), tuple(bounds), tuple(writes), items)
