"""``show --all``'s "Concrete Functions" block, read from the SavedObjectGraph without TensorFlow.

TF loads the SavedModel (``tf.saved_model.load``) and lists the root object's children that are
functions, sorted by name, each with its concrete functions' ``structured_input_signature``: the
``canonicalized_input_signature`` the SavedConcreteFunction stores as a ``StructuredValue``
(``nested_structure_coder``), decoded here into the Python values TF would print
(``TensorSpec(shape=(None, 3), dtype=tf.float32, name='x')``, tuples, dicts, None, ...).

What TF decides only by loading is approximated: a SavedModel with several MetaGraphDefs cannot
be loaded without ``tags`` and prints TF's "N/A" line; a function's concrete functions are sorted
as TF sorts the names they get on loading (``load_order``), assuming the numbers TF appends are of
one length (where they straddle a power of ten, TF's order differs); a type spec other than (Bounded)TensorSpec prints as its
class name and the spec's fields, not as TF's ``repr``. A dict prints its keys sorted: TF prints
them in the order its protobuf map yields them, which changes from one process to the next.
"""

from __future__ import annotations

import collections
import re

from apis.tensorflow.core.framework import types_pb2
from apis.tensorflow.core.protobuf import saved_model_pb2, saved_object_graph_pb2, struct_pb2
from runtime.tensor_util import make_ndarray

_PYTHON_DTYPE_NAMES = {"DT_FLOAT": "float32", "DT_DOUBLE": "float64", "DT_HALF": "float16"}


def dtype_repr(dtype: int) -> str:
    """``repr`` of the ``tf.DType`` of a DataType enum value: ``tf.float32``, ``tf.string``."""
    name = types_pb2.DataType.Name(dtype)
    return "tf." + _PYTHON_DTYPE_NAMES.get(name, name[3:].lower())


def shape_str(shape) -> str:
    """``str(tf.TensorShape)``: ``<unknown>``, ``()``, ``(None,)``, ``(None, 3)``."""
    if shape.unknown_rank:
        return "<unknown>"
    dims = ["None" if d.size < 0 else str(d.size) for d in shape.dim]
    return f"({dims[0]},)" if len(dims) == 1 else "(" + ", ".join(dims) + ")"


class TensorSpec:
    """What TF prints for a ``tf.TensorSpec`` argument: its name, and its ``repr``."""

    def __init__(self, proto, kind: str = "TensorSpec", extra: str = ""):
        self.name = proto.name or None
        self._text = (
            f"{kind}(shape={shape_str(proto.shape)}, dtype={dtype_repr(proto.dtype)}, "
            f"name={self.name!r}{extra})"
        )

    def __repr__(self) -> str:
        return self._text


class TypeSpec:
    """Another ``tf.TypeSpec`` (ragged, sparse, ...): its class name and decoded state."""

    def __init__(self, proto: struct_pb2.TypeSpecProto):
        self.kind = proto.type_spec_class_name or struct_pb2.TypeSpecProto.TypeSpecClass.Name(
            proto.type_spec_class
        )
        self.state = decode(proto.type_state)

    def __repr__(self) -> str:
        return f"{self.kind}{self.state!r}"


def decode(value: struct_pb2.StructuredValue):
    """A ``StructuredValue`` as the Python value TF's ``nested_structure_coder`` decodes."""
    kind = value.WhichOneof("kind")
    if kind is None or kind == "none_value":
        return None
    if kind in ("float64_value", "int64_value", "string_value", "bool_value"):
        return getattr(value, kind)
    if kind == "list_value":
        return [decode(v) for v in value.list_value.values]
    if kind == "tuple_value":
        return tuple(decode(v) for v in value.tuple_value.values)
    if kind == "dict_value":
        fields = value.dict_value.fields  # a map: its iteration order differs from process to process
        return {k: decode(fields[k]) for k in sorted(fields)}
    if kind == "named_tuple_value":
        fields = [p.key for p in value.named_tuple_value.values]
        cls = collections.namedtuple(value.named_tuple_value.name or "NamedTuple", fields, rename=True)
        return cls(*(decode(p.value) for p in value.named_tuple_value.values))
    if kind == "tensor_spec_value":
        return TensorSpec(value.tensor_spec_value)
    if kind == "bounded_tensor_spec_value":
        spec = value.bounded_tensor_spec_value
        bounds = f", minimum={make_ndarray(spec.minimum)!r}, maximum={make_ndarray(spec.maximum)!r}"
        return TensorSpec(spec, "BoundedTensorSpec", bounds)
    if kind == "type_spec_value":
        return TypeSpec(value.type_spec_value)
    if kind == "tensor_shape_value":
        return shape_str(value.tensor_shape_value)
    if kind == "tensor_dtype_value":
        return dtype_repr(value.tensor_dtype_value)
    return make_ndarray(getattr(value, kind))  # tensor_value, numpy_value


