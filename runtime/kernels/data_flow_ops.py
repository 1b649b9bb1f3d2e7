"""Data-flow kernels on dense tensors: DynamicPartition, DynamicStitch, ParallelDynamicStitch.

Feature-column and partitioned-variable embedding lookups reach these in TF1 exports.
"""

from __future__ import annotations

import numpy as np

from runtime.kernels.math_ops import invalid, shape_str
from runtime.kernels.registry import kernel


@kernel("DynamicStitch", "ParallelDynamicStitch")
def dynamic_stitch(indices, data):
    if len(indices) != len(data):
        raise invalid(f"Mismatched number of indices and data: {len(indices)} vs {len(data)}")
    rows, values = [], []
    for i, (idx, value) in enumerate(zip(indices, data)):
        idx = np.asarray(idx)
        if value.shape[: idx.ndim] != idx.shape:
            raise invalid(
                f"data[{i}].shape = {shape_str(value.shape)} does not start with indices[{i}].shape = "
                f"{shape_str(idx.shape)}"
            )
        rows.append(idx.reshape(-1).astype(np.int64))
        values.append(value.reshape((idx.size,) + value.shape[idx.ndim :]))
    flat = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    if flat.size and flat.min() < 0:
        raise invalid(f"indices[{int(np.flatnonzero(flat < 0)[0])}] = {int(flat.min())} is out of range")
    inner = data[0].shape[np.asarray(indices[0]).ndim :]
    merged = np.zeros((int(flat.max()) + 1 if flat.size else 0,) + inner, data[0].dtype)
    merged[flat] = np.concatenate(values) if values else merged[:0]  # later pieces win, as TF's do
    return merged


@kernel("DynamicPartition")
def dynamic_partition(data, partitions, *, num_partitions):
    partitions = np.asarray(partitions)
    if data.shape[: partitions.ndim] != partitions.shape:
        raise invalid(
            f"data.shape must start with partitions.shape, got data.shape = {shape_str(data.shape)}, "
            f"partitions.shape = {shape_str(partitions.shape)}"
        )
    bad = (partitions < 0) | (partitions >= num_partitions)
    if np.any(bad):
        pos = np.unravel_index(int(np.flatnonzero(bad.reshape(-1))[0]), partitions.shape)
        raise invalid(f"partitions{shape_str(pos)} = {int(partitions[pos])} is not in [0, {num_partitions})")
    flat = partitions.reshape(-1)
    rows = data.reshape((flat.size,) + data.shape[partitions.ndim :])
    return tuple(rows[flat == p] for p in range(num_partitions))
