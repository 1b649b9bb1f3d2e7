"""TensorList kernels (TF2's ``list_ops``): the variant lists Keras RNNs and ``tf.while_loop`` use.

A list value is a ``TensorList``: a tuple of items (an item is a numpy array, or None where
nothing was set yet), the element dtype and the element shape (a tuple with None for unknown
dims, or None for an unknown rank). Values are immutable, as TF's are to a caller: every op
returns a new list, so a list shared by two consumers (a While's input and its caller) never
changes under one of them.

``element_shape`` inputs are shape tensors as TF encodes them: -1 for an unknown dim, a scalar
-1 for an unknown rank. An unset item reads as zeros when the element shape is fully known, as
in TF; otherwise it is an error.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from runtime import dtypes
from runtime.kernels.math_ops import invalid, shape_str
from runtime.kernels.registry import kernel
from runtime.tensor_util import conforms


class TensorList(NamedTuple):
    items: tuple
    element_dtype: int
    element_shape: tuple | None

    def __repr__(self) -> str:
        return f"TensorList(length={len(self.items)}, element_shape={self.element_shape})"


def _shape_from_tensor(shape) -> tuple | None:
    shape = np.asarray(shape)
    if shape.ndim == 0:
        if int(shape) != -1:
            raise invalid("The only valid scalar shape tensor is the fully unknown shape specified as -1.")
        return None
    return tuple(None if int(d) < 0 else int(d) for d in shape.reshape(-1))


def _shape_text(shape: tuple | None) -> str:
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _merge(a: tuple | None, b: tuple | None) -> tuple | None:
    """The most specific shape both describe; InvalidArgument when they disagree."""
    if a is None:
        return b
    if b is None:
        return a
    if len(a) != len(b):
        raise invalid(f"Incompatible ranks during merge: {len(a)} vs. {len(b)}")
    merged = []
    for x, y in zip(a, b):
        if x is not None and y is not None and x != y:
            raise invalid(f"Incompatible shapes during merge: {_shape_text(a)} vs. {_shape_text(b)}")
        merged.append(x if x is not None else y)
    return tuple(merged)


def _check_list(handle, element_dtype: int | None = None) -> TensorList:
    if not isinstance(handle, TensorList):
        raise invalid(f"Input handle is not a list. Saw: '{type(handle).__name__}'")
    if element_dtype is not None and handle.element_dtype != element_dtype:
        raise invalid(
            f"Invalid data types; op elements {dtypes.name(element_dtype)} but list elements "
            f"{dtypes.name(handle.element_dtype)}"
        )
    return handle


def _check_item(lst: TensorList, item: np.ndarray) -> None:
    if not conforms(lst.element_shape, item.shape):
        raise invalid(
            f"Tried to set a tensor with incompatible shape at a list index. Item element shape: "
            f"{shape_str(item.shape)} list shape: {_shape_text(lst.element_shape)}"
        )


def _zeros(lst: TensorList, shape: tuple | None) -> np.ndarray:
    shape = _merge(lst.element_shape, shape)
    if shape is None or any(d is None for d in shape):
        raise invalid(
            f"Trying to read an uninitialized tensor but element_shape is not fully defined: "
            f"{_shape_text(shape)} and no list element is set."
        )
    return np.zeros(shape, dtypes.as_numpy_dtype(lst.element_dtype))


def _stacked(lst: TensorList, items, shape: tuple | None) -> np.ndarray:
    """Items stacked on a new axis 0; unset items are zeros of the known element shape."""
    known = _merge(lst.element_shape, shape)
    np_dtype = dtypes.as_numpy_dtype(lst.element_dtype)
    if type(items) is _StackedItems and items.stacked.dtype == np_dtype:
        _merge(known, items.stacked.shape[1:])  # the error a mismatched shape raises
        return items.stacked
    kinds = {(item.shape, item.dtype) for item in items if item is not None}
    if items and len(kinds) == 1 and all(item is not None for item in items):
        # One shape, every item set (a map's output): merging it once merges every item.
        ((item_shape, item_dtype),) = kinds
        _merge(known, item_shape)
        return np.stack(items) if item_dtype == np_dtype else np.stack(items).astype(np_dtype)
    for item in items:
        if item is not None:
            known = _merge(known, item.shape)
    if not items:
        if known is None or any(d is None for d in known):
            raise invalid(
                f"Tried to stack elements of an empty list with non-fully-defined element_shape: "
                f"{_shape_text(known)}"
            )
        return np.zeros((0, *known), np_dtype)
    filled = [item if item is not None else _zeros(lst, known) for item in items]
    return np.stack([np.asarray(x, np_dtype) for x in filled])


def _index(lst: TensorList, index) -> int:
    index = int(index)
    if not 0 <= index < len(lst.items):
        raise invalid(f"Trying to access element {index} in a list with {len(lst.items)} elements.")
    return index


@kernel("EmptyTensorList")
def empty_tensor_list(element_shape, max_num_elements, *, element_dtype):
    return TensorList((), element_dtype, _shape_from_tensor(element_shape))


@kernel("TensorListReserve")
def tensor_list_reserve(element_shape, num_elements, *, element_dtype):
    count = int(num_elements)
    if count < 0:
        raise invalid(f"The num_elements to reserve must be a non negative number, but got {count}")
    return TensorList((None,) * count, element_dtype, _shape_from_tensor(element_shape))


@kernel("TensorListFromTensor")
def tensor_list_from_tensor(tensor, element_shape, *, element_dtype):
    tensor = np.asarray(tensor)
    if tensor.ndim < 1:
        raise invalid(f"Tensor must be at least a vector, but saw shape: {shape_str(tensor.shape)}")
    shape = _shape_from_tensor(element_shape)
    if not conforms(shape, tensor.shape[1:]):
        raise invalid(
            f"Specified a list with shape {_shape_text(shape)} from a tensor with shape {shape_str(tensor.shape[1:])}"
        )
    return TensorList(tuple(tensor), element_dtype, shape)


@kernel("TensorListLength")
def tensor_list_length(input_handle):
    return np.int32(len(_check_list(input_handle).items))


@kernel("TensorListElementShape")
def tensor_list_element_shape(input_handle, *, shape_type):
    shape = _check_list(input_handle).element_shape
    np_dtype = dtypes.as_numpy_dtype(shape_type)
    if shape is None:
        return np.array(-1, np_dtype)
    return np.array([-1 if d is None else d for d in shape], np_dtype)


@kernel("TensorListGetItem")
def tensor_list_get_item(input_handle, index, element_shape, *, element_dtype):
    lst = _check_list(input_handle, element_dtype)
    item = lst.items[_index(lst, index)]
    if item is None:
        return _zeros(lst, _shape_from_tensor(element_shape))
    return item


def get_items(get_item, handle, indices, element_shape) -> list:
    """``get_item`` (the ``TensorListGetItem`` kernel) at each index of one list, as a map loop's
    steps read it: the first call makes the list's checks, set items in range are then read
    directly, and any other index goes through the kernel (its zeros, its error)."""
    items, results = getattr(handle, "items", ()), []
    for step, index in enumerate(indices):
        item = items[index] if step and 0 <= index < len(items) else None
        results.append(item if item is not None else get_item(handle, index, element_shape))
    return results


@kernel("TensorListSetItem")
def tensor_list_set_item(input_handle, index, item, *, element_dtype, resize_if_index_out_of_bounds=False):
    lst = _check_list(input_handle, element_dtype)
    item = np.asarray(item)
    _check_item(lst, item)
    index = int(index)
    items = list(lst.items)
    if resize_if_index_out_of_bounds and index >= len(items):
        items.extend([None] * (index + 1 - len(items)))
    if not 0 <= index < len(items):
        raise invalid(f"Trying to modify element {index} in a list with {len(items)} elements.")
    items[index] = item
    return lst._replace(items=tuple(items))


class _StackedItems(tuple):
    """A list's items that are the rows of one array, kept as ``stacked``: a map loop's output,
    written at once (``set_items``). Any change to the items makes a plain tuple again."""

    stacked: np.ndarray


def _uniform(items: list, lst: TensorList) -> bool:
    """Every item an array of one shape and dtype, which fits the list's element shape."""
    first = items[0]
    if type(first) is not np.ndarray or not conforms(lst.element_shape, first.shape):
        return False
    shape, dtype = first.shape, first.dtype
    return all(type(x) is np.ndarray and x.shape == shape and x.dtype == dtype for x in items)


