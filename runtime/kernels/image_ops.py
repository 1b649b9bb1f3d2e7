"""Image kernels: resizing (bilinear, nearest, bicubic, area, ScaleAndTranslate) and CropAndResize.

TF computes scales and source coordinates in float32 (``CalculateResizeScale``, the legacy and
half-pixel scalers); these kernels do the same float32 arithmetic so that coordinates landing on
pixel boundaries round as TF's do. Separable resizes build one (out, in) weight matrix per axis
and apply both in one einsum. Colour conversions and adjustments live in ``image_color_ops.py``,
non-max suppression in ``non_max_suppression_ops.py`` and decoding (DecodeJpeg/Png, which needs a
codec) in ``image_decode_ops.py``.
"""

from __future__ import annotations

import functools

import numpy as np

from runtime.errors import OutOfRangeError
from runtime.kernels.math_ops import invalid, out, shape_str
from runtime.kernels.registry import kernel


def _resize_args(images, size, align_corners, half_pixel_centers):
    if images.ndim != 4:
        raise invalid(f"input must be 4-dimensional{shape_str(images.shape)}")
    dims = [int(v) for v in np.asarray(size).reshape(-1)]
    if len(dims) != 2:
        raise invalid(f"shape_t must have two elements {shape_str(np.asarray(size).shape)}")
    if align_corners and half_pixel_centers:
        raise invalid("If half_pixel_centers is True, align_corners must be False.")
    if dims[0] <= 0 or dims[1] <= 0:
        raise invalid("output dimensions must be positive")
    if (images.shape[1] == 0 or images.shape[2] == 0) and images.size == 0 and images.shape[0] > 0:
        raise invalid("input image must be of non-zero size")
    return dims


def _scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    if align_corners and out_size > 1:
        return np.float32(in_size - 1) / np.float32(out_size - 1)
    return np.float32(in_size) / np.float32(out_size)


@functools.lru_cache(maxsize=256)  # per (size, scale, mode): a served model resizes the same shapes
def _bilinear_weights(out_size, in_size, scale, half_pixel_centers):
    """Per output position: lower and upper source index and the (read-only) float32 lerp."""
    lower, upper, lerp = _bilinear_weights_of(out_size, in_size, scale, half_pixel_centers)
    for array in (lower, upper, lerp):
        array.flags.writeable = False
    return lower, upper, lerp


def _bilinear_weights_of(out_size, in_size, scale, half_pixel_centers):
    x = np.arange(out_size, dtype=np.float32)
    if half_pixel_centers:
        source = (x + np.float32(0.5)) * scale - np.float32(0.5)
    else:
        source = x * scale
    floor = np.floor(source)
    lower = np.maximum(floor.astype(np.int64), 0)
    upper = np.minimum(np.ceil(source).astype(np.int64), in_size - 1)
    return lower, upper, (source - floor).astype(np.float32)


@kernel("ResizeBilinear", const_inputs=(1,))
def resize_bilinear(images, size, *, align_corners=False, half_pixel_centers=False):
    out_h, out_w = _resize_args(images, size, align_corners, half_pixel_centers)
    _, in_h, in_w, _ = images.shape
    y0, y1, ly = _bilinear_weights(out_h, in_h, _scale(in_h, out_h, align_corners), half_pixel_centers)
    x0, x1, lx = _bilinear_weights(out_w, in_w, _scale(in_w, out_w, align_corners), half_pixel_centers)
    img = images.astype(np.float32, copy=False)
    top, bottom = img[:, y0], img[:, y1]
    tl, tr, bl, br = top[:, :, x0], top[:, :, x1], bottom[:, :, x0], bottom[:, :, x1]
    lx = lx[None, None, :, None]
    ly = ly[None, :, None, None]
    top_row = tl + (tr - tl) * lx
    bottom_row = bl + (br - bl) * lx
    return out(top_row + (bottom_row - top_row) * ly, np.float32)


def _nearest_index(out_size, in_size, scale, align_corners, half_pixel_centers):
    x = np.arange(out_size, dtype=np.float32)
    source = (x + np.float32(0.5)) * scale if half_pixel_centers else x * scale
    if align_corners:
        # roundf: half away from zero (coordinates are non-negative here).
        index = np.floor(source + np.float32(0.5)).astype(np.int64)
    else:
        index = np.floor(source).astype(np.int64)
    index = np.minimum(index, in_size - 1)
    return np.maximum(index, 0) if half_pixel_centers else index


