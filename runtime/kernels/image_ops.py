"""Image kernels: ResizeBilinear and ResizeNearestNeighbor with TF's exact sampling grids.

TF computes the scale and source coordinates in float32 (``CalculateResizeScale``, the legacy and
half-pixel scalers of ``image_resizer_state.h``); these kernels do the same arithmetic in float32
so that coordinates landing exactly on pixel boundaries round the way TF's do.
"""

from __future__ import annotations

import numpy as np

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


def _bilinear_weights(out_size, in_size, scale, half_pixel_centers):
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
    img = images.astype(np.float32)
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
