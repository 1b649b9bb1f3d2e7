"""Raising TF1 while loops into functional ``While`` nodes, before partitioning.

A TF1 loop (``runtime/execution/frames.py``) runs as a frame: every iteration the interpreter steps through
its ``Merge``/``Switch``/``Identity``/``NextIteration`` plumbing and tracks dead tensors. A regular
frame says exactly what a TF2 ``While(cond, body)`` says, and TF2 loops have a faster native kernel
(two function calls per iteration, no deadness) and convert whole to an ONNX ``Loop``
(``control_flow_ops.py``). ``raise_frames`` rewrites each regular frame into one ``While`` node:

- loop variable ``i``: an ``Enter`` (``is_constant=False``) -> ``Merge(Enter, NextIteration)``
  -> ``Switch(Merge, LoopCond)``; ``Switch:1`` is the body's arg, ``Switch:0`` feeds the ``Exit``;
- invariant ``j``: an ``Enter`` with ``is_constant=True``: an arg the body returns unchanged;
- cond: the ops computing the ``LoopCond`` input from the ``Merge`` outputs and invariants;
- body: the ops computing the ``NextIteration`` inputs from the ``Switch:1`` outputs and invariants.

Each ``Exit`` becomes an ``Identity`` of the ``While``'s output under the Exit's name, so every
tensor name a signature uses still resolves. A frame is left as it is (``frames.py`` runs it)
where it is not this shape: nested frames (the inner one is raised, the outer then holds a
``While`` and may be raised in turn), ref loop variables, control edges from outside into the body,
other ``Switch``/``Merge`` ops (a cond inside the loop), or tensors leaving other than by ``Exit``.
Pure: the GraphDef and library given are never modified.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Mapping

from apis.tensorflow.core.framework import function_pb2, graph_pb2, node_def_pb2
from runtime import dtypes
from runtime.graph.op_def import parse_input
from runtime.kernels import lookup
from runtime.onnx.tensor_arrays import tensor_arrays_to_lists

logger = logging.getLogger(__name__)

_STRUCTURE = frozenset({"Enter", "Merge", "Switch", "NextIteration", "Exit", "LoopCond"})
_FORBIDDEN = frozenset({"RefEnter", "RefExit", "RefNextIteration", "RefMerge", "RefSwitch", "ControlTrigger"})
_MAX_ROUNDS = 8  # nested loops raise inside out, one level per round


class Irregular(Exception):
    """The frame is not a plain while loop: it stays a frame."""


def raise_frames(
    graph_def: graph_pb2.GraphDef, library: Mapping[str, function_pb2.FunctionDef]
) -> tuple[graph_pb2.GraphDef, dict[str, function_pb2.FunctionDef]]:
    """``graph_def`` with every regular TF1 frame a ``While`` node, and the library with its
    cond and body functions added (see the module docstring)."""
    library = dict(library)
    graph_def = tensor_arrays_to_lists(graph_def)
    return raise_in_rounds(graph_def, library, _frame_names, _raise_frame, "while loop frame"), library


def raise_in_rounds(graph_def, library: dict, candidates, raise_one, kind: str) -> graph_pb2.GraphDef:
    """``raise_one(graph_def, library, key)`` for each of ``candidates(graph_def)``, in rounds
    until one raises nothing (nested structures raise inside out, one level per round); a
    candidate that is ``Irregular`` stays as it is."""
    for _ in range(_MAX_ROUNDS):
        raised = False
        for key in candidates(graph_def):
            try:
                graph_def = raise_one(graph_def, library, key)
                raised = True
            except Irregular as why:
                logger.debug("%s %s stays as it is: %s", kind, key, why)
        if not raised:
            break
    return graph_def


def _frame_names(graph_def: graph_pb2.GraphDef) -> list[str]:
    return list(dict.fromkeys(n.attr["frame_name"].s.decode() for n in graph_def.node if n.op == "Enter"))


class _Loop:
    """One frame's nodes and their roles (raises Irregular where a role is unclear)."""

    def __init__(self, nodes: dict[str, node_def_pb2.NodeDef], consumers, frame_name: str):
        enters = [
            n for n in nodes.values() if n.op == "Enter" and n.attr["frame_name"].s.decode() == frame_name
        ]
        self.members = _members(enters, nodes, consumers, frame_name)
        by_op = collections.defaultdict(list)
        for name in self.members:
            by_op[nodes[name].op].append(nodes[name])
        if len(by_op["LoopCond"]) != 1:
            raise Irregular(f"{len(by_op['LoopCond'])} LoopCond ops")
        self.loop_cond = by_op["LoopCond"][0]
        self.invariants = [e for e in enters if e.attr["is_constant"].b]
        self.variables = []  # (Enter, Merge, Switch, NextIteration, Exit | None)
        for enter in (e for e in enters if not e.attr["is_constant"].b):
            self.variables.append(_variable(enter, nodes, consumers, self.loop_cond.name))
        structure = {n.name for var in self.variables for n in var if n is not None}
        structure |= {e.name for e in enters} | {self.loop_cond.name}
        for op in ("Merge", "Switch", "NextIteration", "Exit"):
            if any(n.name not in structure for n in by_op[op]):
                raise Irregular(f"a {op} that is not a loop variable's (a cond inside the loop)")
        self.structure = structure
        self.parallel_iterations = enters[0].attr["parallel_iterations"].i or 10


