"""The model zoo's architectures, shared by the zoo builders (``zoo_saved``, ``zoo_frozen``,
``zoo_export``), in whichever Keras their venv ships: Keras 2 (``tf.keras``, TF 2.15) or Keras 3
(TF 2.21). Not a builder module itself (the leading underscore keeps the catalog out); the
builders list it in ``DEPENDS``, so editing it rebuilds the zoo.

Every ``keras.applications`` architecture that builds without downloaded weights
(``weights=None``) at the smallest input resolution it accepts, 10 classes (a small top), fixed
seeds; batch norms get random statistics (at initialisation they are the identity, which would
hide a wrong conversion). Beside them, two models built by hand: a BERT-style encoder
(token, type and position embeddings, padding masks, two attention blocks, a pooler) and a text
classifier over ``TextVectorization``. One batch of reference inputs each.
"""

from __future__ import annotations

import dataclasses

import keras
import numpy as np

SEED = 50
BATCH = 2
CLASSES = 10


@dataclasses.dataclass(frozen=True)
class Application:
    """A ``keras.applications`` constructor at a resolution it accepts, and its input range."""

    constructor: str
    size: int
    low: float = -1.0  # inputs are uniform in [low, high): what the model's preprocessing expects
    high: float = 1.0
    keras2_only: bool = False


APPLICATIONS = {
    "mobilenet": Application("MobileNet", 32),
    "mobilenet_v2": Application("MobileNetV2", 32),
    "mobilenet_v3_small": Application("MobileNetV3Small", 32, 0.0, 255.0),
    "mobilenet_v3_large": Application("MobileNetV3Large", 32, 0.0, 255.0),
    "efficientnet_b0": Application("EfficientNetB0", 32, 0.0, 255.0),
    "efficientnet_v2_b0": Application("EfficientNetV2B0", 32, 0.0, 255.0),
    "resnet50": Application("ResNet50", 32, -120.0, 150.0),
    "resnet50_v2": Application("ResNet50V2", 32),
    "densenet121": Application("DenseNet121", 32, -2.0, 2.0),
    "inception_v3": Application("InceptionV3", 75),
    "xception": Application("Xception", 71),
    "nasnet_mobile": Application("NASNetMobile", 32),
    "convnext_tiny": Application("ConvNeXtTiny", 32, 0.0, 255.0),
    "regnet_y002": Application("RegNetY002", 32, 0.0, 255.0, keras2_only=True),  # not in Keras 3
}

TEXTS = np.array(
    [["the cat sat on the mat"], ["A dog, a DOG!"], ["unknown words only here"], [""]], dtype=object
)


def application(key: str) -> keras.Model:
    """The architecture ``key`` with seeded weights, random batch norm statistics, input "images"."""
    spec = APPLICATIONS[key]
    keras.utils.set_random_seed(SEED)
    images = keras.Input(shape=(spec.size, spec.size, 3), name="images")
    net = getattr(keras.applications, spec.constructor)(weights=None, input_tensor=images, classes=CLASSES)
    randomize_batch_norms(net, np.random.default_rng(SEED))
    return net


def randomize_batch_norms(net: keras.Model, r: np.random.Generator) -> None:
    for layer in _all_layers(net):
        if not isinstance(layer, keras.layers.BatchNormalization):
            continue
        size = layer.moving_mean.shape[0]
        layer.moving_mean.assign(r.normal(0, 0.1, size).astype(np.float32))
        layer.moving_variance.assign(r.uniform(0.5, 1.5, size).astype(np.float32))
        if layer.gamma is not None:
            layer.gamma.assign(r.uniform(0.5, 1.5, size).astype(np.float32))
        if layer.beta is not None:
            layer.beta.assign(r.normal(0, 0.1, size).astype(np.float32))


def _all_layers(net):
    for layer in net.layers:
        yield layer
        if isinstance(layer, keras.Model):
            yield from _all_layers(layer)


