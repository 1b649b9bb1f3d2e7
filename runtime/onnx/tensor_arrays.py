"""TF1 ``TensorArrayV3`` arrays as TensorLists, so that raised loops carry them as values.

A TF1 TensorArray is a mutable resource (the handle) whose state is ordered by a ``flow`` float
that every write returns and every read takes. Where each op touching an array names its state by
that flow (the handle only reaches TensorArray ops, through ``Enter`` at most), the flow chain *is*
the array's value history, and the functional TensorList ops say the same thing: the
``TensorArrayV3`` node becomes ``TensorListReserve`` (its flow output is the list), ``Write`` ->
``TensorListSetItem`` (resizing where the array is ``dynamic_size``), ``Read`` ->
``TensorListGetItem``, ``Gather`` -> ``TensorListGather``, ``Size`` -> ``TensorListLength``, and
``Scatter`` of ``range(0, n)`` over all ``n`` rows of a value into a fresh array of ``n`` elements
(``unstack``) -> ``TensorListFromTensor``. The frame plumbing the flow passes through
(``Enter``/``Merge``/``Switch``/``Identity``/``NextIteration``/``Exit``) carries ``DT_VARIANT``.
Values are the same for every run TF completes; only the failures of misuse differ (writing an
index twice, reading a cleared index). Arrays with any other use (``Concat``, ``Split``, gradients,
a handle read elsewhere) stay TensorArrays. Pure: the GraphDef given is never modified.
"""

from __future__ import annotations

import collections
import functools

import numpy as np

from apis.tensorflow.core.framework import attr_value_pb2, graph_pb2, node_def_pb2, tensor_shape_pb2
from runtime import dtypes, tensor_util
from runtime.graph.op_def import parse_input

_PLUMBING = frozenset({"Enter", "Merge", "Switch", "Identity", "NextIteration", "Exit"})
# TensorArray op -> (index of its flow input, whether it returns a new flow)
_ARRAY_OPS = {
    "TensorArrayWriteV3": (3, True),
    "TensorArrayReadV3": (2, False),
    "TensorArrayGatherV3": (2, False),
    "TensorArrayScatterV3": (3, True),
    "TensorArraySizeV3": (1, False),
}


class _Unmappable(Exception):
    """The array has a use with no TensorList equivalent here: it stays a TensorArray."""


def tensor_arrays_to_lists(graph_def: graph_pb2.GraphDef) -> graph_pb2.GraphDef:
    """``graph_def`` with every array whose uses all map rewritten to TensorList ops."""
    nodes = {n.name: n for n in graph_def.node}
    consumers: dict[str, list[tuple[str, int]]] = collections.defaultdict(list)
    for node in graph_def.node:
        for k, text in enumerate(node.input):
            source, index, control = parse_input(text)
            consumers[source].append((node.name, -1 if control else k, index))
    replaced: dict[str, node_def_pb2.NodeDef] = {}
    dropped: set[str] = set()
    added: list[node_def_pb2.NodeDef] = []
    for array in [n for n in graph_def.node if n.op == "TensorArrayV3"]:
        try:
            handles, flows, ops = _uses(array, nodes, consumers)
            replaced.update(_rewrite(array, nodes, flows, ops, added))
        except _Unmappable:
            continue
        dropped.update(handles)
    if not replaced:
        return graph_def
    result = graph_pb2.GraphDef()
    result.CopyFrom(graph_def)
    del result.node[:]
    for node in graph_def.node:
        if node.name not in dropped:
            result.node.append(replaced.get(node.name, node))
    result.node.extend(added)
    return result


