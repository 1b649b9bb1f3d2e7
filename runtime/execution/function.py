"""Library functions: ``FunctionDef`` instantiation and calls.

``instantiate`` turns a FunctionDef plus the caller's attrs into a ``FunctionBody``: a Graph in
which each input arg is an ``_Arg`` node named after the arg, attr placeholders are replaced by
the caller's values, and every ``node:out_arg:i`` reference is rewritten to the flat output index
``node:k`` (using the op signature, or the called function's signature for nested calls). The
body shares its parent's function library, so nested calls resolve.

``FunctionLibraryRuntime`` (one per Session) instantiates each (function, attrs) once, builds its
plan (fetching the rets, running the control rets and every stateful op, as TF's function
runtime keeps them), and runs it with the Session's resources. Every function a node names
through a func-valued attr (``PartitionedCall``'s ``f``, ``If``'s branches) is instantiated when
the caller's plan is built, so unsupported ops deep inside TF2 functions are reported up front.
Thread-safe: instantiation takes a lock; plans are immutable.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from apis.tensorflow.core.framework import attr_value_pb2, function_pb2, graph_pb2, node_def_pb2
from runtime import errors
from runtime.execution.interpreter import instrument, run_plan
from runtime.execution.plan import Plan, build_plan
from runtime.graph import attrs as attr_lib
from runtime.graph.attrs import FuncAttr
from runtime.graph.graph import Graph, Operation, Tensor
from runtime.graph.op_def import function_signature, op_signature
from runtime.kernels import lookup

# Set by Session.run while a run has a deadline or traces: (deadline | None, trace list | None).
RUN_STATE: contextvars.ContextVar[tuple | None] = contextvars.ContextVar("run_state", default=None)


@dataclass(frozen=True)
class FunctionBody:
    name: str
    graph: Graph
    args: tuple[Tensor, ...]
    rets: tuple[Tensor, ...]
    control_rets: tuple[Operation, ...]


def _call_attrs(
    fdef: function_pb2.FunctionDef, attrs: Mapping[str, attr_value_pb2.AttrValue]
) -> dict[str, attr_value_pb2.AttrValue]:
    """The function's own attrs: the caller's values, else the signature's defaults."""
    result = {}
    for attr in fdef.signature.attr:
        if attr.name in attrs:
            result[attr.name] = attrs[attr.name]
        elif attr.HasField("default_value"):
            result[attr.name] = attr.default_value
    return result


def _substitute(value: attr_value_pb2.AttrValue, attrs: Mapping, where: str) -> None:
    kind = value.WhichOneof("value")
    if kind == "placeholder":
        if value.placeholder not in attrs:
            raise errors.InvalidArgumentError(
                None, None, f"Attr {value.placeholder} is not found from {where}"
            )
        value.CopyFrom(attrs[value.placeholder])
    elif kind == "func":
        for inner in value.func.attr.values():
            _substitute(inner, attrs, where)
    elif kind == "list":
        for func in value.list.func:
            for inner in func.attr.values():
                _substitute(inner, attrs, where)


def _output_offsets(node: node_def_pb2.NodeDef, library: Mapping) -> dict[str, int] | None:
    fdef = library.get(node.op)
    signature = function_signature(fdef) if fdef is not None else op_signature(node.op)
    if signature is None:
        return None
    attrs = attr_lib.decode_attrs(node.attr)
    offsets, start = {}, 0
    for arg in signature.outputs:
        offsets[arg.name] = start
        start += arg.size(attrs)
    return offsets


def _body_graph_def(fdef: function_pb2.FunctionDef, own_attrs: Mapping) -> graph_pb2.GraphDef:
    """``_Arg`` nodes for the inputs, then the body's nodes with placeholders substituted."""
    name = fdef.signature.name
    graph_def = graph_pb2.GraphDef()
    for index, arg in enumerate(fdef.signature.input_arg):
        if arg.number_attr or arg.type_list_attr:
            raise errors.UnimplementedError(
                None, None, f"Function {name}: list input arg '{arg.name}' is not supported"
            )
        node = graph_def.node.add(name=arg.name, op="_Arg")
        node.attr["index"].i = index
        node.attr["T"].type = arg.type or (own_attrs[arg.type_attr].type if arg.type_attr in own_attrs else 0)
    for body_node in fdef.node_def:
        node = graph_def.node.add()
        node.CopyFrom(body_node)
        for value in node.attr.values():
            _substitute(value, own_attrs, f"function {name}")
    return graph_def


def _flattener(name: str, graph_def: graph_pb2.GraphDef, library: Mapping) -> Callable[[str], str]:
    """Rewrites a body input ``node:out_arg:i`` as ``node:k``, k the flat output index."""
    offsets = {n.name: _output_offsets(n, library) for n in graph_def.node if n.op != "_Arg"}

    def flat(text: str) -> str:
        parts = text.split(":")
        if text.startswith("^") or len(parts) != 3:
            return text
        node_name, out_arg, index = parts
        table = offsets.get(node_name)
        if table is not None and out_arg in table:
            return f"{node_name}:{table[out_arg] + int(index)}"
        if node_name in offsets and table is None:  # an op TF does not define: trust the index
            return f"{node_name}:{index}"
        raise errors.InvalidArgumentError(None, None, f"Function {name}: cannot resolve input '{text}'")

    return flat


