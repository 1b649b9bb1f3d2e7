"""Reordering kernels: Transpose, ConjugateTranspose, InvertPermutation, ReverseV2/Reverse,
ReverseSequence and Roll; each moves elements without reading their values.

Split out of ``array_ops.py`` (whose helpers they share) to keep modules small.
"""

from __future__ import annotations

import numpy as np

from runtime.kernels.array_ops import _ints
from runtime.kernels.math_ops import invalid
from runtime.kernels.registry import kernel


@kernel("Transpose", const_inputs=(1,))
def transpose(x, perm):
    p = _ints(perm)
    if len(p) != x.ndim:
        raise invalid(
            f"transpose expects a vector of size {x.ndim}. But input(1) is a vector of size {len(p)}"
        )
    if sorted(p) != list(range(x.ndim)):
        bad = next((v for v in p if not 0 <= v < x.ndim), None)
        if bad is not None:
            raise invalid(f"{bad} is out of range [0 .. {x.ndim})")
        missing = next(i for i in range(x.ndim) if i not in p)
        raise invalid(f"{missing} is missing from {{{','.join(str(v) for v in p)}}}.")
    return np.ascontiguousarray(np.transpose(x, p))


@kernel("ConjugateTranspose", const_inputs=(1,))
def conjugate_transpose(x, perm):
    return np.conj(transpose(x, perm))


@kernel("InvertPermutation")
def invert_permutation(x):
    p = np.asarray(x)
    if p.ndim != 1:
        raise invalid("invert_permutation expects a 1D vector.")
    n = p.size
    if np.any((p < 0) | (p >= n)):
        bad = int(p[(p < 0) | (p >= n)][0])
        raise invalid(f"{bad} is not between 0 and {n}")
    result = np.full(n, -1, p.dtype)
    result[p] = np.arange(n, dtype=p.dtype)
    if np.any(result < 0):
        raise invalid(
            f"{int(np.flatnonzero(np.bincount(p, minlength=n) > 1)[0])} is duplicated in the input."
        )
    return result


@kernel("ReverseV2", const_inputs=(1,))
def reverse_v2(tensor, axis):
    axes = []
    for a in _ints(axis):
        if not -tensor.ndim <= a < tensor.ndim:
            raise invalid(f"'axis'[0] = {a} is out of valid range [0, {tensor.ndim - 1}")
        axes.append(a % tensor.ndim)
    if len(set(axes)) != len(axes):
        raise invalid(f"axis {axes[0]} specified more than once.")
    return np.array(np.flip(tensor, axis=tuple(axes))) if axes else tensor.copy()


@kernel("Reverse")
def reverse(tensor, dims):
    flags = np.asarray(dims).reshape(-1)
    if flags.size != tensor.ndim:
        raise invalid(
            f"'dims' must have the same number of values as 'input' has dimensions. 'input' has "
            f"{tensor.ndim}'dims' has {flags.size} values"
        )
    axes = tuple(int(a) for a in np.flatnonzero(flags))
    return np.array(np.flip(tensor, axes)) if axes else tensor.copy()


@kernel("ReverseSequence")
def reverse_sequence(input, seq_lengths, *, seq_dim, batch_dim=0):  # noqa: A002
    lengths = np.asarray(seq_lengths).astype(np.int64)
    if np.any(lengths > input.shape[seq_dim]):
        bad = int(np.flatnonzero(lengths > input.shape[seq_dim])[0])
        raise invalid(f"seq_lens({bad}) > input.dims({seq_dim})")
    n = input.shape[seq_dim]
    pos = np.arange(n)
    shape = [1] * input.ndim
    shape[seq_dim] = n
    lshape = [1] * input.ndim
    lshape[batch_dim] = input.shape[batch_dim]
    pos_b = pos.reshape(shape)
    len_b = lengths.reshape(lshape)
    source = np.where(pos_b < len_b, len_b - 1 - pos_b, pos_b)
    source = np.broadcast_to(source, input.shape)
    return np.take_along_axis(input, source, axis=seq_dim)


@kernel("Roll", const_inputs=(1, 2))
def roll(input, shift, axis):  # noqa: A002
    shifts, axes = _ints(shift), _ints(axis)
    if len(shifts) != len(axes):
        raise invalid(f"shift and axis must have the same size, got {len(shifts)} and {len(axes)}")
    for a in axes:
        if not -input.ndim <= a < input.ndim:
            raise invalid(f"axis {a} is out of range")
    return np.roll(input, shifts, axes) if axes else input.copy()
