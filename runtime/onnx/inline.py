"""Function inlining: TF2 call nodes replaced by their bodies, so their ops can be partitioned.

A TF2 SavedModel's compute lives in library functions called through ``StatefulPartitionedCall``
/ ``PartitionedCall``. ``inline_calls`` returns a new GraphDef in which each such call whose body
is side-effect free (its only stateful ops read variables or tables, or are control-flow/calls
themselves)
is replaced by the body's nodes, named ``<call>/<node>``, and the call node itself becomes an
``IdentityN`` of the body's results under the call's name, so every tensor name the signatures
use still resolves. Calls whose bodies write state (restore functions, ``AssignVariableOp``) stay
calls. Pure: the input GraphDef is never modified.
"""

from __future__ import annotations

from collections.abc import Mapping

from apis.tensorflow.core.framework import function_pb2, graph_pb2, node_def_pb2
from runtime import dtypes
from runtime.graph.function_def import instantiate
from runtime.graph.op_def import parse_input
from runtime.kernels import lookup

CALL_OPS = frozenset({"StatefulPartitionedCall", "PartitionedCall"})
# Stateful ops a body may hold and still be inlined: reads (of variables: Keras' embeddings
# gather straight from theirs; of tables: TextVectorization's lookup), and ops that run their
# own functions.
_INLINABLE_STATEFUL = (
    frozenset(
        {
            "ReadVariableOp", "VarHandleOp", "ResourceGather", "ResourceGatherNd", "VariableShape",
            "LookupTableFindV2", "LookupTableSizeV2", "While", "StatelessWhile", "If", "StatelessIf",
            "Case", "NoOp",
        }
    )
    | CALL_OPS
)  # fmt: skip
_MAX_ROUNDS = 8
# Output-type attrs that function bodies leave at their defaults (SavedModels strip defaults):
# written back so that every inlined tensor has a known dtype.
_DEFAULT_TYPES = {
    "Shape": ("out_type", dtypes.DT_INT32),
    "Size": ("out_type", dtypes.DT_INT32),
    "ShapeN": ("out_type", dtypes.DT_INT32),
    "ArgMax": ("output_type", dtypes.DT_INT64),
    "ArgMin": ("output_type", dtypes.DT_INT64),
    "Range": ("Tidx", dtypes.DT_INT32),
    "MaxPool": ("T", dtypes.DT_FLOAT),
}


def inlinable(
    name: str, library: Mapping[str, function_pb2.FunctionDef], seen: frozenset = frozenset()
) -> bool:
    """Whether function ``name``'s body (nested calls included) has no side effect but reads."""
    fdef = library.get(name)
    if fdef is None or name in seen:
        return False
    for node in fdef.node_def:
        if node.op in CALL_OPS:
            if not inlinable(node.attr["f"].func.name, library, seen | {name}):
                return False
        elif node.op in library:
            return False
        else:
            definition = lookup(node.op)
            if definition is not None and definition.stateful and node.op not in _INLINABLE_STATEFUL:
                return False
    return True


def with_default_types(graph_def: graph_pb2.GraphDef) -> graph_pb2.GraphDef:
    """A copy of ``graph_def`` with the stripped output-type attrs of ``_DEFAULT_TYPES`` written."""
    result = graph_pb2.GraphDef()
    result.CopyFrom(graph_def)
    for node in result.node:
        default = _DEFAULT_TYPES.get(node.op)
        if default is not None and default[0] not in node.attr:
            node.attr[default[0]].type = default[1]
    return result


def function_with_default_types(fdef: function_pb2.FunctionDef) -> function_pb2.FunctionDef:
    """A copy of ``fdef`` whose nodes have the stripped output-type attrs of ``_DEFAULT_TYPES``."""
    result = function_pb2.FunctionDef()
    result.CopyFrom(fdef)
    for node in result.node_def:
        default = _DEFAULT_TYPES.get(node.op)
        if default is not None and default[0] not in node.attr:
            node.attr[default[0]].type = default[1]
    return result


def inline_calls(
    graph_def: graph_pb2.GraphDef, library: Mapping[str, function_pb2.FunctionDef]
) -> graph_pb2.GraphDef:
    """A copy of ``graph_def`` with every inlinable call inlined, nested calls included, and the
    default output types written back (``with_default_types``)."""
    result = graph_pb2.GraphDef()
    result.CopyFrom(graph_def)
    for _ in range(_MAX_ROUNDS):
        calls = [n for n in result.node if n.op in CALL_OPS and inlinable(n.attr["f"].func.name, library)]
        if not calls:
            break
        names = {n.name for n in result.node}
        replaced: dict[str, list[node_def_pb2.NodeDef]] = {}
        for call in calls:
            replaced[call.name] = _inline_one(call, library, names)
        nodes = []
        for node in result.node:
            nodes.extend(replaced.get(node.name, [node]) if node.op in CALL_OPS else [node])
        del result.node[:]
        result.node.extend(nodes)
    return with_default_types(result)


def _inline_one(call: node_def_pb2.NodeDef, library, taken: set[str]) -> list[node_def_pb2.NodeDef]:
    fdef = library[call.attr["f"].func.name]
    body = instantiate(fdef, call.attr["f"].func.attr, library)
    data_inputs = [t for t in call.input if not t.startswith("^")]
    controls = [t for t in call.input if t.startswith("^")]
    args = {t.op.name: data_inputs[i] for i, t in enumerate(body.args)}
    prefix = f"{call.name}/"

    def mapped(text: str) -> str:
        source, index, is_control = parse_input(text)
        if source in args:
            outer = args[source]
            return "^" + parse_input(outer)[0] if is_control else outer
        return (
            ("^" if is_control else "")
            + prefix
            + (source if index == 0 or is_control else f"{source}:{index}")
        )

    nodes = []
    for op in body.graph.get_operations():
        if op.type == "_Arg":
            continue
        node = node_def_pb2.NodeDef()
        node.CopyFrom(op.node_def)
        node.name = prefix + op.name
        if node.name in taken:
            raise ValueError(f"inlining {call.name}: node {node.name} exists")
        node.input[:] = [mapped(t) for t in op.node_def.input]
        if not any(not t.startswith("^") for t in node.input):
            node.input.extend(controls)  # the call's control inputs still precede its work
        nodes.append(node)
    results = node_def_pb2.NodeDef(name=call.name, op="IdentityN", device=call.device)
    results.input.extend(mapped(t.name) for t in body.rets)
    results.input.extend("^" + prefix + op.name for op in body.control_rets)
    results.input.extend(controls)
    results.attr["T"].list.type.extend(call.attr["Tout"].list.type)
    if not body.rets:
        results.op = "NoOp"
        del results.attr["T"]
    return [*nodes, results]
