"""TF2 SavedModels: ``tf.Module`` with ``tf.function`` signatures, ``tf.saved_model.save``."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tests.oracle.tfside import Case, examples, model, rng

VENV = "tf221"
FAMILY = "tf2"


class HalfPlusTwo(tf.Module):
    def __init__(self):
        super().__init__()
        self.a = tf.Variable(0.5, name="a")
        self.b = tf.Variable(2.0, name="b")
        self.c = tf.Variable(3.0, name="c")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def predict(self, x):
        return {"y": self.a * x + self.b}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def parse_and_predict(self, serialized):
        spec = {
            "x": tf.io.FixedLenFeature([], tf.float32),
            "x2": tf.io.FixedLenFeature([], tf.float32, default_value=0.0),
        }
        features = tf.io.parse_example(serialized, spec)
        return {
            "y": self.a * features["x"] + self.b,
            "y3": self.a * features["x2"] + self.c,
        }


@model("tf2_half_plus_two")
def tf2_half_plus_two(export_dir: str) -> list[Case]:
    """y = 0.5x + 2 with resource variables; one signature parses tf.Example itself."""
    module = HalfPlusTwo()
    signatures = {"serving_default": module.predict, "parse_examples": module.parse_and_predict}
    tf.saved_model.save(module, export_dir, signatures=signatures)
    batch = examples([{"x": 1.0, "x2": 2.0}, {"x": -4.0}])
    return [
        Case("serving_default", {"x": [1.0, 2.0, 5.0]}),
        Case("serving_default", {"x": np.zeros([0], np.float32)}),  # an empty batch
        Case("parse_examples", {"examples": batch}),
    ]


class MultiSignature(tf.Module):
    def __init__(self):
        super().__init__()
        r = rng(20)
        self.w = tf.Variable(r.normal(size=(4, 3)).astype(np.float32), name="w")
        self.offset = tf.Variable(np.int64(7), name="offset")
        self.scale = tf.Variable(np.float64(0.25), name="scale")
        self.prefix = tf.Variable(b"id-", name="prefix")
        self.enabled = tf.Variable(True, name="enabled")

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="features")])
    def classify(self, features):
        logits = tf.matmul(features, self.w)
        top = tf.math.top_k(logits, k=2)
        return {
            "logits": logits,
            "probabilities": tf.nn.softmax(logits),
            "label": tf.argmax(logits, axis=-1),
            "top_values": top.values,
            "top_indices": top.indices,
        }

    @tf.function(
        input_signature=[
            tf.TensorSpec([None], tf.int32, name="a"),
            tf.TensorSpec([None], tf.int64, name="b"),
            tf.TensorSpec([None, 2], tf.float64, name="c"),
        ]
    )
    def arithmetic(self, a, b, c):
        total = tf.cast(a, tf.int64) + b + self.offset
        return {
            "sum": total,
            "product": tf.reduce_prod(c, axis=1) * self.scale,
            "positive": tf.logical_and(total > 0, self.enabled),
            "a_squared": a * a,
        }

    @tf.function(
        input_signature=[
            tf.TensorSpec([None], tf.string, name="text"),
            tf.TensorSpec([None], tf.bool, name="keep"),
        ]
    )
    def strings(self, text, keep):
        words = tf.strings.split(text)
        return {
            "upper": tf.strings.upper(text),
            "length": tf.strings.length(text),
            "word_count": words.row_lengths(),
            "tagged": tf.strings.join([self.prefix, text]),
            "kept": tf.where(keep, text, tf.fill(tf.shape(text), "-")),
            "hash": tf.strings.to_hash_bucket_fast(text, 100),
        }


@model("tf2_multi_signature")
def tf2_multi_signature(export_dir: str) -> list[Case]:
    """Several signatures and outputs over int32/int64/float64/string/bool tensors."""
    module = MultiSignature()
    signatures = {
        "serving_default": module.classify,
        "arithmetic": module.arithmetic,
        "strings": module.strings,
    }
    tf.saved_model.save(module, export_dir, signatures=signatures)
    r = rng(21)
    return [
        Case("serving_default", {"features": r.normal(size=(3, 4)).astype(np.float32)}),
        Case(
            "arithmetic",
            {"a": [1, -20, 3], "b": [2**40, 5, -1], "c": [[1.5, 2.0], [-0.5, 4.0], [1e-3, 1e3]]},
        ),
        Case(
            "strings",
            {"text": [b"hello world", b"", b"a  b c", "caf\u00e9".encode()], "keep": [1, 0, 1, 1]},
        ),
    ]