@kernel("ResizeNearestNeighbor", const_inputs=(1,))
def resize_nearest_neighbor(images, size, *, align_corners=False, half_pixel_centers=False):
    out_h, out_w = _resize_args(images, size, align_corners, half_pixel_centers)
    _, in_h, in_w, _ = images.shape
    ys = _nearest_index(out_h, in_h, _scale(in_h, out_h, align_corners), align_corners, half_pixel_centers)
    xs = _nearest_index(out_w, in_w, _scale(in_w, out_w, align_corners), align_corners, half_pixel_centers)
    return np.ascontiguousarray(images[:, ys][:, :, xs])


# --------------------------------------------------------------------------- bicubic and area
# Both are separable: a (out, in) weight matrix per axis, applied with one einsum.

_CUBIC_TABLE_SIZE = 1024


def _cubic_table(a: float) -> np.ndarray:
    # TF samples the Keys kernel at 1/1024 steps in float32: [i, 0] for |x| < 1, [i, 1] for 1 <= |x| < 2.
    x = np.arange(_CUBIC_TABLE_SIZE + 1, dtype=np.float32) / np.float32(_CUBIC_TABLE_SIZE)
    a = np.float32(a)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far_x = x + 1
    far = ((a * far_x - 5 * a) * far_x + 8 * a) * far_x - 4 * a
    return np.stack([near, far], axis=1).astype(np.float32)


def _bicubic_weights(out_size, in_size, scale, half_pixel_centers):
    table = _cubic_table(-0.5 if half_pixel_centers else -0.75)
    x = np.arange(out_size, dtype=np.float32)
    source = (x + np.float32(0.5)) * scale - np.float32(0.5) if half_pixel_centers else x * scale
    base = np.floor(source)
    offset = np.rint((source - base) * np.float32(_CUBIC_TABLE_SIZE)).astype(np.int64)
    weights = np.stack(
        [
            table[offset, 1],
            table[offset, 0],
            table[_CUBIC_TABLE_SIZE - offset, 0],
            table[_CUBIC_TABLE_SIZE - offset, 1],
        ],
        axis=1,
    )
    taps = base.astype(np.int64)[:, None] + np.arange(-1, 3)[None, :]
    if half_pixel_centers:  # Keys cubic: taps outside the image get no weight, the rest renormalised
        inside = (taps >= 0) & (taps < in_size)
        weights = np.where(inside, weights, np.float32(0))
        total = weights.sum(axis=1, keepdims=True)
        weights = np.where(np.abs(total) >= 1000 * np.finfo(np.float32).tiny, weights / total, weights)
    matrix = np.zeros((out_size, in_size), np.float32)
    rows = np.broadcast_to(np.arange(out_size)[:, None], taps.shape)
    np.add.at(matrix, (rows, np.clip(taps, 0, in_size - 1)), weights)
    return matrix


@kernel("ResizeBicubic", const_inputs=(1,))
def resize_bicubic(images, size, *, align_corners=False, half_pixel_centers=False):
    out_h, out_w = _resize_args(images, size, align_corners, half_pixel_centers)
    _, in_h, in_w, _ = images.shape
    wy = _bicubic_weights(out_h, in_h, _scale(in_h, out_h, align_corners), half_pixel_centers)
    wx = _bicubic_weights(out_w, in_w, _scale(in_w, out_w, align_corners), half_pixel_centers)
    result = np.einsum("yi,nijc,xj->nyxc", wy, images.astype(np.float32), wx, optimize=True)
    return out(result, np.float32)


def _area_weights(out_size, in_size, scale):
    matrix = np.zeros((out_size, in_size), np.float32)
    for o in range(out_size):  # one row of weights per output pixel (never per input element)
        start, end = np.float32(o) * scale, np.float32(o + 1) * scale
        cells = np.arange(int(np.floor(start)), int(np.ceil(end)))
        if cells.size == 0:
            continue
        lo = np.maximum(cells.astype(np.float32), start)
        hi = np.minimum(cells.astype(np.float32) + 1, end)
        np.add.at(matrix[o], np.clip(cells, 0, in_size - 1), (hi - lo).astype(np.float32))
    return matrix


