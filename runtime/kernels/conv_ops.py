"""Convolution and pooling kernels: Conv2D/Conv3D (groups, dilations, SAME/VALID/EXPLICIT),
DepthwiseConv2dNative, Conv2DBackpropInput, MaxPool/AvgPool (2-D, 3-D, V2, WithArgmax),
ExtractImagePatches.

All work on channels-last views: NCHW inputs are transposed in and out (TF's CPU kernels take
NHWC only; graphs exported on GPUs carry NCHW). A window is a strided view of the padded input
(im2col without a Python loop per element) and a convolution is one tensordot over it (a grouped
one, one matmul batched over its groups); a depthwise convolution (and a grouped one of one input
channel per group, Keras' depthwise ``groups``) is one einsum over it, pooling one reduction.
Padding follows TF's GetWindowedOutputSize: SAME pads ``max((out-1)*stride + k_eff - in, 0)``,
the smaller half first; AvgPool's SAME windows average valid elements only; max pooling skips NaN.
"""

from __future__ import annotations

import itertools

import numpy as np

from runtime import dtypes
from runtime.errors import UnimplementedError
from runtime.kernels.math_ops import _low_precision, invalid, out, shape_str
from runtime.kernels.registry import kernel

# --------------------------------------------------------------------------- windows


def _channels_last(x: np.ndarray, data_format: str) -> np.ndarray:
    return np.moveaxis(x, 1, -1) if data_format.startswith("NC") else x


def _channels_back(x: np.ndarray, data_format: str) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(x, -1, 1) if data_format.startswith("NC") else x)


def _spatial(values, data_format, n_spatial, what):
    values = list(values) if values else [1] * (n_spatial + 2)
    if len(values) != n_spatial + 2:
        raise invalid(f"Sliding window {what} field must specify {n_spatial + 2} dimensions")
    if data_format.startswith("NC"):
        batch, channel, spatial = values[0], values[1], values[2:]
    else:
        batch, channel, spatial = values[0], values[-1], values[1:-1]
    return batch, channel, [int(v) for v in spatial]


def _pads(in_sizes, kernel_sizes, strides, dilations, padding, explicit):
    """Per spatial dim (before, after) padding and output size, as TF's GetWindowedOutputSize."""
    pads, outs = [], []
    for d, (n, k, s, r) in enumerate(zip(in_sizes, kernel_sizes, strides, dilations)):
        eff = (k - 1) * r + 1
        if padding == "VALID":
            before = after = 0
            size = (n - eff + s) // s
        elif padding == "SAME":
            size = (n + s - 1) // s
            total = max((size - 1) * s + eff - n, 0)
            before, after = total // 2, total - total // 2
        else:
            before, after = explicit[d]
            size = (n + before + after - eff + s) // s
        if size < 0:
            raise invalid(
                f"Computed output size would be negative: {size} [input_size: {n}, effective_filter_size: "
                f"{eff}, stride: {s}]"
            )
        pads.append((before, after))
        outs.append(size)
    return pads, outs


def _explicit(explicit_paddings, data_format, n_spatial):
    if not explicit_paddings:
        return None
    pairs = [tuple(explicit_paddings[i : i + 2]) for i in range(0, len(explicit_paddings), 2)]
    return pairs[2:] if data_format.startswith("NC") else pairs[1:-1]


def _windows(x, kernel_sizes, strides, dilations, outs):
    """A (N, *out, *kernel, C) strided view of the padded channels-last ``x``."""
    n_spatial = len(kernel_sizes)
    st = x.strides
    shape = (x.shape[0], *outs, *kernel_sizes, x.shape[-1])
    strides_v = (
        st[0],
        *(st[1 + d] * strides[d] for d in range(n_spatial)),
        *(st[1 + d] * dilations[d] for d in range(n_spatial)),
        st[-1],
    )
    return np.lib.stride_tricks.as_strided(x, shape, strides_v, writeable=False)


def _pad_spatial(x, pads, value=0):
    width = [(0, 0), *pads, (0, 0)]
    if all(p == (0, 0) for p in pads):
        return np.ascontiguousarray(x)
    return np.pad(x, width, constant_values=value)


# --------------------------------------------------------------------------- convolution


