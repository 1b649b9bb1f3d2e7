"""Execution plans: a pruned, ordered, kernel-resolved step list (``runtime/execution/interpreter.py`` runs it).

Building one (``runtime/execution/planner.py`` orders the ops) makes every per-node decision once:
resolve each node's kernel (registry first, then the function library: an op named after a library
function calls it), decode and bind its attrs, group list inputs (``runtime/graph/op_signatures.py``),
dereference TF1 ref edges, and compute after which step each value dies (``StepBuilder``,
``finish``). ``resolve_all`` reports every unsupported op type at once.

A Plan is ``Step`` tuples over a list of value slots (slot 0 is scratch: outputs nobody reads).
It is immutable and shared by every thread running it; each run owns its slot list.

TF1 while loops (Enter/Merge/NextIteration/Exit cycles) leave this loop as it is: at plan time
``runtime/execution/frames.py`` makes each loop frame one step whose call runs a plan of the loop body
once per iteration (frames nest the same way).
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from runtime import errors
from runtime.execution.interpreter import direct_call, node_error
from runtime.graph import node_check
from runtime.graph.attrs import FuncAttr
from runtime.graph.graph import Operation, Tensor
from runtime.graph.op_def import OpSignature
from runtime.kernels import lookup

_SCRATCH = 0
# Kernels that return their inputs unchanged (Identity, StopGradient, IdentityN, PlaceholderWithDefault).
_FORWARDING = (lookup("Identity").fn, lookup("IdentityN").fn, lookup("PlaceholderWithDefault").fn)


class UnsupportedOpsError(errors.UnimplementedError):
    """Op types without a kernel, with counts, so that nested plans can merge their reports."""

    def __init__(self, counts: collections.Counter):
        listed = ", ".join(f"{t} (x{n})" for t, n in sorted(counts.items()))
        super().__init__(None, None, f"Op types not supported: {listed}")
        self.counts = counts


class OpContext:
    """What a kernel declaring ``ctx`` receives: its node and its Session's state."""

    __slots__ = ("op", "name", "resources", "functions", "cached")

    def __init__(self, op: Operation, resources, functions):
        self.op = op
        self.name = op.name
        self.resources = resources  # runtime.kernels.resources.ResourceMgr
        self.functions = functions  # runtime.execution.function.FunctionLibraryRuntime
        self.cached = None  # what a kernel keeps between runs, as TF's OpKernel members do

    @property
    def attrs(self) -> dict:
        return self.op.attrs


class Step(NamedTuple):
    call: Callable
    inputs: tuple[int, ...]
    multi: bool  # outputs is a tuple of slots (kernel returns a tuple) or one slot
    outputs: int | tuple[int, ...]
    frees: tuple[int, ...]
    accepts_dead: bool
    dead_inputs: tuple[int, ...]  # inputs plus control-edge slots, for deadness only
    op: Operation | None
    control_slot: int  # where deadness of this step is recorded for control successors


@dataclass(frozen=True)
class Plan:
    """A run worked out once per (feeds, fetches): its steps in order over numbered value slots."""

    steps: tuple[Step, ...]
    num_slots: int
    feed_slots: tuple[int, ...]
    fetch_slots: tuple[int, ...]
    fetch_fed: tuple[bool, ...]
    quiet: bool = False  # every step's kernel is ``quiet``: the run needs no np.errstate
    # The whole plan as one call of the feed values, where it is a single step from the feeds to
    # the fetches (a fully delegated model): no slots, no deadness (``_direct``).
    direct: Callable[[Sequence], list] | None = None
    # Every slot's value before a run: constants' values (computed when the plan was built), else None.
    initial: tuple | None = None
    # No step reads the run's state (``runtime.execution.interpreter.RUN_STATE``: deadline and trace), which
    # only calls into functions and loops do: a run with a timeout checks it between steps only.
    pure: bool = False
    # (call, inputs, output, frees) per step where every step has one output and none takes
    # dead inputs: nothing can be dead in a run fed by its caller, so ``run_simple`` runs it.
    simple: tuple | None = None

    @functools.cached_property
    def simple_run(self) -> bool:
        """``interpreter.run_simple`` runs it whatever the timeout (one-output steps, none of
        which reads the run state), unless a trace is asked."""
        return self.simple is not None and self.pure

    @functools.cached_property
    def any_fed(self) -> bool:
        """Whether a fetch is also fed (its value is returned as fed)."""
        return any(self.fetch_fed)


def _deref(value):
    read = getattr(value, "read", None)  # a ref variable (runtime.kernels.resources.Var)
    return read() if read is not None else value


class CycleError(errors.UnimplementedError):
    """A cycle among the ops of one frame: a TF1 while loop's back edge, or an invalid graph."""


def cycle_error(op: Operation) -> errors.OpError:
    return CycleError(
        None,
        None,
        f"Graph has a cycle through node '{op.name}' ({op.type}) that no while loop frame "
        "(Enter ... NextIteration ... Exit) explains",
    )


class Kernel(NamedTuple):
    call: Callable
    accepts_dead: bool
    multi: bool | None  # None: decide from the output count
    signature: OpSignature | None
    quiet: bool = False
    constant: bool = False
    pure: bool = False  # a plain function of its inputs: no context, so no function calls


