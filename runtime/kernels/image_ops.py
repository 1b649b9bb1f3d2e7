"""Image kernels: ResizeBilinear and ResizeNearestNeighbor with TF's exact sampling grids.

TF computes the scale and source coordinates in float32 (``CalculateResizeScale``, the legacy and
half-pixel scalers of ``image_resizer_state.h``); these kernels do the same arithmetic in float32
so that coordinates landing exactly on pixel boundaries round the way TF's do.
"""

from __future__ import annotations

import numpy as np

from runtime.errors import UnimplementedError
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
        raise invalid("box_index has values outside [0, batch_size)")
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


# --------------------------------------------------------------------------- colour


def _rgb_to_hsv(rgb):
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    v = np.maximum(np.maximum(r, g), b)
    spread = v - np.minimum(np.minimum(r, g), b)
    with np.errstate(all="ignore"):
        s = np.where(v > 0, spread / v, 0)
        norm = 1 / (6 * spread)
        h = np.where(r == v, norm * (g - b), np.where(g == v, norm * (b - r) + 2 / 6, norm * (r - g) + 4 / 6))
    h = np.where(spread > 0, h, 0)
    h = np.where(h < 0, h + 1, h)
    return h, s, v


def _hsv_to_rgb(h, s, v):
    c = s * v
    m = v - c
    dh = h * 6
    category = np.trunc(dh)
    x = c * (1 - np.abs(np.mod(dh, 2) - 1))
    zero = np.zeros_like(c)
    table = [(c, x, zero), (x, c, zero), (zero, c, x), (zero, x, c), (x, zero, c), (c, zero, x)]
    rgb = [np.select([category == k for k in range(6)], [t[i] for t in table], zero) for i in range(3)]
    return np.stack([channel + m for channel in rgb], axis=-1)


def _check_rgb(images):
    if images.ndim < 1 or images.shape[-1] != 3:
        raise invalid(
            f"input must have 3 channels but input only has {images.shape[-1] if images.ndim else 0} channels."
        )


@kernel("RGBToHSV")
def rgb_to_hsv(images):
    _check_rgb(images)
    h, s, v = _rgb_to_hsv(images.astype(np.float32) if images.dtype != np.float64 else images)
    return out(np.stack([h, s, v], axis=-1), images.dtype)


@kernel("HSVToRGB")
def hsv_to_rgb(images):
    _check_rgb(images)
    x = images.astype(np.float32) if images.dtype != np.float64 else images
    return out(_hsv_to_rgb(x[..., 0], x[..., 1], x[..., 2]), images.dtype)


@kernel("AdjustSaturation")
def adjust_saturation(images, scale):
    _check_rgb(images)
    h, s, v = _rgb_to_hsv(images.astype(np.float32))
    s = np.clip(s * np.float32(scale), 0, 1)
    return out(_hsv_to_rgb(h, s, v), images.dtype)


@kernel("AdjustContrastv2")
def adjust_contrastv2(images, contrast_factor):
    if images.ndim < 3:
        raise invalid(f"input must be at least 3-D, got shape{shape_str(images.shape)}")
    x = images.astype(np.float32)
    mean = np.mean(x, axis=(-3, -2), keepdims=True, dtype=np.float32)
    return out((x - mean) * np.float32(contrast_factor) + mean, images.dtype)


# --------------------------------------------------------------------------- non-max suppression


def _iou(box, boxes):
    y1, x1 = np.minimum(box[0], box[2]), np.minimum(box[1], box[3])
    y2, x2 = np.maximum(box[0], box[2]), np.maximum(box[1], box[3])
    ys1, xs1 = np.minimum(boxes[:, 0], boxes[:, 2]), np.minimum(boxes[:, 1], boxes[:, 3])
    ys2, xs2 = np.maximum(boxes[:, 0], boxes[:, 2]), np.maximum(boxes[:, 1], boxes[:, 3])
    area = (y2 - y1) * (x2 - x1)
    areas = (ys2 - ys1) * (xs2 - xs1)
    inter = np.maximum(np.minimum(y2, ys2) - np.maximum(y1, ys1), 0) * np.maximum(
        np.minimum(x2, xs2) - np.maximum(x1, xs1), 0
    )
    with np.errstate(all="ignore"):
        iou = inter / (area + areas - inter)
    return np.where((area <= 0) | (areas <= 0), 0, iou)