def _uses(array, nodes, consumers) -> tuple[set[str], dict[str, None], dict[str, None]]:
    """(handle Enters, flow plumbing nodes, array ops) of ``array``; _Unmappable otherwise."""
    handles: set[str] = set()
    ops: dict[str, None] = {}
    stack = [array.name]
    while stack:
        for name, k, index in consumers[stack.pop()]:
            node = nodes[name]
            if k < 0:
                raise _Unmappable(f"control edge into {name}")
            if index != 0:
                continue  # the array's flow output: walked below
            if node.op == "Enter" and k == 0:
                handles.add(name)
                stack.append(name)
            elif node.op in _ARRAY_OPS and k == 0:
                ops[name] = None
            else:
                raise _Unmappable(f"{name} reads the handle of {array.name}")
    flows: dict[str, None] = {}
    reached: set[str] = set()
    pending = [(array.name, 1)]
    while pending:
        source, out = pending.pop()
        for name, k, index in consumers[source]:
            node = nodes[name]
            if k < 0:
                raise _Unmappable(f"control edge from {source}")
            if index != out:
                continue
            if node.op in _PLUMBING:
                if name not in flows:
                    flows[name] = None
                    pending += [(name, 0)] + ([(name, 1)] if node.op == "Switch" else [])
            elif node.op in _ARRAY_OPS and k == _ARRAY_OPS[node.op][0] and name in ops:
                reached.add(name)
                if _ARRAY_OPS[node.op][1]:
                    pending.append((name, 0))
            else:
                raise _Unmappable(f"{name} reads a flow of {array.name}")
    if reached != set(ops):
        raise _Unmappable(f"an op reads {array.name} with another array's flow")
    return handles, flows, ops


def _node(name: str, op: str, inputs: list[str], **attrs) -> node_def_pb2.NodeDef:
    node = node_def_pb2.NodeDef(name=name, op=op, input=inputs)
    for key, value in attrs.items():
        if isinstance(value, bool):
            node.attr[key].b = value
        elif isinstance(value, np.ndarray):
            node.attr[key].tensor.CopyFrom(tensor_util.make_tensor_proto(value))
        else:
            node.attr[key].type = value
    return node


def _shape_value(shape_proto) -> np.ndarray:
    """A TensorShapeProto as TensorList ops take it: -1 for an unknown rank or dimension."""
    if shape_proto.unknown_rank:
        return np.array(-1, np.int32)
    return np.array([d.size for d in shape_proto.dim], np.int32)


def _rewrite(array, nodes, flows, ops, added: list) -> dict[str, node_def_pb2.NodeDef]:
    """The replacement of ``array``, its ops and its flow plumbing (new Consts into ``added``)."""
    taken = set(nodes) | {n.name for n in added}

    def shape_const(shape_proto) -> str:
        """A Const of the element shape, one per op that reads it, with no inputs: in a loop that
        stays a frame, the frame executor puts it in its reader's frame (``frames.assign_frames``);
        a raised loop copies it into its body."""
        name, k = f"{array.name}/element_shape", 0
        while name in taken:
            k += 1
            name = f"{array.name}/element_shape_{k}"
        taken.add(name)
        added.append(_node(name, "Const", [], dtype=dtypes.DT_INT32, value=_shape_value(shape_proto)))
        return name

    def flow(text: str) -> str:
        source, index, _ = parse_input(text)
        return f"{source}:0" if source == array.name and index == 1 else text

    element = array.attr["element_shape"].shape if "element_shape" in array.attr else _UNKNOWN_RANK
    controls = [t for t in array.input if t.startswith("^")]
    dtype = array.attr["dtype"].type
    replaced = {
        array.name: _node(
            array.name,
            "TensorListReserve",
            [shape_const(element), array.input[0], *controls],
            element_dtype=dtype,
            shape_type=dtypes.DT_INT32,
        )
    }
    for name in flows:
        node = node_def_pb2.NodeDef()
        node.CopyFrom(nodes[name])
        node.input[:] = [flow(t) for t in node.input]
        node.attr["T"].type = dtypes.DT_VARIANT
        replaced[name] = node
    for name in ops:
        shape = functools.partial(shape_const, element)  # (a Const of the array's element shape)
        replaced[name] = _list_op(nodes[name], array, nodes, flow, shape, shape_const)
    return replaced