_INFERENCE_NAME = re.compile(r"^__inference_(.*)_\d+$")


def load_order(library) -> dict[str, str]:
    """Saved function name -> the name TF's loader gives it, up to the uid's value.

    ``tf.saved_model.load`` imports the library in a topological order (TF's
    ``_sort_function_defs``: a stack of the functions whose callees are loaded, seeded in library
    order) and renames each ``__inference_<name>_<n>`` to ``__inference_<name>_<uid>``, its uids
    increasing in that order. Numbers of one length, increasing in the same order, sort alike.
    """
    names = [f.signature.name for f in library.function]
    known = set(names)
    callers: dict[str, list[str]] = collections.defaultdict(list)
    waiting = dict.fromkeys(names, 0)
    for fdef in library.function:
        for callee in _callees(fdef, known):
            callers[callee].append(fdef.signature.name)
            waiting[fdef.signature.name] += 1
    ready = [n for n in names if waiting[n] == 0]
    renamed = {}
    while ready:
        name = ready.pop()
        match = _INFERENCE_NAME.match(name)
        renamed[name] = f"__inference_{match.group(1) if match else name}_{10**9 + len(renamed)}"
        for caller in callers[name]:
            waiting[caller] -= 1
            if not waiting[caller]:
                ready.append(caller)
    return renamed


def _callees(fdef, known: set[str]) -> set[str]:
    """The library functions a body names (TF's ``_list_function_deps``, without gradients)."""
    found = set()
    for node in fdef.node_def:
        if node.op in known:
            found.add(node.op)
            continue
        for value in node.attr.values():
            kind = value.WhichOneof("value")
            if kind == "func":
                found.add(value.func.name)
            elif kind == "list":
                found.update(f.name for f in value.list.func)
    return found


def _print_args(arguments, argument_type: str = "Argument", indent: int = 0) -> None:
    """TF's ``_print_args``, down to its backspaces before a closing bracket."""
    pad = "  " * indent

    def quoted(v) -> str:
        return f"'{v}'" if isinstance(v, str) else str(v)

    for index, element in enumerate(arguments, 1):
        if indent == 4:
            print(pad + f"{argument_type} #{index}")
        if isinstance(element, str):
            print(pad + f"  {element}")
        elif isinstance(element, TensorSpec):
            print((indent + 1) * "  " + f"{element.name}: {element!r}")
        elif isinstance(element, dict):
            print(pad + "  DType: dict")
            body = "".join(f"'{k}': {quoted(v)}, " for k, v in element.items())
            print(pad + "  Value: {" + body + "\b\b}")
        elif isinstance(element, (list, tuple)):
            print(pad + f"  DType: {type(element).__name__}")
            print(pad + "  Value: [" + "".join(f"{quoted(v)}, " for v in element) + "\b\b]")
        else:
            print(pad + f"  DType: {type(element).__name__}")
            print(pad + f"  Value: {element}")


def _print_concrete_function(
    graph: saved_object_graph_pb2.SavedObjectGraph, index: int, name: str, keywords=()
) -> None:
    saved = graph.concrete_functions.get(name)
    args = kwargs = None
    signature = decode(saved.canonicalized_input_signature) if saved is not None else None
    if isinstance(signature, tuple) and len(signature) == 2:
        args, kwargs = signature
    elif keywords:  # a bare concrete function may know no more than its argument keywords
        args = list(keywords)
    if args:
        print(f"    Option #{index}")
        print("      Callable with:")
        _print_args(args, indent=4)
    if kwargs:
        _print_args(kwargs, "Named Argument", indent=4)


def show_defined_functions(saved_model: saved_model_pb2.SavedModel) -> None:
    """The root object's function children and their concrete functions' input signatures."""
    if not any(m.HasField("object_graph_def") for m in saved_model.meta_graphs):
        return
    print("\nConcrete Functions:", end="")
    if len(saved_model.meta_graphs) != 1:  # tf.saved_model.load refuses: it needs tags= then
        print(" N/A (could not be listed due to unknown reasons)")
        return
    graph = saved_model.meta_graphs[0].object_graph_def
    if not graph.nodes:
        return
    loaded = load_order(saved_model.meta_graphs[0].graph_def.library)
    for child in sorted(graph.nodes[0].children, key=lambda c: c.local_name):
        node = graph.nodes[child.node_id]
        kind = node.WhichOneof("kind")
        if kind == "function":
            names, keywords = list(node.function.concrete_functions), ()
        elif kind == "bare_concrete_function":
            names = [node.bare_concrete_function.concrete_function_name]
            keywords = node.bare_concrete_function.argument_keywords
        else:
            continue
        print(f"\n  Function Name: '{child.local_name}'")
        for index, name in enumerate(sorted(names, key=lambda n: loaded.get(n, n)), 1):
            _print_concrete_function(graph, index, name, keywords)
