"""Data-flow kernels on dense tensors: DynamicPartition, DynamicStitch, ParallelDynamicStitch.

Feature-column and partitioned-variable embedding lookups reach these in TF1 exports.
"""

from __future__ import annotations

import numpy as np

from runtime.kernels.bounds import SMALL, in_range
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
        if idx.size:  # empty pieces add nothing (and would cost a concatenation)
            rows.append(idx.reshape(-1))
            values.append(value.reshape((idx.size,) + value.shape[idx.ndim :]))
    inner = data[0].shape[np.asarray(indices[0]).ndim :]
    if not rows:
        return np.zeros((0,) + inner, data[0].dtype)
    total = sum(r.size for r in rows)
    if total <= SMALL:  # positions as a Python list: their bounds without numpy reductions
        flat = [p for r in rows for p in r.tolist()]
        low, high = min(flat), max(flat)
    else:
        flat = np.concatenate(rows).astype(np.int64, copy=False) if len(rows) > 1 else rows[0]
        low, high = int(flat.min()), int(flat.max())
    if low < 0:
        first = next(i for i, p in enumerate(np.asarray(flat).tolist()) if p < 0)
        raise invalid(f"indices[{first}] = {low} is out of range")
    merged = np.zeros((high + 1,) + inner, data[0].dtype)
    merged[flat] = np.concatenate(values) if len(values) > 1 else values[0]  # later pieces win, as TF's
    return merged


@kernel("DynamicPartition")
def dynamic_partition(data, partitions, *, num_partitions):
    partitions = np.asarray(partitions)
    if data.shape[: partitions.ndim] != partitions.shape:
        raise invalid(
            f"data.shape must start with partitions.shape, got data.shape = {shape_str(data.shape)}, "
            f"partitions.shape = {shape_str(partitions.shape)}"
        )
    if not in_range(partitions, num_partitions):
        bad = (partitions < 0) | (partitions >= num_partitions)
        pos = np.unravel_index(int(np.flatnonzero(bad.reshape(-1))[0]), partitions.shape)
        raise invalid(f"partitions{shape_str(pos)} = {int(partitions[pos])} is not in [0, {num_partitions})")
    flat = partitions.reshape(-1)
    rows = data.reshape((flat.size,) + data.shape[partitions.ndim :])
    if flat.size <= SMALL:  # each partition's positions from a Python list: one take per partition
        members: list[list[int]] = [[] for _ in range(num_partitions)]
        for i, p in enumerate(flat.tolist()):
            members[p].append(i)
        return tuple(rows.take(np.array(m, dtype=np.intp), axis=0) for m in members)
    return tuple(rows[flat == p] for p in range(num_partitions))
