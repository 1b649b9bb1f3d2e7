"""Library functions at run time: ``FunctionLibraryRuntime`` instantiates and calls them.

``FunctionLibraryRuntime`` (one per Session) instantiates each (function, attrs) once
(``runtime/graph/function_def.py`` makes the body), builds its plan (fetching the rets, running
the control rets and every stateful op, as TF's function runtime keeps them), and runs it with the
Session's resources. Every function a node names through a func-valued attr (``PartitionedCall``'s
``f``, ``If``'s branches) is instantiated when the caller's plan is built, so unsupported ops deep
inside TF2 functions are reported up front. A ``While`` whose cond and body have ``map_fn``'s shape
runs item by item (``runtime/execution/map_loops.py``).
Thread-safe: instantiation takes a lock; plans are immutable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

from apis.tensorflow.core.framework import attr_value_pb2, function_pb2
from runtime import errors
from runtime.execution.interpreter import RUN_STATE, instrument, run_plan
from runtime.execution.plan import Plan
from runtime.execution.planner import build_plan
from runtime.graph.attrs import FuncAttr
from runtime.graph.function_def import FunctionBody, call_attrs, instantiate
from runtime.graph.graph import Operation, Tensor
from runtime.kernels import lookup


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
        own = call_attrs(fdef, attrs)
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
        instances = []
        for func in (cond, body):
            self.prepare(func)
            instances.append(self._by_attr[id(func)][1])
        if not all(isinstance(i, _Instance) for i in instances):
            return None  # a recursive function still being instantiated
        fn_body = instances[1].body

        def plan_items(tensors):
            return self._items_instance(fn_body, tensors)

        from runtime.execution import map_loops  # (with the TensorList kernels: only a While needs it)

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
