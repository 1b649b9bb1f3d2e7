"""TF1 while loops: iteration frames, each turned into one plan step that runs its body's plan.

``tf.compat.v1.while_loop`` (control flow v1) writes a loop as dataflow: ``Enter`` brings a value
into the loop's frame (``frame_name``; ``is_constant`` for loop invariants, which every iteration
sees), ``Merge`` picks the Enter value in iteration 0 and the ``NextIteration`` value after that,
``LoopCond`` holds the predicate, ``Switch`` sends each loop variable to the body (true) or to
``Exit`` (false), and the body's results go back through ``NextIteration``. Frames nest.

Plans stay flat loops over steps. At plan time (never per step) this module:

1. finds the frame of every needed op, as TF's executor does: a forward walk from the sources in
   which an Enter opens its child frame and an Exit returns to the parent (``assign_frames``);
2. builds each scope (the root, then every frame) as a plan of its own, in which a child frame is
   one step (``FrameRunner``) whose inputs are the values entering it and whose outputs are its
   Exits' values. Inside a frame's plan the Enter outputs, the NextIteration outputs (the back
   edges) and tensors used from outside are feeds; the NextIteration inputs, the Exit outputs
   and the LoopCond outputs are fetches. That cuts every cycle.

``FrameRunner`` runs the body plan once per iteration: iteration 0 feeds the Enter values and
dead back edges; later iterations feed the loop invariants, dead non-constant Enters and the
previous NextIteration values. It stops when no LoopCond is live and true or no NextIteration
value is live (the loop's Switches killed the body). An Exit's value is its live value; a loop
entered with dead values (a while inside an untaken cond branch) exits dead. Dead tensors inside
a frame (a cond inside the loop) work as everywhere else. Runs are re-entrant: a runner keeps
no per-run state, so a plan stays shareable between threads.

Delegation first raises every regular frame into a functional ``While`` (``runtime/onnx/
raise_frames.py``), which converts to an ONNX ``Loop``; the frames left (a cond inside the loop,
ref variables) run here.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence

from runtime import errors
from runtime.execution import interpreter
from runtime.execution import plan as plan_lib
from runtime.graph.graph import Operation, Tensor
from runtime.kernels.registry import DEAD

ENTER = frozenset({"Enter", "RefEnter"})
EXIT = frozenset({"Exit", "RefExit"})
NEXT_ITERATION = frozenset({"NextIteration", "RefNextIteration"})
LOOP_COND = frozenset({"LoopCond"})
_REF_OUTPUT = frozenset({"RefEnter", "RefExit", "RefNextIteration"})


class Frame:
    """One loop frame (or the root scope) and the needed ops whose frame it is."""

    def __init__(self, name: str, parent: Frame | None):
        self.name = name
        self.parent = parent
        self.ops: list[Operation] = []
        self.children: list[Frame] = []
        self.members: dict[Operation, None] = {}  # ops of this frame and the frames inside it, ordered

    def __repr__(self) -> str:
        return f"Frame({self.name!r})"


def has_frames(order: Iterable[Operation]) -> bool:
    return any(op.type in ENTER for op in order)


def _preds(op: Operation, fed: set[Tensor]) -> list[Operation]:
    return [t.op for t in op.inputs if t not in fed] + op.control_inputs


def needed_ops(fed: set[Tensor], fetches: Sequence[Tensor], targets: Sequence[Operation]) -> list[Operation]:
    """Every op the fetches and targets reach backwards (cycles allowed), in discovery order."""
    seen = dict.fromkeys([t.op for t in fetches if t not in fed] + list(targets))
    stack = list(seen)
    while stack:
        for pred in _preds(stack.pop(), fed):
            if pred not in seen:
                seen[pred] = None
                stack.append(pred)
    return list(seen)


def assign_frames(needed: list[Operation], fed: set[Tensor]) -> tuple[Frame, dict[Operation, Frame]]:
    """(root frame, frame of each op): a forward walk from the sources, as TF's executor does."""
    consumers: dict[Operation, list[Operation]] = collections.defaultdict(list)
    sources = []
    for op in needed:
        preds = _preds(op, fed)
        for pred in preds:
            consumers[pred].append(op)
        if not preds:
            sources.append(op)
    root = Frame("", None)
    children: dict[tuple[Frame, str], Frame] = {}

    def frame_in(op: Operation, parent: Frame) -> Frame:
        if op.type not in ENTER:
            return parent
        key = (parent, op.attrs["frame_name"])
        frame = children.get(key)
        if frame is None:
            frame = children[key] = Frame(key[1], parent)
            parent.children.append(frame)
        return frame

    # A source's inputs (none, or fed: TF's feeds live in the root frame) are in the root frame.
    # A Const with no inputs at all belongs to no frame: it takes its consumers' frame where they
    # share one (delegation's rewrites give a loop's op a Const of its own, without TF's control
    # edge from the frame's pivot), so it decides no consumer's frame.
    free = [op for op in sources if op.type == "Const" and not op.node_def.input]
    frame_of = {op: frame_in(op, root) for op in sources if op not in set(free)}

    def walk(queue: collections.deque) -> None:
        while queue:
            op = queue.popleft()
            out_frame = frame_of[op]
            if op.type in EXIT and out_frame.parent is not None:
                out_frame = out_frame.parent
            for consumer in consumers.get(op, ()):
                if consumer not in frame_of:
                    frame_of[consumer] = frame_in(consumer, out_frame)
                    queue.append(consumer)

    walk(collections.deque(frame_of))
    for op in free:  # then what only such Consts reach (an Enter of a constant) walks from the root
        frames = {  # (an Enter reads its input in the frame around its own)
            frame_of[c].parent if c.type in ENTER else frame_of[c]
            for c in consumers.get(op, ())
            if c in frame_of
        }
        frame_of[op] = frames.pop() if len(frames) == 1 else root
    walk(collections.deque(free))
    for op in needed:
        frame = frame_of.setdefault(op, root)  # unreachable from a source: an invalid cycle
        frame.ops.append(op)
        while frame is not None:
            frame.members[op] = None
            frame = frame.parent
    return root, frame_of


