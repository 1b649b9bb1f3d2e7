"""Joining and splitting kernels: Concat/ConcatV2 (and ConcatOffset), Pack/Unpack, Split/SplitV,
Tile, and padding (Pad, PadV2, MirrorPad).

Split out of ``array_ops.py`` (whose helpers they share) to keep modules small. Errors carry TF's
texts where a client could see them.
"""

from __future__ import annotations

import numpy as np

from runtime.kernels.array_ops import _axis, _ints
from runtime.kernels.math_ops import invalid, shape_str
from runtime.kernels.registry import kernel

# --------------------------------------------------------------------------- join and split


def _concat(values, axis):
    first = values[0]
    if first.ndim == 0:
        raise invalid(f"Can't concatenate scalars (use tf.stack instead) for 'concat' : {first.ndim} ")
    axis_i = int(np.asarray(axis))
    if not -first.ndim <= axis_i < first.ndim:
        raise invalid(
            f"ConcatOp : Expected concatenating dimensions in the range [{-first.ndim}, {first.ndim}), "
            f"but got {axis_i}"
        )
    axis_i %= first.ndim
    for i, v in enumerate(values[1:], 1):
        if v.ndim != first.ndim:
            raise invalid(
                f"ConcatOp : Ranks of all input tensors should match: shape[0] = {shape_str(first.shape)} "
                f"vs. shape[{i}] = {shape_str(v.shape)}"
            )
        for d in range(first.ndim):
            if d != axis_i and v.shape[d] != first.shape[d]:
                raise invalid(
                    f"ConcatOp : Dimension {d} in both shapes must be equal: shape[0] = "
                    f"{shape_str(first.shape)} vs. shape[{i}] = {shape_str(v.shape)}"
                )
    return np.concatenate(values, axis=axis_i)


@kernel("ConcatV2", const_inputs=(1,))
def concat_v2(values, axis):
    return _concat(values, axis)


@kernel("Concat", const_inputs=(0,))
def concat(concat_dim, values):
    return _concat(values, concat_dim)


@kernel("Pack")
def pack(values, *, axis=0):
    first = values[0]
    if not -first.ndim - 1 <= axis <= first.ndim:
        raise invalid(f"axis = {axis} not in [{-first.ndim - 1}, {first.ndim + 1})")
    for i, v in enumerate(values[1:], 1):
        if v.shape != first.shape:
            raise invalid(
                f"Shapes of all inputs must match: values[0].shape = {shape_str(first.shape)} != "
                f"values[{i}].shape = {shape_str(v.shape)}"
            )
    axis = axis if axis >= 0 else axis + first.ndim + 1
    if axis == 0 and first.dtype.kind in "biufc":  # np.array is np.stack's axis 0, at a tenth of its cost
        return np.array(values, dtype=first.dtype)
    return np.stack(values, axis=axis)


@kernel("Unpack")
def unpack(value, *, num=None, axis=0):
    if not -value.ndim <= axis < value.ndim:
        raise invalid(f"axis = {axis} not in [{-value.ndim}, {value.ndim})")
    axis %= value.ndim
    return tuple(np.take(value, i, axis=axis) for i in range(value.shape[axis]))


@kernel("Split", const_inputs=(0,))
def split(axis, value, *, num_split):
    a = _axis(axis, value.ndim, "dimension")
    if value.shape[a] % num_split:
        raise invalid(
            f"Number of ways to split should evenly divide the split dimension, but got split_dim {a} "
            f"(size = {value.shape[a]}) and num_split {num_split}"
        )
    return tuple(np.split(value, num_split, axis=a))


