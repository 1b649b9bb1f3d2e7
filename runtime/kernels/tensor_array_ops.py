"""TensorArrayV3 kernels: the TF1 arrays ``map_fn``, ``dynamic_rnn`` and v1 while loops write.

A TensorArray lives for one run, as in TF's per-step container: ``TensorArrayV3`` makes a fresh
``TensorArray`` each time it runs, and its handle output is that object. The ``flow`` tensors only
order the reads after the writes (a float32 zero); writes change the array in place, which is
safe because each run owns the arrays it made and the flow edges order the ops that touch them.
Errors follow TF's ``tensor_array.h``: writing an index twice, reading past the size, reading an
unwritten index whose element shape is not fully known (a known one reads as zeros), reading a
cleared index twice when ``clear_after_read``.
"""

from __future__ import annotations

import itertools

import numpy as np

from runtime import dtypes
from runtime.kernels.math_ops import invalid, shape_str
from runtime.kernels.registry import kernel
from runtime.tensor_util import conforms

_FLOW = np.float32(0)
_CLEARED = object()
_COUNTER = itertools.count()


def _text(shape: tuple | None) -> str:
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _defined(shape: tuple | None) -> bool:
    return shape is not None and all(d is not None for d in shape)


class TensorArray:
    """One run's array: its items (None = unwritten), dtype, inferred element shape."""

    __slots__ = ("name", "items", "dtype", "element_shape", "dynamic_size", "clear_after_read", "identical")

    def __init__(self, name, size, dtype, element_shape, dynamic_size, clear_after_read, identical):
        self.name = name
        self.items: list = [None] * size
        self.dtype = dtype
        self.element_shape = element_shape
        self.dynamic_size = dynamic_size
        self.clear_after_read = clear_after_read
        self.identical = identical

    def __repr__(self) -> str:
        return f"TensorArray({self.name!r}, size={len(self.items)})"

    def error(self, text: str):
        return invalid(f"TensorArray {self.name}: {text}")

    def write(self, index: int, value) -> None:
        value = np.asarray(value, dtypes.as_numpy_dtype(self.dtype))
        if index < 0:
            raise self.error(f"Tried to write to index {index} but array size is: {len(self.items)}")
        if index >= len(self.items):
            if not self.dynamic_size:
                raise self.error(
                    f"Tried to write to index {index} but array is not resizeable and size is: {len(self.items)}"
                )
            self.items.extend([None] * (index + 1 - len(self.items)))
        if not conforms(self.element_shape, value.shape):
            raise self.error(
                f"Could not write to TensorArray index {index} because the value shape is "
                f"{shape_str(value.shape)} which is incompatible with the TensorArray's inferred element "
                f"shape: {_text(self.element_shape)} (consider setting infer_shape=False)."
            )
        if self.identical and not _defined(self.element_shape):
            self.element_shape = value.shape
        if self.items[index] is not None:
            raise self.error(
                f"Could not write to TensorArray index {index} because it has already been written to."
            )
        self.items[index] = value

    def read(self, index: int, element_shape: tuple | None = None):
        if not 0 <= index < len(self.items):
            raise invalid(f"Tried to read from index {index} but array size is: {len(self.items)}")
        value = self.items[index]
        if value is _CLEARED:
            raise self.error(
                f"Could not read index {index} twice because it was cleared after a previous read "
                "(perhaps try setting clear_after_read = false?)."
            )
        if value is None:
            shape = self.element_shape if _defined(self.element_shape) else element_shape
            if not _defined(shape):
                raise self.error(
                    f"Could not read from TensorArray index {index}.  Furthermore, the element shape is not "
                    f"fully defined: {_text(self.element_shape)}.  It is possible you are working with a "
                    "resizeable TensorArray and stop_gradients is not allowing the gradients to be written.  "
                    "If you set the full element_shape property on the forward TensorArray, the proper "
                    "all-zeros tensor will be returned instead of incurring this error."
                )
            return np.zeros(shape, dtypes.as_numpy_dtype(self.dtype))
        if self.clear_after_read:
            self.items[index] = _CLEARED
        return value


def _array(handle) -> TensorArray:
    if not isinstance(handle, TensorArray):
        raise invalid(f"Expected a TensorArray handle, got {type(handle).__name__}")
    return handle


@kernel("TensorArrayV3", stateful=True)
def tensor_array_v3(
    size,
    *,
    dtype,
    element_shape=None,
    dynamic_size=False,
    clear_after_read=True,
    identical_element_shapes=False,
    tensor_array_name="",
    ctx,
):
    size = int(size)
    if size < 0:
        raise invalid(f"Size should be >= 0, but saw: {size}")
    # TF names each array after the attr (else the node) plus a process-wide counter.
    name = f"{tensor_array_name or ctx.name}_{next(_COUNTER)}"
    array = TensorArray(
        name, size, dtype, element_shape, dynamic_size, clear_after_read, identical_element_shapes
    )
    return array, _FLOW