def _members(enters, nodes, consumers, frame_name: str) -> dict[str, None]:
    """Nodes reachable forwards from the frame's Enters, stopping after its Exits."""
    members = dict.fromkeys(e.name for e in enters)
    stack = list(members)
    while stack:
        node = nodes[stack.pop()]
        if node.op in _FORBIDDEN:
            raise Irregular(f"{node.op} {node.name}")
        if node.op == "Enter" and node.attr["frame_name"].s.decode() != frame_name:
            raise Irregular(f"a nested frame ({node.name})")
        if node.op == "Exit":
            continue
        for consumer in consumers[node.name]:
            if consumer not in members:
                members[consumer] = None
                stack.append(consumer)
    return members


def _variable(enter, nodes, consumers, loop_cond: str):
    """(Enter, Merge, Switch, NextIteration, Exit | None) of one loop variable."""
    merges = [nodes[c] for c in consumers[enter.name]]
    if len(merges) != 1 or merges[0].op != "Merge" or len(merges[0].input) != 2:
        raise Irregular(f"Enter {enter.name} does not feed one Merge")
    merge = merges[0]
    nexts = [nodes[parse_input(t)[0]] for t in merge.input if parse_input(t)[0] != enter.name]
    if len(nexts) != 1 or nexts[0].op != "NextIteration":
        raise Irregular(f"Merge {merge.name} does not take one NextIteration")
    switches = [nodes[c] for c in consumers[merge.name] if nodes[c].op == "Switch"]
    if len(switches) != 1 or parse_input(switches[0].input[1])[0] != loop_cond:
        raise Irregular(f"Merge {merge.name} does not feed one Switch on the LoopCond")
    switch = switches[0]
    exits = []
    for name in consumers[switch.name]:
        for text in nodes[name].input:
            source, index, control = parse_input(text)
            if source == switch.name and (control or index == 0):
                if nodes[name].op != "Exit" or control:
                    raise Irregular(f"{name} reads the false side of {switch.name}")
                exits.append(nodes[name])
    if len(exits) > 1 or any(len(e.input) != 1 for e in exits):
        raise Irregular(f"{switch.name} has {len(exits)} Exits, or one with control inputs")
    return enter, merge, switch, nexts[0], exits[0] if exits else None


class _Function:
    """Copies the frame ops one function needs, its args renamed (see ``_Loop``)."""

    def __init__(self, loop: _Loop, nodes, arg_of: dict[tuple[str, int], str]):
        self.loop, self.nodes, self.arg_of = loop, nodes, arg_of
        self.copied: dict[str, node_def_pb2.NodeDef] = {}

    def tensor(self, text: str) -> str:
        """The function's name for a frame tensor (an arg, or a copied node's output)."""
        name, index, _ = parse_input(text)
        arg = self.arg_of.get((name, index))
        if arg is not None:
            return arg
        if name in self.loop.structure or name not in self.loop.members:
            raise Irregular(f"{text} is read where it has no value")
        self._copy(name)
        return f"{name}:{index}"

    def _copy(self, name: str) -> None:
        stack = [name]
        while stack:
            node = self.nodes[stack.pop()]
            if node.name in self.copied:
                continue
            copy = node_def_pb2.NodeDef()
            copy.CopyFrom(node)
            del copy.input[:]
            self.copied[node.name] = copy
            for text in node.input:
                source, index, control = parse_input(text)
                if control and (source in self.loop.structure or (source, 0) in self.arg_of):
                    continue  # frame plumbing: orders nothing inside a function
                if control and source not in self.loop.members:
                    raise Irregular(f"control edge from outside the loop into {node.name}")
                if (source, index) in self.arg_of and not control:
                    copy.input.append(self.arg_of[(source, index)])
                    continue
                if source in self.loop.structure or not self._inside(source):
                    raise Irregular(f"{node.name} reads {text}")
                copy.input.append(text)
                stack.append(source)

    def _inside(self, name: str) -> bool:
        """A frame op, or a constant from outside (its copy means the same in the function)."""
        node = self.nodes[name]
        return name in self.loop.members or (node.op == "Const" and not node.input)

    def fdef(self, name: str, args: list[tuple[str, int]], rets: list[tuple[str, int, str]]):
        fdef = function_pb2.FunctionDef()
        fdef.signature.name = name
        for arg, dtype in args:
            fdef.signature.input_arg.add(name=arg, type=dtype)
        for ret_name, dtype, tensor in rets:
            fdef.signature.output_arg.add(name=ret_name, type=dtype)
            fdef.ret[ret_name] = tensor
        fdef.node_def.extend(self.copied.values())
        return fdef


