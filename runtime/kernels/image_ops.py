"""Image kernels: resizing (bilinear, nearest, bicubic, area, ScaleAndTranslate) and CropAndResize.

TF computes scales and source coordinates in float32 (``CalculateResizeScale``, the legacy and
half-pixel scalers); these kernels do the same float32 arithmetic so that coordinates landing on
pixel boundaries round as TF's do. Bilinear and nearest resizes gather through cached plans (the
source offsets of every output element) and keep TF's per-element float32 lerps, so results are
bit-identical to TF's loops; bicubic and area build one (out, in) weight matrix per axis and
apply both in one einsum. Colour conversions and adjustments live in ``image_color_ops.py``,
non-max suppression in ``non_max_suppression_ops.py`` and decoding (DecodeJpeg/Png, which needs a
codec) in ``image_decode_ops.py``.
"""

from __future__ import annotations

import functools

import numpy as np

from runtime.errors import OutOfRangeError
from runtime.kernels.math_ops import invalid, out, shape_str
from runtime.kernels.registry import kernel


def _size(size) -> tuple:
    """The ``size`` input as a hashable tuple (a cache key); a size that is not a vector keeps its
    shape, for ``_resize_args``'s error."""
    size = np.asarray(size)
    return tuple(size.reshape(-1).tolist()) if size.ndim == 1 or size.size == 2 else (size.shape,)


def _resize_args(shape, size, align_corners, half_pixel_centers):
    """The output (height, width) of resizing ``shape`` to ``size``, or TF's error."""
    if len(shape) != 4:
        raise invalid(f"input must be 4-dimensional{shape_str(shape)}")
    if len(size) != 2:
        shape_t = size[0] if len(size) == 1 and isinstance(size[0], tuple) else (len(size),)
        raise invalid(f"shape_t must have two elements {shape_str(shape_t)}")
    dims = [int(v) for v in size]
    if align_corners and half_pixel_centers:
        raise invalid("If half_pixel_centers is True, align_corners must be False.")
    if dims[0] <= 0 or dims[1] <= 0:
        raise invalid("output dimensions must be positive")
    if (shape[1] == 0 or shape[2] == 0) and shape[0] > 0:
        raise invalid("input image must be of non-zero size")
    return dims


def _scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    if align_corners and out_size > 1:
        return np.float32(in_size - 1) / np.float32(out_size - 1)
    return np.float32(in_size) / np.float32(out_size)


def _bilinear_weights(out_size, in_size, scale, half_pixel_centers):
    """Per output position: lower and upper source index and the float32 lerp, in TF's float32."""
    x = np.arange(out_size, dtype=np.float32)
    if half_pixel_centers:
        source = (x + np.float32(0.5)) * scale - np.float32(0.5)
    else:
        source = x * scale
    floor = np.floor(source)
    lower = np.maximum(floor.astype(np.int64), 0)
    upper = np.minimum(np.ceil(source).astype(np.int64), in_size - 1)
    return lower, upper, (source - floor).astype(np.float32)


def _read_only(*arrays):
    for array in arrays:
        array.flags.writeable = False
    return arrays


# Gather plans are cached per (input shape, output size, flags): a served model resizes the same
# few shapes over and over, and building a plan costs several times more than applying it. Only
# plans of small outputs are kept (a plan holds ~40 bytes per output element): a large resize
# costs far more than building its plan.
_CACHED_ELEMENTS = 1 << 16
_CACHED_PLANS = 64


def _plan(build, shape, size, *flags):
    """``build``'s plan, from its cache where the output is small."""
    small = len(shape) == 4 and len(size) == 2 and size[0] * size[1] * shape[3] <= _CACHED_ELEMENTS
    return build(shape, size, *flags) if small else build.__wrapped__(shape, size, *flags)