# A TensorArrayV3's element_shape where the attr is left out (its default: unknown rank).
_UNKNOWN_RANK = tensor_shape_pb2.TensorShapeProto(unknown_rank=True)


def _attr(node, name: str) -> attr_value_pb2.AttrValue:
    """``node``'s attr ``name``, or an empty one where it is not set. Never ``node.attr[name]``
    for a read: on a protobuf map that adds the attr, empty, to a node this pass hands on."""
    return node.attr[name] if name in node.attr else attr_value_pb2.AttrValue()


def _list_op(node, array, nodes, flow, shape, shape_const) -> node_def_pb2.NodeDef:
    """The TensorList op doing what TensorArray op ``node`` does (inputs by flow, not handle)."""
    ins = list(node.input)
    controls = [t for t in ins if t.startswith("^")]
    name, dtype = node.name, array.attr["dtype"].type
    if node.op == "TensorArrayWriteV3":
        resize = _attr(array, "dynamic_size").b
        new = _node(name, "TensorListSetItem", [flow(ins[3]), ins[1], ins[2]], element_dtype=dtype)
        if resize:
            new.attr["resize_if_index_out_of_bounds"].b = True
    elif node.op == "TensorArrayReadV3":
        new = _node(name, "TensorListGetItem", [flow(ins[2]), ins[1], shape()], element_dtype=dtype)
    elif node.op == "TensorArrayGatherV3":
        own = node.attr["element_shape"].shape if "element_shape" in node.attr else None
        known = own is not None and not own.unknown_rank
        new = _node(
            name,
            "TensorListGather",
            [flow(ins[2]), ins[1], shape_const(own) if known else shape()],
            element_dtype=dtype,
        )
    elif node.op == "TensorArraySizeV3":
        new = _node(name, "TensorListLength", [flow(ins[1])])
    elif _unstacks(node, array, nodes):
        new = _node(
            name,
            "TensorListFromTensor",
            [ins[2], shape()],
            element_dtype=dtype,
            shape_type=dtypes.DT_INT32,
        )
    else:
        new = _node(
            name, "TensorListScatterIntoExistingList", [flow(ins[3]), ins[2], ins[1]], element_dtype=dtype
        )
    new.input.extend(controls)
    return new


def _unstacks(scatter, array, nodes) -> bool:
    """Whether ``scatter`` writes all ``n`` rows of its value at ``range(0, n)`` into the fresh
    ``array`` of size ``n`` (``TensorArray.unstack``): then the list is the value's rows."""
    indices, value, flow_in = scatter.input[1], scatter.input[2], scatter.input[3]
    if parse_input(flow_in)[:2] != (array.name, 1):
        return False
    rows = nodes[parse_input(indices)[0]]
    if rows.op != "Range" or not (_is_const(nodes, rows.input[0], 0) and _is_const(nodes, rows.input[2], 1)):
        return False
    target = parse_input(value)[:2]
    return _leading_dim_of(nodes, rows.input[1]) == target == _leading_dim_of(nodes, array.input[0])


def _is_const(nodes, text: str, want: int) -> bool:
    node = nodes.get(parse_input(text)[0])
    if node is None or node.op != "Const":
        return False
    value = tensor_util.make_ndarray(node.attr["value"].tensor)
    return value.size == 1 and int(value.reshape(())) == want


def _leading_dim_of(nodes, text: str) -> tuple[str, int] | None:
    """(op, output) of ``v`` where ``text`` is ``shape(v)[0]`` (StridedSlice of Shape), else None."""
    node = nodes.get(parse_input(text)[0])
    if node is None or node.op != "StridedSlice" or _attr(node, "shrink_axis_mask").i != 1:
        return None
    if any(_attr(node, m).i for m in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask")):
        return None
    wanted = ((1, 0), (2, 1), (3, 1))
    if not all(_is_const(nodes, node.input[k], v) for k, v in wanted):
        return None
    shape = nodes.get(parse_input(node.input[0])[0])
    if shape is None or shape.op != "Shape":
        return None
    return parse_input(shape.input[0])[:2]
