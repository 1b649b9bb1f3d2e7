"""Function calls and functional control flow: the body is a library function, run by the
Session's ``FunctionLibraryRuntime`` (``ctx.functions``). A node whose op type is a library
function's name is called the same way, without a kernel here (see ``runtime/execution/plan.py``)."""

from __future__ import annotations

import numpy as np

from runtime.kernels.registry import kernel


@kernel("PartitionedCall")
def partitioned_call(args, *, f, ctx):
    return ctx.functions.call(f, args)


@kernel("StatefulPartitionedCall", stateful=True)
def stateful_partitioned_call(args, *, f, ctx):
    return ctx.functions.call(f, args)


def _truthy(value) -> bool:
    """TF's predicate: a scalar's value, else whether the tensor has any element."""
    value = np.asarray(value)
    if value.ndim == 0:
        return bool(value)
    return value.size > 0


def _if(cond, input, *, then_branch, else_branch, ctx):
    return ctx.functions.call(then_branch if _truthy(cond) else else_branch, input)


def _case(branch_index, input, *, branches, ctx):
    index = int(branch_index)
    branch = branches[index] if 0 <= index < len(branches) else branches[-1]  # TF: last = default
    return ctx.functions.call(branch, input)


def _while(input, *, cond, body, ctx):
    values = tuple(input)
    if ctx.cached is None:  # analysed once per node: map-shaped loops skip their bookkeeping
        ctx.cached = ctx.functions.map_loop(cond, body) or False
    if ctx.cached:
        results = ctx.cached(values)
        if results is not None:
            return results
    while _truthy(ctx.functions.call(cond, values)[0]):
        values = ctx.functions.call(body, values)
    return values


# The Stateless* variants promise stateless branches; the stateful ones may touch variables.
kernel("If", stateful=True)(_if)
kernel("StatelessIf")(_if)
kernel("Case", stateful=True)(_case)
kernel("StatelessCase")(_case)
kernel("While", stateful=True)(_while)
kernel("StatelessWhile")(_while)
