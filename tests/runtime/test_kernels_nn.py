"""Kernel checks TensorFlow cannot make for us: behaviour TF's CPU kernels lack (dilated depthwise
convolutions, dilated transposed convolutions, ops removed from TF 2) checked against identities
over kernels that the op records do check against TF, and the speed of the big kernels.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from runtime import errors
from runtime.kernels import lookup

RNG = np.random.default_rng(7)


def run(op: str, *inputs, **attrs):
    return lookup(op).fn(*inputs, **attrs)


def conv2d(x, f, **attrs):
    return run("Conv2D", x, f, **attrs)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("multiplier", [1, 2])
def test_dilated_depthwise_equals_grouped_conv(padding, multiplier):
    # Depthwise = Conv2D with groups = channels; TF's CPU Conv2D supports groups and dilations.
    x = RNG.standard_normal((2, 9, 8, 3)).astype(np.float32)
    f = RNG.standard_normal((3, 3, 3, multiplier)).astype(np.float32)
    attrs = dict(strides=[1, 1, 1, 1], padding=padding, dilations=[1, 2, 2, 1])
    depthwise = run("DepthwiseConv2dNative", x, f, **attrs)
    grouped = conv2d(x, f.reshape(3, 3, 1, 3 * multiplier), **attrs)
    np.testing.assert_allclose(depthwise, grouped, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "shape,kernel,strides,dilations,padding",
    [
        ((3, 2, 2, 5), (7, 7), (1, 1), (1, 1), "SAME"),
        ((2, 1, 1, 4), (3, 3), (1, 1), (1, 1), "SAME"),
        ((4, 6, 5, 3), (3, 3), (2, 2), (1, 1), "SAME"),
        ((2, 9, 7, 2), (3, 2), (1, 1), (2, 3), "VALID"),
        ((1, 8, 8, 3), (5, 5), (3, 3), (1, 1), "SAME"),
        ((2, 5, 6, 2), (2, 3), (1, 1), (1, 1), ((2, 0), (1, 3))),
        ((2, 9, 8, 3), (3, 3), (2, 1), (1, 2), "SAME"),
        ((2, 9, 11, 3), (5, 5), (2, 2), (1, 1), "VALID"),
        ((2, 7, 10, 4), (3, 1), (1, 3), (1, 1), "SAME"),
        ((3, 12, 12, 16), (3, 3), (2, 2), (1, 1), "SAME"),
    ],
)
@pytest.mark.parametrize("multiplier", [1, 3])
@pytest.mark.parametrize("by_matmul", [True, False])
def test_depthwise_matrix_form_equals_window_form(
    shape, kernel, strides, dilations, padding, multiplier, by_matmul
):
    # _depthwise picks a form by cost; each must give the same result on any shape.
    from runtime.kernels import conv_ops

    x = RNG.standard_normal(shape).astype(np.float32)
    w = RNG.standard_normal((*kernel, shape[-1], multiplier)).astype(np.float32)
    explicit = padding if isinstance(padding, tuple) else None
    pads, outs = conv_ops._pads(
        shape[1:3], kernel, strides, dilations, "EXPLICIT" if explicit else padding, explicit
    )
    padded = conv_ops._pad_spatial(x, pads)
    windows = conv_ops._depthwise_windows(padded, w, strides, dilations, outs)
    matrices = conv_ops._depthwise_matrices(x, w, strides, dilations, pads, outs, by_matmul)
    np.testing.assert_allclose(matrices, windows, rtol=1e-5, atol=1e-5)
    if strides[1] == 1:  # the windows' einsum a row at a time
        rows = conv_ops._depthwise_rows(padded, w, strides, dilations, outs)
        np.testing.assert_allclose(rows, windows, rtol=1e-5, atol=1e-5)
    elif dilations[1] == 1:  # ... of each phase of a strided one
        phases = conv_ops._depthwise_phases(padded, w, strides, dilations, outs)
        np.testing.assert_allclose(phases, windows, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "shape,kernel,strides,padding",
    [
        ((2, 7, 8, 3), (3, 3), (2, 2), "SAME"),
        ((2, 7, 8, 3), (3, 2), (1, 3), "VALID"),
        ((1, 2, 2, 4), (5, 5), (1, 1), "SAME"),
        ((2, 5, 6, 4, 2), (2, 3, 2), (1, 2, 2), "SAME"),
        ((1, 6, 5, 2), (2, 2), (1, 1), ((3, 0), (0, 2))),
        ((2, 9, 9, 4), (3, 3), (2, 2), "SAME"),
        ((2, 5, 6, 3), (1, 3), (1, 2), "SAME"),
        ((2, 4, 4, 3), (1, 1), (2, 2), "VALID"),
    ],
)
def test_separable_pooling_equals_one_reduction_per_window(shape, kernel, strides, padding):
    # The separable passes against the plain definition: one reduction over each padded window.
    from runtime.kernels import conv_ops

    n = len(kernel)
    x = RNG.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[::5] = np.nan
    explicit = padding if isinstance(padding, tuple) else None
    pads, outs = conv_ops._pads(
        shape[1:-1], kernel, strides, [1] * n, "EXPLICIT" if explicit else padding, explicit
    )
    axes = tuple(range(1 + n, 1 + 2 * n))
    passes, _ = conv_ops._pool_plan(shape[1:-1], kernel, strides, tuple(pads), tuple(outs))
    lowest = np.finfo(np.float32).min
    x.reshape(-1)[1::7] = -np.inf  # a window of -inf and NaN only gives lowest, as TF's
    reduced = np.fmax.reduce(
        conv_ops._windows(conv_ops._pad_spatial(x, pads, lowest), kernel, strides, [1] * n, outs),
        axis=axes,
        initial=lowest,
    )
    before = x.copy()
    pooled = conv_ops._lowest_at_least(conv_ops._pool_separable(x, passes, np.fmax, lowest), lowest)
    np.testing.assert_array_equal(pooled, reduced)
    np.testing.assert_array_equal(x, before)  # (a 1-tap axis passes views of it along)
    finite = np.nan_to_num(x, neginf=0.0)
    sums = conv_ops._windows(conv_ops._pad_spatial(finite, pads), kernel, strides, [1] * n, outs).sum(
        axis=axes
    )
    np.testing.assert_allclose(
        conv_ops._pool_separable(finite, passes, np.add, 0), sums, rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize(
    "shape,ksize,strides",
    [
        ((7, 9, 9, 5), [1, 3, 3, 1], [1, 2, 2, 1]),  # groups of 2 images, the last one alone
        ((5, 4, 6, 6, 3), [1, 2, 3, 2, 1], [1, 1, 2, 2, 1]),  # 3-D
    ],
)
def test_pooling_by_image_groups_equals_pooling_the_batch(monkeypatch, kind, shape, ksize, strides):
    # The grouped form (a batch larger than the L2 cache) against the whole batch in one go.
    from runtime.kernels import conv_ops

    x = RNG.standard_normal(shape).astype(np.float16 if kind == "avg" else np.float32)
    x.reshape(-1)[::11] = np.nan if kind == "max" else 1.0
    three = len(shape) == 5
    pool = {
        ("max", False): conv_ops.max_pool,
        ("avg", False): conv_ops.avg_pool,
        ("max", True): conv_ops.max_pool3d,
        ("avg", True): conv_ops.avg_pool3d,
    }[kind, three]
    args = dict(ksize=ksize, strides=strides, padding="SAME")
    whole = pool(x, **args)
    groups = []
    separable = conv_ops._pool_separable
    monkeypatch.setattr(conv_ops, "_POOL_GROUPED_ABOVE", 0)
    monkeypatch.setattr(conv_ops, "_POOL_GROUP_BYTES", 2 * x[0].nbytes)
    monkeypatch.setattr(
        conv_ops, "_pool_separable", lambda x, *rest: groups.append(len(x)) or separable(x, *rest)
    )
    grouped = pool(x, **args)
    assert groups == [2] * (len(x) // 2) + [1]
    np.testing.assert_array_equal(grouped, whole)
    assert grouped.dtype == whole.dtype


@pytest.mark.parametrize(
    "args",
    [
        dict(ksize=[1, 3, 1, 1], strides=[1, 2, 2, 1], padding="VALID"),  # the last pass: a view
        dict(  # windows of padding only: a pass of no tap reaching every output
            ksize=[1, 2, 2, 1],
            strides=[1, 1, 1, 1],
            padding="EXPLICIT",
            explicit_paddings=[0, 0, 3, 0, 0, 2, 0, 0],
        ),
    ],
)
def test_grouped_pooling_writes_each_group_into_the_result(monkeypatch, args):
    from runtime.kernels import conv_ops

    x = RNG.standard_normal((5, 6, 7, 3)).astype(np.float32)
    whole = conv_ops.max_pool(x, **args)
    monkeypatch.setattr(conv_ops, "_POOL_GROUPED_ABOVE", 0)
    monkeypatch.setattr(conv_ops, "_POOL_GROUP_BYTES", 2 * x[0].nbytes)
    np.testing.assert_array_equal(conv_ops.max_pool(x, **args), whole)


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_unbuffered_rows_change_no_result_and_restore_numpys_buffer(monkeypatch, kind):
    # Rows of 40 x 16 elements run unbuffered (numpy's buffer shrunk to a row, then restored);
    # against the same pooling with numpy's own buffering.
    from runtime.kernels import conv_ops

    monkeypatch.setattr(conv_ops, "_UNBUFFERED_ABOVE", 0)
    x = RNG.standard_normal((3, 9, 40, 16)).astype(np.float32)
    pool = conv_ops.max_pool if kind == "max" else conv_ops.avg_pool
    args = dict(ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME")
    default, sizes, setbufsize = np.getbufsize(), [], np.setbufsize
    monkeypatch.setattr(np, "setbufsize", lambda size: sizes.append(size) or setbufsize(size))
    unbuffered = pool(x, **args)
    assert sizes == [640, default] and np.getbufsize() == default
    monkeypatch.setattr(conv_ops, "_UNBUFFERED_ROWS", 1 << 30)
    np.testing.assert_array_equal(unbuffered, pool(x, **args))
    assert sizes == [640, default]


@pytest.mark.parametrize("filter_depth,out_depth", [(1, 6), (1, 12), (2, 6), (3, 4)])
@pytest.mark.parametrize("strides,padding", [([1, 1, 1, 1], "SAME"), ([1, 2, 2, 1], "VALID")])
def test_grouped_conv2d_is_each_group_convolved_alone(filter_depth, out_depth, strides, padding):
    # Groups = input depth / filter depth; group g reads its slice of input channels and writes
    # its slice of output channels. A filter one channel deep runs the depthwise tap loop, a
    # deeper one a batched matmul: both checked against plain (groups=1) convolutions, which the
    # op records check against TF.
    x = RNG.standard_normal((2, 8, 7, 6)).astype(np.float32)
    f = RNG.standard_normal((3, 3, filter_depth, out_depth)).astype(np.float32)
    groups, attrs = 6 // filter_depth, dict(strides=strides, padding=padding)
    per = out_depth // groups
    each = [
        conv2d(x[..., g * filter_depth : (g + 1) * filter_depth], f[..., g * per : (g + 1) * per], **attrs)
        for g in range(groups)
    ]
    np.testing.assert_allclose(conv2d(x, f, **attrs), np.concatenate(each, -1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "strides,dilations,padding",
    [
        ([1, 2, 2, 1], [1, 1, 1, 1], "SAME"),
        ([1, 1, 1, 1], [1, 2, 2, 1], "VALID"),
        ([1, 2, 1, 1], [1, 1, 2, 1], "SAME"),
    ],
)
def test_conv2d_backprop_input_is_the_adjoint_of_conv2d(strides, dilations, padding):
    # <conv(x), dy> == <x, conv_backprop_input(dy)> for every x and dy.
    x = RNG.standard_normal((2, 9, 7, 3))
    f = RNG.standard_normal((3, 2, 3, 4))
    attrs = dict(strides=strides, padding=padding, dilations=dilations)
    y = conv2d(x, f, **attrs)
    dy = RNG.standard_normal(y.shape)
    dx = run("Conv2DBackpropInput", np.array(x.shape, np.int32), f, dy, **attrs)
    assert dx.shape == x.shape
    np.testing.assert_allclose(np.sum(y * dy), np.sum(x * dx), rtol=1e-10)


def test_batch_norm_with_global_normalization_matches_fused_batch_norm():
    x = RNG.standard_normal((2, 3, 3, 4)).astype(np.float32)
    mean, var, beta, gamma = (RNG.uniform(0.5, 2, 4).astype(np.float32) for _ in range(4))
    old = run(
        "BatchNormWithGlobalNormalization",
        x,
        mean,
        var,
        beta,
        gamma,
        variance_epsilon=1e-3,
        scale_after_normalization=True,
    )
    fused = run("FusedBatchNormV3", x, gamma, beta, mean, var, epsilon=1e-3, is_training=False)[0]
    np.testing.assert_allclose(old, fused, rtol=1e-5, atol=1e-6)
    unscaled = run(
        "BatchNormWithGlobalNormalization",
        x,
        mean,
        var,
        beta,
        gamma,
        variance_epsilon=1e-3,
        scale_after_normalization=False,
    )
    ones = np.ones(4, np.float32)
    np.testing.assert_allclose(
        unscaled,
        run("FusedBatchNormV3", x, ones, beta, mean, var, epsilon=1e-3, is_training=False)[0],
        rtol=1e-5,
        atol=1e-6,
    )


def test_soft_nms_is_reported_unimplemented():
    boxes = np.array([[0, 0, 1, 1]], np.float32)
    with pytest.raises(errors.UnimplementedError):
        run(
            "NonMaxSuppressionV5",
            boxes,
            np.array([0.5], np.float32),
            np.int32(1),
            np.float32(0.5),
            np.float32(0),
            np.float32(0.5),
        )


def test_nms_selects_many_boxes_fast():
    n = 5000
    corners = RNG.uniform(0, 100, (n, 2)).astype(np.float32)
    boxes = np.concatenate([corners, corners + RNG.uniform(1, 10, (n, 2)).astype(np.float32)], axis=1)
    scores = RNG.uniform(0, 1, n).astype(np.float32)
    start = time.perf_counter()
    selected = run("NonMaxSuppressionV3", boxes, scores, np.int32(300), np.float32(0.5), np.float32(0.1))
    assert time.perf_counter() - start < 2.0
    assert len(selected) == 300 and len(set(selected.tolist())) == 300


BIG = [
    pytest.param(
        "Conv2D",
        lambda: (
            RNG.standard_normal((1, 224, 224, 3), np.float32),
            RNG.standard_normal((3, 3, 3, 32), np.float32),
        ),
        dict(strides=[1, 2, 2, 1], padding="SAME"),
        1.0,
        id="conv2d-224x224-stride2",
    ),
    pytest.param(
        "Conv2D",
        lambda: (
            RNG.standard_normal((8, 28, 28, 64), np.float32),
            RNG.standard_normal((3, 3, 64, 64), np.float32),
        ),
        dict(strides=[1, 1, 1, 1], padding="SAME"),
        2.0,
        id="conv2d-batch8-64ch",
    ),
    pytest.param(
        "DepthwiseConv2dNative",
        lambda: (
            RNG.standard_normal((1, 112, 112, 32), np.float32),
            RNG.standard_normal((3, 3, 32, 1), np.float32),
        ),
        dict(strides=[1, 1, 1, 1], padding="SAME"),
        1.0,
        id="depthwise-112x112",
    ),
    pytest.param(
        "MaxPool",
        lambda: (RNG.standard_normal((4, 112, 112, 64), np.float32),),
        dict(ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME"),
        1.0,
        id="maxpool-112x112",
    ),
    pytest.param(
        "ResizeBilinear",
        lambda: (RNG.standard_normal((4, 224, 224, 3), np.float32), np.array([299, 299], np.int32)),
        dict(half_pixel_centers=True),
        1.0,
        id="resize-bilinear-224-to-299",
    ),
    pytest.param("Erf", lambda: (RNG.standard_normal(1_000_000).astype(np.float32),), {}, 2.0, id="erf-1M"),
]


@pytest.mark.parametrize("op,inputs,attrs,budget", BIG)
def test_big_kernels_run_vectorised(op, inputs, attrs, budget):
    args = inputs()
    start = time.perf_counter()
    run(op, *args, **attrs)
    assert time.perf_counter() - start < budget, f"{op} took too long: a per-element Python loop?"


def test_top_k_v1_matches_top_k_v2():
    x = np.array([[3.0, 1.0, 3.0, 2.0], [0.5, 0.5, 0.5, 1.0]], np.float32)
    for got, want in zip(run("TopK", x, k=2), run("TopKV2", x, np.int32(2))):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(run("TopK", x, k=2)[1], [[0, 2], [3, 0]])
