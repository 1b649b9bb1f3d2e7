"""Raising TF1 conds into functional ``If`` nodes, before partitioning (and before ``raise_frames``).

A TF1 ``cond`` is dataflow: ``Switch`` ops route each value into the taken branch and a dead
tensor into the other, and ``Merge`` ops forward whichever value is alive. Every op downstream of
a ``Switch`` may see dead tensors, so the partitioner leaves them all native, and a while frame
holding a cond is not a plain loop. A regular cond says exactly what a TF2 ``If(pred, then, else)``
says, which runs as two function calls natively and converts to an ONNX ``If`` (``cond_ops.py``).
``raise_conds`` rewrites each regular cond into one ``If`` node:

- predicate: the tensor the cond's ``Switch`` ops share (TF1 routes it through an ``Identity``
  ``pred_id``; the pivot ``Switch(pred, pred)`` is one of the cond's Switches);
- branches: the ops reachable only from the Switches' true (``:1``) or false (``:0``) outputs; the
  pivots' ``switch_t``/``switch_f`` control edges order nothing inside a function and go;
- inputs: the values the Switches route, and outside tensors the branches read (outside constants
  are copied into the branches, where converters can read their values);
- outputs: each ``Merge`` joins one value of each branch; it becomes an ``Identity`` of the
  ``If``'s output under the Merge's name, so every tensor name a signature uses still resolves.

A cond is left as it is (the interpreter runs it) where it is not this shape: ref types, a nested
cond or loop still in dataflow form (inner conds are raised first, one level per round), a
``Merge`` whose ``value_index`` is read, tensors or control edges leaving a branch other than by
a ``Merge``, stateful ops its results do not need, or an input that depends on its own results.
Inside a TF1 while frame the raised ``If`` reads frame tensors, so it stays in the frame, which
``raise_frames`` can then raise whole. Pure: the GraphDef and library given are never modified.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Mapping

from apis.tensorflow.core.framework import function_pb2, graph_pb2, node_def_pb2
from runtime import dtypes
from runtime.graph import attrs as attr_lib
from runtime.graph.op_def import function_signature, op_signature, parse_input
from runtime.onnx.raise_frames import Irregular, fresh_name, raise_in_rounds, stateful

logger = logging.getLogger(__name__)

# Ops that cannot sit in a branch: frame plumbing, another cond's Switch/Merge not raised yet.
_DATAFLOW = frozenset(
    {"Switch", "RefSwitch", "Merge", "RefMerge", "Enter", "RefEnter", "Exit", "RefExit"}
    | {"NextIteration", "RefNextIteration", "LoopCond", "ControlTrigger"}
)


def raise_conds(
    graph_def: graph_pb2.GraphDef, library: Mapping[str, function_pb2.FunctionDef]
) -> tuple[graph_pb2.GraphDef, dict[str, function_pb2.FunctionDef]]:
    """``graph_def`` with every regular TF1 cond an ``If`` node, and the library with its branch
    functions added (see the module docstring)."""
    library = dict(library)
    return raise_in_rounds(graph_def, library, _predicates, _raise_cond, "cond on"), library


def _predicates(graph_def: graph_pb2.GraphDef) -> list[str]:
    """The predicate of each cond (loops' ``LoopCond`` Switches left out), in graph order."""
    nodes = {n.name: n for n in graph_def.node}
    found = (_resolve(nodes, n.input[1]) for n in graph_def.node if n.op == "Switch" and len(n.input) > 1)
    return list(
        dict.fromkeys(p for p in found if p is not None and nodes[parse_input(p)[0]].op != "LoopCond")
    )


def _resolve(nodes, text: str) -> str | None:
    """The tensor ``text`` forwards through ``Identity`` ops (TF1's ``pred_id``), as ``name:k``."""
    name, index, control = parse_input(text)
    while not control and name in nodes and nodes[name].op == "Identity":
        name, index, control = parse_input(nodes[name].input[0])
    return None if control or name not in nodes else f"{name}:{index}"


class _Graph:
    """A GraphDef's nodes with their data consumers per output and their control consumers."""

    def __init__(self, graph_def: graph_pb2.GraphDef):
        self.nodes = {n.name: n for n in graph_def.node}
        self.readers: dict[tuple[str, int], list[str]] = collections.defaultdict(list)
        self.controlled: dict[str, list[str]] = collections.defaultdict(list)
        self._consumers: dict[str, list[str]] = collections.defaultdict(list)
        for node in graph_def.node:
            for text in node.input:
                source, index, control = parse_input(text)
                self._consumers[source].append(node.name)
                if control:
                    self.controlled[source].append(node.name)
                else:
                    self.readers[(source, index)].append(node.name)

    def consumers(self, name: str) -> list[str]:
        """Every op reading ``name`` by a data or control edge."""
        return self._consumers[name]


class _Cond:
    """One cond's Switches, branch ops and Merges (raises Irregular where a role is unclear)."""

    def __init__(self, g: _Graph, predicate: str):
        self.g, self.predicate = g, predicate
        switches = [n for n in g.nodes.values() if n.op in ("Switch", "RefSwitch") and len(n.input) > 1]
        self.switches = {n.name: n for n in switches if _resolve(g.nodes, n.input[1]) == predicate}
        for switch in self.switches.values():
            if switch.op != "Switch" or dtypes.is_ref(switch.attr["T"].type):
                raise Irregular(f"a ref Switch {switch.name}")
            if g.controlled[switch.name] or len(switch.input) > 2:
                raise Irregular(f"control edges at Switch {switch.name}")
        merges: dict[str, None] = {}
        self.sides = [self._branch(0, merges), self._branch(1, merges)]  # false, true
        both = set(self.sides[0]) & set(self.sides[1])
        if both:
            raise Irregular(f"{sorted(both)[0]} is in both branches")
        if not merges:
            raise Irregular("no Merge")
        self.merges = [(g.nodes[m], self._joined(g.nodes[m])) for m in merges]

    def _branch(self, side: int, merges: dict) -> dict[str, None]:
        """Ops reachable from the Switches' ``side`` outputs, stopping at Merges (collected)."""
        members: dict[str, None] = {}
        stack = [c for s in self.switches for c in self.g.readers[(s, side)]]
        while stack:
            name = stack.pop()
            node = self.g.nodes[name]
            if node.op == "Merge":
                merges[name] = None
                continue
            if name in members:
                continue
            if node.op in _DATAFLOW:
                raise Irregular(f"{node.op} {name} in a branch (a nested cond or loop)")
            members[name] = None
            stack.extend(self.g.consumers(name))
        return members

    def side_of(self, text: str) -> int | None:
        """0 or 1 where tensor ``text`` belongs to the false or true branch, else None."""
        name, index, _ = parse_input(text)
        if name in self.switches:
            return index
        return next((k for k in (0, 1) if name in self.sides[k]), None)

    def _joined(self, merge: node_def_pb2.NodeDef) -> list[str]:
        """The Merge's (false, true) inputs."""
        if len(merge.input) != 2 or merge.input[0].startswith("^") or merge.input[1].startswith("^"):
            raise Irregular(f"Merge {merge.name} does not join two values")
        if self.g.readers[(merge.name, 1)] or self.g.controlled[merge.name]:
            raise Irregular(f"the value_index of {merge.name}, or a control edge from it, is read")
        if dtypes.is_ref(merge.attr["T"].type):
            raise Irregular(f"a ref Merge {merge.name}")
        sides = [self.side_of(t) for t in merge.input]
        if sorted(sides, key=str) != [0, 1]:
            raise Irregular(f"Merge {merge.name} does not join one value of each branch")
        return list(merge.input) if sides == [0, 1] else list(reversed(merge.input))


class _Inputs:
    """The If's inputs, shared by both branches: outer tensor -> arg name, in order of first use."""

    def __init__(self, cond: _Cond, library: Mapping):
        self.cond, self.library = cond, library
        self.args: dict[str, str] = {}
        self.types: list[int] = []
        self.controls: dict[str, None] = {}

    def arg(self, outer: str) -> str:
        if outer not in self.args:
            self.args[outer] = f"input_{len(self.args)}"
            self.types.append(_dtype(self.cond.g.nodes, outer, self.library))
        return self.args[outer]


class _Branch:
    """Copies the ops one branch's results need into a function body (see ``_Cond``)."""

    def __init__(self, cond: _Cond, side: int, inputs: _Inputs):
        self.cond, self.side, self.inputs = cond, side, inputs
        self.members = cond.sides[side]
        self.copied: dict[str, node_def_pb2.NodeDef] = {}

    def tensor(self, text: str, pending: list[str] | None = None) -> str:
        """The function's name for a tensor the branch reads (an arg, or a copied node's output);
        a node still to copy goes on ``pending`` where given, else is copied now."""
        name, index, _ = parse_input(text)
        node = self.cond.g.nodes[name]
        if name in self.cond.switches:
            if index != self.side:
                raise Irregular(f"a branch reads the other side of {name}")
            return self.inputs.arg(_canonical(node.input[0]))
        if self.cond.side_of(text) == 1 - self.side:
            raise Irregular(f"{text} is read from the other branch")
        if name in self.members or (node.op == "Const" and not node.input):
            if pending is None:
                self._copy(name)
            else:
                pending.append(name)
            return f"{name}:{index}"
        return self.inputs.arg(f"{name}:{index}")

    def _copy(self, name: str) -> None:
        pending = [name]
        while pending:
            node = self.cond.g.nodes[pending.pop()]
            if node.name in self.copied:
                continue
            copy = node_def_pb2.NodeDef()
            copy.CopyFrom(node)
            del copy.input[:]
            self.copied[node.name] = copy
            for text in node.input:
                source, _, control = parse_input(text)
                if not control:
                    copy.input.append(self.tensor(text, pending))
                elif self._pivot(source):
                    continue  # the branch being taken: implied inside the function
                elif source in self.members:
                    pending.append(source)
                    copy.input.append(text)
                elif source in self.cond.switches or self.cond.side_of(source) is not None:
                    raise Irregular(f"control edge {text} into {node.name}")
                else:
                    self.inputs.controls[text] = None  # ordered before the whole If

    def _pivot(self, name: str) -> bool:
        """An ``Identity`` of one of the cond's Switch outputs on this side (``switch_t``)."""
        node = self.cond.g.nodes[name]
        if name not in self.members or node.op != "Identity":
            return False
        source, index, _ = parse_input(node.input[0])
        return source in self.cond.switches and index == self.side

    def is_pivot(self, name: str) -> bool:
        """A pivot only control edges into this branch read: it goes with the Switches."""
        g = self.cond.g
        if not self._pivot(name) or g.readers[(name, 0)]:
            return False
        return all(c in self.members for c in g.controlled[name])

    def fdef(self, name: str, rets: list[tuple[str, int]]) -> function_pb2.FunctionDef:
        fdef = function_pb2.FunctionDef()
        fdef.signature.name = name
        for arg, dtype in zip(self.inputs.args.values(), self.inputs.types):
            fdef.signature.input_arg.add(name=arg, type=dtype)
        for k, (tensor, dtype) in enumerate(rets):
            fdef.signature.output_arg.add(name=f"output_{k}", type=dtype)
            fdef.ret[f"output_{k}"] = tensor
        fdef.node_def.extend(self.copied.values())
        return fdef


def _canonical(text: str) -> str:
    name, index, _ = parse_input(text)
    return f"{name}:{index}"


def _dtype(nodes, tensor: str, library: Mapping) -> int:
    """The dtype of ``tensor`` (``name:k``) from its op's signature and attrs."""
    name, index, _ = parse_input(tensor)
    node = nodes[name]
    signature = op_signature(node.op)
    if signature is None and node.op in library:
        signature = function_signature(library[node.op])
    if signature is None:
        raise Irregular(f"the dtype of {tensor} is unknown")
    attrs = attr_lib.decode_attrs(node.attr)
    found = [t for spec in signature.outputs for t in spec.dtypes(attrs)]
    if index >= len(found) or found[index] is None or dtypes.is_ref(found[index]):
        raise Irregular(f"the dtype of {tensor} is unknown or a ref")
    return found[index]


def _downstream(g: _Graph, roots) -> set[str]:
    """Ops reachable from ``roots`` (not through ``NextIteration``: a loop's back edge)."""
    seen, stack = set(), list(roots)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if g.nodes[name].op != "NextIteration":
            stack.extend(g.consumers(name))
    return seen


def _raise_cond(graph_def: graph_pb2.GraphDef, library: dict, predicate: str) -> graph_pb2.GraphDef:
    """``graph_def`` with the cond on ``predicate`` one If node (its branches added to ``library``)."""
    g = _Graph(graph_def)
    cond = _Cond(g, predicate)
    inputs = _Inputs(cond, library)
    branches = [_Branch(cond, side, inputs) for side in (0, 1)]
    rets = [[branches[k].tensor(joined[k]) for k in (0, 1)] for _, joined in cond.merges]
    for branch in branches:
        left = [m for m in branch.members if m not in branch.copied and not branch.is_pivot(m)]
        if left:  # a side effect, or a value someone may fetch by name
            raise Irregular(f"{left[0]} is in a branch and its results do not need it")
    sources = [parse_input(t)[0] for t in [predicate, *inputs.args, *inputs.controls]]
    if _downstream(g, [m.name for m, _ in cond.merges]).intersection(sources):
        raise Irregular("an input depends on the cond's own results")
    scope = cond.merges[0][0].name.rpartition("/")[0] or "cond"
    taken = set(g.nodes) | set(library)
    if_name = fresh_name(f"{scope}/If", taken)
    names = [fresh_name(f"{scope.replace('/', '_')}_raised_{k}", taken) for k in ("else", "then")]
    types = [m.attr["T"].type for m, _ in cond.merges]
    for k in (0, 1):
        library[names[k]] = branches[k].fdef(names[k], [(r[k], t) for r, t in zip(rets, types)])
    stateless = not any(stateful(n) for b in branches for n in b.copied.values())
    node = _if_node(if_name, "StatelessIf" if stateless else "If", predicate, inputs, types, names)
    removed = set(cond.switches) | set(cond.sides[0]) | set(cond.sides[1])
    removed |= _unread_predicates(g, cond, removed)
    outputs = {m.name: k for k, (m, _) in enumerate(cond.merges)}
    result = graph_pb2.GraphDef()
    result.CopyFrom(graph_def)
    del result.node[:]
    for original in graph_def.node:
        if original.name in outputs:
            result.node.add(name=original.name, op="Identity", input=[f"{if_name}:{outputs[original.name]}"])
            result.node[-1].attr["T"].type = original.attr["T"].type
        elif original.name not in removed:
            result.node.append(original)
    result.node.append(node)
    logger.debug("cond on %s raised to %s (%d outputs)", predicate, if_name, len(types))
    return result


def _unread_predicates(g: _Graph, cond: _Cond, removed: set[str]) -> set[str]:
    """The ``pred_id`` Identity ops only the removed Switches read."""
    found = set()
    for switch in cond.switches.values():
        name = parse_input(switch.input[1])[0]
        if g.nodes[name].op == "Identity" and all(c in removed for c in g.consumers(name)):
            found.add(name)
    return found


def _if_node(name: str, op: str, predicate: str, inputs: _Inputs, types, branches) -> node_def_pb2.NodeDef:
    node = node_def_pb2.NodeDef(name=name, op=op)
    node.input.extend([predicate, *inputs.args, *inputs.controls])
    node.attr["Tcond"].type = dtypes.DT_BOOL
    node.attr["Tin"].list.type.extend(inputs.types)
    node.attr["Tout"].list.type.extend(types)
    node.attr["else_branch"].func.name = branches[0]
    node.attr["then_branch"].func.name = branches[1]
    for _ in types:
        node.attr["output_shapes"].list.shape.add(unknown_rank=True)
    return node
