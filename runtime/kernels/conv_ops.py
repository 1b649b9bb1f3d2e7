"""Convolution and pooling kernels: Conv2D/Conv3D (groups, dilations, SAME/VALID/EXPLICIT),
DepthwiseConv2dNative, Conv2DBackpropInput, MaxPool/AvgPool (2-D, 3-D, V2, WithArgmax),
ExtractImagePatches.

All work on channels-last views: NCHW inputs are transposed in and out (TF's CPU kernels take
NHWC only; graphs exported on GPUs carry NCHW). A window is a strided view of the padded input
(im2col without a Python loop per element) and a convolution is one product over it (a grouped
one, one matmul batched over its groups). A depthwise convolution (and a grouped one of one input
channel per group, Keras' depthwise ``groups``) is one einsum over the windows, or on small feature
maps one matmul per channel by the map's convolution matrix. Pooling is separable: one pass per
spatial dim folding each tap's shifted slice in. Loops run over kernel taps, never over elements.
Padding follows TF's GetWindowedOutputSize: SAME pads ``max((out-1)*stride + k_eff - in, 0)``,
the smaller half first; AvgPool's SAME windows average valid elements only; max pooling skips NaN.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from runtime import dtypes
from runtime.errors import UnimplementedError
from runtime.kernels.math_ops import _low_precision, invalid, out, shape_str
from runtime.kernels.reduction_ops import _finite_lowest
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


def _taps(size, out_size, k, stride, dilation, pad_before):
    """Along one spatial dim, each kernel tap that reads the input: (tap, the outputs it reaches,
    the inputs they read) as slices. A tap that reads only padding is left out, so a small
    feature map under a large kernel costs the taps it has, not the padded window."""
    taps = []
    for t in range(k):
        offset = t * dilation - pad_before
        lo = max(0, (stride - 1 - offset) // stride)
        hi = min(out_size, (size - 1 - offset) // stride + 1)
        if lo < hi:
            start = lo * stride + offset
            taps.append((t, slice(lo, hi), slice(start, start + (hi - lo - 1) * stride + 1, stride)))
    return taps


def _pad_spatial(x, pads, value=0):
    """``x`` with ``value`` around its spatial dims: one allocation and one copy (np.pad costs
    several times that on the small maps of a network's later stages)."""
    if all(p == (0, 0) for p in pads):
        return np.ascontiguousarray(x)
    sizes = x.shape[1:-1]
    shape = (x.shape[0], *(n + before + after for n, (before, after) in zip(sizes, pads)), x.shape[-1])
    padded = np.full(shape, value, x.dtype) if value else np.zeros(shape, x.dtype)
    padded[(slice(None), *(slice(before, before + n) for n, (before, _) in zip(sizes, pads)))] = x
    return padded


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
    w = filt.astype(acc, copy=False)
    if groups > 1 and f_c == 1 and n_spatial == 2:  # one input channel per group: depthwise
        w = w.reshape(*k_sizes, groups, out_c // groups)
        result = _depthwise(xl.astype(acc, copy=False), w, stride_s, dil_s, pads, outs)
        return _channels_back(out(result, x.dtype), data_format)
    xp = _pad_spatial(xl.astype(acc, copy=False), pads)
    win = _windows(xp, k_sizes, stride_s, dil_s, outs)
    if groups == 1:  # im2col: a copy of the windows (none for a 1x1 kernel), then one product
        cols = np.ascontiguousarray(win).reshape(-1, w[..., 0].size)
        result = (cols @ w.reshape(-1, out_c)).reshape(*win.shape[: 1 + n_spatial], out_c)
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


def _depthwise(x, w, strides, dilations, pads, outs) -> np.ndarray:
    """The channels-last ``x`` (N, H, W, C) convolved per channel by ``w`` (kH, kW, C, M):
    (N, oH, oW, C*M), by whichever equivalent form costs least for its shape."""
    n, h, width, c = x.shape
    kh, kw, _, m = w.shape
    pixels, out_pixels, channels = h * width, outs[0] * outs[1], c * m
    # Estimated costs in multiply-adds of numpy's einsum loop (BLAS does one in ~1/6 of that and
    # pays ~1700 per call); fitted on the zoo's shapes at batch 1 and 32.
    costs = {
        "windows": n * out_pixels * kh * kw * channels,
        "einsum": (n + 2) * pixels * out_pixels * channels,
        "matmul": channels * (n * pixels * out_pixels / 6 + 2 * pixels * out_pixels + 1700)
        + 3 * n * pixels * c,
    }
    form = min(costs, key=costs.__getitem__)
    if form == "windows" or channels * pixels * out_pixels > _MATRIX_ELEMENTS:
        if strides[1] == 1:
            by_rows = _depthwise_rows
        elif dilations[1] == 1 and channels <= _PHASED_CHANNELS:
            by_rows = _depthwise_phases
        else:
            by_rows = _depthwise_windows
        return by_rows(_pad_spatial(x, pads), w, strides, dilations, outs)
    return _depthwise_matrices(x, w, strides, dilations, pads, outs, by_matmul=form == "matmul")


_MATRIX_ELEMENTS = 1 << 22  # 16 MiB of float32 at most for the matrix form's per-channel maps
# A strided window einsum steps C values at a time: up to this many channels the phases' rows
# (``_depthwise_phases``) are 1.2-3x faster; beyond, the extra copy and passes cost more.
_PHASED_CHANNELS = 48
_POOL_GROUPED_ABOVE = 8 << 20  # bytes: a larger pooling input goes image group by image group
_POOL_GROUP_BYTES = 2 << 20  # ... of about this much (an L2 cache)


def _depthwise_windows(xp: np.ndarray, w: np.ndarray, strides, dilations, outs) -> np.ndarray:
    """One einsum over the padded ``xp``'s windows, without ``optimize`` (which would copy the
    windows out for a product): numpy's own loop reads each window once, channels innermost,
    several times faster than a multiply-add per kernel tap."""
    kh, kw, c, m = w.shape
    win = _windows(xp, (kh, kw), strides, dilations, outs)
    if m == 1:
        result = np.einsum("nhwijc,ijc->nhwc", win, w[..., 0])
    else:
        result = np.einsum("nhwijc,ijcm->nhwcm", win, w)
    return result.reshape(xp.shape[0], *outs, c * m)


def _depthwise_rows(xp: np.ndarray, w: np.ndarray, strides, dilations, outs) -> np.ndarray:
    """The windows' einsum in a longer stride: with unit stride along W, a tap's inputs for a
    whole output row are one run of oW*C values, so each numpy loop step multiplies a row by the
    tap's weights tiled along it (oW*C values, not C): several times faster for few channels."""
    kh, kw, c, m = w.shape
    n, (oh, ow) = xp.shape[0], outs
    if m > 1:  # output channel c*M + k reads input channel c
        xp, w, c = np.repeat(xp, m, axis=-1), w.reshape(kh, kw, c * m, 1), c * m
    st = xp.strides
    rows = np.lib.stride_tricks.as_strided(
        xp,
        (kh, kw, n, oh, ow * c),
        (st[1] * dilations[0], st[2] * dilations[1], st[0], st[1] * strides[0], st[3]),
        writeable=False,
    )
    tiled = np.broadcast_to(w[:, :, None, :, 0], (kh, kw, ow, c)).reshape(kh, kw, ow * c)
    return np.einsum("ijnhk,ijk->nhk", rows, tiled).reshape(n, oh, ow, c)


def _depthwise_phases(xp: np.ndarray, w: np.ndarray, strides, dilations, outs) -> np.ndarray:
    """``_depthwise_rows`` for a W stride s > 1 (W dilation 1): the padded input's columns split
    into s phases (one copy), tap j reads phase j % s at unit stride, so each phase is a unit
    stride depthwise convolution by its taps, and the result their sum."""
    s, kw = strides[1], w.shape[1]
    result = None
    for phase in range(min(s, kw)):
        columns = np.ascontiguousarray(xp[:, :, phase::s])
        part = _depthwise_rows(columns, w[:, phase::s], (strides[0], 1), dilations, outs)
        result = part if result is None else np.add(result, part, out=result)
    return result


def _depthwise_matrices(x, w, strides, dilations, pads, outs, by_matmul: bool) -> np.ndarray:
    """Each channel's convolution as the linear map it is, an (H*W, oH*oW) matrix per output
    channel built from the taps that read the input (padding reads nothing): on the small feature
    maps of a network's later stages, where a window loop pays for mostly padded windows. The
    product runs as one matmul batched over channels (BLAS) or, for maps so small that a BLAS
    call per channel costs more than its product, as one einsum with channels innermost."""
    n, h, width, c = x.shape
    kh, kw, _, m = w.shape
    oh, ow = outs
    select = []  # per dim, (k, in, out): 1 where the tap reads that input for that output
    for size, out_size, k, stride, dilation, (before, _) in zip(
        (h, width), outs, (kh, kw), strides, dilations, pads
    ):
        s = np.zeros((k, size, out_size), x.dtype)
        for t, out_index, in_index in _taps(size, out_size, k, stride, dilation, before):
            s[t, in_index, out_index] = np.eye(out_index.stop - out_index.start, dtype=x.dtype)
        select.append(s)
    rows = np.tensordot(w, select[0], axes=(0, 0))  # (kW, C, M, H, oH)
    maps = np.tensordot(rows, select[1], axes=(0, 0))  # (C, M, H, oH, W, oW)
    images = x.reshape(n, h * width, c)
    if not by_matmul:
        maps = maps.transpose(2, 4, 3, 5, 0, 1).reshape(h * width, oh * ow, c, m)
        return np.einsum("npc,pqcm->nqcm", images, maps).reshape(n, oh, ow, c * m)
    maps = maps.transpose(0, 2, 4, 1, 3, 5).reshape(c, h * width, m * oh * ow)
    result = np.matmul(images.transpose(2, 0, 1), maps).reshape(c, n, m, oh * ow)
    return result.transpose(1, 3, 0, 2).reshape(n, oh, ow, c * m)


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
    if stride_s[0] != stride_s[1]:
        raise invalid(
            "Current implementation only supports equal length strides in the row and column dimensions."
        )
    if xl.shape[-1] != c:
        raise invalid(f"input and filter must have the same depth: {xl.shape[-1]} vs {c}")
    pads, outs = _pads(
        xl.shape[1:3], (kh, kw), stride_s, dil_s, padding, _explicit(explicit_paddings, data_format, 2)
    )
    acc = _accumulate_dtype(input.dtype)
    result = _depthwise(
        xl.astype(acc, copy=False), filter.astype(acc, copy=False), stride_s, dil_s, pads, outs
    )
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
    passes, counts = _pool_plan(xl.shape[1:-1], tuple(k_s), tuple(s_s), tuple(pads), tuple(outs))
    # Each group's result is finished while it is still in the cache.
    if kind == "max":
        lowest = _finite_lowest(xl.dtype)
        result = _by_image_groups(
            xl,
            outs,
            xl.dtype,
            lambda x, out: _lowest_at_least(_pool_separable(x, passes, np.fmax, lowest, out), lowest),
        )
        return _channels_back(out(result, value.dtype), data_format)
    acc = _accumulate_dtype(value.dtype)
    if not isinstance(counts, float):
        # SAME windows average their valid elements only. Their divisor, repeated per channel, is
        # divided by as fast as a scalar; a broadcast one numpy divides by row by row (7x slower).
        counts = np.repeat(counts.astype(acc), xl.shape[-1], axis=-1)
    result = _by_image_groups(
        xl,
        outs,
        acc,
        lambda x, out: _average(_pool_separable(x.astype(acc, copy=False), passes, np.add, 0, out), counts),
    )
    return _channels_back(out(result, value.dtype), data_format)


def _average(sums: np.ndarray, counts) -> np.ndarray:
    sums += 0  # TF's sums start from 0: a window of -0.0 averages to +0.0
    sums /= counts
    return sums


def _lowest_at_least(result: np.ndarray, lowest) -> np.ndarray:
    """TF's max pooling starts from lowest() and skips NaN (``a < b ? b : a``): a window of NaN
    and -inf only gives lowest. fmax skipped NaN wherever a window held a number, so only such
    windows are left to fix. A min (which propagates NaN) finds whether there are any, and is
    faster than fmax with a scalar, which numpy runs without SIMD: 7 against 45 us on 0.5 MB."""
    if result.size:  # (integers have neither: their min is never below lowest)
        least = result.min()
        if np.isnan(least) or least < lowest:
            np.fmax(result, lowest, out=result)
    return result


def _by_image_groups(x, outs, dtype, pool):
    """``pool(x, None)``, or where ``x`` is larger than ``_POOL_GROUPED_ABOVE``, ``pool(group,
    out)`` over groups of images of about ``_POOL_GROUP_BYTES``, each writing its slice of the
    result: each pass of a separable pooling reads what the last wrote, which stays in the L2
    cache for a group but not for the batch (Xception's first MaxPool at batch 32, 18 MB: 5.5 ->
    3.6 ms)."""
    if x.nbytes <= _POOL_GROUPED_ABOVE or len(x) < 2:
        return pool(x, None)
    step = max(1, _POOL_GROUP_BYTES // max(1, x[0].nbytes))
    result = np.empty((len(x), *outs, x.shape[-1]), dtype)
    for i in range(0, len(x), step):
        pool(x[i : i + step], result[i : i + step])
    return result


@functools.lru_cache(maxsize=256)
def _pool_plan(sizes, k_s, s_s, pads, outs):
    """For each spatial dim, its pass: (output size, the index of a tap reaching every output or
    None, and (output index, input index) per other tap); and each window's number of valid
    elements, (*outs, 1), or that number where all windows have it. A pure function of the
    shapes, cached: a served model pools the same shapes at every request, and on a small map
    working them out costs more than the pooling."""
    passes, counts = [], np.ones((1,) * (len(sizes) + 1))
    for d, (size, k, stride, (before, _), out_size) in enumerate(zip(sizes, k_s, s_s, pads, outs)):
        taps = _taps(size, out_size, k, stride, 1, before)
        first = next((tap for tap in taps if tap[1] == slice(0, out_size)), None)
        lead = (slice(None),) * (1 + d)
        steps = tuple((lead + (o,), lead + (i,)) for tap, o, i in taps if first is None or tap != first[0])
        passes.append((out_size, None if first is None else lead + (first[2],), steps))
        count = np.zeros(out_size)
        for _, out_index, _ in taps:
            count[out_index] += 1
        counts = counts * count.reshape((1,) * d + (out_size,) + (1,) * (len(sizes) - d))
    if counts.size and counts.min() == counts.max():
        return tuple(passes), float(counts.flat[0])
    counts.flags.writeable = False
    return tuple(passes), counts


def _pool_separable(x, passes, combine, fill, out=None):
    """A window reduction as one pass per spatial dim (max and sum are separable): a pass folds
    each kernel tap's shifted slice into the result. A tap reaching every output starts the pass
    together with the next tap, in one step: kH + kW - 2 vectorised steps for a 2-D window. Only
    a window with no element at all (explicit padding wider than the kernel) takes ``fill``.
    Returns ``out`` filled, or a new array."""
    owned = False
    for axis, (out_size, first, steps) in enumerate(passes, start=1):
        if first is not None and not steps:  # one tap along this axis: a view
            x = x[first]
            continue
        last = out if axis == len(passes) else None
        with _RowsUnbuffered(x, axis):
            x, owned = _pool_pass(x, axis, out_size, first, steps, combine, fill, last), True
    if out is not None and x is not out:  # the last pass took one tap
        np.copyto(out, x)
        return out
    return x if owned else np.array(x)


def _pool_pass(x, axis, out_size, first, steps, combine, fill, out):
    if first is None:
        shape = list(x.shape)
        shape[axis] = out_size
        result = np.empty(shape, x.dtype) if out is None else out
        result[...] = fill
    else:
        (out_index, in_index), steps = steps[0], steps[1:]
        base = x[first]
        result = np.empty_like(base) if out is None else out
        combine(base[out_index], x[in_index], out=result[out_index])
        lead, taken = out_index[:axis], out_index[axis]
        for rest in (slice(0, taken.start), slice(taken.stop, out_size)):  # outputs it misses
            if rest.start < rest.stop:
                result[lead + (rest,)] = base[lead + (rest,)]
    for out_index, in_index in steps:
        target = result[out_index]
        combine(target, x[in_index], out=target)
    return result


_UNBUFFERED_ROWS = 256  # elements: shorter rows gain nothing from running unbuffered
_UNBUFFERED_ABOVE = 1 << 20  # bytes: on less, setting numpy's buffer costs what it saves


class _RowsUnbuffered:
    """numpy (2.3 on) copies operands whose contiguous rows are shorter than its ufunc buffer
    (8192 elements) into that buffer first. For rows of 256 elements and more, that copy costs
    more than the row-by-row loop it saves: a pass over every other row of a 3x3/2 MaxPool's
    32x18x18x64 input (rows of 1152) takes 1.6x the time buffered. A buffer no longer than a row
    keeps the pass unbuffered; the setting is numpy's per-thread one, restored on the way out."""

    __slots__ = ("row", "saved")

    def __init__(self, x: np.ndarray, axis: int):
        self.row = math.prod(x.shape[axis + 1 :]) if x.nbytes >= _UNBUFFERED_ABOVE else 0
        self.saved = None

    def __enter__(self):
        if self.row >= _UNBUFFERED_ROWS and self.row < np.getbufsize():
            self.saved = np.setbufsize(self.row - self.row % 16)  # numpy 1.x: multiples of 16

    def __exit__(self, *exc):
        if self.saved is not None:
            np.setbufsize(self.saved)


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
