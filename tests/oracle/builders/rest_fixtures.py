"""A model for the REST API guide's examples (``g3doc/api_rest.md``), built TF1-style.

``rest_guide``: ``half_plus_three`` (the guide's example model: y = 0.5x + 3, its regress
signature keyed "tensorflow/serving/regress") plus the guide's request shapes: three named
inputs "tag", "signal", "sensor" (row and columnar), strings, a ``_bytes`` output, int tensors
of shape [1, 2], and a classifier over "image" (bytes) and "caption" features.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tests.oracle.tfside import Case, examples, model

VENV = "tf215"
FAMILY = "rest"

v1 = tf.compat.v1
sigs = v1.saved_model.signature_def_utils


@model("rest_guide")
def rest_guide(export_dir: str) -> list[Case]:
    with tf.Graph().as_default(), v1.Session() as sess:
        x = v1.placeholder(tf.float32, [None], name="x")
        a = v1.Variable(0.5, name="a", use_resource=False)
        c = v1.Variable(3.0, name="c", use_resource=False)
        y = tf.add(tf.multiply(a, x), c, name="y")
        serialized = v1.placeholder(tf.string, [None], name="tf_example")
        parsed = tf.io.parse_example(
            serialized,
            {
                "x": tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0]),
                "image": tf.io.FixedLenFeature([], tf.string, default_value=""),
                "caption": tf.io.FixedLenFeature([], tf.string, default_value=""),
            },
        )
        y_examples = tf.add(tf.multiply(a, parsed["x"]), c, name="y_examples")
        lengths = tf.stack([tf.strings.length(parsed["image"]), tf.strings.length(parsed["caption"])], axis=1)
        scores = tf.cast(lengths, tf.float32, name="scores")
        classes = tf.tile(tf.constant([["image", "caption"]]), [tf.shape(serialized)[0], 1], name="classes")
        tag = v1.placeholder(tf.string, [None], name="tag")
        signal = v1.placeholder(tf.int32, [None, 5], name="signal")
        sensor = v1.placeholder(tf.int32, [None, 2, 2], name="sensor")
        words = v1.placeholder(tf.string, [None], name="words")
        pairs = v1.placeholder(tf.int32, [None, 1, 2], name="pairs")
        thirds = v1.placeholder(tf.float32, [None], name="thirds")
        sess.run(v1.global_variables_initializer())
        predict = sigs.predict_signature_def
        signatures = {
            "serving_default": predict({"x": x}, {"y": y}),
            "tensorflow/serving/regress": sigs.regression_signature_def(serialized, y_examples),
            "classify_objects": sigs.classification_signature_def(serialized, classes, scores),
            "tag_signal_sensor": predict(
                {"tag": tag, "signal": signal, "sensor": sensor},
                {
                    "tag_bytes": tf.identity(tag),
                    "signal_sum": tf.reduce_sum(signal, axis=1),
                    "sensor_max": tf.reduce_max(sensor, axis=[1, 2]),
                },
            ),
            "strings": predict(
                {"words": words}, {"upper": tf.strings.upper(words), "length": tf.strings.length(words)}
            ),
            "pairs": predict({"pairs": pairs}, {"doubled": tf.multiply(pairs, 2)}),
            "thirds": predict(
                {"thirds": thirds},
                {
                    "third": tf.divide(thirds, 3.0),
                    "third_double": tf.divide(tf.cast(thirds, tf.float64), 3.0),
                },
            ),
        }
        builder = v1.saved_model.Builder(export_dir)
        builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map=signatures)
        builder.save()
    objects = examples([{"image": b"image bytes", "caption": b"seaside"}, {"image": b"awesome image bytes"}])
    return [
        Case("serving_default", {"x": np.float32([1.0, 2.0, 5.0])}),
        Case("tensorflow/serving/regress", {"inputs": examples([{"x": 1.0}, {"x": 2.0}])}),
        Case("classify_objects", {"inputs": objects}),
        Case(
            "tag_signal_sensor",
            {
                "tag": np.array([b"foo", b"bar"], object),
                "signal": np.int32([[1, 2, 3, 4, 5], [3, 4, 1, 2, 5]]),
                "sensor": np.int32([[[1, 2], [3, 4]], [[4, 5], [6, 8]]]),
            },
        ),
        Case("strings", {"words": np.array([b"foo", b"bar", b"baz"], object)}),
        Case("pairs", {"pairs": np.int32([[[1, 2]], [[3, 4]]])}),
        Case("thirds", {"thirds": np.float32([1.0, 2.0, 0.5])}),
    ]
