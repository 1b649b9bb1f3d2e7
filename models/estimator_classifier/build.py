"""Builds ``estimator_classifier``: a canned ``DNNClassifier`` fed by tf.Example.

Three classes of synthetic, seeded "iris-like" flowers; trained briefly, then exported with a
parsing serving input receiver as the Estimators guide does (TensorFlow 2.15 with
tensorflow-estimator; run it in the oracle's tf215 venv)::

    .oracle/tf215/bin/python models/estimator_classifier/build.py models/estimator_classifier/1

Every signature takes serialized ``tf.Example`` protos with float features ``sepal_length``,
``sepal_width``, ``petal_length`` and ``petal_width`` (``petal_width`` may be left out: it
defaults to 1.0):

    serving_default, classification  classify  {inputs} -> {classes, scores}
    predict                          predict   {examples} -> {class_ids, classes, logits,
                                                probabilities, all_class_ids, all_classes}

Classes are ``setosa``, ``versicolor`` and ``virginica``.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import tempfile
import uuid

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

CLASSES = ["setosa", "versicolor", "virginica"]
# Per-class feature means; the synthetic flowers scatter around them.
CENTRES = np.array([[5.0, 3.4, 1.5, 0.25], [5.9, 2.8, 4.3, 1.3], [6.6, 3.0, 5.6, 2.0]], dtype=np.float32)


def feature_columns():
    fc = tf.feature_column
    return [
        fc.numeric_column("sepal_length"),
        fc.numeric_column("sepal_width"),
        fc.numeric_column("petal_length"),
        fc.numeric_column("petal_width", default_value=1.0),
    ]


def training_data(n: int = 150):
    rng = np.random.default_rng(2024)
    labels = rng.integers(0, 3, n)
    values = CENTRES[labels] + rng.normal(0, 0.3, size=(n, 4)).astype(np.float32)
    names = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
    features = {name: values[:, i : i + 1] for i, name in enumerate(names)}
    return features, np.array(CLASSES, dtype=object)[labels]


def reproducible_table_names() -> None:
    """StaticHashTable names itself ``hash_table_<uuid4>`` (here: the label vocabulary's table);
    numbered uuids instead keep rebuilds from unchanged sources byte-identical."""
    counter = itertools.count()
    uuid.uuid4 = lambda: uuid.UUID(int=next(counter))


def build(export_dir: str) -> None:
    reproducible_table_names()
    columns = feature_columns()
    features, labels = training_data()
    with tempfile.TemporaryDirectory() as work:
        estimator = tf.estimator.DNNClassifier(
            hidden_units=[10, 10],
            feature_columns=columns,
            n_classes=3,
            label_vocabulary=CLASSES,
            optimizer=lambda: tf.keras.optimizers.legacy.Adam(learning_rate=0.02),
            config=tf.estimator.RunConfig(tf_random_seed=2024, model_dir=f"{work}/model"),
        )

        def input_fn():
            data = tf.data.Dataset.from_tensor_slices((features, labels))
            return data.shuffle(150, seed=1).repeat().batch(16)

        estimator.train(input_fn, steps=300)
        spec = tf.feature_column.make_parse_example_spec(columns)
        receiver = tf.estimator.export.build_parsing_serving_input_receiver_fn(spec)
        exported = estimator.export_saved_model(f"{work}/export", receiver)
        shutil.move(exported.decode(), export_dir)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(f"usage: {sys.argv[0]} EXPORT_DIR")
    build(sys.argv[1])
