"""Models sized for request batching: where one Session run costs enough that batching pays.

``batching_mlp`` (512 -> 1024 -> 1024 -> 1024 -> 10, about 2.6M weights) and ``batching_cnn``
(28x28x1, two conv/pool stages, a small dense head) are what ``benchmarks/batching.py``
serves and what the batching tests compare batched against unbatched results on. Weights are
the seeded initial ones: their values matter only as TensorFlow computes them too.
"""

from __future__ import annotations

import keras
import numpy as np

from tests.oracle.tfside import Case, model, rng

VENV = "tf221"
FAMILY = "keras"


def export(net: keras.Model, export_dir: str) -> None:
    net.export(export_dir, format="tf_saved_model", verbose=False)


@model("batching_mlp")
def batching_mlp(export_dir: str) -> list[Case]:
    """Three 1024-unit ReLU layers and a softmax over 10 classes, on 512 features."""
    keras.utils.set_random_seed(40)
    inputs = keras.Input(shape=(512,), name="features")
    x = inputs
    for i in range(3):
        x = keras.layers.Dense(1024, activation="relu", name=f"hidden_{i}")(x)
    outputs = keras.layers.Dense(10, activation="softmax", name="probabilities")(x)
    export(keras.Model(inputs, outputs), export_dir)
    features = rng(40).normal(size=(8, 512)).astype(np.float32)
    return [Case(key, {"features": features}, rtol=1e-4, atol=1e-6) for key in ("serving_default", "serve")]


@model("batching_cnn")
def batching_cnn(export_dir: str) -> list[Case]:
    """MNIST-sized: conv 16 + pool, conv 32 + pool, dense 64, logits over 10 classes."""
    keras.utils.set_random_seed(41)
    inputs = keras.Input(shape=(28, 28, 1), name="image")
    x = keras.layers.Conv2D(16, 3, activation="relu")(inputs)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Conv2D(32, 3, activation="relu")(x)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(64, activation="relu")(x)
    outputs = keras.layers.Dense(10, name="logits")(x)
    export(keras.Model(inputs, outputs), export_dir)
    images = rng(41).uniform(0, 1, size=(8, 28, 28, 1)).astype(np.float32)
    return [Case(key, {"image": images}, rtol=1e-4, atol=1e-5) for key in ("serving_default", "serve")]
