"""Neural-network kernels: activations, softmax, BiasAdd, convolutions, pooling, batch norm, LRN, TopK.

Convolutions and pooling work on channels-last views: NCHW inputs are transposed in and out. A
window is a strided view of the padded input (im2col without a Python loop per element), and a
convolution is one matmul over it. Padding follows TF: SAME pads ``max((out-1)*stride + k_eff - in,
0)`` split with the smaller half first; AvgPool's SAME windows average valid elements only.
"""

from __future__ import annotations

import numpy as np

from runtime import dtypes
from runtime.errors import UnimplementedError
from runtime.kernels.math_ops import _low_precision, broadcast, invalid, out, shape_str
from runtime.kernels.registry import kernel

# --------------------------------------------------------------------------- activations


def _float32_for(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if _low_precision(x.dtype) else x


def _activation(fn):
    def compute(features):
        with np.errstate(all="ignore"):
            return out(fn(_float32_for(features)), features.dtype)

    return compute


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946

for _op, _fn in {
    "Relu": lambda x: np.maximum(x, 0),
    "Relu6": lambda x: np.minimum(np.maximum(x, 0), 6),
    "Elu": lambda x: np.where(x < 0, np.expm1(np.minimum(x, 0)), x),
    "Selu": lambda x: np.where(
        x < 0, _SELU_SCALE * _SELU_ALPHA * np.expm1(np.minimum(x, 0)), _SELU_SCALE * x
    ),
    "Softsign": lambda x: x / (1 + np.abs(x)),
}.items():
    kernel(_op)(_activation(_fn))


@kernel("Softplus")
def softplus(features):
    x = _float32_for(features)
    # TF's threshold avoids exp overflow and keeps float precision for very negative inputs.
    threshold = np.log(np.finfo(x.dtype).eps) + 2
    with np.errstate(all="ignore"):
        result = np.where(x > -threshold, x, np.where(x < threshold, np.exp(x), np.log1p(np.exp(x))))
    return out(result, features.dtype)


@kernel("LeakyRelu")
def leaky_relu(features, *, alpha=0.2):
    x = _float32_for(features)
    return out(np.where(x > 0, x, x * np.asarray(alpha, x.dtype)), features.dtype)


def _softmax(logits, log):
    if logits.ndim < 1:
        raise invalid(f"logits must have >= 1 dimension, got {shape_str(logits.shape)}")
    x = _float32_for(logits)
    with np.errstate(all="ignore"):
        shifted = x - np.max(x, axis=-1, keepdims=True) if x.size else x
        if log:
            result = shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))
        else:
            e = np.exp(shifted)
            result = e / np.sum(e, axis=-1, keepdims=True)
    return out(result, logits.dtype)


@kernel("Softmax")
def softmax(logits):
    return _softmax(logits, False)


@kernel("LogSoftmax")
def log_softmax(logits):
    return _softmax(logits, True)


