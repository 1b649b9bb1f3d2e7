"""Builds ``half_plus_two_tf2``: y = 0.5 * x + 2 as a TF2 ``tf.Module`` SavedModel.

Exported with ``tf.saved_model.save`` (TensorFlow 2.21; run it in the oracle's tf221 venv)::

    .oracle/tf221/bin/python models/half_plus_two_tf2/build.py models/half_plus_two_tf2/1

Signatures (both ``tensorflow/serving/predict``; ``x`` is float [-1], so TF Serving's
``{"instances": [1.0, 2.0, 5.0]}`` returns ``{"predictions": [2.5, 3.0, 4.5]}``):

    serving_default  {x} -> {y = 0.5x + 2}
    x2_to_y3         {x2} -> {y3 = 0.5x2 + 3}
"""

from __future__ import annotations

import hashlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import tensorflow as tf  # noqa: E402


class HalfPlusTwo(tf.Module):
    def __init__(self):
        super().__init__(name="half_plus_two")
        self.a = tf.Variable(0.5, name="a")
        self.b = tf.Variable(2.0, name="b")
        self.c = tf.Variable(3.0, name="c")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def half_plus_two(self, x):
        return {"y": self.a * x + self.b}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x2")])
    def half_plus_three(self, x2):
        return {"y3": self.a * x2 + self.c}


def build(export_dir: str) -> None:
    module = HalfPlusTwo()
    signatures = {"serving_default": module.half_plus_two, "x2_to_y3": module.half_plus_three}
    tf.saved_model.save(module, export_dir, signatures=signatures)
    pin_fingerprint_uuid(export_dir)


def pin_fingerprint_uuid(export_dir: str) -> None:
    """Derives fingerprint.pb's uuid (random per export) from the content hashes beside it, so
    rebuilding from unchanged sources gives byte-identical files."""
    from tensorflow.core.protobuf import fingerprint_pb2

    path = os.path.join(export_dir, "fingerprint.pb")
    with open(path, "rb") as f:
        fingerprint = fingerprint_pb2.FingerprintDef.FromString(f.read())
    content = f"{fingerprint.saved_model_checksum}:{fingerprint.checkpoint_hash}"
    fingerprint.uuid = str(int.from_bytes(hashlib.sha256(content.encode()).digest()[:16], "big"))
    with open(path, "wb") as f:
        f.write(fingerprint.SerializeToString())


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(f"usage: {sys.argv[0]} EXPORT_DIR")
    build(sys.argv[1])
