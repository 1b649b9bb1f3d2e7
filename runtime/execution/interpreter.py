"""The interpreter: the loop that runs a ``runtime.execution.plan.Plan``, and what a run returns.

In the style of JAX's ``eval_jaxpr``: one flat loop over ``Step`` tuples reading and writing a
list of value slots (slot 0 is scratch: outputs nobody reads). Dead tensors of TF1 control flow
are the ``DEAD`` sentinel: a step with a dead input is skipped and its outputs are dead, unless
its kernel ``accepts_dead``. A kernel's exception becomes the OpError TF reports, naming the node.
A plan that is one step from the feeds to the fetches runs as one call (``direct_call``).
"""

from __future__ import annotations

import contextvars
import operator
import time
from collections.abc import Callable, Sequence

import numpy as np

from runtime import errors
from runtime.execution import fp_errors
from runtime.graph.graph import Operation
from runtime.kernels.registry import DEAD

_SCRATCH = 0  # runtime.execution.plan's scratch slot
# What a run carries into the plans it calls (functions, loop frames, map loops): set by Session.run
# while a run has a deadline or traces, as (deadline | None, trace list | None).
RUN_STATE: contextvars.ContextVar[tuple | None] = contextvars.ContextVar("run_state", default=None)
_monotonic = time.monotonic


def direct_call(steps: tuple, feed_slots, fetch_slots, fetch_fed, constants=None) -> Callable | None:
    """``Plan.direct``, built with the plan: the single step called on the feeds (and constants)
    it reads, returning its outputs in fetch order as ``fetched`` makes them; None unless the plan
    is that one step (deadness cannot arise then: no feed is dead, and the step's kernel is no TF1
    control-flow op)."""
    if len(steps) != 1 or any(fetch_fed):
        return None
    step = steps[0]
    constants = constants or {}
    feed_index = {slot: i for i, slot in enumerate(feed_slots)}
    outs = step.outputs if step.multi else (step.outputs,)
    out_index = {slot: i for i, slot in enumerate(outs) if slot != _SCRATCH}
    if (
        step.accepts_dead
        or step.control_slot != _SCRATCH
        or not all(slot in feed_index or slot in constants for slot in step.inputs)
        or not all(slot in out_index for slot in fetch_slots)
    ):
        return None
    call, op, multi = step.call, step.op, step.multi
    picks = tuple(out_index[slot] for slot in fetch_slots)
    one = not multi and len(picks) == 1
    in_order = multi and picks == tuple(range(len(outs)))
    if all(slot in feed_index for slot in step.inputs):
        args = tuple(feed_index[slot] for slot in step.inputs)
    else:  # constants among the inputs: the feeds and the constants in one list
        extra = {slot: len(feed_slots) + i for i, slot in enumerate(constants)}
        args = tuple(feed_index[slot] if slot in feed_index else extra[slot] for slot in step.inputs)
        bound = list(constants.values())
        call = _with_constants(call, args, bound)
        args = tuple(range(len(feed_slots)))  # every feed, in order: ``with_constants`` picks
    count = len(outs)
    if len(picks) > 1:
        pick = operator.itemgetter(*picks)  # a tuple of the picked outputs, in one C call
    else:

        def pick(result):
            return [result[i] for i in picks]

    first_only = args == (0,)
    all_feeds = args == tuple(range(len(feed_slots)))  # each feed once, in order: no list to build

    def direct(feed_values: Sequence) -> list:
        try:
            if first_only:
                result = call(feed_values[0])
            elif all_feeds:
                result = call(*feed_values)
            else:
                result = call(*[feed_values[i] for i in args])
            if one:
                if type(result) is np.ndarray and result.ndim:
                    return [result]
                return [fetched(result, False, 0)]
            if multi and (not isinstance(result, (tuple, list)) or len(result) != count):
                _store([None] * (max(outs) + 1), outs, result, None, op)  # raises its error
        except errors.OpError as exc:
            raise node_error(exc, op) from None
        except Exception as exc:  # noqa: BLE001 - as in run_plan
            raise node_error(exc, op) from exc
        if multi:
            values = list(result) if in_order else list(pick(result))
        else:
            values = [result] * len(picks)
        index = 0
        for value in values:  # a plain loop: enumerate's tuples cost more, per run
            if type(value) is not np.ndarray or not value.ndim:
                values[index] = fetched(value, False, index)
            index += 1
        return values

    # A kernel bound to an object that runs whole plans itself (an onnxruntime cluster's runner):
    # its run, with this one for everything it does not answer.
    plan_run = getattr(getattr(call, "__self__", None), "plan_run", None)
    if plan_run is not None and call is step.call:
        return plan_run(args, picks, direct)
    return direct