class FrameRunner:
    """The step of one frame: runs its body plan iteration after iteration (see module doc)."""

    __slots__ = ("name", "plan", "constant", "num_next", "num_exits", "num_conds")

    def __init__(
        self, name: str, plan, constant: tuple[bool, ...], num_next: int, num_exits: int, num_conds: int
    ):
        self.name = name
        self.plan = plan
        self.constant = constant  # per Enter: is_constant
        self.num_next = num_next
        self.num_exits = num_exits
        self.num_conds = num_conds

    def __call__(self, *args) -> tuple:
        count = len(self.constant)
        num_next, num_exits = self.num_next, self.num_exits
        enters, outside = args[:count], list(args[count:])
        feeds = [*enters, *outside, *(DEAD,) * num_next]
        later = [v if c else DEAD for v, c in zip(enters, self.constant)] + outside
        exits = [DEAD] * num_exits
        state = interpreter.RUN_STATE.get()
        steps = deadline = None
        if state is not None:
            deadline, trace = state
            steps = interpreter.instrument(self.plan, trace) if trace is not None else None
        while True:
            out = interpreter.run_plan(self.plan, feeds, steps, deadline)
            for i in range(num_exits):
                if out[num_next + i] is not DEAD:
                    exits[i] = out[num_next + i]
            nexts = out[:num_next]
            conds = out[num_next + num_exits :]
            if conds and not any(c is not DEAD and bool(c) for c in conds):
                break
            if all(v is DEAD for v in nexts):
                break
            feeds = later + nexts
        return tuple(exits)

    def __repr__(self) -> str:
        return f"FrameRunner({self.name!r})"


