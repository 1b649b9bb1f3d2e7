"""Batch forming: how tasks' tensors become one batch's and the batch's outputs each task's.

Pure functions over numpy arrays, TF Serving's ``BatchingSession`` and ``batching_util`` step by
step, each with its texts and codes:

- ``input_batch_size``: a task's size, dimension 0 of every input (``ComputeTensorBatchSize``);
- ``merge_inputs``: the tasks' inputs concatenated along dimension 0 (``MergeInputTensors``),
  inputs of different shapes padded at the end of each dimension with their first element
  when ``pad_variable_length_inputs`` (``AddPadding``), and rows added up to the next allowed
  batch size, copies of the first row of the last task (dropped again from the results);
- ``split_outputs``: each batched output cut back into the tasks' rows (``SplitOutputTensors``);
- ``split_task_sizes`` / ``slice_inputs`` / ``concat_outputs``: one task larger than the room
  left in the open batch cut into pieces that fill batches (``InputSplitMetadata``,
  ``SplitInputTask``), and its result put back together.

A batch holds tasks of one queue, so every task feeds the same tensors, in the same order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from runtime import errors


def input_batch_size(values: Sequence[np.ndarray]) -> int:
    """The batch size of one task: dimension 0, equal across its inputs (INVALID_ARGUMENT)."""
    if not values:
        _invalid("Batching Run() must have at least one input tensor")
    size = None
    for value in values:
        if value.ndim == 0:
            _invalid("Batching Run() input tensors must have at least one dimension")
        if size is None:
            size = value.shape[0]
        elif value.shape[0] != size:
            _invalid("Batching Run() input tensors must have equal 0th-dimension size")
    return size


def round_to_allowed_batch_size(allowed_batch_sizes: Sequence[int], batch_size: int) -> int:
    """The smallest allowed size that holds ``batch_size`` (``batch_size`` itself where none
    is allowed or none is large enough: TF Serving then ignores the constraint)."""
    for allowed in allowed_batch_sizes:
        if allowed >= batch_size:
            return allowed
    return batch_size


def merge_inputs(
    task_inputs: Sequence[Sequence[np.ndarray]],
    names: Sequence[str],
    allowed_batch_sizes: Sequence[int] = (),
    pad_variable_length_inputs: bool = False,
) -> tuple[list[np.ndarray], int]:
    """The batch's inputs, in ``names`` order, and the padding rows added to reach an allowed
    batch size. ``task_inputs[i][j]`` is task i's value of input ``names[j]``."""
    sizes = [values[0].shape[0] for values in task_inputs]
    batch_size = sum(sizes)
    padding = round_to_allowed_batch_size(allowed_batch_sizes, batch_size) - batch_size
    # The padding row is the first row of the last task that has one (TF Serving takes the last
    # task's; a task of 0 rows has none to give).
    donor = next((i for i in range(len(sizes) - 1, -1, -1) if sizes[i] > 0), None)
    if donor is None:
        padding = 0
    merged = []
    for j, name in enumerate(names):
        column = [values[j] for values in task_inputs]
        if pad_variable_length_inputs:
            column = pad_variable_length(column)
        else:
            _check_same_shapes(column, name)
        if padding:
            column.append(np.repeat(column[donor][:1], padding, axis=0))
        merged.append(column[0] if len(column) == 1 else np.concatenate(column, axis=0))
    return merged, padding


def _check_same_shapes(column: list[np.ndarray], name: str) -> None:
    reference = column[0].shape
    for value in column[1:]:
        if value.shape[1:] != reference[1:] or value.ndim != len(reference):
            raise errors.FailedPreconditionError(
                None,
                None,
                f"Tensors with name '{name}' from different tasks have different shapes and padding is "
                "turned off. Set pad_variable_length_inputs to true, or ensure that all tensors with "
                "the same name have equal dimensions starting with the first dim.",
            )


def pad_variable_length(column: list[np.ndarray]) -> list[np.ndarray]:
    """Every task's value of one input padded to the largest size of each dimension but the
    0th (``CalculateMaxDimSizes`` + ``AddPadding``)."""
    ranks = {value.ndim for value in column}
    if len(ranks) > 1:
        _invalid(f"Tensors of one input have different ranks in one batch: {sorted(ranks)}")
    dims = tuple(max(value.shape[d] for value in column) for d in range(column[0].ndim))
    return [pad_to_dims(value, dims) for value in column]


def pad_to_dims(value: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    """``value`` grown at the end of every dimension but the 0th to ``dims``, the new cells
    holding its first element (``AddPadding``; ranks 1 to 6, as TF's Pad)."""
    if not 1 <= value.ndim <= 6:
        _invalid("Only tensors with rank from 1 to 6 can be padded.")
    shape = (value.shape[0], *dims[1:])
    if math.prod(shape) == value.size:  # nothing to add (or nothing at all): a reshape
        return value.reshape(shape)
    if value.size < 1:
        _invalid("Got empty tensor in batch of non-empty tensors.")
    out = np.full(shape, value.flat[0], dtype=value.dtype)
    out[tuple(slice(0, n) for n in value.shape)] = value
    return out


def split_outputs(outputs: Sequence[np.ndarray], task_sizes: Sequence[int], padding: int) -> list[list]:
    """Each task's rows of every batched output (views, in output order); the padding rows are
    dropped. FAILED_PRECONDITION where an output is not batched along dimension 0."""
    total = sum(task_sizes) + padding
    for value in outputs:
        if np.ndim(value) == 0:
            raise errors.FailedPreconditionError(None, None, "Batched output tensor has 0 dimensions")
        if value.shape[0] != total:
            raise errors.FailedPreconditionError(
                None,
                None,
                "Batched output tensor's 0th dimension does not equal the sum of the 0th dimension "
                "sizes of the input tensors",
            )
    if len(task_sizes) == 1 and not padding:
        return [list(outputs)]
    per_task = []
    start = 0
    for size in task_sizes:
        end = start + size
        per_task.append([value[start:end] for value in outputs])
        start = end
    return per_task


def split_task_sizes(
    input_task_size: int, open_batch_remaining_slot: int, batch_size_limit: int
) -> list[int]:
    """The sizes a task of ``input_task_size`` is cut into: first what fills the open batch's
    ``open_batch_remaining_slot``, then whole batches of ``batch_size_limit``, then the rest
    (TF's ``InputSplitMetadata``)."""
    if input_task_size <= open_batch_remaining_slot:
        return [input_task_size]
    head = (
        open_batch_remaining_slot if open_batch_remaining_slot > 0 else min(input_task_size, batch_size_limit)
    )
    sizes = [head]
    left = input_task_size - head
    while left > 0:
        sizes.append(min(left, batch_size_limit))
        left -= sizes[-1]
    return sizes


def slice_inputs(values: Sequence[np.ndarray], sizes: Sequence[int]) -> list[list[np.ndarray]]:
    """The inputs of each piece of a split task (views along dimension 0)."""
    pieces = []
    start = 0
    for size in sizes:
        pieces.append([value[start : start + size] for value in values])
        start += size
    return pieces


def concat_outputs(pieces: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
    """A split task's outputs: each output's pieces concatenated along dimension 0."""
    if len(pieces) == 1:
        return list(pieces[0])
    return [np.concatenate(column, axis=0) for column in zip(*pieces)]


def _invalid(message: str):
    raise errors.InvalidArgumentError(None, None, message)
