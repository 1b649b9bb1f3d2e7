"""FFT kernels: FFT/IFFT (1-3D) on complex tensors, RFFT/IRFFT (1-3D) with ``fft_length``.

numpy's pocketfft computes in double precision; results are rounded to TF's output types
(complex64 for float32 input unless ``Tcomplex`` says otherwise), so they match TF's single
precision transforms to rounding.
"""

from __future__ import annotations

import numpy as np

from runtime import dtypes
from runtime.kernels.math_ops import invalid, out, shape_str
from runtime.kernels.registry import kernel


def _axes(x: np.ndarray, rank: int) -> tuple[int, ...]:
    if x.ndim < rank:
        raise invalid(f"Input must have rank of at least {rank} but got: {x.ndim}")
    return tuple(range(-rank, 0))


def _complex_fft(rank: int, inverse: bool):
    def compute(input):  # noqa: A002
        axes = _axes(input, rank)
        fn = np.fft.ifftn if inverse else np.fft.fftn
        return out(fn(input, axes=axes), input.dtype) if input.size else input.copy()

    return compute


for _rank, _suffix in ((1, ""), (2, "2D"), (3, "3D")):
    kernel(f"FFT{_suffix}")(_complex_fft(_rank, False))
    kernel(f"IFFT{_suffix}")(_complex_fft(_rank, True))


def _lengths(fft_length, rank: int) -> list[int]:
    lengths = [int(v) for v in np.asarray(fft_length).reshape(-1)]
    if len(lengths) != rank:
        raise invalid(
            f"fft_length must be length {rank} vector, got: {shape_str(np.asarray(fft_length).shape)}"
        )
    return lengths


def _check_lengths(x: np.ndarray, needed: list[int]) -> None:
    """TF crops the transformed axes to fft_length but never zero-pads them."""
    for i, n in enumerate(needed):
        axis = x.ndim - len(needed) + i
        if x.shape[axis] < n:
            raise invalid(f"Input dimension {axis} must have length of at least {n} but got: {x.shape[axis]}")


def _rfft(rank: int):
    def compute(input, fft_length, *, Tcomplex=dtypes.DT_COMPLEX64):  # noqa: A002
        axes = _axes(input, rank)
        lengths = _lengths(fft_length, rank)
        dtype = dtypes.as_numpy_dtype(Tcomplex)
        _check_lengths(input, lengths)
        if 0 in lengths:
            return np.zeros(
                input.shape[:-rank] + tuple(lengths[:-1]) + (lengths[-1] // 2 + 1 if lengths[-1] else 0,),
                dtype,
            )
        return out(np.fft.rfftn(input, s=lengths, axes=axes), dtype)

    return compute


def _irfft(rank: int):
    def compute(input, fft_length, *, Treal=dtypes.DT_FLOAT):  # noqa: A002
        axes = _axes(input, rank)
        lengths = _lengths(fft_length, rank)
        dtype = dtypes.as_numpy_dtype(Treal)
        _check_lengths(input, lengths[:-1] + [lengths[-1] // 2 + 1])
        if 0 in lengths:
            return np.zeros(input.shape[:-rank] + tuple(lengths), dtype)
        # TF reads only the first fft_length[-1] // 2 + 1 bins of the inner axis (and crops or
        # zero-pads the outer axes to fft_length), as irfftn does.
        return out(np.fft.irfftn(input, s=lengths, axes=axes), dtype)

    return compute


for _rank, _suffix in ((1, ""), (2, "2D"), (3, "3D")):
    kernel(f"RFFT{_suffix}", const_inputs=(1,))(_rfft(_rank))
    kernel(f"IRFFT{_suffix}", const_inputs=(1,))(_irfft(_rank))