@kernel("TensorArrayWriteV3", stateful=True)
def tensor_array_write_v3(handle, index, value, flow_in):
    _array(handle).write(int(index), value)
    return _FLOW


@kernel("TensorArrayReadV3", stateful=True)
def tensor_array_read_v3(handle, index, flow_in, *, dtype):
    return _array(handle).read(int(index))


def _stack(array: TensorArray, values: list, element_shape: tuple | None) -> np.ndarray:
    np_dtype = dtypes.as_numpy_dtype(array.dtype)
    if not values:
        shape = array.element_shape if _defined(array.element_shape) else element_shape
        if not _defined(shape):
            raise invalid(
                f"TensorArray has size zero, but element shape {_text(shape)} is not fully defined. Currently "
                "only static shapes are supported when packing zero-size TensorArrays."
            )
        return np.zeros((0, *shape), np_dtype)
    first = values[0].shape
    for i, value in enumerate(values[1:], 1):
        if value.shape != first:
            raise invalid(
                f"TensorArray has inconsistent shapes.  Index 0 has shape: {shape_str(first)} but index {i} "
                f"has shape: {shape_str(value.shape)}"
            )
    return np.stack(values).astype(np_dtype, copy=False)


@kernel("TensorArrayGatherV3", stateful=True)
def tensor_array_gather_v3(handle, indices, flow_in, *, dtype, element_shape=None):
    array = _array(handle)
    indices = np.asarray(indices).reshape(-1)
    return _stack(array, [array.read(int(i), element_shape) for i in indices], element_shape)


@kernel("TensorArrayScatterV3", stateful=True)
def tensor_array_scatter_v3(handle, indices, value, flow_in):
    array = _array(handle)
    indices = np.asarray(indices).reshape(-1)
    value = np.asarray(value)
    if value.ndim < 1 or value.shape[0] != indices.size:
        raise invalid(
            f"Expected len(indices) == values.shape[0], but saw: {indices.size} vs. "
            f"{value.shape[0] if value.ndim else 0}"
        )
    for i, index in enumerate(indices):
        array.write(int(index), value[i])
    return _FLOW


@kernel("TensorArraySizeV3", stateful=True)
def tensor_array_size_v3(handle, flow_in):
    return np.int32(len(_array(handle).items))


@kernel("TensorArrayConcatV3", stateful=True)
def tensor_array_concat_v3(handle, flow_in, *, dtype, element_shape_except0=None):
    array = _array(handle)
    np_dtype = dtypes.as_numpy_dtype(array.dtype)
    values = []
    for i in range(len(array.items)):
        value = array.read(i)
        if value.ndim == 0:
            raise array.error("Concat saw a scalar shape at index 0 but requires at least vectors.")
        values.append(value)
    lengths = np.array([v.shape[0] for v in values], np.int64)
    if not values:
        inner = element_shape_except0
        if not _defined(inner):
            raise invalid(
                "TensorArray has size zero, but element_shape_except0 "
                f"{_text(inner)} is not fully defined. Currently only static shapes are supported when "
                "concatenating zero-size TensorArrays."
            )
        return np.zeros((0, *inner), np_dtype), lengths
    inner = values[0].shape[1:]
    for i, value in enumerate(values[1:], 1):
        if value.shape[1:] != inner:
            raise invalid(
                f"TensorArray has inconsistent shapes.  Index 0 has (excepting dimension 0) shape: "
                f"{shape_str(inner)} but index {i} has (excepting dimension 0) shape: {shape_str(value.shape[1:])}"
            )
    return np.concatenate(values).astype(np_dtype, copy=False), lengths


@kernel("TensorArraySplitV3", stateful=True)
def tensor_array_split_v3(handle, value, lengths, flow_in):
    array = _array(handle)
    value = np.asarray(value)
    lengths = np.asarray(lengths).reshape(-1).astype(np.int64)
    if value.ndim < 1:
        raise array.error(
            f"Expected value to be at least a vector, but received shape: {shape_str(value.shape)}"
        )
    if lengths.sum() != value.shape[0] or np.any(lengths < 0):
        raise invalid(
            f"Expected sum of lengths to be equal to values.shape[0], but sum of lengths is "
            f"{int(lengths.sum())} and value's shape is: {shape_str(value.shape)}"
        )
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    if not array.dynamic_size and lengths.size > len(array.items):
        raise array.error(
            f"Expected lengths to be a vector of size at most {len(array.items)}, but saw size: {lengths.size}"
        )
    for i in range(lengths.size):
        array.write(i, value[bounds[i] : bounds[i + 1]])
    return _FLOW


@kernel("TensorArrayCloseV3", stateful=True)
def tensor_array_close_v3(handle):
    return None