def set_items(input_handle, indices, items, *, element_dtype) -> TensorList:
    """``TensorListSetItem`` of each ``items[k]`` at ``indices[k]``, in order, as one write: the
    same list, or the error of the first write that fails. Where every item then has one shape
    and the list's dtype, they are held stacked, so that ``TensorListStack`` need not copy them."""
    if not items:
        return input_handle
    lst = _check_list(input_handle, element_dtype)
    positions = indices.tolist() if type(indices) is np.ndarray else [int(i) for i in indices]
    stacked = getattr(items, "stacked", None)  # items that are the rows of one array, in order
    if (
        stacked is not None
        and len(items) == len(lst.items) > 1
        and stacked.dtype == dtypes.as_numpy_dtype(lst.element_dtype)
        and conforms(lst.element_shape, stacked.shape[1:])
        and positions == list(range(len(items)))
    ):  # every item set by this write: the list is that array
        return lst._replace(items=_held(stacked))
    written = list(lst.items)
    if _uniform(items, lst) and 0 <= min(positions) and max(positions) < len(written):
        for index, item in zip(positions, items):  # one shape, checked once; bounds checked
            written[index] = item
    else:
        for index, item in zip(positions, items):  # TensorListSetItem's checks, in write order
            item = np.asarray(item)
            _check_item(lst, item)
            if not 0 <= index < len(written):
                raise invalid(f"Trying to modify element {index} in a list with {len(written)} elements.")
            written[index] = item
    # One item stacks as fast as it is held: keep the plain list.
    if len(written) < 2 or not _uniform(written, lst):
        return lst._replace(items=tuple(written))
    if written[0].dtype != dtypes.as_numpy_dtype(lst.element_dtype):
        return lst._replace(items=tuple(written))
    return lst._replace(items=_held(np.stack(written)))


