"""Colour kernels: RGBToHSV, HSVToRGB, AdjustHue, AdjustSaturation, AdjustContrastv2.

Split out of ``image_ops.py`` to keep modules small. Arithmetic is float32, as in TF's kernels
(RGBToHSV and HSVToRGB keep float64 images in float64); AdjustHue follows TF's six-sector hue
arithmetic.
"""

from __future__ import annotations

import numpy as np

from runtime.kernels.math_ops import invalid, out, shape_str
from runtime.kernels.registry import kernel

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
    category = np.clip(np.trunc(dh), 0, 5)  # h == 1 is red again, like h == 0
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


@kernel("AdjustHue")
def adjust_hue(images, delta):
    _check_rgb(images)
    x = images.astype(np.float32)
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    # TF's six-sector hue: category by the order of the channels, fraction by the middle one.
    conditions = [
        (r < g) & (b < r),
        (r < g) & (b > g),
        (r < g),
        (b < g),
        (b > r),
    ]
    category = np.select(conditions, [1, 3, 2, 0, 4], 5)
    v_max = np.select(conditions, [g, b, g, r, b], r)
    v_mid = np.select(conditions, [r, g, b, g, r], b)
    v_min = np.select(conditions, [b, r, r, b, g], g)
    with np.errstate(all="ignore"):
        ratio = (v_mid - v_min) / (v_max - v_min)
    increase = (category & 1) == 0
    h = np.where(v_max == v_min, np.float32(0), category + np.where(increase, ratio, 1 - ratio)).astype(
        np.float32
    )
    h = h + np.float32(delta) * np.float32(6)
    h = np.mod(h, np.float32(6))
    h = np.where(h >= 6, h - 6, h)
    category = np.trunc(h).astype(np.int64)
    ratio = h - category
    ratio = np.where((category & 1) == 0, ratio, 1 - ratio)
    v_mid = v_min + ratio * (v_max - v_min)
    cases = [category == k for k in range(5)]
    red = np.select(cases, [v_max, v_mid, v_min, v_min, v_mid], v_max)
    green = np.select(cases, [v_mid, v_max, v_max, v_mid, v_min], v_min)
    blue = np.select(cases, [v_min, v_min, v_mid, v_max, v_max], v_mid)
    return out(np.stack([red, green, blue], axis=-1), images.dtype)
