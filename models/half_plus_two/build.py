"""Builds ``half_plus_two``: TF Serving's classic example model, y = 0.5 * x + 2.

A TF1 graph exported with ``tf.compat.v1.saved_model.Builder`` (TensorFlow 2.15 with the
v1 API; run it in the oracle's tf215 venv)::

    .oracle/tf215/bin/python models/half_plus_two/build.py models/half_plus_two/00000123

Signatures (tensor ``x`` is float [-1, 1]; ``inputs`` are serialized tf.Examples with float
features ``x`` and, optionally, ``x2``):

    serving_default    predict   {x} -> {y = 0.5x + 2}
    classify_x_to_y    classify  {inputs} -> {scores = 0.5x + 2}
    regress_x_to_y     regress   {inputs} -> {outputs = 0.5x + 2}
    regress_x_to_y2    regress   {inputs} -> {outputs = 0.5x + 3}
    regress_x2_to_y3   regress   {inputs} -> {outputs = 0.5x2 + 3}

The asset ``foo.txt`` is read by the ``legacy_init_op`` (the init op of pre-main_op exports),
so a loader must feed asset paths while running it. Variables ``a``, ``b``, ``c`` are TF1
reference variables (VariableV2).
"""

from __future__ import annotations

import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import tensorflow as tf  # noqa: E402

v1 = tf.compat.v1
sigs = v1.saved_model.signature_def_utils


def build(export_dir: str) -> None:
    export_dir = os.path.abspath(export_dir)
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as work:
        # A relative asset path keeps temporary directory names out of the graph.
        os.chdir(work)
        try:
            with open("foo.txt", "w") as asset:
                asset.write("asset-file-contents")
            _build(export_dir)
        finally:
            os.chdir(here)


def _build(export_dir: str) -> None:
    with tf.Graph().as_default(), v1.Session() as sess:
        serialized = v1.placeholder(tf.string, [None], name="tf_example")
        features = tf.io.parse_example(
            serialized,
            {
                "x": tf.io.FixedLenFeature([1], tf.float32),
                "x2": tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0]),
            },
        )
        x = tf.identity(features["x"], name="x")
        x2 = tf.identity(features["x2"], name="x2")
        a = v1.Variable(0.5, name="a", use_resource=False)
        b = v1.Variable(2.0, name="b", use_resource=False)
        c = v1.Variable(3.0, name="c", use_resource=False)
        y = tf.add(tf.multiply(a, x), b, name="y")
        y2 = tf.add(tf.multiply(a, x), c, name="y2")
        y3 = tf.add(tf.multiply(a, x2), c, name="y3")

        asset_path = tf.constant("foo.txt", name="filename_tensor")
        v1.add_to_collection(v1.GraphKeys.ASSET_FILEPATHS, asset_path)
        contents = v1.Variable(
            "",
            name="asset_contents",
            use_resource=False,
            collections=[v1.GraphKeys.LOCAL_VARIABLES],
        )
        init_op = tf.group(v1.assign(contents, tf.io.read_file(asset_path)), name="init_op")
        v1.add_to_collection(v1.saved_model.constants.LEGACY_INIT_OP_KEY, init_op)

        sess.run(v1.global_variables_initializer())
        builder = v1.saved_model.Builder(export_dir)
        builder.add_meta_graph_and_variables(
            sess,
            [v1.saved_model.tag_constants.SERVING],
            signature_def_map={
                "serving_default": sigs.predict_signature_def({"x": x}, {"y": y}),
                "classify_x_to_y": sigs.classification_signature_def(serialized, None, y),
                "regress_x_to_y": sigs.regression_signature_def(serialized, y),
                "regress_x_to_y2": sigs.regression_signature_def(serialized, y2),
                "regress_x2_to_y3": sigs.regression_signature_def(serialized, y3),
            },
            assets_collection=v1.get_collection(v1.GraphKeys.ASSET_FILEPATHS),
        )
        builder.save()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(f"usage: {sys.argv[0]} EXPORT_DIR")
    build(sys.argv[1])