def _resolve(op: Operation, resources, functions) -> Kernel | None:
    definition = lookup(op.type)
    if definition is not None or (functions is not None and op.type in op.graph.functions):
        node_check.check_node(
            op, definition.required_attrs if definition else frozenset(), op.signature, len(op.inputs)
        )
    if functions is not None:
        _prepare_functions(op, functions)
    if definition is not None:
        attrs = definition.select_attrs(op.attrs)
        if definition.needs_context:
            attrs["ctx"] = OpContext(op, resources, functions)
        if definition.per_node:
            try:
                call = definition.fn(**attrs)
            except Exception as exc:  # TF's kernel constructor fails naming the node
                raise node_error(exc, op) from (None if isinstance(exc, errors.OpError) else exc)
        else:
            call = functools.partial(definition.fn, **attrs) if attrs else definition.fn
        pure = not (definition.needs_context or definition.per_node)
        return Kernel(
            call, definition.accepts_dead, None, op.signature, definition.quiet, definition.constant, pure
        )
    if functions is not None and op.type in op.graph.functions:
        return Kernel(functions.call_kernel(op), False, True, op.signature)
    return None


def call_kernel(op: Operation, inputs: list, resources):
    """``op`` run once by its kernel outside any plan, as a plan's step calls it (the node checked,
    the attrs its kernel names, its context, list inputs grouped): for a few hundred variable ops
    at a start, where planning them costs more than running them. Ops without a kernel, or whose
    kernel is built per node, raise ``LookupError``."""
    definition = lookup(op.type)
    if definition is None or definition.per_node:
        raise LookupError(f"{op.type}: no kernel to call outside a plan")
    kernel = _resolve(op, resources, None)
    return _grouped(kernel.call, kernel.signature, op)(*inputs)


def _prepare_functions(op: Operation, functions) -> None:
    """Instantiates every function a func-valued attr names (plan time, not run time)."""
    for name, proto in op.node_def.attr.items():
        kind = proto.WhichOneof("value")
        if kind == "func" or (kind == "list" and proto.list.func):
            value = op.attrs[name]
            for item in value if isinstance(value, list) else (value,):
                if isinstance(item, FuncAttr) and item.name in op.graph.functions:
                    functions.prepare(item)


def _grouped(call: Callable, signature: OpSignature | None, op: Operation) -> Callable:
    """``call`` taking flat inputs, regrouped into the lists the op's list args declare."""
    if signature is None or not any(a.number_attr or a.type_list_attr for a in signature.inputs):
        return call
    attrs = op.attrs
    layout, start = [], 0
    for arg in signature.inputs:
        size = arg.size(attrs)
        layout.append((start, start + size, bool(arg.number_attr or arg.type_list_attr)))
        start += size
    if start != len(op.inputs):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"NodeDef '{op.name}' ({op.type}) has {len(op.inputs)} inputs, its attrs say {start}",
        )

    def grouped_call(*args):
        return call(*[list(args[a:b]) if is_list else args[a] for a, b, is_list in layout])

    return grouped_call


def _ref_flags(args, attrs) -> list[bool]:
    return [arg.is_ref for arg in args for _ in range(arg.size(attrs))]


def resolve_all(order: list[Operation], resources, functions) -> list[Kernel]:
    """Every op's kernel; one UnsupportedOpsError listing all that have none (functions too)."""
    missing: collections.Counter = collections.Counter()
    kernels = []
    for op in order:
        try:
            kernel = _resolve(op, resources, functions)
        except UnsupportedOpsError as nested:  # inside a function this node calls
            missing.update(nested.counts)
            kernel = None
        else:
            if kernel is None:
                missing[op.type] += 1
        kernels.append(kernel)
    if missing:
        raise UnsupportedOpsError(missing)
    return kernels