def _conv(x, filt, strides, padding, explicit_paddings, data_format, dilations, n_spatial):
    xl = _channels_last(x, data_format)
    _, _, stride_s = _spatial(strides, data_format, n_spatial, "stride")
    _, _, dil_s = _spatial(dilations, data_format, n_spatial, "dilation")
    if x.ndim != n_spatial + 2:
        raise invalid(f"input must be {n_spatial + 2}-dimensional{shape_str(x.shape)}")
    if filt.ndim != n_spatial + 2:
        raise invalid(f"filter must be {n_spatial + 2}-dimensional: {shape_str(filt.shape)}")
    k_sizes = list(filt.shape[:n_spatial])
    in_c, f_c, out_c = xl.shape[-1], filt.shape[-2], filt.shape[-1]
    if f_c == 0 or in_c % f_c:
        raise invalid(f"input depth must be evenly divisible by filter depth: {in_c} vs {f_c}")
    groups = in_c // f_c
    if out_c % groups:
        raise invalid(f"output depth must be evenly divisible by number of groups: {out_c} vs {groups}")
    pads, outs = _pads(
        xl.shape[1:-1],
        k_sizes,
        stride_s,
        dil_s,
        padding,
        _explicit(explicit_paddings, data_format, n_spatial),
    )
    acc = _accumulate_dtype(x.dtype)
    xp = _pad_spatial(xl.astype(acc, copy=False), pads)
    w = filt.astype(acc, copy=False)
    if groups > 1 and f_c == 1:  # one input channel per group: a depthwise convolution
        w = w.reshape(*k_sizes, groups, out_c // groups)
        result = _depthwise(xp, w, stride_s, dil_s, outs)
        return _channels_back(out(result, x.dtype), data_format)
    win = _windows(xp, k_sizes, stride_s, dil_s, outs)
    if groups == 1:
        result = np.tensordot(
            win, w, axes=(list(range(1 + n_spatial, 2 + 2 * n_spatial)), list(range(n_spatial + 1)))
        )
    else:
        result = _grouped(win, w, groups, n_spatial)
    return _channels_back(out(result, x.dtype), data_format)


def _grouped(win: np.ndarray, w: np.ndarray, groups: int, n_spatial: int) -> np.ndarray:
    """A grouped convolution of windows (N, *out, *kernel, C) by a filter (*kernel, C/groups, O):
    one matmul batched over the groups, (groups, pixels, taps*C/g) @ (groups, taps*C/g, O/g)."""
    batch_out = win.shape[: 1 + n_spatial]
    taps = int(np.prod(w.shape[:n_spatial]))
    f_c, out_c = w.shape[-2], w.shape[-1]
    cols = np.ascontiguousarray(win).reshape(-1, taps, groups, f_c).transpose(2, 0, 1, 3)
    cols = cols.reshape(groups, -1, taps * f_c)
    weights = w.reshape(taps, f_c, groups, out_c // groups).transpose(2, 0, 1, 3)
    result = np.matmul(cols, weights.reshape(groups, taps * f_c, -1))  # (groups, pixels, O/g)
    return result.transpose(1, 0, 2).reshape(*batch_out, out_c)


def _depthwise(xp: np.ndarray, w: np.ndarray, strides, dilations, outs) -> np.ndarray:
    """The padded channels-last ``xp`` (N, H, W, C) convolved per channel by ``w`` (kH, kW, C, M):
    (N, oH, oW, C*M). One einsum over the windows' view, without ``optimize`` (which would copy
    the windows out for a product): numpy's own loop reads each window once, channels innermost,
    several times faster than a multiply-add per kernel tap."""
    kh, kw, c, m = w.shape
    win = _windows(xp, (kh, kw), strides, dilations, outs)
    if m == 1:
        result = np.einsum("nhwijc,ijc->nhwc", win, w[..., 0])
    else:
        result = np.einsum("nhwijc,ijcm->nhwcm", win, w)
    return result.reshape(xp.shape[0], *outs, c * m)


def _accumulate_dtype(dtype):
    return np.dtype(np.float32) if _low_precision(dtype) else dtype


@kernel("Conv2D")
def conv2d(
    input,  # noqa: A002
    filter,  # noqa: A002
    *,
    strides,
    padding,
    explicit_paddings=(),
    data_format="NHWC",
    dilations=(1, 1, 1, 1),
    use_cudnn_on_gpu=True,
):
    return _conv(input, filter, strides, padding, explicit_paddings, data_format, dilations, 2)


@kernel("Conv3D")
def conv3d(input, filter, *, strides, padding, data_format="NDHWC", dilations=(1, 1, 1, 1, 1)):  # noqa: A002
    return _conv(input, filter, strides, padding, (), data_format, dilations, 3)


@kernel("DepthwiseConv2dNative")
def depthwise_conv2d_native(
    input,  # noqa: A002
    filter,  # noqa: A002
    *,
    strides,
    padding,
    explicit_paddings=(),
    data_format="NHWC",
    dilations=(1, 1, 1, 1),
):
    xl = _channels_last(input, data_format)
    _, _, stride_s = _spatial(strides, data_format, 2, "stride")
    _, _, dil_s = _spatial(dilations, data_format, 2, "dilation")
    kh, kw, c, m = filter.shape
    if xl.shape[-1] != c:
        raise invalid(f"input and filter must have the same depth: {xl.shape[-1]} vs {c}")
    pads, outs = _pads(
        xl.shape[1:3], (kh, kw), stride_s, dil_s, padding, _explicit(explicit_paddings, data_format, 2)
    )
    acc = _accumulate_dtype(input.dtype)
    xp = _pad_spatial(xl.astype(acc, copy=False), pads)
    result = _depthwise(xp, filter.astype(acc, copy=False), stride_s, dil_s, outs)
    return _channels_back(out(result, input.dtype), data_format)


def _conv_backprop_input(
    sizes, filt, out_backprop, strides, padding, explicit_paddings, data_format, dilations, n
):
    """The gradient of an n-D convolution with respect to its input (a transposed convolution)."""
    if len(sizes) != n + 2:
        raise invalid(f"input_sizes must be a {n + 2}-element vector, got {len(sizes)} elements")
    in_shape = sizes if not data_format.startswith("NC") else [sizes[0], *sizes[2:], sizes[1]]
    _, _, stride_s = _spatial(strides, data_format, n, "stride")
    _, _, dil_s = _spatial(dilations, data_format, n, "dilation")
    k_sizes, c, oc = filt.shape[:n], filt.shape[n], filt.shape[n + 1]
    pads, outs = _pads(
        in_shape[1:-1], k_sizes, stride_s, dil_s, padding, _explicit(explicit_paddings, data_format, n)
    )
    dy = _channels_last(out_backprop, data_format)
    if list(dy.shape[1:-1]) != outs or dy.shape[-1] != oc:
        d = next((i for i in range(n) if dy.shape[1 + i] != outs[i]), 0)
        raise invalid(
            f"Conv{n}DCustomBackpropInput: Size of out_backprop doesn't match computed: actual = "
            f"{dy.shape[1 + d]}, computed = {outs[d]} spatial_dim: {d + 1} input: {in_shape[1 + d]} filter: "
            f"{k_sizes[d]} output: {dy.shape[1 + d]} stride: {stride_s[d]} dilation: {dil_s[d]}"
        )
    acc = _accumulate_dtype(out_backprop.dtype)
    cols = np.tensordot(dy.astype(acc, copy=False), filt.astype(acc, copy=False), axes=([n + 1], [n + 1]))
    padded = np.zeros((in_shape[0], *(s + sum(p) for s, p in zip(in_shape[1:-1], pads)), c), acc)
    # Scatter each kernel tap's contribution: a loop over kernel taps, never over elements.
    for tap in itertools.product(*(range(k) for k in k_sizes)):
        window = tuple(
            slice(t * r, t * r + (o - 1) * st + 1, st) for t, r, o, st in zip(tap, dil_s, outs, stride_s)
        )
        padded[(slice(None), *window)] += cols[(slice(None),) * (n + 1) + tap]
    crop = tuple(slice(p[0], p[0] + s) for p, s in zip(pads, in_shape[1:-1]))
    return _channels_back(out(padded[(slice(None), *crop)], out_backprop.dtype), data_format)


@kernel("Conv2DBackpropInput", const_inputs=(0,))
def conv2d_backprop_input(
    input_sizes,
    filter,  # noqa: A002
    out_backprop,
    *,
    strides,
    padding,
    explicit_paddings=(),
    data_format="NHWC",
    dilations=(1, 1, 1, 1),
    use_cudnn_on_gpu=True,
):
    sizes = [int(v) for v in np.asarray(input_sizes).reshape(-1)]
    return _conv_backprop_input(
        sizes, filter, out_backprop, strides, padding, explicit_paddings, data_format, dilations, 2
    )


@kernel("Conv3DBackpropInputV2", const_inputs=(0,))
def conv3d_backprop_input_v2(
    input_sizes,
    filter,  # noqa: A002
    out_backprop,
    *,
    strides,
    padding,
    data_format="NDHWC",
    dilations=(1, 1, 1, 1, 1),
):
    sizes = [int(v) for v in np.asarray(input_sizes).reshape(-1)]
    return _conv_backprop_input(sizes, filter, out_backprop, strides, padding, (), data_format, dilations, 3)


# --------------------------------------------------------------------------- pooling


def _pool(value, ksize, strides, padding, data_format, n_spatial, kind, explicit_paddings=()):
    xl = _channels_last(value, data_format)
    kb, kc, k_s = _spatial(ksize, data_format, n_spatial, "ksize")
    sb, sc, s_s = _spatial(strides, data_format, n_spatial, "stride")
    if kb != 1 or sb != 1:
        raise UnimplementedError(None, None, "Pooling is not yet supported on the batch dimension.")
    if kc != 1 or sc != 1:
        raise UnimplementedError(None, None, "Pooling across depth is not supported on this kernel.")
    pads, outs = _pads(
        xl.shape[1:-1],
        k_s,
        s_s,
        [1] * n_spatial,
        padding,
        _explicit(explicit_paddings, data_format, n_spatial),
    )
    axes = tuple(range(1 + n_spatial, 1 + 2 * n_spatial))
    if kind == "max":
        fill = (
            -np.inf if value.dtype.kind == "f" or _low_precision(value.dtype) else np.iinfo(value.dtype).min
        )
        win = _windows(_pad_spatial(xl, pads, fill), k_s, s_s, [1] * n_spatial, outs)
        result = (
            np.fmax.reduce(win, axis=axes)  # TF's max pooling skips NaN (a < b ? b : a)
            if win.size
            else np.zeros(win.shape[: n_spatial + 1] + win.shape[-1:], value.dtype)
        )
        return _channels_back(out(result, value.dtype), data_format)
    acc = _accumulate_dtype(value.dtype)
    win = _windows(_pad_spatial(xl.astype(acc, copy=False), pads), k_s, s_s, [1] * n_spatial, outs)
    ones = np.ones((1, *xl.shape[1:-1], 1), acc)
    counts = _windows(_pad_spatial(ones, pads), k_s, s_s, [1] * n_spatial, outs).sum(axis=axes)
    result = win.sum(axis=axes) / counts
    return _channels_back(out(result, value.dtype), data_format)


@kernel("MaxPool")
def max_pool(input, *, ksize, strides, padding, explicit_paddings=(), data_format="NHWC"):  # noqa: A002
    return _pool(input, ksize, strides, padding, data_format, 2, "max", explicit_paddings)


@kernel("MaxPoolV2", const_inputs=(1, 2))
def max_pool_v2(input, ksize, strides, *, padding, data_format="NHWC"):  # noqa: A002
    return _pool(input, list(np.asarray(ksize)), list(np.asarray(strides)), padding, data_format, 2, "max")


@kernel("AvgPool")
def avg_pool(value, *, ksize, strides, padding, data_format="NHWC"):
    return _pool(value, ksize, strides, padding, data_format, 2, "avg")


@kernel("MaxPool3D")
def max_pool3d(input, *, ksize, strides, padding, data_format="NDHWC"):  # noqa: A002
    return _pool(input, ksize, strides, padding, data_format, 3, "max")


@kernel("AvgPool3D")
def avg_pool3d(input, *, ksize, strides, padding, data_format="NDHWC"):  # noqa: A002
    return _pool(input, ksize, strides, padding, data_format, 3, "avg")


@kernel("ExtractImagePatches")
def extract_image_patches(images, *, ksizes, strides, rates, padding):
    _, _, k_s = _spatial(ksizes, "NHWC", 2, "ksize")
    _, _, s_s = _spatial(strides, "NHWC", 2, "stride")
    _, _, r_s = _spatial(rates, "NHWC", 2, "rate")
    pads, outs = _pads(images.shape[1:3], k_s, s_s, r_s, padding, None)
    win = _windows(_pad_spatial(images, pads), k_s, s_s, r_s, outs)
    n, oh, ow = win.shape[:3]
    return np.ascontiguousarray(win).reshape(n, oh, ow, -1)


@kernel("MaxPoolWithArgmax")
def max_pool_with_argmax(
    input, *, ksize, strides, padding, Targmax=dtypes.DT_INT64, include_batch_in_index=False
):  # noqa: A002
    _, _, k_s = _spatial(ksize, "NHWC", 2, "ksize")
    _, _, s_s = _spatial(strides, "NHWC", 2, "stride")
    pads, outs = _pads(input.shape[1:3], k_s, s_s, [1, 1], padding, None)
    n, h, w, c = input.shape
    fill = -np.inf if input.dtype.kind == "f" or _low_precision(input.dtype) else np.iinfo(input.dtype).min
    win = _windows(_pad_spatial(input, pads, fill), k_s, s_s, [1, 1], outs)  # (n, oh, ow, kh, kw, c)
    flat = np.ascontiguousarray(win).reshape(n, outs[0], outs[1], k_s[0] * k_s[1], c)
    pick = np.argmax(flat, axis=3)  # first maximum, as TF's scan order
    values = np.take_along_axis(flat, pick[:, :, :, None, :], axis=3)[:, :, :, 0, :]
    ky, kx = np.divmod(pick, k_s[1])
    y = np.arange(outs[0])[None, :, None, None] * s_s[0] - pads[0][0] + ky
    x = np.arange(outs[1])[None, None, :, None] * s_s[1] - pads[1][0] + kx
    index = (y * w + x) * c + np.arange(c)
    if include_batch_in_index:
        index = index + np.arange(n)[:, None, None, None] * (h * w * c)
    return out(values, input.dtype), out(index, dtypes.as_numpy_dtype(Targmax))