@kernel("SplitV", const_inputs=(1, 2))
def split_v(value, size_splits, axis, *, num_split):
    a = _axis(axis, value.ndim, "dimension")
    sizes = _ints(size_splits)
    unknown = [i for i, s in enumerate(sizes) if s == -1]
    if len(unknown) > 1:
        raise invalid("There can only be one -1 in the input.")
    known = sum(s for s in sizes if s != -1)
    if unknown:
        sizes[unknown[0]] = value.shape[a] - known
    if sum(sizes) != value.shape[a] or any(s < 0 for s in sizes):
        raise invalid(
            "Determined shape must either match input shape along split_dim exactly if fully specified, "
            f"or be less than the size of the input along split_dim if not fully specified.  Got: {known}"
        )
    return tuple(np.split(value, np.cumsum(sizes)[:-1], axis=a))


@kernel("ConcatOffset")
def concat_offset(concat_dim, shape):
    axis = int(np.asarray(concat_dim))
    first = np.asarray(shape[0])
    rank = first.size
    if not -rank <= axis < rank:
        raise invalid(f"Concat dim is out of range: {axis} vs. {rank}")
    axis %= rank
    offsets, running = [], 0
    for i, s in enumerate(shape):
        s = np.asarray(s)
        if s.size != rank:
            raise invalid(f"input {i} should contain {rank} elements, but got {s.size}")
        offset = np.zeros(rank, s.dtype)
        offset[axis] = running
        offsets.append(offset)
        running += int(s[axis])
    return tuple(offsets)


# --------------------------------------------------------------------------- tiling


@kernel("Tile", const_inputs=(1,))
def tile(input, multiples):  # noqa: A002
    reps = _ints(multiples)
    if len(reps) != input.ndim:
        raise invalid(
            f"Expected multiples argument to be a vector of length {input.ndim} but got length {len(reps)}"
        )
    if any(r < 0 for r in reps):
        raise invalid(f"Expected multiples[{min(range(len(reps)), key=lambda i: reps[i])}] >= 0")
    return np.tile(input, reps) if input.ndim else input.copy()


# --------------------------------------------------------------------------- padding


def _paddings(paddings, ndim, input_shape=""):
    pads = np.asarray(paddings).astype(np.int64)
    if pads.shape != (ndim, 2):
        raise invalid(
            f"The first dimension of paddings must be the rank of inputs{shape_str(pads.shape)} {input_shape}"
        )
    if np.any(pads < 0):
        before, after = pads[np.flatnonzero(np.any(pads < 0, axis=1))[0]]
        raise invalid(f"Paddings must be non-negative: {before} {after}")
    return [tuple(row) for row in pads.tolist()]


@kernel("Pad", const_inputs=(1,))
def pad(input, paddings):  # noqa: A002
    if input.ndim == 0:
        _paddings(paddings, 0, shape_str(input.shape))
        return input.copy()
    fill_value = b"" if input.dtype == object else 0
    return np.pad(input, _paddings(paddings, input.ndim, shape_str(input.shape)), constant_values=fill_value)


@kernel("PadV2", const_inputs=(1,))
def pad_v2(input, paddings, constant_values):  # noqa: A002
    if input.ndim == 0:
        _paddings(paddings, 0, shape_str(input.shape))
        return input.copy()
    return np.pad(
        input, _paddings(paddings, input.ndim, shape_str(input.shape)), constant_values=constant_values.item()
    )


@kernel("MirrorPad", const_inputs=(1,))
def mirror_pad(input, paddings, *, mode):  # noqa: A002
    pads = _paddings(paddings, input.ndim, shape_str(input.shape))
    offset = 0 if mode == "SYMMETRIC" else 1
    for d, (before, after) in enumerate(pads):
        if before > input.shape[d] - offset or after > input.shape[d] - offset:
            raise invalid(
                f"paddings must be less than the dimension size: {before}, {after} not less than "
                f"{input.shape[d]}"
                if offset
                else f"paddings must be no greater than the dimension size: {before}, {after} greater than "
                f"{input.shape[d]}"
            )
    return np.pad(input, pads, mode="symmetric" if mode == "SYMMETRIC" else "reflect")