class StepBuilder:
    """Assigns value slots and turns ordered (op, kernel) pairs into raw steps."""

    def __init__(
        self,
        feeds: Sequence[Tensor],
        wanted: set[Tensor],
        controlled: set[Operation],
        ref_feeds: frozenset[Tensor] = frozenset(),
    ):
        self.slot_of: dict[Tensor, int] = {t: i + 1 for i, t in enumerate(feeds)}
        self.num_slots = len(feeds) + 1
        self.fed = set(feeds)
        self.wanted = wanted
        self.controlled = controlled
        self.control_slot: dict[Operation, int] = {}
        self.ref_out: dict[Tensor, bool] = dict.fromkeys(ref_feeds, True)
        self.raw_steps: list[list] = []
        self.quiet_calls: set[Callable] = {_deref}  # step calls known to do no numpy math
        self.pure_calls: set[Callable] = {_deref}  # step calls known not to read the run state
        self.constants: dict[int, object] = {}  # slot -> the value a constant op gives every run

    def new_slot(self) -> int:
        self.num_slots += 1
        return self.num_slots - 1

    def _forwards(self, op: Operation, kernel: Kernel) -> bool:
        """An ``Identity`` (or alike) that only forwards its value (no control edges in or out, so its
        deadness is its input's) costs no step. Arrays are never mutated in place, so sharing
        the slot is what TF's Identity (which forwards the same buffer) does."""
        return (
            kernel.call in _FORWARDING
            and not op.control_inputs
            and op not in self.controlled
            and len(op.outputs) == len(op.inputs)
            and not any(t in self.fed for t in op.outputs)
        )

    def value_slot(self, tensor: Tensor, is_ref_input: bool, op: Operation | None) -> int:
        """The slot ``op`` reads ``tensor`` from: a ref read into a value where the arg is not a ref."""
        slot = self.slot_of[tensor]
        if self.ref_out.get(tensor) and not is_ref_input:
            out = self.new_slot()
            self.raw_steps.append([_deref, (slot,), False, out, False, (slot,), op, _SCRATCH])
            return out
        return slot

    def add(self, op: Operation, kernel: Kernel) -> None:
        signature, attrs = kernel.signature, op.attrs
        ref_in = _ref_flags(signature.inputs, attrs) if signature else []
        inputs = tuple(self.value_slot(t, i < len(ref_in) and ref_in[i], op) for i, t in enumerate(op.inputs))
        if self._forwards(op, kernel):
            for tensor, slot in zip(op.outputs, inputs):
                self.slot_of[tensor] = slot  # no step: readers read the input's slot
            return
        count = op.num_outputs
        multi = kernel.multi
        if multi is None and signature is not None:
            outs = signature.outputs
            one = len(outs) == 1 and not (outs[0].number_attr or outs[0].type_list_attr)
            multi = not one and count > 0
        elif multi is None:
            multi = count > 1
        refs = _ref_flags(signature.outputs, attrs) if signature else []
        out_slots = []
        for index in range(count):
            tensor = op._outputs.get(index)
            if tensor is None or tensor not in self.wanted or tensor in self.fed:
                out_slots.append(_SCRATCH)
                continue
            out_slots.append(self.new_slot())
            self.slot_of[tensor] = out_slots[-1]
            self.ref_out[tensor] = index < len(refs) and refs[index]
        # A constant nothing gates is a value of the plan, no step, and never dead: a control
        # edge from it orders nothing (a frozen Keras graph's NoOp waits on every weight).
        inert = kernel.constant and not op.control_inputs and not multi
        if op in self.controlled and not inert:
            self.control_slot[op] = self.new_slot()
        # A control input from outside this frame has no slot here: its frame's step orders it.
        dead_inputs = inputs + tuple(
            self.control_slot[c] for c in op.control_inputs if c in self.control_slot
        )
        outputs = tuple(out_slots) if multi else (out_slots[0] if out_slots else _SCRATCH)
        call = _grouped(kernel.call, signature, op)
        if inert:
            if outputs != _SCRATCH:
                try:
                    self.constants[outputs] = call()
                except Exception as exc:  # a Const's value TF's import would refuse: name the node
                    raise node_error(exc, op) from (None if isinstance(exc, errors.OpError) else exc)
            return
        if kernel.quiet:
            self.quiet_calls.add(call)
        if kernel.pure:
            self.pure_calls.add(call)
        ctrl = self.control_slot.get(op, _SCRATCH)
        self.raw_steps.append([call, inputs, multi, outputs, kernel.accepts_dead, dead_inputs, op, ctrl])


def finish(builder: StepBuilder, feed_slots, fetch_slots, fetches) -> Plan:
    """Frees each slot after its last reader (never fetched slots) and freezes the steps."""
    raw_steps = builder.raw_steps
    last_use: dict[int, int] = {}
    for index, raw in enumerate(raw_steps):
        for slot in raw[1]:
            last_use[slot] = index
    keep = set(fetch_slots) | {_SCRATCH}
    frees: list[list[int]] = [[] for _ in raw_steps]
    for slot, index in last_use.items():
        if slot not in keep:
            frees[index].append(slot)
    steps = tuple(
        Step(call, ins, multi, outs, tuple(frees[i]), accepts_dead, dead_ins, op, ctrl)
        for i, (call, ins, multi, outs, accepts_dead, dead_ins, op, ctrl) in enumerate(raw_steps)
    )
    fetch_fed = tuple(t in builder.fed for t in fetches)
    initial = None
    if builder.constants:
        initial = [None] * builder.num_slots
        for slot, value in builder.constants.items():
            initial[slot] = value
        initial = tuple(initial)
    return Plan(
        steps=steps,
        num_slots=builder.num_slots,
        feed_slots=feed_slots,
        fetch_slots=fetch_slots,
        fetch_fed=fetch_fed,
        quiet=all(step.call in builder.quiet_calls for step in steps),
        direct=direct_call(steps, feed_slots, fetch_slots, fetch_fed, builder.constants),
        initial=initial,
        pure=all(step.call in builder.pure_calls for step in steps),
        simple=_simple(steps),
    )


def _simple(steps: tuple[Step, ...]) -> tuple | None:
    if any(step.multi or step.accepts_dead for step in steps):
        return None  # (only multi-output kernels, Switch and alike, make dead values)
    return tuple((step.call, step.inputs, step.outputs, step.frees) for step in steps)
