"""ResizeBilinear and ResizeNearestNeighbor gather through cached plans (``runtime/kernels/image_ops.py``).

Each output must equal, bit for bit, TF's kernel computed element by element: the source
coordinates in float32 (legacy or half-pixel scaler), the four corners cast to float, then
``top = tl + (tr - tl) * x_lerp``, ``bottom = bl + (br - bl) * x_lerp``, ``top + (bottom - top) * y_lerp``
(``resize_bilinear_op.cc``); nearest takes ``floor`` (``roundf`` with align_corners) of the scaled
coordinate, clamped (``resize_nearest_neighbor_op.cc``). The reference below is that loop, written
with numpy float32 scalars, run over upscales, downscales, 1-pixel and non-square images, every flag
combination TF accepts and every dtype the kernels take.
"""

from __future__ import annotations

import itertools
import math

import ml_dtypes
import numpy as np
import pytest

from runtime import errors
from runtime.kernels import image_ops, load_all

KERNELS = load_all()  # the whole registry: these tests call kernels by op type

F32 = np.float32
BILINEAR_DTYPES = [
    np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64,
    np.float16, ml_dtypes.bfloat16, np.float32, np.float64,
]  # fmt: skip
FLAGS = [(False, False), (True, False), (False, True)]  # align_corners with half_pixel_centers is refused
SIZES = [
    ((1, 1), (1, 1)),
    ((1, 1), (3, 5)),
    ((2, 3), (1, 1)),
    ((3, 3), (7, 7)),
    ((5, 4), (2, 9)),
    ((8, 6), (3, 4)),
    ((37, 45), (16, 16)),
    ((16, 16), (37, 45)),
    ((4, 9), (4, 9)),
    ((7, 1), (2, 6)),
]


def _scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    if align_corners and out_size > 1:
        return F32(in_size - 1) / F32(out_size - 1)
    return F32(in_size) / F32(out_size)


def _bilinear_axis(out_size, in_size, align_corners, half_pixel_centers):
    scale = _scale(in_size, out_size, align_corners)
    axis = []
    for i in range(out_size):
        source = (F32(i) + F32(0.5)) * scale - F32(0.5) if half_pixel_centers else F32(i) * scale
        floor = F32(math.floor(source))
        lower = max(int(floor), 0)
        upper = min(int(math.ceil(source)), in_size - 1)
        axis.append((lower, upper, F32(source - floor)))
    return axis


def reference_bilinear(images, out_h, out_w, align_corners, half_pixel_centers):
    batch, in_h, in_w, channels = images.shape
    result = np.empty((batch, out_h, out_w, channels), F32)
    ys = _bilinear_axis(out_h, in_h, align_corners, half_pixel_centers)
    xs = _bilinear_axis(out_w, in_w, align_corners, half_pixel_centers)
    for b, (y, (y0, y1, ly)), (x, (x0, x1, lx)), c in itertools.product(
        range(batch), enumerate(ys), enumerate(xs), range(channels)
    ):
        tl, tr = F32(images[b, y0, x0, c]), F32(images[b, y0, x1, c])
        bl, br = F32(images[b, y1, x0, c]), F32(images[b, y1, x1, c])
        top = tl + (tr - tl) * lx
        bottom = bl + (br - bl) * lx
        result[b, y, x, c] = top + (bottom - top) * ly
    return result


def _nearest_axis(out_size, in_size, align_corners, half_pixel_centers):
    scale = _scale(in_size, out_size, align_corners)
    axis = []
    for i in range(out_size):
        source = (F32(i) + F32(0.5)) * scale if half_pixel_centers else F32(i) * scale
        index = math.floor(source + F32(0.5)) if align_corners else math.floor(source)
        index = min(index, in_size - 1)
        axis.append(max(index, 0) if half_pixel_centers else index)
    return axis


def reference_nearest(images, out_h, out_w, align_corners, half_pixel_centers):
    ys = _nearest_axis(out_h, images.shape[1], align_corners, half_pixel_centers)
    xs = _nearest_axis(out_w, images.shape[2], align_corners, half_pixel_centers)
    result = np.empty((images.shape[0], out_h, out_w, images.shape[3]), images.dtype)
    for (y, sy), (x, sx) in itertools.product(enumerate(ys), enumerate(xs)):
        result[:, y, x, :] = images[:, sy, sx, :]
    return result


def _images(shape, dtype, seed):
    r = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return r.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)
    # Wide values, negatives and exact ties: the lerps' rounding shows.
    return (r.normal(0, 100, size=shape) * r.choice([1, 1e-3, 50], size=shape)).astype(dtype)


@pytest.fixture(params=["cached", "uncached"])
def plans(request, monkeypatch):
    """Plans from the cache, or built per call (as for large outputs)."""
    if request.param == "uncached":
        monkeypatch.setattr(image_ops, "_CACHED_ELEMENTS", 0)
    return request.param


