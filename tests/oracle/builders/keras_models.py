"""Keras 3 models exported with ``model.export(path, format="tf_saved_model")``.

Signatures are Keras' own (``serve`` and ``serving_default``), keyed by the ``keras.Input``
names. Recurrent and attention models get looser tolerances: their reductions and gate
nonlinearities accumulate float32 rounding differently across implementations.
"""

from __future__ import annotations

import keras
import numpy as np

from tests.oracle.tfside import Case, model, rng

VENV = "tf221"
FAMILY = "keras"

LOOSE = {"rtol": 1e-4, "atol": 1e-5}


def export(net: keras.Model, export_dir: str) -> None:
    net.export(export_dir, format="tf_saved_model", verbose=False)


def both_signatures(inputs: dict, **tolerance) -> list[Case]:
    return [Case(key, inputs, **tolerance) for key in ("serving_default", "serve")]


@model("keras_mlp")
def keras_mlp(export_dir: str) -> list[Case]:
    """Dense/ReLU/Dropout/softmax MLP, trained two epochs."""
    keras.utils.set_random_seed(30)
    inputs = keras.Input(shape=(8,), name="features")
    hidden = keras.layers.Dense(16, activation="relu")(inputs)
    hidden = keras.layers.Dropout(0.2)(hidden)
    hidden = keras.layers.Dense(8, activation="tanh")(hidden)
    outputs = keras.layers.Dense(3, activation="softmax", name="probabilities")(hidden)
    net = keras.Model(inputs, outputs)
    net.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    r = rng(30)
    x = r.normal(size=(64, 8)).astype(np.float32)
    net.fit(x, (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 1), epochs=2, verbose=0)
    export(net, export_dir)
    return both_signatures({"features": r.normal(size=(4, 8)).astype(np.float32)})


@model("keras_mlp_784")
def keras_mlp_784(export_dir: str) -> list[Case]:
    """The MNIST-sized MLP (784-512-256-10) that per-request cost is measured on (issue 43)."""
    keras.utils.set_random_seed(32)
    inputs = keras.Input(shape=(784,), name="features")
    hidden = keras.layers.Dense(512, activation="relu")(inputs)
    hidden = keras.layers.Dense(256, activation="relu")(hidden)
    outputs = keras.layers.Dense(10, activation="softmax", name="probabilities")(hidden)
    net = keras.Model(inputs, outputs)
    export(net, export_dir)
    r = rng(32)
    return both_signatures({"features": r.uniform(0, 1, size=(4, 784)).astype(np.float32)})


@model("keras_cnn_bn")
def keras_cnn_bn(export_dir: str) -> list[Case]:
    """Conv2D + BatchNormalization (trained moving statistics) + MaxPool + Dense."""
    keras.utils.set_random_seed(31)
    inputs = keras.Input(shape=(12, 12, 3), name="image")
    x = keras.layers.Conv2D(4, 3, activation=None)(inputs)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Conv2D(6, 3, padding="same", strides=2, activation="relu")(x)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.Flatten()(x)
    outputs = keras.layers.Dense(5, name="logits")(x)
    net = keras.Model(inputs, outputs)
    net.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    r = rng(31)
    images = r.uniform(0, 1, size=(32, 12, 12, 3)).astype(np.float32)
    net.fit(images, r.integers(0, 5, 32), epochs=1, batch_size=8, verbose=0)
    for layer in net.layers:  # a few steps barely move moving statistics away from 0 and 1
        if isinstance(layer, keras.layers.BatchNormalization):
            size = layer.moving_mean.shape[0]
            layer.moving_mean.assign(r.normal(0, 0.5, size).astype(np.float32))
            layer.moving_variance.assign(r.uniform(0.5, 2.0, size).astype(np.float32))
    export(net, export_dir)
    return both_signatures({"image": r.uniform(0, 1, size=(2, 12, 12, 3)).astype(np.float32)})


@model("keras_lstm")
def keras_lstm(export_dir: str) -> list[Case]:
    """Stacked LSTMs (sequences, then last state) and a Dense head."""
    keras.utils.set_random_seed(32)
    inputs = keras.Input(shape=(6, 4), name="sequence")
    x = keras.layers.LSTM(8, return_sequences=True)(inputs)
    x = keras.layers.LSTM(5)(x)
    outputs = keras.layers.Dense(2, name="output")(x)
    net = keras.Model(inputs, outputs)
    export(net, export_dir)
    r = rng(32)
    return both_signatures({"sequence": r.normal(size=(3, 6, 4)).astype(np.float32)}, **LOOSE)


@model("keras_gru_bidirectional")
def keras_gru_bidirectional(export_dir: str) -> list[Case]:
    """Masked (mask_zero) Embedding into a Bidirectional GRU."""
    keras.utils.set_random_seed(33)
    inputs = keras.Input(shape=(7,), dtype="int32", name="tokens")
    x = keras.layers.Embedding(20, 6, mask_zero=True)(inputs)
    x = keras.layers.Bidirectional(keras.layers.GRU(5))(x)
    outputs = keras.layers.Dense(1, activation="sigmoid", name="score")(x)
    net = keras.Model(inputs, outputs)
    export(net, export_dir)
    tokens = np.array([[3, 7, 1, 0, 0, 0, 0], [5, 5, 5, 5, 5, 5, 5], [19, 2, 0, 0, 0, 0, 0]], np.int32)
    return both_signatures({"tokens": tokens}, **LOOSE)


@model("keras_transformer_block")
def keras_transformer_block(export_dir: str) -> list[Case]:
    """MultiHeadAttention + residual + LayerNormalization + feed-forward, pooled."""
    keras.utils.set_random_seed(34)
    inputs = keras.Input(shape=(5, 8), name="tokens")
    attention = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)(inputs, inputs)
    x = keras.layers.LayerNormalization()(inputs + attention)
    feed_forward = keras.layers.Dense(16, activation="gelu")(x)
    feed_forward = keras.layers.Dense(8)(feed_forward)
    x = keras.layers.LayerNormalization()(x + feed_forward)
    x = keras.layers.GlobalAveragePooling1D()(x)
    outputs = keras.layers.Dense(3, name="logits")(x)
    net = keras.Model(inputs, outputs)
    export(net, export_dir)
    r = rng(34)
    return both_signatures({"tokens": r.normal(size=(2, 5, 8)).astype(np.float32)}, **LOOSE)


@model("keras_text_vectorization")
def keras_text_vectorization(export_dir: str) -> list[Case]:
    """TextVectorization adapted on a tiny corpus, Embedding, pooling, Dense: strings in."""
    keras.utils.set_random_seed(35)
    corpus = [
        "the cat sat on the mat",
        "the dog ate my homework",
        "a cat and a dog",
        "Stars shine, at night!",
    ]
    vectorize = keras.layers.TextVectorization(max_tokens=16, output_sequence_length=6)
    vectorize.adapt(corpus)
    inputs = keras.Input(shape=(1,), dtype="string", name="text")
    x = vectorize(inputs)
    x = keras.layers.Embedding(16, 4)(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    outputs = keras.layers.Dense(2, activation="softmax", name="probabilities")(x)
    net = keras.Model(inputs, outputs)
    export(net, export_dir)
    text = np.array([[b"The cat ate"], [b"unknown words only"], [b""], [b"dog, DOG; dog."]])
    return both_signatures({"text": text})
