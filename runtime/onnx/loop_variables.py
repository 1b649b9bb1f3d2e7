"""Freezing the variables a TF2 ``While`` reads: its resource inputs become constants of its body.

A Keras RNN passes its kernels to the loop as ``DT_RESOURCE`` loop variables, read by
``ReadVariableOp`` in the body each step. A resource cannot enter onnxruntime, so, where nothing
the served signatures run can write variables (``frozen_variables.freeze_variables`` decides that, as for
reads outside loops), ``freeze_loop_variables`` gives each such ``While`` copies of its cond and
body (``<name>__frozen``) in which those args are gone and their reads are ``Const`` nodes holding
the variables' current values; the loop node drops those inputs and outputs. The rewritten graph
means the same thing to the native kernels, so it also runs there. A loop that passes a resource
anywhere but to a read (a nested call, its outputs read afterwards) is left as it is. Pure: the
GraphDef and library given are never modified.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from apis.tensorflow.core.framework import function_pb2, graph_pb2
from runtime import dtypes, tensor_util
from runtime.graph.op_def import parse_input

WHILE_OPS = frozenset({"While", "StatelessWhile"})
SUFFIX = "__frozen"


def freeze_loop_variables(
    graph_def: graph_pb2.GraphDef, library: Mapping[str, function_pb2.FunctionDef], values: Mapping
) -> tuple[graph_pb2.GraphDef, dict[str, function_pb2.FunctionDef]]:
    """``graph_def`` and ``library`` with every While whose resource inputs all come from the
    ``VarHandleOp`` nodes in ``values`` (name -> current value) rewritten (module docstring)."""
    result = graph_pb2.GraphDef()
    result.CopyFrom(graph_def)
    new_library = dict(library)
    read = _outputs_read(result)
    remap: dict[str, dict[int, int]] = {}
    for node in result.node:
        if node.op not in WHILE_OPS:
            continue
        frozen = _frozen_inputs(node, values)
        if not frozen or read.get(node.name, set()) & set(frozen):
            continue
        cond = _frozen_function(library.get(node.attr["cond"].func.name), frozen, False)
        body = _frozen_function(library.get(node.attr["body"].func.name), frozen, True)
        if cond is None or body is None:
            continue
        new_library[cond.signature.name] = cond
        new_library[body.signature.name] = body
        remap[node.name] = _drop_inputs(node, frozen)
        node.attr["cond"].func.name = cond.signature.name
        node.attr["body"].func.name = body.signature.name
    for node in result.node:
        node.input[:] = [_renumbered(text, remap) for text in node.input]
    return result, new_library


def _outputs_read(graph_def: graph_pb2.GraphDef) -> dict[str, set[int]]:
    read: dict[str, set[int]] = {}
    for node in graph_def.node:
        for text in node.input:
            source, index, is_control = parse_input(text)
            if not is_control:
                read.setdefault(source, set()).add(index)
    return read


def _frozen_inputs(node, values: Mapping) -> dict[int, np.ndarray] | None:
    frozen = {}
    data = [t for t in node.input if not t.startswith("^")]
    for i, (text, dtype) in enumerate(zip(data, node.attr["T"].list.type)):
        if dtype == dtypes.DT_RESOURCE:
            source = parse_input(text)[0]
            if source not in values:
                return None
            frozen[i] = np.asarray(values[source])
    return frozen


def _drop_inputs(node, frozen: Mapping[int, np.ndarray]) -> dict[int, int]:
    """Removes the frozen inputs (and outputs) from the loop node; old output index -> new."""
    data = [t for t in node.input if not t.startswith("^")]
    controls = [t for t in node.input if t.startswith("^")]
    keep = [i for i in range(len(data)) if i not in frozen]
    node.input[:] = [data[i] for i in keep] + controls
    types = list(node.attr["T"].list.type)
    node.attr["T"].list.type[:] = [types[i] for i in keep]
    if "output_shapes" in node.attr:
        shapes = list(node.attr["output_shapes"].list.shape)
        del node.attr["output_shapes"].list.shape[:]
        node.attr["output_shapes"].list.shape.extend(shapes[i] for i in keep if i < len(shapes))
    for stale in ("_read_only_resource_inputs", "_num_original_outputs"):
        if stale in node.attr:
            del node.attr[stale]
    return {old: new for new, old in enumerate(keep)}


def _renumbered(text: str, remap: Mapping[str, dict[int, int]]) -> str:
    source, index, is_control = parse_input(text)
    if is_control or source not in remap:
        return text
    new = remap[source][index]
    return source if new == 0 else f"{source}:{new}"


def _frozen_function(
    fdef: function_pb2.FunctionDef | None, frozen: Mapping[int, np.ndarray], is_body: bool
) -> function_pb2.FunctionDef | None:
    """A copy of ``fdef`` without the frozen args, their reads made constants; None if the
    function uses one otherwise (or, a body, does not return it unchanged)."""
    if fdef is None:
        return None
    signature = fdef.signature
    args = {signature.input_arg[i].name: value for i, value in frozen.items()}
    new = function_pb2.FunctionDef()
    new.CopyFrom(fdef)
    new.signature.name = signature.name + SUFFIX
    keep = [i for i in range(len(signature.input_arg)) if i not in frozen]
    del new.signature.input_arg[:]
    new.signature.input_arg.extend(signature.input_arg[i] for i in keep)
    new.arg_attr.clear()
    for new_index, old in enumerate(keep):
        if old in fdef.arg_attr:
            new.arg_attr[new_index].CopyFrom(fdef.arg_attr[old])
    new.resource_arg_unique_id.clear()
    if is_body:
        for i in frozen:
            out = signature.output_arg[i].name
            if fdef.ret[out] != signature.input_arg[i].name:
                return None
            del new.ret[out]
        del new.signature.output_arg[:]
        new.signature.output_arg.extend(signature.output_arg[i] for i in keep)
    reads = set()
    for node in new.node_def:
        used = [t.split(":")[0] for t in node.input if not t.startswith("^")]
        hit = [name for name in used if name in args]
        if not hit:
            continue
        if node.op != "ReadVariableOp" or len(used) != 1:
            return None
        dtype = node.attr["dtype"].type
        value = args[hit[0]]
        if dtypes.base_dtype(dtype) != dtypes.from_numpy(value.dtype):
            return None
        node.op = "Const"
        del node.input[:]
        node.attr.clear()
        node.attr["dtype"].type = dtype
        node.attr["value"].tensor.CopyFrom(tensor_util.make_tensor_proto(value, dtype))
        reads.add(node.name)
    for node in new.node_def:
        node.input[:] = [_const_output(t, reads) for t in node.input]
    for key, value in list(new.ret.items()):
        new.ret[key] = _const_output(value, reads)
    return new


def _const_output(text: str, reads: set[str]) -> str:
    """``read:value:0`` -> ``read:output:0`` (a Const's output arg) for the reads made constants."""
    parts = text.split(":")
    if len(parts) == 3 and parts[0] in reads:
        return f"{parts[0]}:output:{parts[2]}"
    return text