def instantiate(
    fdef: function_pb2.FunctionDef,
    attrs: Mapping[str, attr_value_pb2.AttrValue],
    library: dict[str, function_pb2.FunctionDef],
) -> FunctionBody:
    """The body of ``fdef`` called with ``attrs``, as a Graph sharing ``library``."""
    signature = fdef.signature
    graph_def = _body_graph_def(fdef, _call_attrs(fdef, attrs))
    flat = _flattener(signature.name, graph_def, library)
    for node in graph_def.node:
        node.input[:] = [flat(t) for t in node.input]
    graph = Graph(functions=library)
    graph.import_graph_def(graph_def)
    graph.finalize()
    rets = [flat(fdef.ret[arg.name]) for arg in signature.output_arg]
    return FunctionBody(
        name=signature.name,
        graph=graph,
        args=tuple(graph.get_tensor_by_name(f"{a.name}:0") for a in signature.input_arg),
        rets=tuple(graph.get_tensor_by_name(r if ":" in r else f"{r}:0") for r in rets),
        control_rets=tuple(
            graph.get_operation_by_name(fdef.control_ret[n]) for n in signature.control_output
        ),
    )


class _Instance:
    """An instantiated function with its plan: calling it runs the body."""

    def __init__(self, body: FunctionBody, plan: Plan):
        self.body = body
        self.plan = plan

    def __call__(self, *args) -> tuple:
        if len(args) != len(self.plan.feed_slots):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Function {self.body.name} expects {len(self.plan.feed_slots)} arguments, got {len(args)}",
            )
        state = RUN_STATE.get()
        if state is None:
            return tuple(run_plan(self.plan, args))
        deadline, trace = state
        steps = instrument(self.plan, trace) if trace is not None else None
        return tuple(run_plan(self.plan, args, steps, deadline))


class MapItems:
    """A map loop's items: its body run up to them, its constants fed as ``consts`` (computed
    once). Calling it runs one step; ``plan`` lets ``runtime.execution.map_batching`` run all at once."""

    def __init__(self, instance: _Instance, consts: tuple):
        self.instance, self.plan, self.consts = instance, instance.plan, consts

    def __call__(self, *args) -> tuple:
        return self.instance(*args, *self.consts)


class FunctionLibraryRuntime:
    """Instantiates and calls a graph's library functions for one Session."""

    def __init__(self, library: dict[str, function_pb2.FunctionDef], resources):
        self._library = library
        self._resources = resources
        self._instances: dict[tuple, _Instance | None] = {}
        self._by_attr: dict[int, tuple[FuncAttr, Callable]] = {}
        self._lock = threading.RLock()

    def instance(self, name: str, attrs: Mapping[str, attr_value_pb2.AttrValue]) -> Callable:
        """A callable ``(*args) -> tuple`` running function ``name`` with ``attrs``."""
        fdef = self._library.get(name)
        if fdef is None:
            raise errors.NotFoundError(None, None, f"Function {name} is not defined.")
        own = _call_attrs(fdef, attrs)
        key = (
            name,
            tuple(sorted((k, v.SerializeToString(deterministic=True)) for k, v in own.items())),
        )
        with self._lock:
            if key in self._instances:
                found = self._instances[key]
                # None: being instantiated (a recursive function); resolve at call time.
                return found if found is not None else (lambda *a: self._instances[key](*a))
            self._instances[key] = None
            try:
                body = instantiate(fdef, attrs, self._library)
                self._instances[key] = _Instance(body, self._plan(body))
            except BaseException:
                del self._instances[key]
                raise
            return self._instances[key]

    def _plan(self, body: FunctionBody) -> Plan:
        stateful = [
            op for op in body.graph.get_operations() if (k := lookup(op.type)) is not None and k.stateful
        ]
        targets = list(dict.fromkeys([*body.control_rets, *stateful]))
        return build_plan(body.args, body.rets, targets, self._resources, self)

    def call_kernel(self, op: Operation) -> Callable:
        """The kernel of a node whose op type names a library function."""
        return self.instance(op.type, op.node_def.attr)

    def prepare(self, func: FuncAttr) -> None:
        """Instantiates ``func`` now (plan time), so ``call`` only looks it up."""
        if id(func) not in self._by_attr:
            attrs = func.proto.attr if func.proto is not None else {}
            instance = self.instance(func.name, attrs)
            with self._lock:
                self._by_attr[id(func)] = (func, instance)

    def map_loop(self, cond: FuncAttr, body: FuncAttr):
        """``cond``/``body`` of a While as a ``runtime.execution.map_loops.MapLoop``, or None (not map-shaped)."""
        from runtime.execution import map_loops  # imported late: map_loops imports this module

        instances = []
        for func in (cond, body):
            self.prepare(func)
            instances.append(self._by_attr[id(func)][1])
        if not all(isinstance(i, _Instance) for i in instances):
            return None  # a recursive function still being instantiated
        fn_body = instances[1].body

        def plan_items(tensors):
            return self._items_instance(fn_body, tensors)

        return map_loops.analyze(instances[0].body, fn_body, plan_items)

    def _items_instance(self, body: FunctionBody, tensors: Sequence[Tensor]) -> MapItems:
        """``body`` up to ``tensors`` as ``(*args) -> tuple``, its constants computed once: a map
        loop runs the body per item, and a Const step per item costs as much as a small kernel."""
        consts = [
            op.outputs[0]
            for op in body.graph.get_operations()
            if op.type == "Const" and not op.control_inputs and op.outputs[0] not in tensors
        ]
        values = tuple(run_plan(build_plan([], consts, [], self._resources, self), ()))
        instance = _Instance(body, build_plan([*body.args, *consts], tensors, [], self._resources, self))
        return MapItems(instance, values)

    def call(self, func: FuncAttr, args: Sequence) -> tuple:
        """Runs the function a func-valued attr names (kernels: ``ctx.functions.call(f, args)``)."""
        entry = self._by_attr.get(id(func))
        if entry is None:
            self.prepare(func)
            entry = self._by_attr[id(func)]
        return entry[1](*args)