@kernel("ResizeArea", const_inputs=(1,))
def resize_area(images, size, *, align_corners=False):
    out_h, out_w = _resize_args(images, size, align_corners, False)
    _, in_h, in_w, _ = images.shape
    sy, sx = _scale(in_h, out_h, align_corners), _scale(in_w, out_w, align_corners)
    wy, wx = _area_weights(out_h, in_h, sy), _area_weights(out_w, in_w, sx)
    result = np.einsum("yi,nijc,xj->nyxc", wy, images.astype(np.float32), wx, optimize=True)
    return out(result * (np.float32(1) / (sy * sx)), np.float32)


# --------------------------------------------------------------------------- ScaleAndTranslate


def _sampling_kernel(kernel_type: str):
    """TF's sampling kernels (``sampling_kernels.h``): (function of |x|, radius)."""
    pi = np.float32(3.14159265359)

    def lanczos(radius):
        def fn(x):
            with np.errstate(all="ignore"):
                value = radius * np.sin(pi * x) * np.sin(pi * x / radius) / (pi * pi * x * x)
            return np.where(x > radius, 0, np.where(x <= 1e-3, 1, value))

        return fn, float(radius)

    sigma = np.float32(1.5 / 3)
    kernels = {
        "lanczos1": lanczos(1),
        "lanczos3": lanczos(3),
        "lanczos5": lanczos(5),
        "gaussian": (lambda x: np.where(x >= 1.5, 0, np.exp(-x * x / (2 * sigma * sigma))), 1.5),
        "box": (lambda x: np.where(x < 0.5, 1, np.where(x == 0.5, 0.5, 0)), 1.0),
        "triangle": (lambda x: np.where(x < 1, 1 - x, 0), 1.0),
        "keyscubic": (
            lambda x: np.where(
                x >= 2, 0, np.where(x >= 1, ((-0.5 * x + 2.5) * x - 4) * x + 2, ((1.5 * x - 2.5) * x) * x + 1)
            ),
            2.0,
        ),
        "mitchellcubic": (
            lambda x: np.where(
                x >= 2,
                0,
                np.where(
                    x >= 1,
                    (((-7 / 18) * x + 2) * x - 10 / 3) * x + 16 / 9,
                    (((7 / 6) * x - 2) * x) * x + 8 / 9,
                ),
            ),
            2.0,
        ),
    }
    if kernel_type not in kernels:
        raise invalid(f"Unrecognized kernel type: {kernel_type}")
    return kernels[kernel_type]


def _span_weights(out_size, in_size, scale, translation, kernel_fn, radius, antialias):
    inv_scale = np.float32(1) / np.float32(scale)
    inv_translate = -inv_scale * np.float32(translation)
    kernel_scale = max(inv_scale, np.float32(1)) if antialias else np.float32(1)
    sample = (np.arange(out_size, dtype=np.float32) + np.float32(0.5)) * inv_scale + inv_translate
    reach = np.float32(radius) * kernel_scale
    start = np.clip(np.ceil(sample - reach - np.float32(0.5)), 0, in_size - 1)
    end = np.clip(np.floor(sample + reach - np.float32(0.5)), 0, in_size - 1) + 1
    source = np.arange(in_size, dtype=np.float32)[None, :]
    inside = (
        (source >= start[:, None]) & (source < end[:, None]) & ((sample >= 0) & (sample <= in_size))[:, None]
    )
    position = np.abs((source + np.float32(0.5) - sample[:, None]) * (np.float32(1) / kernel_scale))
    weights = np.where(inside, kernel_fn(position).astype(np.float32), np.float32(0))
    total = weights.sum(axis=1, keepdims=True, dtype=np.float32)
    usable = np.abs(total) >= 1000 * np.finfo(np.float32).tiny
    with np.errstate(all="ignore"):
        return np.where(usable, weights * (np.float32(1) / total), np.float32(0)).astype(np.float32)


