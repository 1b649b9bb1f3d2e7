"""SavedModels as users export them, in the shapes that broke delegation and that the native
kernels answer: TF1 loops over TensorArrays (``dynamic_rnn``, ``map_fn`` over JPEG decoding, a
``while_loop`` writing rows), saved with default attrs stripped as ``tf.estimator`` and
``Builder(strip_default_attrs=True)`` save them; loops holding an Assert or a Print that no output
needs (so they stay frames); and ``tf.Module`` exports of image ops (non-max suppression, resize,
crop) and of a broad math zoo over many dtypes.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tests.oracle.tfside import Case, model, rng

VENV = "tf215"
FAMILY = "real_exports"

v1 = tf.compat.v1


def _save_v1(export_dir: str, build, strip: bool) -> None:
    """Runs ``build()`` (-> inputs, outputs) in a fresh graph with control flow v1 and saves it."""
    v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default(), v1.Session() as sess:
            v1.set_random_seed(1)
            inputs, outputs = build()
            sess.run(v1.global_variables_initializer())
            builder = v1.saved_model.Builder(export_dir)
            signature = v1.saved_model.signature_def_utils.predict_signature_def(inputs, outputs)
            builder.add_meta_graph_and_variables(
                sess, ["serve"], signature_def_map={"serving_default": signature}, strip_default_attrs=strip
            )
            builder.save()
    finally:
        v1.enable_control_flow_v2()


def _jpegs(r, shapes) -> np.ndarray:
    images = [(r.uniform(size=s) * 255).astype(np.uint8) for s in shapes]
    return np.array([tf.io.encode_jpeg(image).numpy() for image in images], dtype=object)


@model("real_dynamic_rnn_stripped")
def real_dynamic_rnn_stripped(export_dir: str) -> list[Case]:
    """``dynamic_rnn`` of a GRU and of a stacked LSTM/GRU, unknown batch and time."""

    def build():
        x = v1.placeholder(tf.float32, [None, None, 3], name="x")
        with v1.variable_scope("gru"):
            gru, _ = v1.nn.dynamic_rnn(v1.nn.rnn_cell.GRUCell(4), x, dtype=tf.float32)
        with v1.variable_scope("stacked"):
            cells = v1.nn.rnn_cell.MultiRNNCell([v1.nn.rnn_cell.LSTMCell(4), v1.nn.rnn_cell.GRUCell(3)])
            stacked, state = v1.nn.dynamic_rnn(cells, x, dtype=tf.float32)
        return {"x": x}, {"gru": gru, "stacked": stacked[:, -1, :], "h": state[1]}

    _save_v1(export_dir, build, strip=True)
    r = rng(70)
    return [
        Case("serving_default", {"x": r.normal(size=s).astype(np.float32)}) for s in ((2, 5, 3), (3, 7, 3))
    ]


@model("real_map_decode_jpeg_stripped")
def real_map_decode_jpeg_stripped(export_dir: str) -> list[Case]:
    """``map_fn`` over a batch of JPEG strings: decode, resize, and a central crop (its Asserts)."""

    def build():
        images = v1.placeholder(tf.string, [None], name="images")

        def resized(data):
            return tf.image.resize(tf.cast(tf.io.decode_jpeg(data, channels=3), tf.float32), [8, 8])

        def cropped(data):
            image = tf.image.convert_image_dtype(tf.io.decode_jpeg(data, channels=3), tf.float32)
            return tf.image.resize(tf.image.central_crop(image, 0.8), [5, 5])

        return {"images": images}, {
            "mean": tf.reduce_mean(tf.map_fn(resized, images, dtype=tf.float32), axis=[1, 2]),
            "cropped": tf.map_fn(cropped, images, dtype=tf.float32),
        }

    _save_v1(export_dir, build, strip=True)
    r = rng(71)
    return [
        Case("serving_default", {"images": _jpegs(r, [(10, 12, 3), (16, 9, 3)])}, rtol=1e-4, atol=1e-4),
        Case("serving_default", {"images": _jpegs(r, [(7, 7, 3)] * 3)}, rtol=1e-4, atol=1e-4),
    ]


@model("real_while_tensor_array_stripped")
def real_while_tensor_array_stripped(export_dir: str) -> list[Case]:
    """``while_loop`` writing rows into a TensorArray (and one of unknown element shape)."""

    def build():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        n = tf.shape(x)[0]
        rows = v1.TensorArray(tf.float32, size=n)
        _, rows = v1.while_loop(lambda i, _: i < n, lambda i, t: (i + 1, t.write(i, x[i] * 2.0)), [0, rows])
        grown = v1.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False)
        _, grown = v1.while_loop(
            lambda i, _: i < n, lambda i, t: (i + 1, t.write(i, tf.reduce_sum(x[: i + 1], 0))), [0, grown]
        )
        return {"x": x}, {"rows": rows.stack(), "sums": grown.stack()}

    _save_v1(export_dir, build, strip=True)
    r = rng(72)
    return [Case("serving_default", {"x": r.normal(size=(k, 3)).astype(np.float32)}) for k in (4, 6)]


@model("real_loops_with_side_effects")
def real_loops_with_side_effects(export_dir: str) -> list[Case]:
    """Loops holding an Assert and a Print no output needs, reading TensorArrays (stay frames)."""

    def build():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        n = tf.shape(x)[0]

        def checked(row):
            tf.debugging.assert_greater(tf.size(row), 0)
            return row * 2.0

        rows = v1.TensorArray(tf.float32, size=n).unstack(x)

        def body(i, total):
            tf.print("step", i)
            return i + 1, total + rows.read(i)

        _, total = v1.while_loop(lambda i, _: i < n, body, [0, tf.zeros([3])])
        return {"x": x}, {"doubled": tf.map_fn(checked, x), "total": total}

    _save_v1(export_dir, build, strip=False)
    r = rng(73)
    return [Case("serving_default", {"x": r.normal(size=(k, 3)).astype(np.float32)}) for k in (4, 6)]


class _ImageOps(tf.Module):
    @tf.function(
        input_signature=[
            tf.TensorSpec([None, 4], tf.float32, name="boxes"),
            tf.TensorSpec([None], tf.float32, name="scores"),
            tf.TensorSpec([1, 16, 16, 3], tf.float32, name="image"),
        ]
    )
    def serve(self, boxes, scores, image):
        selected = tf.image.non_max_suppression(boxes, scores, 5, iou_threshold=0.5)
        padded, valid = tf.image.non_max_suppression_padded(boxes, scores, 5, pad_to_max_output_size=True)
        with_scores, kept_scores = tf.image.non_max_suppression_with_scores(boxes, scores, 5)
        return {
            "selected": selected,
            "padded": padded,
            "valid": valid,
            "with_scores": with_scores,
            "kept_scores": kept_scores,
            "gathered": tf.gather(boxes, selected),
            "resized": tf.image.resize(image, [8, 8]),
            "nearest": tf.image.resize(image, [20, 20], method="nearest"),
            "crops": tf.image.crop_and_resize(image, boxes[:2] * 0.5, tf.zeros([2], tf.int32), [4, 4]),
            "central": tf.image.central_crop(image, 0.5),
            "flipped": tf.image.flip_left_right(image),
            "gray": tf.image.rgb_to_grayscale(image),
            "brighter": tf.image.adjust_brightness(image, 0.1),
        }


@model("real_image_ops_module")
def real_image_ops_module(export_dir: str) -> list[Case]:
    module = _ImageOps()
    tf.saved_model.save(module, export_dir, signatures={"serving_default": module.serve})
    r = rng(74)
    cases = []
    for count in (10, 3):
        corners = r.uniform(size=(count, 2)).astype(np.float32)
        boxes = np.concatenate([corners, corners + 0.3], 1)
        feeds = {
            "boxes": boxes,
            "scores": r.uniform(size=count).astype(np.float32),
            "image": r.uniform(size=(1, 16, 16, 3)).astype(np.float32),
        }
        cases.append(Case("serving_default", feeds))
    return cases


class _MathZoo(tf.Module):
    @tf.function(
        input_signature=[
            tf.TensorSpec([None, 4], tf.float32, name="x"),
            tf.TensorSpec([None, 4], tf.int32, name="i"),
            tf.TensorSpec([None], tf.int32, name="segments"),
        ]
    )
    def serve(self, x, i, segments):
        return {
            "unary": tf.stack(
                [tf.abs(x), tf.exp(x), tf.math.log1p(tf.abs(x)), tf.tanh(x), tf.sigmoid(x), tf.floor(x)]
                + [tf.round(x), tf.sign(x), tf.math.rsqrt(tf.abs(x) + 1.0), tf.pow(tf.abs(x), 1.5)]
                + [tf.nn.softplus(x), tf.math.erf(x), tf.atan2(x, x + 1.0), tf.atan(x), tf.asinh(x)]
            ),
            "reduced": tf.stack(
                [tf.reduce_max(x, 1), tf.reduce_mean(x, 1), tf.reduce_prod(x, 1), tf.reduce_logsumexp(x, 1)]
            ),
            "min0": tf.reduce_min(x, 0),
            "sum_i": tf.reduce_sum(i, 1),
            "any": tf.reduce_any(x > 0, 1),
            "all": tf.reduce_all(x > -1, 1),
            "cumsum": tf.cumsum(x, 1),
            "cumprod": tf.math.cumprod(x, 1, exclusive=True),
            "cumsum_rev": tf.cumsum(i, 0, reverse=True),
            "segment_sum": tf.math.segment_sum(x, segments),
            "unsorted_max": tf.math.unsorted_segment_max(x, segments, 3),
            "unsorted_sum": tf.math.unsorted_segment_sum(i, segments, 3),
            "to_int": tf.cast(x * 3.0, tf.int32),
            "to_bool": tf.cast(i, tf.bool),
            "half": tf.cast(x, tf.float16) * tf.constant(2.0, tf.float16),
            "double": tf.cast(x, tf.float64) + 1.0,
            "int64": tf.cast(i, tf.int64) * 3,
            "uint8": tf.cast(tf.abs(i), tf.uint8) + 1,
            "floordiv": tf.math.floordiv(i, 3),
            "floormod": tf.math.floormod(i, 3),
            "argmax": tf.argmax(x, 1),
            "argmin": tf.argmin(x, 0),
            "top_k": tf.math.top_k(x, 2).values,
            "sorted": tf.sort(x, 1),
            "where": tf.where(x > 0, x, -x),
            "clipped": tf.clip_by_value(x, -0.5, 0.5),
            "squared_difference": tf.math.squared_difference(x, 1.0),
            "l2": tf.nn.l2_normalize(x, 1),
            "is_nan": tf.math.is_nan(x / x),
            "bitwise": tf.bitwise.bitwise_and(i, 5),
            "minimum": tf.minimum(i, 2),
            "nonzero": tf.math.count_nonzero(i, 1),
        }


@model("real_math_zoo_module")
def real_math_zoo_module(export_dir: str) -> list[Case]:
    module = _MathZoo()
    tf.saved_model.save(module, export_dir, signatures={"serving_default": module.serve})
    r = rng(75)
    cases = []
    for segments in ([0, 0, 1, 2, 2], [0, 1, 1]):
        count = len(segments)
        feeds = {
            "x": r.normal(size=(count, 4)).astype(np.float32),
            "i": r.integers(-5, 5, size=(count, 4)).astype(np.int32),
            "segments": np.array(segments, np.int32),
        }
        cases.append(Case("serving_default", feeds, rtol=1e-4, atol=1e-5))
    return cases