class _Build:
    """What every scope of one plan shares: the feeds, each op's kernel and frame."""

    def __init__(self, feeds):
        self.fed = set(feeds)
        self.kernels: dict[Operation, plan_lib.Kernel] = {}
        self.frame_of: dict[Operation, Frame] = {}

    def unit(self, op: Operation, scope: Frame):
        """``op`` itself when in ``scope``, the child frame of ``scope`` holding it, else None."""
        frame = self.frame_of[op]
        if frame is scope:
            return op
        while frame.parent is not None and frame.parent is not scope:
            frame = frame.parent
        return frame if frame.parent is scope else None


def build_frame_plan(feeds, fetches, targets, resources, functions):
    """``planner.build_plan`` for ops holding while loops: the root scope's plan."""
    build = _Build(feeds)
    needed = needed_ops(build.fed, fetches, targets)
    root, build.frame_of = assign_frames(needed, build.fed)
    kernels = plan_lib.resolve_all(needed, resources, functions)
    build.kernels = dict(zip(needed, kernels))
    for tensor in fetches:
        frame = build.frame_of.get(tensor.op, root)
        leaves = tensor.op.type in EXIT and frame.parent is root  # an Exit of a top-level loop
        if tensor not in build.fed and frame is not root and not leaves:
            raise errors.UnimplementedError(
                None, None, f"Fetching {tensor.name} inside while loop frame '{frame.name}' is not supported"
            )
    builder = _scope_steps(build, root, list(feeds), list(fetches), frozenset())
    fetch_slots = tuple(builder.value_slot(t, False, t.op) for t in fetches)
    feed_slots = tuple(builder.slot_of[t] for t in feeds)
    return plan_lib.finish(builder, feed_slots, fetch_slots, fetches)


def _order(build: _Build, scope: Frame, skip: set[Operation]) -> list:
    """The scope's units (ops, child frames) in a topological order; CycleError otherwise."""
    fed = build.fed | {op._output(0) for op in skip}  # Enter and NextIteration outputs are fed
    units = [op for op in scope.ops if op not in skip] + scope.children
    order: list = []
    state: dict = {}
    for root in units:
        stack = [(root, False)]
        while stack:
            unit, expanded = stack.pop()
            if expanded:
                state[unit] = True
                order.append(unit)
                continue
            if state.get(unit) is not None:
                continue
            state[unit] = False
            stack.append((unit, True))
            for pred in _unit_preds(build, scope, unit, fed):
                if pred in skip:
                    continue
                if state.get(pred) is False:
                    raise plan_lib.cycle_error(pred if isinstance(pred, Operation) else unit)
                if pred not in state:
                    stack.append((pred, False))
    return order


def _unit_preds(build: _Build, scope: Frame, unit, fed: set[Tensor]) -> list:
    if isinstance(unit, Operation):
        ops = [unit]
    else:
        ops = list(unit.members)
    preds = []
    for op in ops:
        for pred in _preds(op, fed):
            found = build.unit(pred, scope)
            if found is not None and found is not unit:
                preds.append(found)
    return preds


class _FrameLayout:
    """How a child frame's step connects to its parent scope."""

    def __init__(self, build: _Build, frame: Frame):
        members = frame.members
        self.enters = [op for op in frame.ops if op.type in ENTER]
        self.nexts = [op for op in frame.ops if op.type in NEXT_ITERATION]
        self.conds = [op for op in frame.ops if op.type in LOOP_COND]
        self.exits = [op for op in frame.ops if op.type in EXIT]
        enter_set = set(self.enters)
        outside: dict[Tensor, None] = {}
        controls: dict[Operation, None] = {}
        for op in members:
            for tensor in op.inputs:
                if op not in enter_set and (tensor.op not in members or tensor in build.fed):
                    outside[tensor] = None
            for control in op.control_inputs:
                if control not in members and op not in enter_set:
                    controls[control] = None
        self.outside = list(outside)
        self.controls = list(controls)  # into non-Enter ops: orders the frame, TF forbids more


