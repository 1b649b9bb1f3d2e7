"""Converter for TF2's functional ``While``: the whole loop becomes one ONNX ``Loop``.

Run step by step, a loop costs one interpreter round trip (and one onnxruntime call for its cell)
per iteration; as one ``Loop`` node it joins the cluster around it and runs in one call. TF's
``While(cond, body)`` maps onto ``Loop`` with no trip count: the condition on the initial values
is computed before the ``Loop``, and the body computes the next values and then ``cond`` on them.
Each loop variable takes one of three roles:

- invariant: the body returns it unchanged (bounds, the input sequence list): the body reads the
  outer value directly, nothing is carried;
- scan: a list the body writes with one ``TensorListSetItem`` per step, at a counter that starts
  at 0 and grows by 1 (Keras' ``return_sequences``) or at a constant index (the last output only):
  the written items become a scan output, reshaped after the loop into the list TF would hold;
- carried: anything else, a ``Loop`` state variable (a list only where it is dense, see
  ``list_ops.py``).

``loop_reason`` checks statically (before any run) that the cond and body hold only convertible
ops and no resources; the partitioner asks it through the converter's ``check``. Everything
rank-dependent is decided when the cluster compiles, and a failure there leaves the cluster to
the native kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from onnx import TensorProto, helper

from runtime import dtypes, tensor_util
from runtime.graph.function_def import FunctionBody, instantiate
from runtime.graph.graph import Operation, Tensor
from runtime.kernels import lookup as kernel_lookup
from runtime.onnx import partition
from runtime.onnx.converter import Builder, ListInfo, NotConvertible, TFNode, Value, converter, emit
from runtime.onnx.inline import function_with_default_types
from runtime.onnx.list_ops import dense

WHILE_OPS = frozenset({"While", "StatelessWhile"})
_ALIASES = frozenset({"Identity", "Snapshot", "StopGradient"})
_INT64_MAX = np.iinfo(np.int64).max


def loop_reason(op: Operation) -> str | None:
    """Why ``op`` (a While) cannot become one ``Loop``, judged from its functions alone."""
    return while_reason(op.node_def, op.graph.functions)


def while_reason(node, library) -> str | None:
    """``loop_reason`` of a While NodeDef whose functions are in ``library``."""
    if node.op not in WHILE_OPS:
        return f"{node.op} is not a While"
    return functions_reason(node, library, ("cond", "body"), row_index)


def functions_reason(node, library, keys, exempt=None) -> str | None:
    """Why the functions ``node`` names by the attrs ``keys`` cannot all convert (None: they
    can); ``exempt(op, body)``: an op that need not convert itself (a While's row reads)."""
    for key in keys:
        fdef = library.get(node.attr[key].func.name)
        if fdef is None or fdef.signature.attr:
            return f"{key} function is missing or polymorphic"
        try:
            body = instantiate(function_with_default_types(fdef), {}, library)
        except Exception as exc:  # noqa: BLE001 - a body we cannot read stays native
            return f"{key} function: {exc}"
        for arg in body.args:
            if dtypes.base_dtype(arg.dtype) == dtypes.DT_RESOURCE:
                return f"{key} function takes a resource"
        for inner in needed(body, [*body.rets], ()):
            if inner.type in ("_Arg", "NoOp") or inner.type in _ALIASES:
                continue
            if inner.type == "Const":
                if not partition.is_constant(inner):
                    return f"{key} function: {inner.name} is a constant ONNX lacks"
                continue
            why = partition.reason(inner)
            if why is not None and (exempt is None or exempt(inner, body) is None):
                return f"{key} function: {inner.type} {inner.name}: {why}"
    return None


def needed(body: FunctionBody, roots: list[Tensor], skip) -> list[Operation]:
    """Ops computing ``roots`` (data edges only), in a topological order, ``skip`` not entered."""
    seen: set[Operation] = set()
    order: list[Operation] = []
    stack = [(t.op, False) for t in roots]
    while stack:
        op, expanded = stack.pop()
        if expanded:
            order.append(op)
            continue
        if op in seen:
            continue
        seen.add(op)
        stack.append((op, True))
        if op not in skip:
            stack.extend((t.op, False) for t in op.inputs if t.op not in seen)
    return order


def source(tensor: Tensor) -> Tensor:
    while tensor.op.type in _ALIASES:
        tensor = tensor.op.inputs[0]
    return tensor


def same(a: Tensor, b: Tensor) -> bool:
    return a.name == b.name


@dataclass(frozen=True)
class Role:
    """What a While loop variable is to the loop, which decides its place in the ONNX Loop."""

    kind: str  # invariant | scan | carried
    writer: Operation | None = None  # scan: the TensorListSetItem
    index: int | None = None  # scan: the constant index written, None for the counter


@dataclass(frozen=True)
class WhileLoop:
    """A While being converted: its functions, the ONNX values it starts from, its variables' roles."""

    name: str
    body: FunctionBody
    cond: FunctionBody
    inits: list[str]
    roles: list[Role]


# Recognizers of whole loops with a fused ONNX form (``rnn_ops.py``): loop -> outputs, or None.
FUSED_LOOPS: list[Callable[[WhileLoop, Builder], list[str] | None]] = []


def fused_loop(fn: Callable) -> Callable:
    """Registers ``fn(loop, b)``: the While's outputs as one fused ONNX op, or None (not its shape)."""
    FUSED_LOOPS.append(fn)
    return fn


def _consumers(body: FunctionBody, tensor: Tensor) -> list[Operation]:
    ops = needed(body, [*body.rets], ())
    return [op for op in ops if any(same(t, tensor) for t in op.inputs)]


def counter_start(body: FunctionBody, inits: list[str], b: Builder, k: int) -> int | None:
    """Where loop variable ``k`` starts if it is a counter (an integer the body adds 1 to)."""
    start = b.values[inits[k]].const
    step = source(body.rets[k]).op
    if start is None or np.asarray(start).size != 1 or np.asarray(start).dtype.kind != "i":
        return None
    if step.type not in ("AddV2", "Add") or len(step.inputs) != 2:
        return None
    a, c = step.inputs
    if not same(source(a), body.args[k]):
        a, c = c, a
    if not same(source(a), body.args[k]) or source(c).op.type != "Const":
        return None
    one = const_value(source(c).op)
    return int(np.asarray(start).reshape(())) if one.size == 1 and int(one.reshape(())) == 1 else None


def const_value(op: Operation) -> np.ndarray:
    return tensor_util.make_ndarray(op.node_def.attr["value"].tensor)


def trip_count(b: Builder, body: FunctionBody, cond: FunctionBody, inits: list[str], roles) -> str | None:
    """The number of steps, where ``cond`` is a conjunction of ``counter < bound`` with bounds the
    loop does not change (Keras' ``time < steps and loop_counter < max``): then the body needs no
    condition at all. None otherwise."""
    pending, counts = [source(cond.rets[0]).op], []
    while pending:
        op = pending.pop()
        if op.type == "LogicalAnd":
            pending += [source(t).op for t in op.inputs]
            continue
        if op.type != "Less":
            return None
        counter, bound = (source(t) for t in op.inputs)
        k = next((i for i, a in enumerate(cond.args) if same(a, counter)), None)
        start = counter_start(body, inits, b, k) if k is not None and roles[k].kind == "carried" else None
        j = next((i for i, a in enumerate(cond.args) if same(a, bound)), None)
        if bound.op.type == "Const":
            limit = b.const(const_value(bound.op))
        elif j is not None and roles[j].kind == "invariant":
            limit = inits[j]
        else:
            return None
        if start is None or _rank(b, limit) != 0:
            return None
        counts.append(b.op("Sub", [b.cast(limit, TensorProto.INT64), b.int64s(start)], rank=0))
    steps = counts[0] if len(counts) == 1 else b.op("Min", counts, rank=0)
    return b.op("Max", [steps, b.int64s(0)], rank=0)


def _role(body: FunctionBody, cond: FunctionBody, inits: list[str], b: Builder, i: int) -> Role:
    arg = body.args[i]
    if same(source(body.rets[i]), arg):
        return Role("invariant")
    info = b.lists.get(inits[i])
    writer = source(body.rets[i]).op
    if info is None or writer.type != "TensorListSetItem" or not _scannable(info):
        return Role("carried")
    readers = [op.name for op in _consumers(body, arg)]
    if not same(source(writer.inputs[0]), arg) or readers != [writer.name] or _consumers(cond, cond.args[i]):
        return Role("carried")
    index = source(writer.inputs[1])
    if index.op.type == "Const" and info.num_elements is not None:
        value = tensor_util.make_ndarray(index.op.node_def.attr["value"].tensor)
        return Role("scan", writer, int(value.reshape(())))
    counter = next((k for k, a in enumerate(body.args) if same(a, index)), None)
    if counter is not None and counter_start(body, inits, b, counter) == 0:
        return Role("scan", writer, None)
    return Role("carried")


def _scannable(info) -> bool:
    """A list whose length is known, at plan time or (TF1's ``TensorArray(size=n)``) at run time."""
    return info.num_elements is not None or info.length is not None


def convert_function(
    b: Builder, body: FunctionBody, args: dict[int, str], roots, skip=(), hoisted=None, variant=None
) -> dict:
    """Converts the ops of ``body`` that ``roots`` need into ``b``; ONNX name per TF tensor.
    ``skip``: ops left out; ``hoisted``: op -> (its value for every step, the step index);
    ``variant``: the args that change per step, where ``b`` is a loop body: an op reading none of
    them (nor what they feed) is the same every step and is converted once, before the loop."""
    mapped = {body.args[i].name: name for i, name in args.items()}
    hoisted = hoisted or {}
    changing = set(variant or ())
    for op in needed(body, roots, [*skip, *hoisted]):
        if op in hoisted:
            every, index = hoisted[op]
            rank = b.rank(every)
            mapped[op.outputs[0].name] = b.op("Gather", [every, mapped[index.name]], axis=0, rank=rank - 1)
            changing.add(op.outputs[0].name)
            continue
        if op.type == "_Arg" or op in skip:
            continue
        try:
            inputs = [mapped[t.name] for t in op.inputs]
        except KeyError:
            raise NotConvertible(f"{op.name} reads a loop list outside its write") from None
        if op.type in _ALIASES:
            mapped[op.outputs[0].name] = inputs[0]
            changing.update(t.name for t in op.outputs if op.inputs[0].name in changing)
            continue
        target = b
        if variant is not None and not any(t.name in changing for t in op.inputs) and not _stateful(op):
            target = b.parent
        else:
            changing.update(t.name for t in op.outputs)
        for k, name in enumerate(emit(target, op.name, op.type, op.node_def.attr, inputs)):
            if name is not None:
                mapped[f"{op.name}:{k}"] = name
    return mapped


def _stateful(op: Operation) -> bool:
    definition = kernel_lookup(op.type)
    return definition is None or definition.stateful


def _hoisted(b: Builder, body: FunctionBody, inits: list[str], roles, roots) -> dict:
    """Input projections computed for every step before the loop: ``MatMul(GetItem(seq, t), W)``,
    ``seq`` and ``W`` loop invariants, is ``Gather(MatMul(seq, W), t)``: one large product instead
    of a small one per step (Keras' ``x_t @ kernel``)."""
    found = {}
    for op in needed(body, roots, ()):
        index = row_index(op, body)
        if index is not None:
            rows = _outer(b, body, inits, roles, op.inputs[0])
            if rows is not None and rows not in b.lists and (_rank(b, rows) or 0) >= 1:
                found[op] = (rows, index)
            continue
        if op.type != "MatMul" or op.attrs.get("transpose_a") or op.attrs.get("transpose_b"):
            continue
        read = source(op.inputs[0]).op
        if read.type != "TensorListGetItem":
            continue
        seq, weight = (
            _outer(b, body, inits, roles, read.inputs[0]),
            _outer(b, body, inits, roles, op.inputs[1]),
        )
        index = source(read.inputs[1])
        if seq is None or weight is None or not any(same(a, index) for a in body.args):
            continue
        rank = _rank(b, seq)
        if rank is None or rank < 2 or _rank(b, weight) != 2 or (seq in b.lists and not b.lists[seq].dense):
            continue
        found[op] = (b.op("MatMul", [seq, weight], rank=rank), index)
    return found


def row_index(op: Operation, body: FunctionBody) -> Tensor | None:
    """The arg ``i`` where ``op`` is ``x[i]`` (TF1 indexing: ``StridedSlice(x, [i], [i + 1], [1])``
    shrinking axis 0, ``x`` an arg): the ``Gather(x, i)`` ``_hoisted`` makes of it. None otherwise."""
    if op.type != "StridedSlice" or op.attrs.get("shrink_axis_mask") != 1:
        return None
    if any(op.attrs.get(m) for m in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask")):
        return None
    begin, strides = source(op.inputs[1]).op, source(op.inputs[3]).op
    if begin.type != "Pack" or len(begin.inputs) != 1 or strides.type != "Const":
        return None
    if const_value(strides).reshape(-1).tolist() != [1]:
        return None
    index = source(begin.inputs[0])
    args = [a for a in body.args if same(a, index) or same(a, source(op.inputs[0]))]
    return index if len(args) == 2 else None


def _outer(b: Builder, body: FunctionBody, inits: list[str], roles, tensor: Tensor) -> str | None:
    """The ONNX value outside the loop that ``tensor`` always equals (a constant, an invariant)."""
    tensor = source(tensor)
    if tensor.op.type == "Const" and partition.is_constant(tensor.op):
        return b.const(const_value(tensor.op))
    k = next((i for i, a in enumerate(body.args) if same(a, tensor)), None)
    return inits[k] if k is not None and roles[k].kind == "invariant" else None


def _rank(b: Builder, name: str) -> int | None:
    return b.rank(name) if b.rank(name) is not None else b.infer_rank(name)


def _condition(b: Builder, cond: FunctionBody, args: dict[int, str]) -> str:
    result = convert_function(b, cond, args, [cond.rets[0]])[cond.rets[0].name]
    if b.elem_type(result) != TensorProto.BOOL or _rank(b, result) not in (0, None):
        raise NotConvertible("While condition is not a boolean scalar")
    if b.rank(result) == 0:
        return result
    return b.op("Reshape", [result, b.int64s(np.zeros(0, np.int64))], rank=0)


def function_body(b: Builder, func) -> FunctionBody:
    fdef = b.library.get(func.name)
    if fdef is None:
        raise NotConvertible(f"function {func.name} is not in the cluster's library")
    return instantiate(function_with_default_types(fdef), {}, b.library)


@converter("While", "StatelessWhile", num_outputs=None, lists=True, check=loop_reason)
def while_(node: TFNode, b: Builder) -> list[str | None]:
    """One ``Loop``: see the module docstring for the roles of the loop variables."""
    cond, body = function_body(b, node.attr("cond")), function_body(b, node.attr("body"))
    inits = list(node.inputs)
    roles = [_role(body, cond, inits, b, i) for i in range(len(inits))]
    for fused in FUSED_LOOPS:
        results = fused(WhileLoop(node.name, body, cond, inits, roles), b)
        if results is not None:
            return results
    carried = [i for i, r in enumerate(roles) if r.kind == "carried"]
    scans = [i for i, r in enumerate(roles) if r.kind == "scan"]
    sb = b.child()
    graph_inputs = []
    for hint, elem in (("iteration", TensorProto.INT64), ("condition", TensorProto.BOOL)):
        graph_inputs.append(helper.make_tensor_value_info(b.fresh(hint), elem, []))
        sb.values[graph_inputs[-1].name] = Value(elem, 0)
    args = {i: inits[i] for i, r in enumerate(roles) if r.kind == "invariant"}
    for i in args:
        if inits[i] not in b.lists:
            _rank(b, inits[i])  # the body's converters need invariants' ranks too (TF1's Fill zeros)
    for i in carried:
        value = b.values[dense(b, inits[i])]
        _rank(b, inits[i])  # the converters in the body need the state's rank
        name = b.fresh("state")
        sb.values[name] = Value(value.elem_type, value.rank)
        shape = None if value.rank is None else [None] * value.rank
        graph_inputs.append(helper.make_tensor_value_info(name, value.elem_type, shape))
        if inits[i] in b.lists:
            sb.lists[name] = b.lists[inits[i]]
        args[i] = name
    writers = [roles[i].writer for i in scans]
    roots = [body.rets[i] for i in carried] + [w.inputs[2] for w in writers]
    hoisted = _hoisted(b, body, inits, roles, roots)
    variant = {body.args[i].name for i in carried}
    mapped = convert_function(sb, body, args, roots, writers, hoisted, variant)
    next_args = {i: inits[i] for i, r in enumerate(roles) if r.kind == "invariant"}
    next_args.update({i: mapped[body.rets[i].name] for i in carried})
    steps = trip_count(b, body, cond, inits, roles)
    if steps is None:
        first = _condition(b, cond, {i: inits[i] for i, r in enumerate(roles) if r.kind != "scan"})
        results = [_condition(sb, cond, next_args)]
    else:
        first, results = b.const(np.array(True)), [graph_inputs[1].name]
    results += [next_args[i] for i in carried]
    guard = _carry_guards(b, sb, graph_inputs, results)
    results += [mapped[w.inputs[2].name] for w in writers]
    graph = helper.make_graph(sb.nodes, b.fresh(node.name), graph_inputs, body_outputs(sb, results))
    finals = [b.fresh("final") for _ in carried]
    stacked = [b.fresh("scan") for _ in writers]
    loop_inputs = [steps or "", first, *[inits[i] for i in carried]]
    if guard is not None:
        loop_inputs.append(b.int64s(0, "margin"))
        finals.append(guard)
    b.nodes.append(helper.make_node("Loop", loop_inputs, finals + stacked, body=graph))
    if guard is not None:
        b.values[guard] = Value(TensorProto.INT64, 0)
        b.margins.append(finals.pop())
    results_by_var: dict[int, str] = {i: inits[i] for i, r in enumerate(roles) if r.kind == "invariant"}
    for i, name in zip(carried, finals):
        b.values[name] = Value(b.elem_type(inits[i]), b.rank(inits[i]))
        if inits[i] in b.lists:
            b.lists[name] = b.lists[inits[i]]
        results_by_var[i] = name
    for i, name, writer in zip(scans, stacked, writers):
        item = mapped[writer.inputs[2].name]
        rank = sb.rank(item)
        if rank is None:
            raise NotConvertible(f"rank of the items {node.name} writes is unknown")
        b.values[name] = Value(sb.elem_type(item), rank + 1)
        results_by_var[i] = scan_to_list(b, name, roles[i].index, b.lists[inits[i]])
    return [results_by_var[i] for i in range(len(inits))]


def _carry_guards(b: Builder, sb: Builder, graph_inputs: list, results: list[str]) -> str | None:
    """The body's guard margins as one more carried int64 (0 before the first step, the minimum
    of every step's after): the name of its final value in ``b``, or None without guards."""
    if not sb.margins:
        return None
    state = b.fresh("guard_state")
    sb.values[state] = Value(TensorProto.INT64, 0)
    graph_inputs.append(helper.make_tensor_value_info(state, TensorProto.INT64, []))
    results.append(sb.op("Min", [state, *sb.margins], rank=0))
    return b.fresh("guard_final")


def body_outputs(sb: Builder, results: list[str]) -> list:
    """The body graph's outputs: its own node outputs as they are (an Identity per step costs
    time), an Identity where a result is an input, an outer value or already an output."""
    produced = {name for n in sb.nodes for name in n.output}
    outputs, used = [], set()
    for name in results:
        out = name
        if name not in produced or name in used:
            out = sb.fresh("out")
            sb.nodes.append(helper.make_node("Identity", [name], [out]))
        used.add(out)
        outputs.append(helper.make_tensor_value_info(out, sb.elem_type(name), None))
    return outputs


def scan_to_list(b: Builder, scan: str, index: int | None, info: ListInfo) -> str:
    """The list TF holds after the loop: written rows in place, unwritten rows zeros."""
    count, rank = info.num_elements, b.rank(scan)
    zeros = [0] * (rank - 1)
    if index is not None:  # every step wrote row ``index``: the last item is what remains
        if not 0 <= index < count:
            raise NotConvertible(f"TensorListSetItem index {index} outside a list of {count}")
        last = b.op("Slice", [scan, b.int64s([-1]), b.int64s([_INT64_MAX]), b.int64s([0])], rank=rank)
        pads = b.int64s([index, *zeros, count - index - 1, *zeros])
        rows = b.op("Pad", [last, pads], rank=rank) if count > 1 else last
    else:  # row k written at step k: pad to the reserved length
        written = b.op("Shape", [scan], start=0, end=1, rank=1, elem_type=TensorProto.INT64)
        length = b.int64s([count]) if count is not None else info.length  # run-time length
        missing = b.op("Max", [b.op("Sub", [length, written], rank=1), b.int64s([0])], rank=1)
        pads = b.op("Concat", [b.int64s([0, *zeros]), missing, b.int64s(zeros)], axis=0, rank=1)
        rows = b.op("Pad", [scan, pads], rank=rank)
    b.lists[rows] = ListInfo(info.element_shape, count, True)
    return rows