@kernel("BiasAdd", "BiasAddV1")
def bias_add(value, bias, *, data_format="NHWC"):
    if value.ndim < 2:
        raise invalid(f"Input tensor must be at least 2D: {shape_str(value.shape)}")
    if bias.ndim != 1:
        raise invalid(f"Biases must be 1D: {shape_str(bias.shape)}")
    channel = 1 if data_format.startswith("NC") else value.ndim - 1
    if value.shape[channel] != bias.shape[0]:
        raise invalid(
            f"Must provide as many biases as the last dimension of the input tensor: "
            f"{shape_str(bias.shape)} vs. {shape_str(value.shape)}"
        )
    shape = [1] * value.ndim
    shape[channel] = -1
    with np.errstate(all="ignore"):
        return out(value + bias.reshape(shape), value.dtype)


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
    win = _windows(xp, k_sizes, stride_s, dil_s, outs)
    w = filt.astype(acc, copy=False)
    if groups == 1:
        result = np.tensordot(
            win, w, axes=(list(range(1 + n_spatial, 2 + 2 * n_spatial)), list(range(n_spatial + 1)))
        )
    else:
        per = out_c // groups
        parts = [
            np.tensordot(
                win[..., g * f_c : (g + 1) * f_c],
                w[..., g * per : (g + 1) * per],
                axes=(list(range(1 + n_spatial, 2 + 2 * n_spatial)), list(range(n_spatial + 1))),
            )
            for g in range(groups)
        ]
        result = np.concatenate(parts, axis=-1)
    return _channels_back(out(result, x.dtype), data_format)


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
    win = _windows(_pad_spatial(xl.astype(acc, copy=False), pads), (kh, kw), stride_s, dil_s, outs)
    result = np.einsum("nhwijc,ijcm->nhwcm", win, filter.astype(acc, copy=False), optimize=True)
    result = result.reshape(result.shape[:3] + (c * m,))
    return _channels_back(out(result, input.dtype), data_format)


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
    if len(sizes) != 4:
        raise invalid(f"Conv2DBackpropInput: input_sizes input must be 1-dim, not {len(sizes)}")
    in_shape = sizes if not data_format.startswith("NC") else [sizes[0], sizes[2], sizes[3], sizes[1]]
    _, _, stride_s = _spatial(strides, data_format, 2, "stride")
    _, _, dil_s = _spatial(dilations, data_format, 2, "dilation")
    kh, kw, c, oc = filter.shape
    pads, outs = _pads(
        in_shape[1:3], (kh, kw), stride_s, dil_s, padding, _explicit(explicit_paddings, data_format, 2)
    )
    dy = _channels_last(out_backprop, data_format)
    if list(dy.shape[1:3]) != outs or dy.shape[-1] != oc:
        raise invalid(
            f"Conv2DCustomBackpropInput: Size of out_backprop doesn't match computed: actual = "
            f"{dy.shape[1]}, computed = {outs[0]} spatial_dim: 1 input: {in_shape[1]} filter: {kh} output: "
            f"{dy.shape[1]} stride: {stride_s[0]} dilation: {dil_s[0]}"
        )
    acc = _accumulate_dtype(out_backprop.dtype)
    cols = np.tensordot(dy.astype(acc, copy=False), filter.astype(acc, copy=False), axes=([3], [3]))
    n = in_shape[0]
    padded = np.zeros((n, in_shape[1] + sum(pads[0]), in_shape[2] + sum(pads[1]), c), acc)
    # Scatter each kernel tap's contribution: a loop over kernel taps, never over elements.
    oh, ow = outs
    for i in range(kh):
        for j in range(kw):
            hi, wj = i * dil_s[0], j * dil_s[1]
            padded[
                :,
                hi : hi + (oh - 1) * stride_s[0] + 1 : stride_s[0],
                wj : wj + (ow - 1) * stride_s[1] + 1 : stride_s[1],
            ] += cols[:, :, :, i, j, :]
    result = padded[:, pads[0][0] : pads[0][0] + in_shape[1], pads[1][0] : pads[1][0] + in_shape[2]]
    return _channels_back(out(result, out_backprop.dtype), data_format)


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


# --------------------------------------------------------------------------- normalisation


def _check_batch_norm(x, scale, offset, mean, variance, is_training, channel):
    if x.ndim not in (4, 5):
        raise invalid(f"input must be 4 or 5-dimensional{shape_str(x.shape)}")
    for name, value in (("scale", scale), ("offset", offset), ("mean", mean), ("variance", variance)):
        if value.ndim != 1:
            raise invalid(f"{name} must be 1-dimensional{shape_str(value.shape)}")
    depth = x.shape[channel]
    checked = (("scale", scale), ("offset", offset))
    if not is_training:
        checked += (("mean", mean), ("variance", variance))
    for name, value in checked:
        if value.shape[0] != depth:
            prefix = "When is_training=false, " if name in ("mean", "variance") else ""
            raise invalid(
                f"{prefix}{name} must have the same number of elements as the channels of x, got "
                f"{value.shape[0]} and {depth}"
            )


