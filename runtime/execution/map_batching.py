"""A map loop's steps run op by op, same-shaped items batched (``runtime/execution/map_loops.py``).

``MapLoop`` runs the body's item ops once per step: for ``tf.map_fn`` over a batch of images, every
image pays each op's Python dispatch (cast, divide, resize, ...). Run op by op instead, over all
the steps at once, items whose inputs have the same shape and dtype can go through one kernel call
as one stacked array, where the op is known to treat each item alone with the same arithmetic:

- elementwise ops with correctly rounded results (Cast, + - * /, min, max, Neg, Abs, Sqrt): a
  stacked array gives each element the same value as the item alone gets;
- ops that only reshape (ExpandDims, Squeeze, Reshape, Identity): the kernel runs on one item,
  and the stack is reshaped to its output shape;
- ResizeBilinear and ResizeNearestNeighbor: the items' batches are concatenated into one batch,
  which the kernels resize image by image.

Every other op runs per item; a loop-invariant list's items are read without the kernel's
per-call checks once its first read has made them (``list_ops.get_items``). Inputs equal for
every step (loop invariants, constants) stay shared. Items are grouped by their inputs' shapes
and dtypes, so a batch of same-sized images takes a handful of calls per op; a batch of
all-different sizes runs item by item as before.
Outputs are bit-identical to the step-by-step run. Where anything fails, ``run_items`` returns
None and the loop runs step by step, so an error is the one the sequential run raises first.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from runtime.kernels import list_ops

ELEMENTWISE = frozenset(
    {"Cast", "Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "Neg", "Abs", "Sqrt"}
)
RESHAPES = frozenset({"ExpandDims", "Squeeze", "Reshape", "Identity"})
RESIZES = frozenset({"ResizeBilinear", "ResizeNearestNeighbor"})
_DEADLY = frozenset({"Switch", "RefSwitch"})  # kernels that return dead values


class _Shared:
    """A value equal for every step."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class _Batched:
    """One value per step, held as stacked arrays: ``groups`` (step indices) and their ``arrays``."""

    __slots__ = ("groups", "arrays", "_items")

    def __init__(self, groups: tuple, arrays: list):
        self.groups, self.arrays, self._items = groups, arrays, None

    def items(self, steps: int) -> list:
        if self._items is None:
            self._items = [None] * steps
            for group, array in zip(self.groups, self.arrays):
                for position, step in enumerate(group):
                    self._items[step] = array[position]
        return self._items


def _item(value, step: int, steps: int):
    if type(value) is _Shared:
        return value.value
    if type(value) is _Batched:
        return value.items(steps)[step]
    return value[step]


def _column(value, steps: int):
    """Every step's value."""
    if type(value) is _Shared:
        return [value.value] * steps
    return value.items(steps) if type(value) is _Batched else value


def _groups(varying: list, steps: int) -> tuple | None:
    """The steps grouped by their varying inputs' shapes and dtypes, or None if no group has two."""
    batched = {id(v.groups): v.groups for v in varying if type(v) is _Batched}
    if len(batched) == 1 and all(type(v) is _Batched for v in varying):
        return next(iter(batched.values()))
    keys: dict[tuple, list[int]] = {}
    columns = [_column(v, steps) for v in varying]
    for step in range(steps):
        key = []
        for column in columns:
            item = column[step]
            if type(item) is not np.ndarray or not item.ndim:
                return None
            key.append((item.shape, item.dtype))
        keys.setdefault(tuple(key), []).append(step)
    if len(keys) == steps:
        return None
    return tuple(tuple(group) for group in keys.values())


def _stacked(value, groups: tuple, index: int, steps: int):
    if type(value) is _Shared:
        return value.value
    if type(value) is _Batched and value.groups is groups:
        return value.arrays[index]
    items = value.items(steps) if type(value) is _Batched else value
    return np.stack([items[step] for step in groups[index]])


def _batched_call(op_type: str, call, inputs: list, groups: tuple, steps: int) -> list:
    arrays = []
    for index, group in enumerate(groups):
        stacked = [_stacked(v, groups, index, steps) for v in inputs]
        if op_type in ELEMENTWISE:
            result = call(*stacked)
        elif op_type in RESHAPES:
            first = call(*[_item(v, group[0], steps) for v in inputs])
            if type(first) is not np.ndarray or first.dtype != stacked[0].dtype:
                raise TypeError("not a reshape")
            result = stacked[0].reshape((len(group), *first.shape))
        else:  # RESIZES: the items' batches resized as one batch
            images = stacked[0]
            if images.ndim != 5:
                raise TypeError("not a batch of images per item")
            resized = call(images.reshape((-1, *images.shape[2:])), *stacked[1:])
            result = resized.reshape((len(group), images.shape[1], *resized.shape[1:]))
        if type(result) is not np.ndarray or result.ndim < 2 or result.shape[0] != len(group):
            raise TypeError("not batched")
        arrays.append(result)
    return arrays


