"""Which signatures of a MetaGraphDef can run here, decided at load rather than at request time.

For each signature, the op types its outputs need are those of every node reached backwards from
its output tensors through data inputs and control inputs (a tensor the signature feeds cuts its
producer off, as in ``Session.run``), following each op that names a library function, either as
its op type (a function call) or through a func-valued attr (``PartitionedCall``'s ``f``, ``If``'s
branches, ``While``'s cond and body, ``Case``'s branches, ...). Inside a function body the roots are
what TF's function runtime runs: the rets, the control rets and every stateful op (registry data)
or forbidden op.

An op type is *missing* when it has no numpy kernel and names no library function, or when it is
*forbidden*: ``PyFunc``, ``PyFuncStateless`` and ``EagerPyFunc`` call Python code the exporting
process registered, which a model server must never run (and cannot: the code is not in the
SavedModel). A signature with missing ops gets one ``UnavailableSignatureError`` listing them all
with counts, in the planner's words ("Op types not supported: PyFunc (x1), Foo (x3)"). The same
walk from the restore op and the init op decides whether a model can load at all.

Pure functions over protos: no Session, no threads. The op-type walk (``needed_op_types``) is also
what ``runtime/ops_table.py`` uses to say which ops the conformance models exercise.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Mapping

from apis.tensorflow.core.framework import function_pb2, graph_pb2, node_def_pb2
from apis.tensorflow.core.protobuf import meta_graph_pb2
from runtime import errors
from runtime.kernels import registry

FORBIDDEN_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
INIT_OP_SIGNATURE_KEY = "__saved_model_init_op"


class UnavailableSignatureError(errors.UnimplementedError):
    """A signature (or the init/restore op) needs op types this runtime cannot or must not run."""

    def __init__(self, what: str, counts: collections.Counter):
        listed = ", ".join(f"{t} (x{n})" for t, n in sorted(counts.items()))
        super().__init__(None, None, f"{what} cannot run here. Op types not supported: {listed}")
        self.what = what
        self.counts = counts

    def __reduce__(self):
        # copy.copy() and pickle rebuild it from (what, counts): each request raises a fresh copy,
        # since re-raising one shared instance would grow its traceback without bound.
        return type(self), (self.what, self.counts)


def has_kernel(op_type: str) -> bool:
    """Whether the numpy registry runs ``op_type``: forbidden ops never, whatever is registered."""
    return op_type not in FORBIDDEN_OPS and registry.registered(op_type)


def _is_stateful(op_type: str) -> bool:
    return op_type in FORBIDDEN_OPS or registry.stateful(op_type)


def _node_name(ref: str) -> str:
    return ref[1:] if ref.startswith("^") else ref.split(":", 1)[0]


def _tensor_name(ref: str) -> str:
    return ref if ":" in ref else f"{ref}:0"


def called_functions(node: node_def_pb2.NodeDef, library: Mapping) -> list[str]:
    """Library functions ``node`` runs: its op type, and every func-valued attr."""
    names = [node.op] if node.op in library else []
    attrs = node.attr
    for key in attrs:  # (by key: iterating the map's values costs twice as much)
        value = attrs[key]
        kind = value.WhichOneof("value")
        if kind == "func":
            names.append(value.func.name)
        elif kind == "list" and value.list.func:
            names += [f.name for f in value.list.func]
    return [n for n in names if n in library]


class GraphIndex:
    """A GraphDef's nodes and functions by name, built once and shared by every walk over it:
    what each function body reaches is worked out once (``function_reach``), however many
    signatures, restore and init ops call it."""

    def __init__(self, graph_def: graph_pb2.GraphDef):
        self.nodes = {n.name: n for n in graph_def.node}
        self.library: dict[str, function_pb2.FunctionDef] = {
            f.signature.name: f for f in graph_def.library.function
        }
        self._reached: dict[str, tuple[collections.Counter, list[str]]] = {}

    def function_reach(self, name: str) -> tuple[collections.Counter, list[str]]:
        """The op types (with node counts) a function body runs, from the roots TF's function
        runtime runs (its rets, control rets and stateful ops), and the functions it calls."""
        if name not in self._reached:
            fdef = self.library[name]
            nodes = {n.name: n for n in fdef.node_def}
            roots = [_node_name(r) for r in fdef.ret.values()] + list(fdef.control_ret.values())
            roots += [n.name for n in fdef.node_def if _is_stateful(n.op)]
            self._reached[name] = reach(nodes, roots, lambda ref: False, self.library)
        return self._reached[name]


def _index(graph: graph_pb2.GraphDef | GraphIndex) -> GraphIndex:
    return graph if isinstance(graph, GraphIndex) else GraphIndex(graph)


def reach(
    nodes: Mapping[str, node_def_pb2.NodeDef],
    roots: Iterable[str],
    cut: Callable[[str], bool],
    library: Mapping,
) -> tuple[collections.Counter, list[str]]:
    """(op type -> count of the nodes reached from ``roots`` (node names) through data and
    control inputs, the library functions they call): ``cut(input ref)`` stops at feeds."""
    counts: collections.Counter = collections.Counter()
    called: dict[str, None] = {}
    seen: set[str] = set()
    stack = [r for r in roots if r in nodes]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        node = nodes[name]
        counts[node.op] += 1
        called.update(dict.fromkeys(called_functions(node, library)))
        for ref in node.input:
            if not cut(ref):
                source = _node_name(ref)
                if source in nodes and source not in seen:
                    stack.append(source)
    return counts, list(called)


def _walk(index: GraphIndex, roots: Iterable[str], cut: Callable[[str], bool]) -> collections.Counter:
    """What ``reach`` finds from ``roots`` in the graph, and in every function called from there,
    each function counted once."""
    counts, pending = reach(index.nodes, roots, cut, index.library)
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name not in seen:
            seen.add(name)
            body_counts, calls = index.function_reach(name)
            counts.update(body_counts)
            pending += calls
    return counts


def needed_op_types(
    graph: graph_pb2.GraphDef | GraphIndex,
    fetches: Iterable[str],
    feeds: Iterable[str] = (),
) -> collections.Counter:
    """Op type -> node count of everything ``fetches`` (tensor or op names) need, functions included.

    ``graph``: a GraphDef, or its ``GraphIndex`` when several walks share one graph."""
    index = _index(graph)
    fed = {_tensor_name(t) for t in feeds}
    return _walk(index, [_node_name(f) for f in fetches], cut=lambda ref: _tensor_name(ref) in fed)


def missing_op_types(
    graph: graph_pb2.GraphDef | GraphIndex, fetches: Iterable[str], feeds: Iterable[str] = ()
) -> collections.Counter:
    """The needed op types that are forbidden or have neither a kernel nor a library function."""
    index = _index(graph)
    return collections.Counter(
        {
            op: n
            for op, n in needed_op_types(index, fetches, feeds).items()
            if op in FORBIDDEN_OPS or (not has_kernel(op) and op not in index.library)
        }
    )


def unavailable_signatures(
    meta_graph_def: meta_graph_pb2.MetaGraphDef, index: GraphIndex | None = None
) -> dict[str, UnavailableSignatureError]:
    """Signature key -> its error, for every serving signature that needs a missing op type.
    ``index``: the graph's ``GraphIndex`` where the caller walks it more than once."""
    result = {}
    index = index or GraphIndex(meta_graph_def.graph_def)
    for key, signature in sorted(meta_graph_def.signature_def.items()):
        if key == INIT_OP_SIGNATURE_KEY:
            continue
        fetches = [info.name for info in signature.outputs.values() if info.name]
        feeds = [info.name for info in signature.inputs.values() if info.name]
        missing = missing_op_types(index, fetches, feeds)
        if missing:
            result[key] = UnavailableSignatureError(f"Signature '{key}'", missing)
    return result


def check_load_ops(
    meta_graph_def: meta_graph_pb2.MetaGraphDef,
    ops: Mapping[str, tuple[str, list[str]]],
    index: GraphIndex | None = None,
) -> None:
    """Raises for the first of ``ops`` (what -> (op name, fed tensor names)) needing a missing op."""
    index = index or GraphIndex(meta_graph_def.graph_def)
    for what, (name, feeds) in ops.items():
        missing = missing_op_types(index, [name], feeds)
        if missing:
            raise UnavailableSignatureError(f"The {what} op '{_node_name(name)}'", missing)


def check_some_signature_runs(
    meta_graph_def: meta_graph_pb2.MetaGraphDef, unavailable: Mapping[str, errors.OpError], export_dir: str
) -> None:
    """UnimplementedError when the model has serving signatures and none of them can run."""
    keys = [k for k in meta_graph_def.signature_def if k != INIT_OP_SIGNATURE_KEY]
    if not keys or any(k not in unavailable for k in keys):
        return
    if len(keys) == 1:
        raise unavailable[keys[0]]
    listed = "; ".join(unavailable[k].message for k in sorted(keys))
    raise errors.UnimplementedError(None, None, f"No signature of {export_dir} can run here: {listed}")