def _consumers(graph_def: graph_pb2.GraphDef) -> dict[str, list[str]]:
    consumers: dict[str, list[str]] = collections.defaultdict(list)
    for node in graph_def.node:
        for text in node.input:
            consumers[parse_input(text)[0]].append(node.name)
    return consumers


def _pivots(nodes, consumers, args: dict) -> dict:
    """The body's ``Identity`` of each ``Switch:1``, read as the arg itself: TF2 bodies read their
    args directly, which is what the While converter recognizes (scans, counters)."""
    found = {}
    for (switch, index), arg in args.items():
        for name in consumers[switch]:
            node = nodes[name]
            if node.op == "Identity" and list(node.input) == [f"{switch}:{index}"]:
                found[(name, 0)] = arg
    return found


def stateful(node: node_def_pb2.NodeDef) -> bool:
    definition = lookup(node.op)
    return definition is None or definition.stateful


def fresh_name(base: str, taken) -> str:
    """``base``, or ``base_k`` for the first k that no name in ``taken`` has."""
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    return name


def _raise_frame(graph_def: graph_pb2.GraphDef, library: dict, frame_name: str) -> graph_pb2.GraphDef:
    """``graph_def`` with frame ``frame_name`` one While node (its functions added to ``library``)."""
    nodes = {n.name: n for n in graph_def.node}
    consumers = _consumers(graph_def)
    loop = _Loop(nodes, consumers, frame_name)
    entered = [var[0] for var in loop.variables] + loop.invariants
    types = [e.attr["T"].type for e in entered]
    if any(dtypes.is_ref(t) for t in types):
        raise Irregular("a ref loop variable")
    names = [f"loop_var_{k}" for k in range(len(entered))]
    invariant_args = {(e.name, 0): names[len(loop.variables) + j] for j, e in enumerate(loop.invariants)}
    cond = _Function(
        loop, nodes, {(v[1].name, 0): names[k] for k, v in enumerate(loop.variables)} | invariant_args
    )
    predicate = cond.tensor(loop.loop_cond.input[0])
    body_args = {(v[2].name, 1): names[k] for k, v in enumerate(loop.variables)} | invariant_args
    body = _Function(loop, nodes, body_args | _pivots(nodes, consumers, body_args))
    results = [body.tensor(var[3].input[0]) for var in loop.variables] + names[len(loop.variables) :]
    for var in loop.variables:
        for text in var[3].input[1:]:  # control inputs of a NextIteration: run every step
            body.tensor(text.lstrip("^"))
    outside = [
        m for m in loop.members if m not in loop.structure and m not in cond.copied and m not in body.copied
    ]
    if any(stateful(nodes[m]) for m in outside):  # a side effect nothing in the loop orders
        raise Irregular("a stateful op the loop's values do not need")
    base = frame_name.removesuffix("/while_context") or frame_name
    taken = set(nodes) | set(library)
    while_name = fresh_name(f"{base}/While", taken)
    cond_name, body_name = fresh_name(f"{base}_raised_cond", taken), fresh_name(f"{base}_raised_body", taken)
    args = list(zip(names, types))
    library[cond_name] = cond.fdef(cond_name, args, [("predicate", dtypes.DT_BOOL, predicate)])
    library[body_name] = body.fdef(
        body_name, args, [(f"out_{k}", t, r) for k, (t, r) in enumerate(zip(types, results))]
    )
    while_node = _while_node(while_name, entered, types, cond_name, body_name, loop.parallel_iterations)
    exits = {var[4].name: k for k, var in enumerate(loop.variables) if var[4] is not None}
    result = graph_pb2.GraphDef()
    result.CopyFrom(graph_def)
    del result.node[:]
    for node in graph_def.node:
        if node.name in exits:
            result.node.add(name=node.name, op="Identity", input=[f"{while_name}:{exits[node.name]}"])
            result.node[-1].attr["T"].type = types[exits[node.name]]
        elif node.name not in loop.members:
            result.node.append(node)
    result.node.append(while_node)
    logger.info("while loop frame %s raised to %s (%d ops left out)", frame_name, while_name, len(outside))
    return result


def _while_node(name: str, entered, types, cond: str, body: str, parallel: int) -> node_def_pb2.NodeDef:
    node = node_def_pb2.NodeDef(name=name, op="While")
    node.input.extend(e.input[0] for e in entered)
    controls = dict.fromkeys(t for e in entered for t in e.input[1:])
    node.input.extend(controls)
    node.attr["T"].list.type.extend(types)
    node.attr["cond"].func.name = cond
    node.attr["body"].func.name = body
    for _ in types:
        node.attr["output_shapes"].list.shape.add(unknown_rank=True)
    node.attr["parallel_iterations"].i = parallel
    return node
