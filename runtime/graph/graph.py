"""``Graph``, ``Operation`` and ``Tensor``: a GraphDef in memory, with ``tf.Graph``'s lookups.

A Graph is built by importing GraphDefs (``Graph.from_graph_def``, ``import_graph_def``,
``import_meta_graph``); there is no op-building API. NodeDefs are kept as given, so
``as_graph_def`` round-trips them. Everything derived from a node (inputs, attrs, outputs) is
computed lazily and cached on its ``Operation``.

Outputs: without OpDefs at run time, an op's outputs come from ``runtime/graph/op_signatures.py`` (every
TF op's args), the function library (an op named after a function), or its ``_output_shapes``
attr. For an op none of these describe (a custom op), the count is the highest output index any
consumer or lookup has asked for, and the kernel decides at run time.

Thread-safety: lookups are safe from any thread; imports and collection changes take a lock and
bump ``version`` (Sessions key their cached plans on it). ``finalize()`` makes the graph
read-only, as TF does before serving it.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator, Mapping

from apis.tensorflow.core.framework import attr_value_pb2, function_pb2, graph_pb2, node_def_pb2, versions_pb2
from apis.tensorflow.core.protobuf import meta_graph_pb2
from runtime import dtypes, errors
from runtime.graph import attrs as attr_lib
from runtime.graph import graph_check, node_check
from runtime.graph.device import DeviceSpec
from runtime.graph.op_def import OpSignature, function_signature, op_signature, parse_input
from runtime.tensor_util import shape_from_proto

InvalidGraphError = graph_check.InvalidGraphError
_TENSOR_FORM = ' Tensor names must be of the form "<op_name>:<output_index>".'


class DecodedAttrs(Mapping):
    """A NodeDef's attrs, decoded lazily and once each: a plan asks only for what its kernel
    names, so big attrs nobody reads (``_output_shapes``, unused tensors) stay undecoded. An
    AttrValue with no value set counts as absent (the kernel's default applies): what a
    ``node.attr[name]`` read leaves in a NodeDef, or an export with its default attrs stripped."""

    __slots__ = ("_protos", "_decoded")

    def __init__(self, protos: Mapping[str, attr_value_pb2.AttrValue]):
        self._protos = protos
        self._decoded: dict[str, object] = {}

    def __getitem__(self, name: str):
        try:
            return self._decoded[name]
        except KeyError:
            if name not in self:
                raise
        return self._decoded.setdefault(name, attr_lib.decode(self._protos[name]))

    def __contains__(self, name: object) -> bool:
        protos = self._protos
        return name in protos and protos[name].WhichOneof("value") is not None

    def __iter__(self) -> Iterator[str]:
        return (name for name in self._protos if name in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class Tensor:
    """One output of an Operation; interned, so it is hashable and comparable by identity."""

    __slots__ = ("op", "value_index", "name")

    def __init__(self, op: Operation, value_index: int):
        self.op = op
        self.value_index = value_index
        self.name = f"{op.name}:{value_index}"

    @property
    def graph(self) -> Graph:
        return self.op.graph

    @property
    def dtype(self) -> int | None:
        """The ``DataType`` where the op's signature or attrs tell it, else None."""
        return self.op._output_dtype(self.value_index)

    @property
    def shape(self) -> tuple[int | None, ...] | None:
        """Static shape: a tuple (None for unknown dims), or None for an unknown rank."""
        return self.op._output_shape(self.value_index)

    def get_shape(self) -> tuple[int | None, ...] | None:
        return self.shape

    def consumers(self) -> list[Operation]:
        return [op for op in self.graph.get_operations() if self in op.inputs]

    def __repr__(self) -> str:
        dtype = self.dtype
        shown = "<unknown>" if self.shape is None else self.shape
        return f"<Tensor '{self.name}' shape={shown} dtype={dtypes.name(dtype) if dtype else None}>"


class Operation:
    """One node of a Graph: its NodeDef and what is derived from it, lazily."""

    def __init__(self, graph: Graph, node_def: node_def_pb2.NodeDef):
        self.graph = graph
        self.node_def = node_def
        self.name = node_def.name
        self.type = node_def.op
        self._attrs = DecodedAttrs(node_def.attr)
        self._links: tuple[list[Tensor], list[Operation]] | None = None
        self._outputs: dict[int, Tensor] = {}
        self._num_outputs: tuple[int, bool] | None = None
        self._dtypes: list[int | None] | None = None

    # -- attrs ---------------------------------------------------------------------------
    @property
    def attrs(self) -> DecodedAttrs:
        """The attrs as a read-only mapping, each decoded (``runtime.graph.attrs``) on first access."""
        return self._attrs

    def get_attr(self, name: str):
        if name not in self.node_def.attr:
            raise ValueError(f"Operation '{self.name}' has no attr named '{name}'.")
        return self._attrs[name]

    @property
    def device(self) -> str:
        return self.node_def.device

    @property
    def device_spec(self) -> DeviceSpec:
        return DeviceSpec.from_string(self.node_def.device)

    # -- edges ---------------------------------------------------------------------------
    def _resolve_links(self) -> tuple[list[Tensor], list[Operation]]:
        if self._links is None:
            data, control = [], []
            for text in self.node_def.input:
                name, index, is_control = parse_input(text)
                op = self.graph._ops[name]
                if is_control:
                    control.append(op)
                else:
                    data.append(op._output(index))
            self._links = (data, control)
        return self._links

    @property
    def inputs(self) -> list[Tensor]:
        return self._resolve_links()[0]

    @property
    def control_inputs(self) -> list[Operation]:
        return self._resolve_links()[1]

    @property
    def signature(self) -> OpSignature | None:
        """The op's args: TF's op signature, or the library function it calls."""
        fdef = self.graph._functions.get(self.type)
        return function_signature(fdef) if fdef is not None else op_signature(self.type)

    def _count_outputs(self) -> tuple[int, bool]:
        """(number of outputs, whether that number is known rather than inferred)."""
        if self._num_outputs is None:
            signature = self.signature
            if signature is not None:
                attrs = self.attrs
                self._num_outputs = (sum(a.size(attrs) for a in signature.outputs), True)
            elif "_output_shapes" in self.node_def.attr:
                self._num_outputs = (len(self.node_def.attr["_output_shapes"].list.shape), True)
            else:
                seen = self.graph._max_output_ref.get(self.name, -1)
                return max(seen + 1, len(self._outputs), 1), False
        return self._num_outputs

    @property
    def num_outputs(self) -> int:
        return self._count_outputs()[0]

    @property
    def outputs(self) -> list[Tensor]:
        return [self._output(i) for i in range(self.num_outputs)]

    def values(self) -> tuple[Tensor, ...]:
        return tuple(self.outputs)

    def _output(self, index: int) -> Tensor:
        tensor = self._outputs.get(index)
        if tensor is None:
            tensor = self._outputs.setdefault(index, Tensor(self, index))
        return tensor

    def _output_dtype(self, index: int) -> int | None:
        types = self._dtypes
        if types is None:
            signature = self.signature
            if signature is not None:  # (kept: a signature, once found, stays as it is)
                types = self._dtypes = [t for arg in signature.outputs for t in arg.dtypes(self.attrs)]
        if types is not None:
            return types[index] if index < len(types) else None
        attrs = self.attrs
        for key in ("dtype", "T", "out_type"):
            if isinstance(attrs.get(key), int):
                return attrs[key]
        return None

    def _output_shape(self, index: int):
        attrs = self.attrs
        shapes = attrs.get("_output_shapes")
        if shapes and index < len(shapes):
            return shapes[index]
        if self.type in ("Placeholder", "PlaceholderV2", "PlaceholderWithDefault") and "shape" in attrs:
            return attrs["shape"]
        if self.type == "Const" and "value" in attrs:
            return shape_from_proto(self.node_def.attr["value"].tensor.tensor_shape)
        return None

    def __repr__(self) -> str:
        return f"<Operation '{self.name}' type={self.type}>"


class Graph:
    """A GraphDef in memory: ops by name, function library, collections, versions."""

    def __init__(self, functions: dict[str, function_pb2.FunctionDef] | None = None):
        """``functions``: a library dict to share (a function body shares its caller's)."""
        self._ops: dict[str, Operation] = {}
        self._functions: dict[str, function_pb2.FunctionDef] = {} if functions is None else functions
        self._gradients: dict[str, str] = {}
        self._collections: dict[str, list] = {}
        self._versions = versions_pb2.VersionDef()
        self._max_output_ref: dict[str, int] = {}
        self._finalized = False
        self._version = 0
        self._lock = threading.RLock()

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_graph_def(cls, graph_def: graph_pb2.GraphDef) -> Graph:
        graph = cls()
        graph.import_graph_def(graph_def)
        return graph

    def import_graph_def(
        self, graph_def: graph_pb2.GraphDef, name: str = "", *, derived: bool = False
    ) -> list[Operation]:
        """Adds every node (names prefixed by ``name/`` when given) and the function library.

        Inputs may name nodes of this GraphDef or nodes already in the graph. Returns the
        new operations. A GraphDef TF's import refuses (an invalid or duplicate name, an input
        naming no node or no output, a NodeDef its op refuses, a cycle) raises
        ``InvalidGraphError`` with TF's text: an InvalidArgumentError and a ValueError, as TF's
        C++ and Python imports raise.

        ``derived``: the GraphDef is one this runtime rewrote from graphs it imported, whose
        nodes were checked then (delegation's passes): only unique names and inputs that name
        a node are checked again, which is most of an import's cost saved on every pass.
        """
        with self._lock:
            self._check_not_finalized()
            prefix = f"{name}/" if name else ""
            copies = []
            for node in graph_def.node:
                copy = node_def_pb2.NodeDef()
                copy.CopyFrom(node)
                if prefix:
                    copy.name = prefix + node.name
                    copy.input[:] = [_prefixed(prefix, text) for text in node.input]
                copies.append(copy)
            if not derived:
                graph_check.check_node_index(copies, self._ops)
            added = [Operation(self, copy) for copy in copies]
            new_ops = {op.name: op for op in added}
            if derived and (len(new_ops) < len(added) or not new_ops.keys().isdisjoint(self._ops)):
                raise InvalidGraphError("A derived GraphDef repeats a node name")
            self._check_inputs(added, new_ops, derived)
            for fdef in graph_def.library.function:
                self._functions.setdefault(fdef.signature.name, fdef)
            for grad in graph_def.library.gradient:
                self._gradients.setdefault(grad.function_name, grad.gradient_func)
            if not self._ops and graph_def.HasField("versions"):
                self._versions.CopyFrom(graph_def.versions)
            self._ops.update(new_ops)
            self._version += 1
            return added

    def _check_inputs(self, added: list[Operation], new_ops: dict[str, Operation], derived: bool) -> None:
        """TF's import checks past the names: inputs naming no node, then (unless ``derived``)
        node by node in TF's order, the outputs its inputs name and its NodeDef against its op,
        then cycles."""
        refs = self._max_output_ref
        parsed = [[parse_input(text) for text in op.node_def.input] for op in added]
        for op, inputs in zip(added, parsed):
            for text, (source, index, _) in zip(op.node_def.input, inputs):
                if source not in new_ops and source not in self._ops:
                    raise InvalidGraphError(f"Node '{op.name}': Unknown input node '{text}'")
                if index > refs.get(source, -1):
                    refs[source] = index
        if derived:
            return
        order = graph_check.topological_order([op.node_def for op in added], parsed)
        counts: dict[str, tuple[int, bool]] = {}
        for position in order:
            op, data_inputs = added[position], 0
            for source, index, control in parsed[position]:
                if control:
                    continue
                data_inputs += 1
                count = counts.get(source)
                if count is None:
                    count = counts[source] = (new_ops.get(source) or self._ops[source])._count_outputs()
                if count[1] and index >= count[0]:
                    raise InvalidGraphError(
                        f"Node '{op.name}': Connecting to invalid output {index} of source "
                        f"node {source} which has {count[0]} outputs."
                    )
            try:
                node_check.check_node(op, frozenset(), op.signature, data_inputs)
            except errors.InvalidArgumentError as e:
                raise InvalidGraphError(e.message) from None
        error = graph_check.cycle_error(len(added), order)
        if error is not None:
            raise error

    def import_meta_graph(self, meta_graph_def: meta_graph_pb2.MetaGraphDef) -> None:
        """Imports the MetaGraphDef's graph_def and its collections, as TF's import does.

        ``node_list`` collections hold graph elements (Tensors or Operations), ``bytes_list``
        bytes (serialized protos stay serialized), ``int64_list`` ints, ``float_list`` floats,
        ``any_list`` ``google.protobuf.Any`` messages.
        """
        with self._lock:
            self.import_graph_def(meta_graph_def.graph_def)
            for key in sorted(meta_graph_def.collection_def):
                collection = meta_graph_def.collection_def[key]
                kind = collection.WhichOneof("kind")
                if kind is None:
                    continue
                values = getattr(collection, kind).value
                if kind == "node_list":
                    items = [self.as_graph_element(v) for v in values]
                else:
                    items = list(values)
                self._collections.setdefault(key, []).extend(items)
            self._version += 1

    def _check_not_finalized(self) -> None:
        if self._finalized:
            raise RuntimeError("Graph is finalized and cannot be modified.")

    def finalize(self) -> None:
        self._finalized = True

    @property
    def finalized(self) -> bool:
        return self._finalized

    @property
    def version(self) -> int:
        """Bumped on every change to the graph's structure or collections."""
        return self._version

    # -- lookups ---------------------------------------------------------------------------
    def get_operations(self) -> list[Operation]:
        return list(self._ops.values())

    def get_operation_by_name(self, name: str) -> Operation:
        if not isinstance(name, str):
            raise TypeError(f"Operation names are strings (or similar), not {type(name).__name__}.")
        return self.as_graph_element(name, allow_tensor=False, allow_operation=True)

    def get_tensor_by_name(self, name: str) -> Tensor:
        if not isinstance(name, str):
            raise TypeError(f"Tensor names are strings (or similar), not {type(name).__name__}.")
        return self.as_graph_element(name, allow_tensor=True, allow_operation=False)

    def as_graph_element(
        self, obj, allow_tensor: bool = True, allow_operation: bool = True
    ) -> Tensor | Operation:
        """A Tensor or Operation of this graph from itself or its name, with TF's errors."""
        kinds = " or ".join(k for k, ok in (("Tensor", allow_tensor), ("Operation", allow_operation)) if ok)
        if isinstance(obj, (Tensor, Operation)):
            if obj.graph is not self:
                raise ValueError(f"{obj} is not an element of this graph.")
            if isinstance(obj, Tensor) and allow_tensor:
                return obj
            if isinstance(obj, Operation) and allow_operation:
                return obj
            raise TypeError(f"Can not convert a {type(obj).__name__} into a {kinds}.")
        if isinstance(obj, bytes):
            obj = obj.decode()
        if not isinstance(obj, str):
            raise TypeError(f"Can not convert a {type(obj).__name__} into a {kinds}.")
        if ":" in obj:
            if not allow_tensor:
                raise ValueError(f"Name {obj!r} appears to refer to a Tensor, not a {kinds}.")
            return self._tensor_by_name(obj)
        if not allow_operation:
            if obj in self._ops:
                raise ValueError(f"The name {obj!r} refers to an Operation, not a {kinds}." + _TENSOR_FORM)
            raise ValueError(
                f"The name {obj!r} looks like an (invalid) Operation name, not a {kinds}." + _TENSOR_FORM
            )
        op = self._ops.get(obj)
        if op is None:
            raise KeyError(f"The name {obj!r} refers to an Operation not in the graph.")
        return op

    def _tensor_by_name(self, name: str) -> Tensor:
        op_name, _, index_text = name.partition(":")
        try:
            index = int(index_text)
        except ValueError:
            raise ValueError(
                f"The name {name!r} looks a like a Tensor name, but is not a valid one." + _TENSOR_FORM
            ) from None
        op = self._ops.get(op_name)
        if op is None:
            raise KeyError(
                f"The name {name!r} refers to a Tensor which does not exist. The operation, "
                f"{op_name!r}, does not exist in the graph."
            )
        count, known = op._count_outputs()
        if index < 0 or (known and index >= count):
            raise KeyError(
                f"The name {name!r} refers to a Tensor which does not exist. The operation, "
                f"{op_name!r}, exists but only has {count} outputs."
            )
        return op._output(index)

    # -- function library -------------------------------------------------------------------
    def get_function(self, name: str) -> function_pb2.FunctionDef | None:
        return self._functions.get(name)

    @property
    def functions(self) -> dict[str, function_pb2.FunctionDef]:
        """The function library by name (read-only by convention)."""
        return self._functions

    # -- collections ------------------------------------------------------------------------
    def add_to_collection(self, name: str, value) -> None:
        with self._lock:
            self._check_not_finalized()
            self._collections.setdefault(name, []).append(value)
            self._version += 1

    def add_to_collections(self, names, value) -> None:
        for name in [names] if isinstance(names, str) else set(names):
            self.add_to_collection(name, value)

    def get_collection_ref(self, name: str) -> list:
        with self._lock:
            return self._collections.setdefault(name, [])

    def get_collection(self, name: str, scope: str | None = None) -> list:
        """A copy of the collection; with ``scope``, items whose ``name`` matches it (re.match)."""
        items = list(self._collections.get(name, ()))
        if scope is None:
            return items
        pattern = re.compile(scope)
        return [i for i in items if hasattr(i, "name") and pattern.match(i.name)]

    def get_all_collection_keys(self) -> list[str]:
        return [k for k, v in self._collections.items() if v is not None]

    def clear_collection(self, name: str) -> None:
        with self._lock:
            self._check_not_finalized()
            self._collections.pop(name, None)
            self._version += 1

    # -- export ----------------------------------------------------------------------------
    def as_graph_def(self, with_library: bool = True) -> graph_pb2.GraphDef:
        """The nodes, versions and (``with_library``) function library as a new GraphDef. Passes
        that import their result into a Graph given the library anyway leave it out: a TF2
        SavedModel's library can be most of the model, and copying it is most of the cost."""
        graph_def = graph_pb2.GraphDef()
        graph_def.node.extend(op.node_def for op in self._ops.values())
        if with_library:
            graph_def.library.function.extend(self._functions.values())
            graph_def.library.gradient.extend(
                function_pb2.GradientDef(function_name=f, gradient_func=g) for f, g in self._gradients.items()
            )
        graph_def.versions.CopyFrom(self._versions)
        return graph_def

    @property
    def graph_def_versions(self) -> versions_pb2.VersionDef:
        return self._versions

    # -- default graph ------------------------------------------------------------------------
    @contextlib.contextmanager
    def as_default(self) -> Iterator[Graph]:
        """Makes this the default graph of the current thread inside the ``with`` block."""
        stack = _default_graphs()
        stack.append(self)
        try:
            yield self
        finally:
            stack.pop()


def _prefixed(prefix: str, text: str) -> str:
    return "^" + prefix + text[1:] if text.startswith("^") else prefix + text


_local = threading.local()
_global_default: Graph | None = None
_global_lock = threading.Lock()


def _default_graphs() -> list[Graph]:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def get_default_graph() -> Graph:
    """The innermost ``as_default()`` graph of this thread, else a process-wide Graph."""
    global _global_default
    stack = _default_graphs()
    if stack:
        return stack[-1]
    with _global_lock:
        if _global_default is None:
            _global_default = Graph()
        return _global_default