def _with_constants(call: Callable, args: tuple, bound: list) -> Callable:
    """``call`` of the feeds it is given with the plan's constants appended, in ``args`` order."""

    def with_constants(*feed_values):
        values = [*feed_values, *bound]
        return call(*[values[i] for i in args])

    return with_constants


def run_plan(
    plan,
    feed_values: Sequence,
    steps: Sequence | None = None,
    deadline: float | None = None,
) -> list:
    """Runs the plan; returns the fetched values (DEAD where a fetch is dead).

    ``steps`` replaces ``plan.steps`` for a traced run (``instrument``); ``deadline``
    (``time.monotonic()`` seconds) is checked before every step: DeadlineExceededError.
    """
    vals: list = [None] * plan.num_slots if plan.initial is None else list(plan.initial)
    for slot, value in zip(plan.feed_slots, feed_values):
        vals[slot] = value
    dead: set[int] | None = None
    op = None
    try:
        for call, ins, multi, outs, frees, accepts_dead, dead_ins, op, ctrl in (
            plan.steps if steps is None else steps
        ):
            if deadline is not None and _monotonic() > deadline:
                raise errors.DeadlineExceededError(None, None, "Timed out waiting for notification")
            if dead is not None and not accepts_dead and not dead.isdisjoint(dead_ins):
                _kill(vals, dead, outs if multi else (outs,), ctrl)
            elif multi:
                dead = _store(vals, outs, call(*[vals[i] for i in ins]), dead, op)
            else:
                # Unrolled for the common arities: a list per step costs more than the branch.
                n = len(ins)
                if n == 2:
                    result = call(vals[ins[0]], vals[ins[1]])
                elif n == 1:
                    result = call(vals[ins[0]])
                elif n == 0:
                    result = call()
                else:
                    result = call(*[vals[i] for i in ins])
                vals[outs] = result
                if result is DEAD:
                    dead = _kill(vals, dead, (outs,), _SCRATCH)
            for slot in frees:
                vals[slot] = None
    except Exception as exc:  # noqa: BLE001 - every kernel failure becomes an OpError
        raise node_error(exc, op) from (None if isinstance(exc, errors.OpError) else exc)
    return [vals[slot] for slot in plan.fetch_slots]


def run_simple(plan, feed_values: Sequence, timeout_ms: int = 0) -> list:
    """A whole run of a plan fed by its caller whose steps are ``plan.simple`` (one output each:
    no deadness to track) and read no run state (``plan.pure``) where there is a timeout: the
    results ``Session.run`` returns, with ``run_plan``'s errors. A server's small models spend
    most of a run on what this leaves out."""
    deadline = _monotonic() + timeout_ms / 1000 if timeout_ms > 0 else None
    token = None if plan.quiet else fp_errors.ignore()  # TF's kernels give inf and nan silently
    vals: list = [None] * plan.num_slots if plan.initial is None else list(plan.initial)
    for slot, value in zip(plan.feed_slots, feed_values):
        vals[slot] = value
    index = 0
    try:
        for call, ins, out, frees in plan.simple:
            if deadline is not None and _monotonic() > deadline:
                raise errors.DeadlineExceededError(None, None, "Timed out waiting for notification")
            n = len(ins)
            if n == 2:
                vals[out] = call(vals[ins[0]], vals[ins[1]])
            elif n == 1:
                vals[out] = call(vals[ins[0]])
            else:
                vals[out] = call(*[vals[i] for i in ins])
            for slot in frees:
                vals[slot] = None
            index += 1
    except Exception as exc:  # noqa: BLE001 - as in run_plan
        raise node_error(exc, plan.steps[index].op) from (None if isinstance(exc, errors.OpError) else exc)
    finally:
        if token is not None:
            fp_errors.restore(token)
    return fetched_values(plan, list(map(vals.__getitem__, plan.fetch_slots)))