def _nms(boxes, scores, max_output_size, iou_threshold, score_threshold):
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise invalid(f"boxes must be 2-D{shape_str(boxes.shape)}")
    if scores.shape != (boxes.shape[0],):
        raise invalid("scores has incompatible shape")
    limit = int(np.asarray(max_output_size))
    if limit < 0:
        raise invalid(f"max_output_size must be non-negative, got {limit}")
    iou_t = float(np.asarray(iou_threshold))
    if not 0 <= iou_t <= 1:
        raise invalid("iou_threshold must be in [0, 1]")
    b = boxes.astype(np.float32)
    s = scores.astype(np.float32)
    candidates = np.flatnonzero(s > np.float32(score_threshold))
    # Highest score first, ties by the lower index (TF's priority queue order).
    order = candidates[np.argsort(-s[candidates], kind="stable")]
    alive = np.ones(order.size, np.bool_)
    selected = []
    position = 0
    # One iteration per selected box: everything it suppresses goes at once.
    while len(selected) < limit:
        remaining = np.flatnonzero(alive[position:])
        if remaining.size == 0:
            break
        position += int(remaining[0])
        chosen = order[position]
        selected.append(chosen)
        alive[position] = False
        rest = slice(position + 1, None)
        alive[rest] &= ~(_iou(b[chosen], b[order[rest]]) > np.float32(iou_t))
    return np.asarray(selected, np.int32)


@kernel("NonMaxSuppression")
def non_max_suppression(boxes, scores, max_output_size, *, iou_threshold=0.5):
    return _nms(boxes, scores, max_output_size, iou_threshold, -np.inf)


@kernel("NonMaxSuppressionV2")
def non_max_suppression_v2(boxes, scores, max_output_size, iou_threshold):
    return _nms(boxes, scores, max_output_size, iou_threshold, -np.inf)


@kernel("NonMaxSuppressionV3")
def non_max_suppression_v3(boxes, scores, max_output_size, iou_threshold, score_threshold):
    return _nms(boxes, scores, max_output_size, iou_threshold, float(np.asarray(score_threshold)))


@kernel("NonMaxSuppressionV4")
def non_max_suppression_v4(
    boxes, scores, max_output_size, iou_threshold, score_threshold, *, pad_to_max_output_size=False
):
    selected = _nms(boxes, scores, max_output_size, iou_threshold, float(np.asarray(score_threshold)))
    valid = np.asarray(selected.size, np.int32)
    if pad_to_max_output_size:
        selected = np.pad(selected, (0, int(np.asarray(max_output_size)) - selected.size))
    return selected, valid


@kernel("NonMaxSuppressionV5")
def non_max_suppression_v5(
    boxes,
    scores,
    max_output_size,
    iou_threshold,
    score_threshold,
    soft_nms_sigma,
    *,
    pad_to_max_output_size=False,
):
    if float(np.asarray(soft_nms_sigma)) > 0:
        raise UnimplementedError(None, None, "NonMaxSuppressionV5 with soft_nms_sigma > 0 is not supported")
    selected, valid = non_max_suppression_v4(
        boxes,
        scores,
        max_output_size,
        iou_threshold,
        score_threshold,
        pad_to_max_output_size=pad_to_max_output_size,
    )
    chosen = selected[: int(valid)]
    selected_scores = np.zeros(selected.shape, scores.dtype)
    selected_scores[: chosen.size] = scores[chosen]
    return selected, selected_scores, valid
