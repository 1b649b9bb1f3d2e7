"""TF2 SavedModels holding mutable lookup tables whose contents the checkpoint carries.

A ``tf.lookup.experimental.DenseHashTable`` saves its bucket arrays as they are (``table-keys`` /
``table-values``): empty buckets hold ``empty_key``, erased ones ``deleted_key``, and restoring
imports the arrays whole. The tables here are filled and erased from before export, and grown past
their initial buckets, so that the checkpoint holds every kind of bucket.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tests.oracle.tfside import Case, model

VENV = "tf221"
FAMILY = "tf2"

_DenseHashTable = tf.lookup.experimental.DenseHashTable


class DenseTables(tf.Module):
    def __init__(self):
        super().__init__()
        self.ids = _DenseHashTable(
            tf.int64, tf.float32, default_value=-1.0, empty_key=-1, deleted_key=-2, initial_num_buckets=16
        )
        self.ids.insert(
            tf.constant([3, 17, 42, 5, 1_000_003, -7], tf.int64), tf.constant([0.5, 1.5, 2.5, 3.5, 4.5, 5.5])
        )
        self.ids.erase(tf.constant([17, 99], tf.int64))
        # Seven words in eight buckets pass the 0.8 load factor: the table grows to 16 first.
        self.words = _DenseHashTable(
            tf.string, tf.int64, default_value=0, empty_key="", deleted_key="<deleted>", initial_num_buckets=8
        )
        words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"]
        self.words.insert(tf.constant(words), tf.range(1, 8, dtype=tf.int64))
        self.words.erase(tf.constant(["gamma"]))
        self.words.insert(tf.constant(["beta"]), tf.constant([20], tf.int64))  # an update
        # Keys of two int32 and values of three floats.
        self.pairs = _DenseHashTable(
            tf.int32,
            tf.float32,
            default_value=[0.0, 0.0, -1.0],
            empty_key=[-1, -1],
            deleted_key=[-2, -2],
            initial_num_buckets=4,
        )
        self.pairs.insert(
            tf.constant([[0, 1], [1, 0], [2, 2]], tf.int32),
            tf.constant([[1, 2, 3], [4, 5, 6], [7, 8, 9]], tf.float32),
        )
        self.pairs.erase(tf.constant([[1, 0]], tf.int32))

    @tf.function(
        input_signature=[
            tf.TensorSpec([None], tf.int64, name="ids"),
            tf.TensorSpec([None], tf.string, name="words"),
            tf.TensorSpec([None, 2], tf.int32, name="pairs"),
        ]
    )
    def lookup(self, ids, words, pairs):
        return {
            "values": self.ids.lookup(ids),
            "size": self.ids.size(),
            "word_ids": self.words.lookup(words),
            "word_count": self.words.size(),
            "pair_values": self.pairs.lookup(pairs),
            "pair_count": self.pairs.size(),
        }

    @tf.function(input_signature=[])
    def export(self):
        ids, values = self.ids.export()
        words, word_ids = self.words.export()
        pairs, pair_values = self.pairs.export()
        return {
            "ids": ids,
            "values": values,
            "words": words,
            "word_ids": word_ids,
            "pairs": pairs,
            "pair_values": pair_values,
        }


@model("tf2_dense_hash_table")
def tf2_dense_hash_table(export_dir: str) -> list[Case]:
    """DenseHashTables of int64, string and int32-pair keys, with inserts, an update and erases
    before export; lookups (erased and missing keys included), sizes and the exported buckets."""
    module = DenseTables()
    signatures = {"serving_default": module.lookup, "export": module.export}
    tf.saved_model.save(module, export_dir, signatures=signatures)
    return [
        Case(
            "serving_default",
            {
                "ids": np.array([3, 17, 42, 5, 1_000_003, -7, 99, 0], np.int64),
                "words": np.array([b"alpha", b"beta", b"gamma", b"eta", b"omega", b"<Deleted>"], object),
                "pairs": np.array([[0, 1], [1, 0], [2, 2], [5, 5]], np.int32),
            },
        ),
        Case("export", {}),
    ]
