"""Converters for TF's TensorList ops: a list is one dense ONNX tensor, its index on axis 0.

TF2 RNNs (Keras' ``LSTM``/``GRU``, ``tf.map_fn``, ``tf.scan``) move their sequences through
TensorLists: ``TensorListFromTensor`` unstacks the input along time, the ``While`` body reads one
step with ``TensorListGetItem`` and writes one with ``TensorListSetItem`` into a list from
``TensorListReserve``, and ``TensorListStack`` gathers the result. All of these are exact on a
dense tensor ``[num_elements, *element_shape]`` as long as every element has the same shape,
which a list built this way guarantees. A reserved list whose element shape is partly unknown
(the batch dimension) has no tensor until a loop writes it: the ``While`` converter turns its
writes into a ``Loop`` scan output (``control_flow_ops.py``); any other use is not convertible.
Lists that change length (``TensorListPushBack``/``PopBack``) have no converter here.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from runtime.onnx.converter import Builder, ListInfo, NotConvertible, TFNode, Value, converter, onnx_type


def dense(b: Builder, name: str) -> str:
    """``name`` as a dense list tensor, or NotConvertible where no tensor holds it yet."""
    info = b.lists.get(name)
    if info is not None and not info.dense:
        raise NotConvertible("a reserved TensorList of unknown element shape is used outside a loop")
    return name


def _element_shape(value: np.ndarray) -> tuple[int, ...] | None:
    value = np.asarray(value)
    return None if value.ndim == 0 else tuple(int(d) for d in value.reshape(-1))


@converter("TensorListFromTensor", const_inputs=(1,), lists=True)
def tensor_list_from_tensor(node: TFNode, b: Builder) -> str:
    """The tensor itself is the dense list."""
    if node.rank(0) < 1:
        raise NotConvertible("TensorListFromTensor of a scalar")
    out = b.op("Identity", [node.inputs[0]])
    b.lists[out] = ListInfo(_element_shape(node.const_required(1)), None, True)
    return out


@converter("TensorListReserve", const_inputs=(0,), lists=True)
def tensor_list_reserve(node: TFNode, b: Builder) -> str:
    """Zeros where the element shape is known (TF stacks unset elements as zeros); else a
    placeholder name that only a loop's scan output can fill (see the module docstring). A
    length known only at run time (TF1's ``TensorArray(size=tf.shape(x)[0])``) is such a length."""
    shape = _element_shape(node.const_required(0))
    known = node.const(1)
    count = None if known is None else int(np.asarray(known).reshape(()))
    elem = onnx_type(node.attr("element_dtype"))
    if shape is not None and all(d >= 0 for d in shape) and (count is None or count >= 0):
        if count is not None:
            zeros = np.zeros((count, *shape), helper.tensor_dtype_to_np_dtype(elem))
            out = b.const(zeros, node.name)
        else:
            dims = b.op("Concat", [_length(node, b), b.int64s(list(shape))], axis=0, rank=1)
            zero = helper.make_tensor("zero", elem, [1], [0])
            out = b.op("ConstantOfShape", [dims], value=zero, rank=len(shape) + 1, elem_type=elem)
        b.lists[out] = ListInfo(shape, count, True)
        return out
    out = b.fresh(node.name)
    b.values[out] = Value(elem, None if shape is None else len(shape) + 1)
    if count is None:
        b.lists[out] = ListInfo(shape, None, False, _length(node, b))
    else:
        b.lists[out] = ListInfo(shape, count if count >= 0 else None, False)
    return out


def _length(node: TFNode, b: Builder) -> str:
    """The reserved length as a 1-D int64 value (what ``Pad`` and ``ConstantOfShape`` take)."""
    return b.op("Reshape", [b.cast(node.inputs[1], TensorProto.INT64), b.int64s([1])], rank=1)


@converter("TensorListGetItem", lists=True)
def tensor_list_get_item(node: TFNode, b: Builder) -> str:
    items = dense(b, node.inputs[0])
    rank = b.rank(items)
    return b.op("Gather", [items, node.inputs[1]], axis=0, rank=None if rank is None else rank - 1)


@converter("TensorListSetItem", lists=True)
def tensor_list_set_item(node: TFNode, b: Builder) -> str:
    """ScatterND of one row (a loop that writes every step uses a scan output instead)."""
    if node.attr("resize_if_index_out_of_bounds", False):
        raise NotConvertible("TensorListSetItem that resizes the list")
    items = dense(b, node.inputs[0])
    index = b.op("Reshape", [b.cast(node.inputs[1], TensorProto.INT64), b.int64s([1, 1])], rank=2)
    update = b.op("Unsqueeze", [node.inputs[2], b.int64s([0])], rank=b.rank(items))
    out = b.op("ScatterND", [items, index, update], rank=b.rank(items))
    b.lists[out] = b.lists.get(items) or ListInfo(None, None, True)
    return out


@converter("TensorListStack", lists=True)
def tensor_list_stack(node: TFNode, b: Builder) -> str:
    return b.op("Identity", [dense(b, node.inputs[0])])


@converter("TensorListGather", lists=True)
def tensor_list_gather(node: TFNode, b: Builder) -> str:
    """Rows of the dense list (TF1's ``TensorArray.stack``: all of them, in order)."""
    items, rank = dense(b, node.inputs[0]), b.rank(node.inputs[0])
    out_rank = None if rank is None else rank + node.rank(1) - 1
    return b.op("Gather", [items, node.inputs[1]], axis=0, rank=out_rank)


@converter("TensorListLength", lists=True)
def tensor_list_length(node: TFNode, b: Builder) -> str:
    shape = b.op("Shape", [dense(b, node.inputs[0])], start=0, end=1, rank=1, elem_type=TensorProto.INT64)
    length = b.op("Squeeze", [shape, b.int64s([0])], rank=0)
    return b.cast(length, TensorProto.INT32)


@converter("TensorListElementShape", lists=True)
def tensor_list_element_shape(node: TFNode, b: Builder) -> str:
    """The list's declared element shape (-1 where unknown), as TF keeps it: a constant."""
    info = b.lists.get(node.inputs[0])
    if info is None:
        raise NotConvertible("TensorListElementShape of a list of unknown origin")
    shape = np.asarray(-1 if info.element_shape is None else info.element_shape)
    return b.const(shape.astype(helper.tensor_dtype_to_np_dtype(onnx_type(node.attr("shape_type")))))