def images(key: str) -> np.ndarray:
    spec = APPLICATIONS[key]
    r = np.random.default_rng(SEED + 1)
    return r.uniform(spec.low, spec.high, (BATCH, spec.size, spec.size, 3)).astype(np.float32)


def inputs(key: str) -> dict[str, np.ndarray]:
    """The reference batch of model ``key``, by input name."""
    if key == "bert_encoder":
        return bert_inputs()
    if key == "text_classifier":
        return {"text": TEXTS}
    return {"images": images(key)}


# -- built by hand ----------------------------------------------------------------------------

SEQUENCE, VOCABULARY, WIDTH, HEADS, BLOCKS = 16, 100, 32, 4, 2


class PositionEmbedding(keras.layers.Layer):
    """A learned embedding per position, added (sequences are ``SEQUENCE`` long)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def build(self, input_shape):
        self.table = self.add_weight(
            name="table", shape=(SEQUENCE, WIDTH), initializer=keras.initializers.RandomNormal(0, 0.5)
        )

    def call(self, x):
        return x + self.table


def bert_encoder() -> keras.Model:
    """Word ids (0 pads, masked out of attention) and segment ids in, pooled logits out."""
    keras.utils.set_random_seed(SEED)
    words = keras.Input(shape=(SEQUENCE,), dtype="int32", name="input_word_ids")
    types = keras.Input(shape=(SEQUENCE,), dtype="int32", name="input_type_ids")
    x = keras.layers.Embedding(VOCABULARY, WIDTH, mask_zero=True)(words)
    x = keras.layers.Add()([x, keras.layers.Embedding(2, WIDTH)(types)])
    x = PositionEmbedding()(x)
    x = keras.layers.LayerNormalization(epsilon=1e-12)(x)
    for _ in range(BLOCKS):
        attention = keras.layers.MultiHeadAttention(HEADS, WIDTH // HEADS)(x, x)
        x = keras.layers.LayerNormalization(epsilon=1e-12)(keras.layers.Add()([x, attention]))
        hidden = keras.layers.Dense(4 * WIDTH, activation="gelu")(x)
        x = keras.layers.LayerNormalization(epsilon=1e-12)(
            keras.layers.Add()([x, keras.layers.Dense(WIDTH)(hidden)])
        )
    pooled = keras.layers.Dense(WIDTH, activation="tanh")(x[:, 0, :])
    logits = keras.layers.Dense(3, name="logits")(pooled)
    return keras.Model({"input_word_ids": words, "input_type_ids": types}, logits)


def bert_inputs() -> dict[str, np.ndarray]:
    r = np.random.default_rng(SEED + 2)
    words = r.integers(1, VOCABULARY, (BATCH, SEQUENCE)).astype(np.int32)
    words[0, 11:] = 0  # padding
    types = np.zeros((BATCH, SEQUENCE), np.int32)
    types[:, SEQUENCE // 2 :] = 1
    return {"input_word_ids": words, "input_type_ids": types}


def text_classifier() -> keras.Model:
    """TextVectorization adapted on a small corpus, Embedding, Conv1D, max pooling, softmax."""
    keras.utils.set_random_seed(SEED)
    corpus = [
        "the cat sat on the mat",
        "the dog ate my homework",
        "a cat and a dog played",
        "stars shine at night over the sea",
        "my dog sat on a cat",
    ]
    vectorize = keras.layers.TextVectorization(max_tokens=32, output_sequence_length=12)
    vectorize.adapt(corpus)
    text = keras.Input(shape=(1,), dtype="string", name="text")
    x = keras.layers.Embedding(32, 16)(vectorize(text))
    x = keras.layers.Conv1D(16, 3, padding="same", activation="relu")(x)
    x = keras.layers.GlobalMaxPooling1D()(x)
    outputs = keras.layers.Dense(3, activation="softmax", name="probabilities")(x)
    return keras.Model(text, outputs)


def build(key: str) -> keras.Model:
    if key == "bert_encoder":
        return bert_encoder()
    if key == "text_classifier":
        return text_classifier()
    return application(key)


# Deep float32 networks: onnxruntime's and TF's kernels sum in different orders.
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}