def _scope_steps(build: _Build, scope: Frame, feeds: list[Tensor], fetches: list[Tensor], ref_feeds):
    """A filled ``_StepBuilder`` for one scope: its ops, then each child frame as one step."""
    skip = set()
    if scope.parent is not None:
        skip = {op for op in scope.ops if op.type in ENTER or op.type in NEXT_ITERATION}
    order = _order(build, scope, skip)
    layouts = {unit: _FrameLayout(build, unit) for unit in order if isinstance(unit, Frame)}
    wanted = set(fetches)
    controlled: set[Operation] = set()
    for unit in order:
        if isinstance(unit, Operation):
            wanted.update(unit.inputs)
            controlled.update(unit.control_inputs)
        else:
            layout = layouts[unit]
            wanted.update(e.inputs[0] for e in layout.enters)
            wanted.update(layout.outside)
            for enter in layout.enters:
                controlled.update(enter.control_inputs)
    builder = plan_lib.StepBuilder(feeds, wanted, controlled, ref_feeds)
    for unit in order:
        if isinstance(unit, Operation):
            builder.add(unit, build.kernels[unit])
        else:
            _add_frame(build, builder, unit, layouts[unit])
    return builder


def _add_frame(build: _Build, builder, frame: Frame, layout: _FrameLayout) -> None:
    inputs = []
    for enter in layout.enters:
        is_ref = enter.type in _REF_OUTPUT
        slot = builder.value_slot(enter.inputs[0], is_ref, enter)
        gates = tuple(builder.control_slot[c] for c in enter.control_inputs if c in builder.control_slot)
        if gates:  # a dead control input makes the Enter's value dead
            out = builder.new_slot()
            builder.raw_steps.append([_identity, (slot,), False, out, False, (slot, *gates), enter, 0])
            slot = out
        inputs.append(slot)
    ref_feeds = {e._output(0) for e in layout.enters if e.type in _REF_OUTPUT}
    for tensor in layout.outside:
        is_ref = bool(builder.ref_out.get(tensor))
        inputs.append(builder.value_slot(tensor, is_ref, None))
        if is_ref:
            ref_feeds.add(tensor)
    exits = [e for e in layout.exits if e._output(0) in builder.wanted or e in builder.controlled]
    sub_feeds = [e._output(0) for e in layout.enters] + layout.outside + [n._output(0) for n in layout.nexts]
    sub_fetches = [n.inputs[0] for n in layout.nexts] + [e._output(0) for e in exits]
    sub_fetches += [c._output(0) for c in layout.conds]
    sub = _scope_steps(build, frame, sub_feeds, sub_fetches, frozenset(ref_feeds))
    refs = [n.type in _REF_OUTPUT for n in layout.nexts] + [e.type in _REF_OUTPUT for e in exits]
    refs += [False] * len(layout.conds)
    fetch_slots = tuple(sub.value_slot(t, ref, t.op) for t, ref in zip(sub_fetches, refs))
    sub_plan = plan_lib.finish(sub, tuple(range(1, len(sub_feeds) + 1)), fetch_slots, sub_fetches)
    constant = tuple(bool(e.attrs.get("is_constant", False)) for e in layout.enters)
    runner = FrameRunner(frame.name, sub_plan, constant, len(layout.nexts), len(exits), len(layout.conds))
    outs = []
    for exit_op in exits:
        slot = builder.new_slot()
        tensor = exit_op._output(0)
        builder.slot_of[tensor] = slot
        builder.ref_out[tensor] = exit_op.type in _REF_OUTPUT
        if exit_op in builder.controlled:
            builder.control_slot[exit_op] = slot
        outs.append(slot)
    dead_inputs = tuple(inputs) + tuple(
        builder.control_slot[c] for c in layout.controls if c in builder.control_slot
    )
    builder.raw_steps.append([runner, tuple(inputs), True, tuple(outs), True, dead_inputs, None, 0])


def _identity(value):
    return value