@functools.lru_cache(maxsize=_CACHED_PLANS)
def _bilinear_plan(shape, size, align_corners, half_pixel_centers):
    """Flat offsets of each output's four corners, shaped (x side, y side, out_h*out_w*channels),
    the x and y lerps spread to one value per output element, and the output shape (index None
    where the output is empty)."""
    out_h, out_w = _resize_args(shape, size, align_corners, half_pixel_centers)
    batch, in_h, in_w, channels = shape
    if not batch * in_h * in_w * channels:
        return None, None, None, (batch, out_h, out_w, channels)
    y0, y1, ly = _bilinear_weights(out_h, in_h, _scale(in_h, out_h, align_corners), half_pixel_centers)
    x0, x1, lx = _bilinear_weights(out_w, in_w, _scale(in_w, out_w, align_corners), half_pixel_centers)
    rows = np.stack([y0, y1])[None, :, :, None, None] * (in_w * channels)
    cols = np.stack([x0, x1])[:, None, None, :, None] * channels
    index = (rows + cols + np.arange(channels)).reshape(2, 2, -1).astype(np.intp)
    spread = (out_h, out_w, channels)
    lx = np.broadcast_to(lx[None, :, None], spread).reshape(-1).copy()
    ly = np.broadcast_to(ly[:, None, None], spread).reshape(-1).copy()
    return (*_read_only(index, lx, ly), (batch, out_h, out_w, channels))


@kernel("ResizeBilinear", const_inputs=(1,))
def resize_bilinear(images, size, *, align_corners=False, half_pixel_centers=False):
    """One gather of precomputed corner offsets, then TF's lerps in TF's float32 order: each corner
    cast to float, ``top = tl + (tr - tl) * lx`` (bottom alike), ``top + (bottom - top) * ly``."""
    index, lx, ly, shape = _plan(_bilinear_plan, images.shape, _size(size), align_corners, half_pixel_centers)
    if index is None:
        return np.zeros(shape, np.float32)
    # Gathering before the cast is exact (the cast is per element); the gather is a fresh array,
    # so the lerps can be computed in place. Several images are laid out (sides, batch, elements)
    # in one copy: the lerps then run on contiguous rows, twice as fast as on strided views.
    flat = images.reshape(shape[0], -1)
    if shape[0] == 1:
        corners = flat[0].take(index).astype(np.float32, copy=False)
    else:
        corners = np.moveaxis(flat.take(index, axis=1), 0, 2).astype(np.float32, order="C")
    left, right = corners[0], corners[1]
    rows = np.subtract(right, left, out=right)
    rows *= lx
    rows += left
    top, bottom = rows[0], rows[1]
    result = np.subtract(bottom, top, out=bottom)
    result *= ly
    result += top
    return result.reshape(shape)


@functools.lru_cache(maxsize=_CACHED_PLANS)
def _nearest_plan(shape, size, align_corners, half_pixel_centers):
    """Flat offset of each output element's source pixel, and the output shape (see
    ``_bilinear_plan``)."""
    out_h, out_w = _resize_args(shape, size, align_corners, half_pixel_centers)
    batch, in_h, in_w, channels = shape
    if not batch * in_h * in_w * channels:
        return None, (batch, out_h, out_w, channels)
    ys = _nearest_index(out_h, in_h, _scale(in_h, out_h, align_corners), align_corners, half_pixel_centers)
    xs = _nearest_index(out_w, in_w, _scale(in_w, out_w, align_corners), align_corners, half_pixel_centers)
    index = ys[:, None, None] * (in_w * channels) + xs[None, :, None] * channels + np.arange(channels)
    return _read_only(index.reshape(-1).astype(np.intp))[0], (batch, out_h, out_w, channels)


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
    """One gather of precomputed offsets (``_nearest_plan``)."""
    index, shape = _plan(_nearest_plan, images.shape, _size(size), align_corners, half_pixel_centers)
    if index is None:
        return np.zeros(shape, images.dtype)
    return images.reshape(shape[0], -1).take(index, axis=1).reshape(shape)


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
    out_h, out_w = _resize_args(images.shape, _size(size), align_corners, half_pixel_centers)
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
    out_h, out_w = _resize_args(images.shape, _size(size), align_corners, False)
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