def _fused_batch_norm(
    x, scale, offset, mean, variance, epsilon, exponential_avg_factor, data_format, is_training
):
    channel = 1 if data_format.startswith("NC") else x.ndim - 1
    _check_batch_norm(x, scale, offset, mean, variance, is_training, channel)
    shape = [1] * x.ndim
    shape[channel] = -1
    xf = x.astype(np.float32) if _low_precision(x.dtype) else x
    u = scale.dtype
    if is_training:
        axes = tuple(a for a in range(x.ndim) if a != channel)
        count = x.size // max(x.shape[channel], 1)
        batch_mean = (
            np.mean(xf, axis=axes, dtype=np.float64).astype(u) if count else np.full(scale.shape, np.nan, u)
        )
        batch_var = (
            np.var(xf, axis=axes, dtype=np.float64).astype(u) if count else np.full(scale.shape, np.nan, u)
        )
        use_mean, use_var = batch_mean, batch_var
        corrected = batch_var * (count / max(count - 1, 1))
        if exponential_avg_factor != 1.0:
            f = np.asarray(exponential_avg_factor, u)
            running_mean = (1 - f) * mean + f * batch_mean
            running_var = (1 - f) * variance + f * corrected
        else:
            running_mean, running_var = batch_mean, corrected.astype(u)
        saved = (batch_mean, out(1 / np.sqrt(batch_var + epsilon), u))
    else:
        use_mean, use_var = mean, variance
        running_mean, running_var = mean, variance
        saved = (mean, variance)
    inv = (1 / np.sqrt(use_var.astype(u) + np.asarray(epsilon, u))) * scale
    y = (xf - use_mean.reshape(shape)) * inv.reshape(shape) + offset.reshape(shape)
    return out(y, x.dtype), out(running_mean, u), out(running_var, u), out(saved[0], u), out(saved[1], u)


@kernel("FusedBatchNorm", "FusedBatchNormV2")
def fused_batch_norm(
    x,
    scale,
    offset,
    mean,
    variance,
    *,
    epsilon=0.0001,
    exponential_avg_factor=1.0,
    data_format="NHWC",
    is_training=True,
):
    return _fused_batch_norm(
        x, scale, offset, mean, variance, epsilon, exponential_avg_factor, data_format, is_training
    )


@kernel("FusedBatchNormV3")
def fused_batch_norm_v3(
    x,
    scale,
    offset,
    mean,
    variance,
    *,
    epsilon=0.0001,
    exponential_avg_factor=1.0,
    data_format="NHWC",
    is_training=True,
):
    outs = _fused_batch_norm(
        x, scale, offset, mean, variance, epsilon, exponential_avg_factor, data_format, is_training
    )
    return (*outs, np.zeros((0,), scale.dtype))


@kernel("LRN")
def lrn(input, *, depth_radius=5, bias=1.0, alpha=1.0, beta=0.5):  # noqa: A002
    if input.ndim != 4:
        raise invalid("input must be 4-dimensional")
    x = input.astype(np.float32) if _low_precision(input.dtype) else input
    sq = np.square(x)
    c = x.shape[-1]
    cum = np.concatenate([np.zeros(x.shape[:-1] + (1,), x.dtype), np.cumsum(sq, axis=-1)], axis=-1)
    hi = np.minimum(np.arange(c) + depth_radius + 1, c)
    lo = np.maximum(np.arange(c) - depth_radius, 0)
    window = cum[..., hi] - cum[..., lo]
    return out(x / np.power(bias + alpha * window, beta), input.dtype)


# --------------------------------------------------------------------------- top k


@kernel("TopKV2", const_inputs=(1,))
def top_k_v2(input, k, *, sorted=True, index_type=dtypes.DT_INT32):  # noqa: A002
    kk = int(np.asarray(k))
    if kk < 0:
        raise invalid(f"Need k >= 0, got {kk}")
    if input.ndim < 1:
        raise invalid(f"input must be >= 1-D, got shape {shape_str(input.shape)}")
    n = input.shape[-1]
    if n < kk:
        raise invalid(f"input must have at least k columns. Had {n}, needed {kk}")
    # Descending with ties broken by the lower index: a stable ascending sort of the reversed row.
    order = np.argsort(input[..., ::-1], axis=-1, kind="stable")[..., ::-1][..., :kk]
    indices = (n - 1 - order).astype(dtypes.as_numpy_dtype(index_type))
    values = np.take_along_axis(input, indices.astype(np.int64), axis=-1)
    return out(values, input.dtype), indices


