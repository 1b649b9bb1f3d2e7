"""Neural-network kernels: activations, Softmax/LogSoftmax, BiasAdd, batch normalisation, LRN,
TopK/NthElement/InTopK, softmax cross entropies and the activation gradients' BiasAddGrad.

Half and bfloat16 inputs compute in float32 and round back, as Eigen does. Convolutions and
pooling live in ``conv_ops.py``.
"""

from __future__ import annotations

import numpy as np

from runtime import dtypes
from runtime.kernels.math_ops import _low_precision, broadcast, invalid, out, shape_str
from runtime.kernels.registry import kernel

# --------------------------------------------------------------------------- activations


def _float32_for(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if _low_precision(x.dtype) else x


def _activation(fn):
    def compute(features):
        # No np.errstate of its own (1 us a call): Session runs every non-quiet plan under one.
        result = fn(_float32_for(features))
        return (
            result
            if type(result) is np.ndarray and result.dtype == features.dtype
            else out(result, features.dtype)
        )

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
    # The methods, not np.max/np.sum: same ufunc reduce, less dispatch. No np.errstate of its own.
    shifted = x - x.max(axis=-1, keepdims=True) if x.size else x
    if log:
        result = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    else:
        e = np.exp(shifted)
        result = e / e.sum(axis=-1, keepdims=True)
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
    acc = np.dtype(np.float32) if _low_precision(out_backprop.dtype) else out_backprop.dtype
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
