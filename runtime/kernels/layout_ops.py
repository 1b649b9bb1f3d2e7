"""Layout kernels (TF's array ops that move data between dimensions): SpaceToBatchND,
BatchToSpaceND (and their V1 forms), SpaceToDepth, DepthToSpace, DataFormatVecPermute,
DataFormatDimMap. Each is a reshape/transpose/pad or crop, never an element loop.
"""

from __future__ import annotations

import numpy as np

from runtime.kernels.array_ops import _ints
from runtime.kernels.math_ops import invalid, out, shape_str
from runtime.kernels.registry import kernel


def _block_args(input, block_shape, pads, what):  # noqa: A002
    block = _ints(block_shape)
    m = len(block)
    pairs = (
        np.asarray(pads).astype(np.int64).reshape(-1, 2)
        if np.asarray(pads).size
        else np.zeros((0, 2), np.int64)
    )
    if pairs.shape[0] != m:
        raise invalid(f"{what} should have shape [{m}, 2] instead of {shape_str(np.asarray(pads).shape)}")
    if input.ndim < m + 1:
        raise invalid(f"input rank should be >= {m + 1} instead of {input.ndim}")
    if any(b < 1 for b in block):
        raise invalid(
            f"All values in block_shape must be positive, got value, {min(block)} at index {block.index(min(block))}."
        )
    if np.any(pairs < 0):
        raise invalid(f"All values in {what} must be non-negative")
    return block, pairs.tolist()


@kernel("SpaceToBatchND", const_inputs=(1, 2))
def space_to_batch_nd(input, block_shape, paddings):  # noqa: A002
    block, pads = _block_args(input, block_shape, paddings, "paddings")
    m = len(block)
    padded = np.pad(input, [(0, 0), *pads] + [(0, 0)] * (input.ndim - 1 - m))
    batch, rest = padded.shape[0], padded.shape[1 + m :]
    split = [batch]
    for i, b in enumerate(block):
        size = padded.shape[1 + i]
        if size % b:
            raise invalid(f"padded_shape[{i}]={size} is not divisible by block_shape[{i}]={b}")
        split += [size // b, b]
    x = padded.reshape(split + list(rest))
    perm = (
        [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + list(range(1 + 2 * m, x.ndim))
    )
    x = np.transpose(x, perm)
    return np.ascontiguousarray(
        x.reshape([batch * int(np.prod(block))] + [split[1 + 2 * i] for i in range(m)] + list(rest))
    )


@kernel("BatchToSpaceND", const_inputs=(1, 2))
def batch_to_space_nd(input, block_shape, crops):  # noqa: A002
    block, cuts = _block_args(input, block_shape, crops, "crops")
    m = len(block)
    prod = int(np.prod(block))
    if input.shape[0] % prod:
        raise invalid(
            f"Input batch dimension ({input.shape[0]}) is not divisible by product of block sizes ({prod})"
        )
    batch = input.shape[0] // prod
    spatial, rest = list(input.shape[1 : 1 + m]), list(input.shape[1 + m :])
    x = input.reshape(block + [batch] + spatial + rest)
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    perm += list(range(2 * m + 1, x.ndim))
    x = np.transpose(x, perm).reshape([batch] + [s * b for s, b in zip(spatial, block)] + rest)
    index = [slice(None)]
    for i, (lo, hi) in enumerate(cuts):
        size = spatial[i] * block[i]
        if lo + hi > size:
            raise invalid(f"crops must be non-negative and not exceed the input shape: {lo} + {hi} > {size}")
        index.append(slice(lo, size - hi))
    return np.ascontiguousarray(x[tuple(index)])


@kernel("SpaceToBatch", const_inputs=(1,))
def space_to_batch(input, paddings, *, block_size):  # noqa: A002
    return space_to_batch_nd(input, np.asarray([block_size, block_size]), paddings)


@kernel("BatchToSpace", const_inputs=(1,))
def batch_to_space(input, crops, *, block_size):  # noqa: A002
    return batch_to_space_nd(input, np.asarray([block_size, block_size]), crops)


def _format_positions(src_format: str, dst_format: str, size: int) -> list[int]:
    if size == len(src_format) - 2:  # spatial dims only
        src_format = "".join(c for c in src_format if c not in "NC")
        dst_format = "".join(c for c in dst_format if c not in "NC")
    return [src_format.index(c) for c in dst_format]


@kernel("DataFormatVecPermute")
def data_format_vec_permute(x, *, src_format="NHWC", dst_format="NCHW"):
    if x.shape[0] not in (len(src_format), len(src_format) - 2):
        raise invalid(
            f"First dimension of 1D input must be of size {len(src_format)} or {len(src_format) - 2}, "
            f"but got shape {shape_str(x.shape)}"
        )
    return np.ascontiguousarray(x[_format_positions(src_format, dst_format, x.shape[0])])


@kernel("DataFormatDimMap")
def data_format_dim_map(x, *, src_format="NHWC", dst_format="NCHW"):
    n = len(src_format)
    mapping = np.asarray([dst_format.index(c) for c in src_format], x.dtype)
    return out(mapping[np.mod(x, n)], x.dtype)


@kernel("SpaceToDepth")
def space_to_depth(input, *, block_size, data_format="NHWC"):  # noqa: A002
    x = input if data_format == "NHWC" else np.transpose(input, (0, 2, 3, 1))
    n, h, w, c = x.shape
    b = block_size
    if h % b or w % b:
        raise invalid(f"Image width {w} and height {h} should be divisible by block_size: {b}")
    y = (
        x.reshape(n, h // b, b, w // b, b, c)
        .transpose(0, 1, 3, 2, 4, 5)
        .reshape(n, h // b, w // b, b * b * c)
    )
    return np.ascontiguousarray(y if data_format == "NHWC" else np.transpose(y, (0, 3, 1, 2)))


@kernel("DepthToSpace")
def depth_to_space(input, *, block_size, data_format="NHWC"):  # noqa: A002
    x = input if data_format == "NHWC" else np.transpose(input, (0, 2, 3, 1))
    n, h, w, c = x.shape
    b = block_size
    if c % (b * b):
        raise invalid(f"Input depth dimension {c} should be divisible by: {b * b}")
    y = (
        x.reshape(n, h, w, b, b, c // (b * b))
        .transpose(0, 1, 3, 2, 4, 5)
        .reshape(n, h * b, w * b, c // (b * b))
    )
    return np.ascontiguousarray(y if data_format == "NHWC" else np.transpose(y, (0, 3, 1, 2)))