@kernel("TopK")
def top_k(input, *, k, sorted=True):  # noqa: A002
    return top_k_v2(input, np.asarray(k), sorted=sorted)


@kernel("NthElement", const_inputs=(1,))
def nth_element(input, n, *, reverse=False):  # noqa: A002
    k = int(np.asarray(n))
    if input.ndim < 1:
        raise invalid(f"Input must be >= 1-D, got shape {shape_str(input.shape)}")
    if not 0 <= k < input.shape[-1]:
        raise invalid(f"Input must have last dimension > n = {k}")
    ordered = np.sort(input, axis=-1)
    return np.ascontiguousarray(ordered[..., -1 - k] if reverse else ordered[..., k])


@kernel("InTopKV2", const_inputs=(2,))
def in_top_k_v2(predictions, targets, k):
    kk = int(np.asarray(k))
    if predictions.ndim != 2:
        raise invalid(f"predictions must be 2-dimensional{shape_str(predictions.shape)}")
    if targets.shape != (predictions.shape[0],):
        raise invalid(
            f"First dimension of predictions {predictions.shape[0]} must match length of targets {targets.size}"
        )
    n = predictions.shape[1]
    valid = (targets >= 0) & (targets < n)
    rows = np.arange(predictions.shape[0])
    target = predictions[rows, np.where(valid, targets, 0)]
    finite = np.isfinite(target)
    better = np.sum(predictions > target[:, None], axis=1)
    return out(valid & finite & (better < kk), np.bool_)


@kernel("InTopK")
def in_top_k(predictions, targets, *, k):
    return in_top_k_v2(predictions, targets, np.asarray(k))


@kernel("BiasAddGrad")
def bias_add_grad(out_backprop, *, data_format="NHWC"):
    channel = 1 if data_format.startswith("NC") and out_backprop.ndim > 2 else out_backprop.ndim - 1
    axes = tuple(a for a in range(out_backprop.ndim) if a != channel)
    acc = _accumulate_dtype(out_backprop.dtype)
    return out(np.sum(out_backprop.astype(acc), axis=axes), out_backprop.dtype)


def _xent(logits, labels_prob):
    x = _float32_for(logits)
    shifted = x - np.max(x, axis=-1, keepdims=True)
    log_sum = np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))
    log_prob = shifted - log_sum
    with np.errstate(all="ignore"):
        loss = -np.sum(np.where(labels_prob == 0, 0, labels_prob * log_prob), axis=-1)
    backprop = np.exp(log_prob) - labels_prob
    return out(loss, logits.dtype), out(backprop, logits.dtype)


@kernel("SoftmaxCrossEntropyWithLogits")
def softmax_cross_entropy_with_logits(features, labels):
    shape = broadcast(features, labels)
    if len(shape) != 2:
        raise invalid("logits and labels must be either 2-dimensional, or broadcasted to be 2-dimensional")
    return _xent(
        np.broadcast_to(features, shape), np.broadcast_to(labels, shape).astype(_float32_for(features).dtype)
    )


@kernel("SparseSoftmaxCrossEntropyWithLogits")
def sparse_softmax_cross_entropy_with_logits(features, labels):
    if features.ndim != 2 or labels.shape != features.shape[:1]:
        raise invalid(
            f"logits and labels must have the same first dimension, got logits shape "
            f"{shape_str(features.shape)} and labels shape {shape_str(labels.shape)}"
        )
    n = features.shape[1]
    bad = (labels < 0) | (labels >= n)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise invalid(
            f"Received a label value of {int(labels[i])} which is outside the valid range of [0, {n}).  Label values: {' '.join(str(int(v)) for v in labels)}"
        )
    probs = np.zeros(features.shape, _float32_for(features).dtype)
    probs[np.arange(features.shape[0]), labels.astype(np.int64)] = 1
    return _xent(features, probs)


@kernel("BatchNormWithGlobalNormalization")
def batch_norm_with_global_normalization(
    t, m, v, beta, gamma, *, variance_epsilon, scale_after_normalization
):
    x = _float32_for(t)
    inv = 1 / np.sqrt(v + np.asarray(variance_epsilon, v.dtype))
    if scale_after_normalization:
        inv = inv * gamma
    return out((x - m) * inv + beta, t.dtype)


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