def fetched_values(plan, values: list) -> list:
    """A run's fetched values as Session.run returns them (``fetched``): the common fetches,
    non-scalar arrays the run computed, are the list itself."""
    for value in values:
        if type(value) is not np.ndarray or not value.ndim:
            break
    else:
        if not plan.any_fed:
            return values
    return list(map(fetched, values, plan.fetch_fed, range(len(values))))


def _store(vals: list, outs: tuple, result, dead, op) -> set[int] | None:
    if not isinstance(result, (tuple, list)) or len(result) != len(outs):
        got = len(result) if isinstance(result, (tuple, list)) else "1"
        raise errors.InternalError(
            None, None, f"Kernel for {op.type} returned {got} outputs, expected {len(outs)}"
        )
    for slot, value in zip(outs, result):
        vals[slot] = value
        if value is DEAD:
            dead = _kill(vals, dead, (slot,), _SCRATCH)
    return dead


def _kill(vals: list, dead: set[int] | None, slots: tuple, ctrl: int) -> set[int]:
    """Marks ``slots`` (and a control slot) dead: DEAD values, and in the ``dead`` set."""
    dead = set() if dead is None else dead
    for slot in slots:
        vals[slot] = DEAD
    dead.update(slots)
    dead.add(ctrl)
    dead.discard(_SCRATCH)
    return dead


# Python exceptions a kernel may raise, by the OpError TF would report (default InvalidArgument).
_PYTHON_ERRORS = (
    (MemoryError, errors.ResourceExhaustedError),
    (NotImplementedError, errors.UnimplementedError),
)


def node_error(exc: Exception, op: Operation | None) -> errors.OpError:
    """``exc`` raised by ``op``'s kernel as TF reports it: an OpError naming the node.

    A run's own timeout is not a node's failure and keeps its plain text, as in TF.
    """
    if isinstance(exc, errors.DeadlineExceededError) and exc.op is None:
        return exc
    if op is None:
        return exc if isinstance(exc, errors.OpError) else errors.InternalError(None, None, str(exc))
    if getattr(exc, "names_the_model_node", False):  # raised inside a fused node: it names the
        exc.names_the_model_node = False  # model's own node, as TF would; callers further out add theirs
        return exc
    suffix = f"\n\t [[{{{{node {op.name}}}}}]]"
    if isinstance(exc, errors.OpError):
        return errors.error_for_code(
            exc.code, exc.message + suffix, exc.node_def or op.node_def, exc.op or op
        )
    kind = next((e for python, e in _PYTHON_ERRORS if isinstance(exc, python)), None)
    text = f"{op.type}: {str(exc) or type(exc).__name__}{suffix}"
    return (kind or errors.InvalidArgumentError)(op.node_def, op, text)


def instrument(plan, trace: list) -> tuple:
    """The plan's steps, each appending (op, start_us, micros) to ``trace`` when it runs."""

    def wrap(call: Callable, op: Operation | None) -> Callable:
        def traced(*args):
            start_us = time.time_ns() // 1000
            start = time.perf_counter()
            result = call(*args)
            if op is not None:
                trace.append((op, start_us, int((time.perf_counter() - start) * 1e6)))
            return result

        return traced

    return tuple(step._replace(call=wrap(step.call, step.op)) for step in plan.steps)


def fetched(value, fed: bool, index: int):
    """A fetched value as Session.run returns it: 0-d results as numpy scalars."""
    if value is DEAD:
        raise errors.InvalidArgumentError(None, None, f"Retval[{index}] does not have value")
    if fed:
        return value
    if isinstance(value, np.ndarray):
        return value[()] if value.ndim == 0 else value
    return value
