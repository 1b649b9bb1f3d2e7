"""Exports of TF 2.21's writers for the version-pickup tests, their checkpoints split into
several data shards (``MaxShardSizePolicy``): a ``tf.saved_model.save`` of a ``tf.Module`` whose
init fills a table from an asset, and a Keras 3 export (``ExportArchive``, as ``model.export``
builds it, written with the same sharding).

See ``pickup_tf215.py`` for how the tests use them.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from tests.oracle.tfside import Case, model

VENV = "tf221"
FAMILY = "pickup"

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


def sharded(max_shard_size: int) -> tf.saved_model.SaveOptions:
    policy = tf.train.experimental.MaxShardSizePolicy(max_shard_size=max_shard_size)
    return tf.saved_model.SaveOptions(experimental_sharding_callback=policy)


class Vocabulary(tf.Module):
    def __init__(self, vocab: str):
        super().__init__()
        initializer = tf.lookup.TextFileInitializer(
            tf.saved_model.Asset(vocab),
            tf.string,
            tf.lookup.TextFileIndex.WHOLE_LINE,
            tf.int64,
            tf.lookup.TextFileIndex.LINE_NUMBER,
        )
        self.table = tf.lookup.StaticHashTable(initializer, default_value=-1)
        self.w = tf.Variable(np.full((64,), 1.5, np.float32))
        self.b = tf.Variable(np.full((64,), 0.25, np.float32))
        self.c = tf.Variable(np.full((64,), 2.0, np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="word")])
    def serve(self, word):
        ids = tf.cast(self.table.lookup(word), tf.float32)
        return {"y": ids * tf.reduce_sum(self.w) + tf.reduce_sum(self.b) - tf.reduce_sum(self.c)}


@model("pickup_module_sharded_assets")
def pickup_module_sharded_assets(export_dir: str) -> list[Case]:
    """y = table(word) * sum(w) + sum(b) - sum(c): the table from an asset, w, b, c in shards."""
    vocab = Path(tempfile.mkdtemp()) / "vocab.txt"
    vocab.write_text("\n".join(f"{w}{i}" for i in range(50) for w in WORDS) + "\n")
    module = Vocabulary(str(vocab))
    tf.saved_model.save(
        module, export_dir, signatures={"serving_default": module.serve}, options=sharded(300)
    )
    return [Case("serving_default", {"word": np.array([b"gamma3", b"theta49", b"unknown"], dtype=object)})]


@model("pickup_keras3_sharded")
def pickup_keras3_sharded(export_dir: str) -> list[Case]:
    """A Keras 3 MLP exported with ``serve`` and ``serving_default``, its variables in shards."""
    keras.utils.set_random_seed(6)
    inputs = keras.Input(shape=(4,), name="features")
    hidden = keras.layers.Dense(16, activation="relu")(inputs)
    outputs = keras.layers.Dense(3, activation="softmax", name="probabilities")(hidden)
    net = keras.Model(inputs, outputs)
    archive = keras.export.ExportArchive()
    archive.track(net)
    spec = [tf.TensorSpec([None, 4], tf.float32, name="features")]
    archive.add_endpoint("serve", net.call, input_signature=spec)
    archive.add_endpoint("serving_default", net.call, input_signature=spec)
    archive.write_out(export_dir, options=sharded(300), verbose=False)
    x = np.float32([[0.1, -0.2, 0.3, 0.4]])
    return [Case("serving_default", {"features": x}), Case("serve", {"features": x})]
