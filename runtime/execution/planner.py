"""``build_plan``: the Plan for (feeds, fetches, targets), built once where a Session or a function caches it.

Prunes the graph to what the fetches and targets need (fed tensors cut their producers off) and
orders it topologically; a graph without TF1 while loops then becomes one flat ``Plan``
(``runtime/execution/plan.py`` resolves kernels and lays out the steps), and one with loops is
built frame by frame (``runtime/execution/frames.py``). This is the only module that knows both,
so that the plan's builder and the frames that build on it import each other in one direction.
"""

from __future__ import annotations

from collections.abc import Sequence

from runtime.execution import frames
from runtime.execution.plan import CycleError, Plan, StepBuilder, cycle_error, finish, resolve_all
from runtime.graph.graph import Operation, Tensor


def _needed_ops(fed: set[Tensor], fetches: Sequence[Tensor], targets: Sequence[Operation]) -> list[Operation]:
    """Ops the fetches and targets need, in a topological order (iterative DFS post-order)."""
    order: list[Operation] = []
    state: dict[Operation, bool] = {}  # False while visiting, True once ordered
    for root in [t.op for t in fetches if t not in fed] + list(targets):
        stack = [(root, False)]
        while stack:
            op, expanded = stack.pop()
            if expanded:
                state[op] = True
                order.append(op)
                continue
            if state.get(op) is not None:
                if state[op] is False:  # reached again while its own inputs are visited
                    raise cycle_error(op)
                continue
            state[op] = False
            stack.append((op, True))
            preds = [t.op for t in op.inputs if t not in fed] + op.control_inputs
            for pred in reversed(preds):
                if state.get(pred) is False:
                    raise cycle_error(pred)
                if pred not in state:
                    stack.append((pred, False))
    return order


def build_plan(
    feeds: Sequence[Tensor],
    fetches: Sequence[Tensor],
    targets: Sequence[Operation],
    resources=None,
    functions=None,
) -> Plan:
    """A Plan computing ``fetches`` and running ``targets`` with ``feeds`` given (in order).

    Where the needed ops hold TF1 while loops, ``runtime/execution/frames.py`` builds the plan: each loop
    frame becomes one step running a plan of its own body per iteration.
    """
    try:
        order = _needed_ops(set(feeds), fetches, targets)
    except CycleError:
        order = None
    if order is None or frames.has_frames(order):
        return frames.build_frame_plan(feeds, fetches, targets, resources, functions)
    kernels = resolve_all(order, resources, functions)
    wanted = set(fetches).union(*(op.inputs for op in order))
    controlled = {c for op in order for c in op.control_inputs}
    builder = StepBuilder(feeds, wanted, controlled)
    for op, kernel in zip(order, kernels):
        builder.add(op, kernel)
    fetch_slots = tuple(builder.value_slot(t, False, t.op) for t in fetches)
    feed_slots = tuple(builder.slot_of[t] for t in feeds)
    return finish(builder, feed_slots, fetch_slots, fetches)