def _held(stacked: np.ndarray) -> _StackedItems:
    held = _StackedItems(stacked)
    held.stacked = stacked
    return held


@kernel("TensorListStack")
def tensor_list_stack(input_handle, element_shape, *, element_dtype, num_elements=-1):
    lst = _check_list(input_handle, element_dtype)
    if num_elements != -1 and num_elements != len(lst.items):
        raise invalid(
            f"Operation expected a list with {num_elements} elements but got a list with "
            f"{len(lst.items)} elements."
        )
    return _stacked(lst, lst.items, _shape_from_tensor(element_shape))


@kernel("TensorListGather")
def tensor_list_gather(input_handle, indices, element_shape, *, element_dtype):
    lst = _check_list(input_handle, element_dtype)
    indices = np.asarray(indices).reshape(-1)
    items = [lst.items[_index(lst, i)] for i in indices]
    return _stacked(lst, items, _shape_from_tensor(element_shape))


@kernel("TensorListPushBack")
def tensor_list_push_back(input_handle, tensor, *, element_dtype):
    lst = _check_list(input_handle, element_dtype)
    tensor = np.asarray(tensor)
    _check_item(lst, tensor)
    return lst._replace(items=lst.items + (tensor,))


@kernel("TensorListPopBack")
def tensor_list_pop_back(input_handle, element_shape, *, element_dtype):
    lst = _check_list(input_handle, element_dtype)
    if not lst.items:
        raise invalid("Trying to pop from an empty list.")
    item = lst.items[-1]
    if item is None:
        item = _zeros(lst, _shape_from_tensor(element_shape))
    return lst._replace(items=lst.items[:-1]), item


@kernel("TensorListResize")
def tensor_list_resize(input_handle, size):
    lst = _check_list(input_handle)
    size = int(size)
    if size < 0:
        raise invalid(f"TensorListSlice expects size to be non-negative. Got: {size}")
    items = lst.items[:size] + (None,) * max(0, size - len(lst.items))
    return lst._replace(items=items)


def _concat(lst: TensorList, shape: tuple | None, leading: np.ndarray | None):
    np_dtype = dtypes.as_numpy_dtype(lst.element_dtype)
    shape = _merge(lst.element_shape, shape)
    if shape is not None and len(shape) == 0:
        raise invalid("Concat requires elements to be at least vectors, found scalars instead.")
    inner = shape[1:] if shape is not None else None
    for item in lst.items:
        if item is not None:
            inner = _merge(inner, item.shape[1:])
    pieces = []
    for i, item in enumerate(lst.items):
        if item is None:
            rows = shape[0] if shape is not None and shape[0] is not None else None
            if rows is None and leading is not None and i < leading.size:
                rows = int(leading[i])
            if rows is None or inner is None or any(d is None for d in inner):
                raise invalid(
                    "Trying to concat list with only uninitialized tensors but element_shape_except_first_dim "
                    "is not fully defined: " + _shape_text(inner)
                )
            item = np.zeros((rows, *inner), np_dtype)
        pieces.append(np.asarray(item, np_dtype))
    lengths = np.array([p.shape[0] for p in pieces], np.int64)
    if not pieces:
        if inner is None or any(d is None for d in inner):
            raise invalid(
                "All except the first dimension must be fully defined when concating an empty "
                "tensor list. element_shape: " + _shape_text(shape)
            )
        return np.zeros((0, *inner), np_dtype), lengths
    return np.concatenate(pieces), lengths


