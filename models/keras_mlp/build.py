"""Builds ``keras_mlp``: a small Keras 3 multilayer perceptron classifier.

Trained briefly on seeded synthetic data and exported with
``model.export(path, format="tf_saved_model")`` (TensorFlow 2.21 with Keras 3; run it in the
oracle's tf221 venv)::

    .oracle/tf221/bin/python models/keras_mlp/build.py models/keras_mlp/1

Signatures ``serving_default`` and ``serve`` (Keras' names; both ``tensorflow/serving/predict``):
``{features: float [-1, 4]} -> {output_0: float [-1, 3]}``, the softmax probabilities of three
classes (class k is most likely where feature k is largest, among the first three).
"""

from __future__ import annotations

import hashlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import keras  # noqa: E402
import numpy as np  # noqa: E402


def build(export_dir: str) -> None:
    keras.utils.set_random_seed(7)
    inputs = keras.Input(shape=(4,), name="features")
    hidden = keras.layers.Dense(16, activation="relu", name="hidden_1")(inputs)
    hidden = keras.layers.Dense(8, activation="relu", name="hidden_2")(hidden)
    outputs = keras.layers.Dense(3, activation="softmax", name="probabilities")(hidden)
    model = keras.Model(inputs, outputs, name="keras_mlp")
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    rng = np.random.default_rng(7)
    x = rng.normal(size=(256, 4)).astype(np.float32)
    y = np.argmax(x[:, :3], axis=1)
    model.fit(x, y, epochs=10, batch_size=32, verbose=0, shuffle=False)
    model.export(export_dir, format="tf_saved_model", verbose=False)
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