@pytest.mark.parametrize("dtype", BILINEAR_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("flags", FLAGS, ids=["legacy", "align_corners", "half_pixel"])
def test_bilinear_equals_tfs_element_loop(dtype, flags, plans):
    for seed, ((in_h, in_w), (out_h, out_w)) in enumerate(SIZES):
        for channels, batch in ((1, 1), (3, 2)):
            images = _images((batch, in_h, in_w, channels), dtype, seed)
            got = KERNELS["ResizeBilinear"].fn(
                images,
                np.array([out_h, out_w], np.int32),
                align_corners=flags[0],
                half_pixel_centers=flags[1],
            )
            want = reference_bilinear(images, out_h, out_w, *flags)
            np.testing.assert_array_equal(
                got, want, strict=True, err_msg=f"{(in_h, in_w)} -> {(out_h, out_w)}"
            )


@pytest.mark.parametrize("dtype", [*BILINEAR_DTYPES, np.bool_], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("flags", FLAGS, ids=["legacy", "align_corners", "half_pixel"])
def test_nearest_equals_tfs_element_loop(dtype, flags, plans):
    for seed, ((in_h, in_w), (out_h, out_w)) in enumerate(SIZES):
        for channels, batch in ((1, 1), (3, 2)):
            images = _images((batch, in_h, in_w, channels), np.uint8, seed).astype(dtype)
            got = KERNELS["ResizeNearestNeighbor"].fn(
                images,
                np.array([out_h, out_w], np.int32),
                align_corners=flags[0],
                half_pixel_centers=flags[1],
            )
            want = reference_nearest(images, out_h, out_w, *flags)
            np.testing.assert_array_equal(
                got, want, strict=True, err_msg=f"{(in_h, in_w)} -> {(out_h, out_w)}"
            )


def test_non_contiguous_images_resize_as_their_copies():
    images = _images((2, 9, 11, 4), np.float32, 7)[:, ::2, 1::3, ::-1]
    size = np.array([5, 3], np.int32)
    for op in ("ResizeBilinear", "ResizeNearestNeighbor"):
        fn = KERNELS[op].fn
        np.testing.assert_array_equal(
            fn(images, size, half_pixel_centers=True),
            fn(np.ascontiguousarray(images), size, half_pixel_centers=True),
            strict=True,
        )


@pytest.mark.parametrize("shape", [(0, 4, 5, 3), (0, 0, 0, 3), (2, 4, 5, 0)])
def test_empty_batches_and_channels_give_empty_outputs(shape):
    size = np.array([3, 2], np.int32)
    assert KERNELS["ResizeBilinear"].fn(np.zeros(shape, np.uint8), size).dtype == np.float32
    for op in ("ResizeBilinear", "ResizeNearestNeighbor"):
        assert KERNELS[op].fn(np.zeros(shape, np.uint8), size).shape == (shape[0], 3, 2, shape[3])


@pytest.mark.parametrize(
    ("shape", "size", "flags", "message"),
    [
        ((4, 5, 3), [2, 2], (False, False), "input must be 4-dimensional[4,5,3]"),
        ((1, 4, 5, 3), [2, 2, 2], (False, False), "shape_t must have two elements [3]"),
        ((1, 4, 5, 3), [[2, 2, 2]], (False, False), "shape_t must have two elements [1,3]"),
        ((1, 4, 5, 3), [2, 2], (True, True), "If half_pixel_centers is True, align_corners must be False."),
        ((1, 4, 5, 3), [0, 2], (False, False), "output dimensions must be positive"),
        ((1, 0, 5, 3), [2, 2], (False, False), "input image must be of non-zero size"),
    ],
)
def test_invalid_arguments_raise_tfs_errors(shape, size, flags, message):
    for op in ("ResizeBilinear", "ResizeNearestNeighbor"):
        with pytest.raises(errors.InvalidArgumentError) as raised:
            KERNELS[op].fn(np.zeros(shape, np.float32), np.array(size, np.int32), align_corners=flags[0],
                           half_pixel_centers=flags[1])  # fmt: skip
        assert raised.value.message == message


def test_plans_are_cached_read_only_and_bounded():
    image_ops._bilinear_plan.cache_clear()
    images, size = _images((1, 6, 7, 3), np.float32, 1), np.array([4, 4], np.int32)
    first = KERNELS["ResizeBilinear"].fn(images, size)
    second = KERNELS["ResizeBilinear"].fn(images, size)
    info = image_ops._bilinear_plan.cache_info()
    assert (info.hits, info.misses) == (1, 1) and info.maxsize is not None
    np.testing.assert_array_equal(first, second, strict=True)
    index, lx, ly, _ = image_ops._bilinear_plan(images.shape, (4, 4), False, False)
    assert not (index.flags.writeable or lx.flags.writeable or ly.flags.writeable)
    first += 1  # an output is the caller's to write into: it shares nothing with the plan
    np.testing.assert_array_equal(second, KERNELS["ResizeBilinear"].fn(images, size), strict=True)


def test_plans_of_large_outputs_are_not_kept():
    image_ops._bilinear_plan.cache_clear()
    image_ops._nearest_plan.cache_clear()
    images = _images((2, 5, 3, 2), np.uint8, 3)
    big = np.array([200, 200], np.int32)  # 80,000 output elements per image
    bilinear = KERNELS["ResizeBilinear"].fn(images, big, half_pixel_centers=True)
    nearest = KERNELS["ResizeNearestNeighbor"].fn(images, big, half_pixel_centers=True)
    assert image_ops._bilinear_plan.cache_info().currsize == 0
    assert image_ops._nearest_plan.cache_info().currsize == 0
    assert bilinear.shape == nearest.shape == (2, 200, 200, 2) and bilinear.dtype == np.float32
    # Uncached plans equal the element loop (the ``plans`` fixture); here a spot check.
    np.testing.assert_array_equal(
        nearest[:, ::40, ::40], reference_nearest(images, 200, 200, False, True)[:, ::40, ::40]
    )
