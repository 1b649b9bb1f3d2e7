"""Exports of TF 2.15's writers for the version-pickup tests, each with what a half copy can
lack: a TF1 Builder export whose checkpoint is two data shards (variables on two devices) and
whose init op fills a lookup table from an asset, and a Keras 2 ``model.save``.

``tests/e2e/test_version_pickup.py`` copies each into a served base path in every writing
order; its clients check that every answer equals the first (a table filled from half a vocabulary
would answer differently).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf

from tests.oracle.tfside import Case, model

VENV = "tf215"
FAMILY = "pickup"

v1 = tf.compat.v1
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


@model("pickup_tf1_sharded_assets")
def pickup_tf1_sharded_assets(export_dir: str) -> list[Case]:
    """y = table(word) * w + b: the table from assets/vocab.txt (main_op), w and b in two shards."""
    vocab = Path(tempfile.mkdtemp()) / "vocab.txt"
    vocab.write_text(
        "\n".join(f"{w}{i}" for i in range(50) for w in WORDS) + "\n"
    )  # some kilobytes: a copy writes it in pieces
    config = v1.ConfigProto(device_count={"CPU": 2})
    with tf.Graph().as_default(), v1.Session(config=config) as sess:
        with tf.device("/cpu:0"):
            word = v1.placeholder(tf.string, [None], name="word")
            w = v1.get_variable("w", initializer=np.float32([1.5] * 256))
        with tf.device("/cpu:1"):
            b = v1.get_variable("b", initializer=np.float32([0.25] * 256))
        vocab_path = tf.constant(str(vocab), name="vocab_path")
        v1.add_to_collection(v1.GraphKeys.ASSET_FILEPATHS, vocab_path)
        initializer = tf.lookup.TextFileInitializer(
            vocab_path,
            tf.string,
            tf.lookup.TextFileIndex.WHOLE_LINE,
            tf.int64,
            tf.lookup.TextFileIndex.LINE_NUMBER,
        )
        table = v1.lookup.StaticHashTable(initializer, default_value=-1)
        ids = tf.cast(table.lookup(word), tf.float32)
        y = tf.identity(ids * tf.reduce_sum(w) + tf.reduce_sum(b), name="y")
        sess.run(v1.global_variables_initializer())
        builder = v1.saved_model.Builder(export_dir)
        builder.add_meta_graph_and_variables(
            sess,
            ["serve"],
            signature_def_map={
                "serving_default": v1.saved_model.signature_def_utils.predict_signature_def(
                    {"word": word}, {"y": y}
                )
            },
            assets_collection=v1.get_collection(v1.GraphKeys.ASSET_FILEPATHS),
            main_op=v1.tables_initializer(),
        )
        builder.save()
    return [Case("serving_default", {"word": np.array([b"gamma3", b"theta49", b"unknown"], dtype=object)})]


@model("pickup_keras2_save")
def pickup_keras2_save(export_dir: str) -> list[Case]:
    """A Keras 2 Functional model saved with ``model.save(dir)`` (SavedModel format)."""
    tf.keras.utils.set_random_seed(5)
    inputs = tf.keras.Input(shape=(4,), name="features")
    hidden = tf.keras.layers.Dense(8, activation="relu")(inputs)
    outputs = tf.keras.layers.Dense(3, activation="softmax", name="probabilities")(hidden)
    net = tf.keras.Model(inputs, outputs)
    net.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    net.save(export_dir)
    return [Case("serving_default", {"features": np.float32([[0.1, -0.2, 0.3, 0.4]])})]