@kernel("TensorListConcat")
def tensor_list_concat(input_handle, *, element_dtype, element_shape=None):
    return _concat(_check_list(input_handle, element_dtype), element_shape, None)


@kernel("TensorListConcatV2")
def tensor_list_concat_v2(input_handle, element_shape, leading_dims, *, element_dtype):
    lst = _check_list(input_handle, element_dtype)
    return _concat(lst, _shape_from_tensor(element_shape), np.asarray(leading_dims).reshape(-1))


@kernel("TensorListSplit")
def tensor_list_split(tensor, element_shape, lengths, *, element_dtype):
    tensor = np.asarray(tensor)
    if tensor.ndim < 1:
        raise invalid(f"Tensor must be at least a vector, but saw shape: {shape_str(tensor.shape)}")
    items, start = [], 0
    for length in np.asarray(lengths).reshape(-1):
        length = int(length)
        if length < 0:
            raise invalid(f"Invalid value in lengths: {length}")
        if start + length > tensor.shape[0]:
            raise invalid(
                f"Attempting to slice [{start}, {start + length}] from tensor with length {tensor.shape[0]}"
            )
        items.append(tensor[start : start + length])
        start += length
    if start != tensor.shape[0]:
        raise invalid(f"Unused values in tensor. Length of tensor: {tensor.shape[0]} Values used: {start}")
    return TensorList(tuple(items), element_dtype, _shape_from_tensor(element_shape))


def _scatter(items: list, tensor: np.ndarray, indices: np.ndarray) -> list:
    if tensor.shape[:1] != indices.shape:
        raise invalid(
            f"Specified a list with shape {shape_str(tensor.shape)} from a tensor with {indices.size} indices"
        )
    for row, index in zip(tensor, indices):
        index = int(index)
        if index < 0:
            raise invalid(f"Indices in TensorListScatter must all be non-negative. Got {index}")
        if index >= len(items):
            items.extend([None] * (index + 1 - len(items)))
        items[index] = row
    return items


@kernel("TensorListScatter")
def tensor_list_scatter(tensor, indices, element_shape, *, element_dtype):
    return tensor_list_scatter_v2(tensor, indices, element_shape, -1, element_dtype=element_dtype)


@kernel("TensorListScatterV2")
def tensor_list_scatter_v2(tensor, indices, element_shape, num_elements, *, element_dtype):
    tensor = np.asarray(tensor)
    indices = np.asarray(indices).reshape(-1)
    count = int(num_elements)
    items = [None] * max(count, 0)
    shape = _merge(_shape_from_tensor(element_shape), tensor.shape[1:])
    return TensorList(tuple(_scatter(items, tensor, indices)), element_dtype, shape)


@kernel("TensorListScatterIntoExistingList")
def tensor_list_scatter_into_existing_list(input_handle, tensor, indices, *, element_dtype):
    lst = _check_list(input_handle, element_dtype)
    tensor = np.asarray(tensor)
    indices = np.asarray(indices).reshape(-1)
    if not conforms(lst.element_shape, tensor.shape[1:]):
        raise invalid(
            f"Tried to scatter a tensor with element shape {shape_str(tensor.shape[1:])} into a list with "
            f"element shape {_shape_text(lst.element_shape)}"
        )
    return lst._replace(items=tuple(_scatter(list(lst.items), tensor, indices)))


@kernel("TensorListConcatLists")
def tensor_list_concat_lists(input_a, input_b, *, element_dtype):
    a, b = _check_list(input_a, element_dtype), _check_list(input_b, element_dtype)
    return a._replace(items=a.items + b.items, element_shape=_merge(a.element_shape, b.element_shape))
