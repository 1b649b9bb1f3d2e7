"""``FunctionDef`` instantiation: a library function called with attrs, as a Graph of its own.

``instantiate`` turns a FunctionDef plus the caller's attrs into a ``FunctionBody``: a Graph in
which each input arg is an ``_Arg`` node named after the arg, attr placeholders are replaced by
the caller's values, and every ``node:out_arg:i`` reference is rewritten to the flat output index
``node:k`` (using the op signature, or the called function's signature for nested calls). The
body shares its parent's function library, so nested calls resolve. Pure graph work: running a
body is ``runtime/execution/function.py``'s, rewriting one for onnxruntime ``runtime/onnx``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from apis.tensorflow.core.framework import attr_value_pb2, function_pb2, graph_pb2, node_def_pb2
from runtime import errors
from runtime.graph.graph import DecodedAttrs, Graph, Operation, Tensor
from runtime.graph.op_def import function_signature, op_signature


@dataclass(frozen=True)
class FunctionBody:
    """A FunctionDef instantiated as a Graph of its own: its args' and rets' tensors in that graph."""

    name: str
    graph: Graph
    args: tuple[Tensor, ...]
    rets: tuple[Tensor, ...]
    control_rets: tuple[Operation, ...]


def call_attrs(
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
    attrs = DecodedAttrs(node.attr)  # (list sizes only: a Const's tensor stays undecoded)
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
    graph_def = _body_graph_def(fdef, call_attrs(fdef, attrs))
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