@kernel("ScaleAndTranslate", const_inputs=(1,))
def scale_and_translate(images, size, scale, translation, *, kernel_type="lanczos3", antialias=True):
    if images.ndim != 4:
        raise invalid(f"input must be 4-dimensional{shape_str(images.shape)}")
    out_h, out_w = (int(v) for v in np.asarray(size).reshape(-1))
    if out_h <= 0 or out_w <= 0:
        raise invalid("output dimensions must be positive")
    sy, sx = (float(v) for v in np.asarray(scale).reshape(-1))
    ty, tx = (float(v) for v in np.asarray(translation).reshape(-1))
    if sy <= 0 or sx <= 0:
        raise invalid("Scale must be greater than zero.")
    fn, radius = _sampling_kernel(kernel_type)
    _, in_h, in_w, _ = images.shape
    wy = _span_weights(out_h, in_h, sy, ty, fn, radius, antialias)
    wx = _span_weights(out_w, in_w, sx, tx, fn, radius, antialias)
    result = np.einsum("yi,nijc,xj->nyxc", wy, images.astype(np.float32), wx, optimize=True)
    return out(result, np.float32)


# --------------------------------------------------------------------------- crops


@kernel("CropAndResize", const_inputs=(3,))
def crop_and_resize(image, boxes, box_ind, crop_size, *, method="bilinear", extrapolation_value=0.0):
    if image.ndim != 4:
        raise invalid(f"input image must be 4-D{shape_str(image.shape)}")
    batch, in_h, in_w, _ = image.shape
    crop_h, crop_w = (int(v) for v in np.asarray(crop_size).reshape(-1))
    if crop_h <= 0 or crop_w <= 0:
        raise invalid("crop dimensions must be positive")
    if boxes.ndim != 2 or boxes.shape[1] != 4 or box_ind.shape != (boxes.shape[0],):
        raise invalid(
            f"boxes must be 2-D [num_boxes, 4]{shape_str(boxes.shape)} with box_index of [num_boxes]"
        )
    if np.any((box_ind < 0) | (box_ind >= batch)):
        raise OutOfRangeError(None, None, "box_index has values outside [0, batch_size)")
    b = boxes.astype(np.float32)
    in_y = _crop_coords(b[:, 0], b[:, 2], in_h, crop_h)
    in_x = _crop_coords(b[:, 1], b[:, 3], in_w, crop_w)
    img = image.astype(np.float32)
    bi = box_ind.astype(np.int64)[:, None, None]
    valid = ((in_y >= 0) & (in_y <= in_h - 1))[:, :, None] & ((in_x >= 0) & (in_x <= in_w - 1))[:, None, :]
    if method == "nearest":
        y = np.clip(np.floor(np.abs(in_y) + 0.5) * np.sign(in_y), 0, in_h - 1).astype(np.int64)
        x = np.clip(np.floor(np.abs(in_x) + 0.5) * np.sign(in_x), 0, in_w - 1).astype(np.int64)
        result = img[bi, y[:, :, None], x[:, None, :]]
    else:
        y0 = np.clip(np.floor(in_y), 0, in_h - 1).astype(np.int64)
        y1 = np.clip(np.ceil(in_y), 0, in_h - 1).astype(np.int64)
        x0 = np.clip(np.floor(in_x), 0, in_w - 1).astype(np.int64)
        x1 = np.clip(np.ceil(in_x), 0, in_w - 1).astype(np.int64)
        ly = (in_y - np.floor(in_y))[:, :, None, None]
        lx = (in_x - np.floor(in_x))[:, None, :, None]
        tl = img[bi, y0[:, :, None], x0[:, None, :]]
        tr = img[bi, y0[:, :, None], x1[:, None, :]]
        bl = img[bi, y1[:, :, None], x0[:, None, :]]
        br = img[bi, y1[:, :, None], x1[:, None, :]]
        top = tl + (tr - tl) * lx
        bottom = bl + (br - bl) * lx
        result = top + (bottom - top) * ly
    return out(np.where(valid[..., None], result, np.float32(extrapolation_value)), np.float32)


def _crop_coords(start, end, in_size, crop_size):
    if crop_size > 1:
        scale = (end - start) * np.float32(in_size - 1) / np.float32(crop_size - 1)
        return (
            start[:, None] * np.float32(in_size - 1)
            + np.arange(crop_size, dtype=np.float32)[None, :] * scale[:, None]
        )
    return np.broadcast_to(
        (np.float32(0.5) * (start + end) * np.float32(in_size - 1))[:, None], (start.size, 1)
    )