def _batchable(step, inputs: list) -> list | None:
    """The inputs that vary per step, where ``step``'s op may run batched on them."""
    op_type = step.op.type if step.op is not None else None
    if step.multi or op_type not in ELEMENTWISE | RESHAPES | RESIZES:
        return None
    varying = [v for v in inputs if type(v) is not _Shared]
    if (
        not varying
        or (op_type not in ELEMENTWISE and type(inputs[0]) is _Shared)
        or len(varying) > (len(inputs) if op_type in ELEMENTWISE else 1)
    ):
        return None
    return varying


def _shared_ok(op_type: str, inputs: list, groups: tuple, steps: int) -> bool:
    """An elementwise op's varying operands have one shape per item, and its shared operands
    broadcast against a stack as against one item (no more dimensions than an item)."""
    if op_type not in ELEMENTWISE:
        return True
    shared_ndim = max((np.ndim(v.value) for v in inputs if type(v) is _Shared), default=0)
    for group in groups:
        items = [_item(v, group[0], steps) for v in inputs if type(v) is not _Shared]
        if any(item.shape != items[0].shape for item in items) or shared_ndim > items[0].ndim:
            return False
    return True


def _run_step(step, inputs: list, steps: int):
    varying = _batchable(step, inputs)
    groups = _groups(varying, steps) if varying else None
    if groups is not None and _shared_ok(step.op.type, inputs, groups, steps):
        return _Batched(groups, _batched_call(step.op.type, step.call, inputs, groups, steps))
    if all(type(v) is _Shared for v in inputs):
        result = step.call(*[v.value for v in inputs])
        return [_Shared(r) for r in result] if step.multi else _Shared(result)
    columns = [_column(v, steps) for v in inputs]
    call = step.call
    if step.op.type == "TensorListGetItem" and type(inputs[0]) is _Shared and type(inputs[2]) is _Shared:
        return list_ops.get_items(call, inputs[0].value, columns[1], inputs[2].value)
    results = [call(*args) for args in zip(*columns)]
    if step.multi:
        return [[r[k] for r in results] for k in range(len(step.outputs))]
    return results


def run_items(plan, feeds: Sequence, steps: int, deadline: float | None = None) -> list[tuple] | None:
    """Each step's fetches of ``plan``, as ``steps`` runs of it would give them (``run_columns``)."""
    columns = run_columns(plan, feeds, steps, deadline)
    return None if columns is None else list(zip(*columns))


def run_columns(plan, feeds: Sequence, steps: int, deadline: float | None = None) -> list | None:
    """Per fetch of ``plan``, its value at each step, as ``steps`` runs of it would give them
    (a ``Rows`` where they are the rows of one array); ``feeds``: per feed slot a list of its
    per-step values, or a ``shared(value)`` for one equal for all. None where any kernel fails,
    the ``deadline`` (``time.monotonic()``) passes, or a step could see a dead value (TF1
    control flow): then run step by step."""
    if any(step.accepts_dead or step.op is None or step.op.type in _DEADLY for step in plan.steps):
        return None
    vals: list = [None] * plan.num_slots
    for slot, value in zip(plan.feed_slots, feeds):
        vals[slot] = value
    try:
        for step in plan.steps:
            if deadline is not None and time.monotonic() > deadline:
                return None
            result = _run_step(step, [vals[i] for i in step.inputs], steps)
            if step.multi:
                for slot, value in zip(step.outputs, result):
                    vals[slot] = value
            else:
                vals[step.outputs] = result
            for slot in step.frees:
                vals[slot] = None
    except Exception:  # noqa: BLE001 - the step-by-step run raises the error TF would
        return None
    return [_fetched(vals[slot], steps) for slot in plan.fetch_slots]


class Rows(list):
    """Per-step values that are the rows of ``stacked``, in step order: a list writing them all
    can hold the array itself (``list_ops.set_items``)."""

    stacked: np.ndarray


def _fetched(value, steps: int) -> list:
    if type(value) is not _Batched or len({(a.shape[1:], a.dtype) for a in value.arrays}) != 1:
        return list(_column(value, steps))
    if len(value.groups) == 1:  # every step, in order
        stacked = value.arrays[0]
    else:
        stacked = np.empty((steps, *value.arrays[0].shape[1:]), value.arrays[0].dtype)
        for group, array in zip(value.groups, value.arrays):
            stacked[list(group)] = array
    rows = Rows(stacked)
    rows.stacked = stacked
    return rows


def shared(value) -> _Shared:
    """A feed equal for every step (a loop invariant, a constant)."""
    return _Shared(value)
