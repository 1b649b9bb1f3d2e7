"""Canned Estimators (tensorflow_estimator), exported with a tf.Example parsing receiver."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf

from tests.oracle.tfside import Case, every_signature, examples, model, rng

VENV = "tf215"
FAMILY = "estimator"

fc = tf.feature_column


def train_and_export(
    make_estimator: Callable[..., tf.estimator.Estimator],
    columns: Sequence,
    features: dict[str, np.ndarray],
    labels: np.ndarray,
    export_dir: str,
    steps: int = 5,
) -> None:
    """Trains a few seeded steps, then exports like the Estimators guide does."""
    work = Path(tempfile.mkdtemp())
    config = tf.estimator.RunConfig(tf_random_seed=7, model_dir=str(work / "model"))
    estimator = make_estimator(config=config)

    def input_fn():
        data = tf.data.Dataset.from_tensor_slices((features, labels))
        return data.repeat().batch(8)

    estimator.train(input_fn, steps=steps)
    spec = fc.make_parse_example_spec(columns)
    receiver = tf.estimator.export.build_parsing_serving_input_receiver_fn(spec)
    exported = estimator.export_saved_model(str(work / "export"), receiver)
    shutil.move(exported.decode() if isinstance(exported, bytes) else exported, export_dir)
    shutil.rmtree(work)


@model("est_dnn_classifier")
def est_dnn_classifier(export_dir: str) -> list[Case]:
    """DNNClassifier, 3 classes, numeric columns (one optional with a default)."""
    r = rng(10)
    columns = [
        fc.numeric_column("f1"),
        fc.numeric_column("f2", shape=(2,)),
        fc.numeric_column("f3", default_value=0.5),
    ]
    n = 32
    features = {
        "f1": r.normal(size=(n, 1)).astype(np.float32),
        "f2": r.normal(size=(n, 2)).astype(np.float32),
        "f3": r.normal(size=(n, 1)).astype(np.float32),
    }
    labels = (np.digitize(features["f1"][:, 0], [-0.5, 0.5])).astype(np.int64)
    train_and_export(
        lambda config: tf.estimator.DNNClassifier(
            hidden_units=[8, 4], feature_columns=columns, n_classes=3, config=config
        ),
        columns,
        features,
        labels,
        export_dir,
    )
    batches = [
        examples([{"f1": 0.3, "f2": [1.0, -2.0], "f3": 0.25}]),
        examples(
            [
                {"f1": -1.0, "f2": [0.0, 0.5], "f3": 2.0},
                {"f1": 1.5, "f2": [0.1, 0.2]},  # f3 missing: its default applies
                {"f1": 0.0, "f2": [-3.0, 3.0], "f3": -1.0},
            ]
        ),
    ]
    return every_signature(export_dir, batches)


@model("est_linear_regressor")
def est_linear_regressor(export_dir: str) -> list[Case]:
    """LinearRegressor over numeric and vocabulary-list columns."""
    r = rng(11)
    columns = [
        fc.numeric_column("size"),
        fc.numeric_column("rooms", default_value=3.0),
        fc.categorical_column_with_vocabulary_list("kind", ["flat", "house", "villa"]),
    ]
    n = 32
    kinds = np.array([b"flat", b"house", b"villa", b"boat"], dtype=object)[r.integers(0, 4, n)]
    features = {
        "size": r.uniform(20, 200, size=(n, 1)).astype(np.float32),
        "rooms": r.integers(1, 6, size=(n, 1)).astype(np.float32),
        "kind": kinds[:, None],
    }
    labels = (features["size"] * 0.01 + features["rooms"] * 0.2).astype(np.float32)
    train_and_export(
        lambda config: tf.estimator.LinearRegressor(feature_columns=columns, config=config),
        columns,
        features,
        labels,
        export_dir,
    )
    batches = [
        examples([{"size": 55.0, "rooms": 2.0, "kind": "flat"}]),
        examples(
            [
                {"size": 120.0, "rooms": 4.0, "kind": "house"},
                {"size": 80.0, "kind": "castle"},  # rooms missing; kind out of vocabulary
                {"size": 300.0, "rooms": 7.0},  # kind missing
            ]
        ),
    ]
    return every_signature(export_dir, batches)


@model("est_wide_deep")
def est_wide_deep(export_dir: str) -> list[Case]:
    """DNNLinearCombinedClassifier over most feature column kinds, one vocabulary an asset."""
    work = Path(tempfile.mkdtemp())
    vocab = work / "cities.txt"
    vocab.write_text("paris\nlyon\nnice\nlille\n")
    color = fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"])
    city = fc.categorical_column_with_vocabulary_file("city", str(vocab), num_oov_buckets=1)
    tag = fc.categorical_column_with_hash_bucket("tag", hash_bucket_size=7)
    age = fc.numeric_column("age", normalizer_fn=lambda a: (a - 40.0) / 15.0)
    age_buckets = fc.bucketized_column(age, boundaries=[-1.5, -0.5, 0.5])  # normalized
    crossed = fc.crossed_column([color, age_buckets], hash_bucket_size=11)
    linear = [color, tag, age_buckets, crossed]
    dnn = [age, fc.indicator_column(color), fc.embedding_column(city, dimension=3)]
    r = rng(12)
    n = 32
    pick = lambda values: np.array(values, dtype=object)[r.integers(0, len(values), n)][:, None]  # noqa: E731
    features = {
        "color": pick([b"red", b"green", b"blue"]),
        "city": pick([b"paris", b"lyon", b"nice", b"lille", b"brest"]),
        "tag": pick([b"a", b"b", b"c", b"d"]),
        "age": r.uniform(10, 70, size=(n, 1)).astype(np.float32),
    }
    labels = (features["age"][:, 0] > 40).astype(np.int64)
    train_and_export(
        lambda config: tf.estimator.DNNLinearCombinedClassifier(
            linear_feature_columns=linear,
            dnn_feature_columns=dnn,
            dnn_hidden_units=[6, 3],
            config=config,
        ),
        linear + dnn,
        features,
        labels,
        export_dir,
    )
    shutil.rmtree(work)
    batches = [
        examples([{"color": "red", "city": "nice", "tag": "b", "age": 33.0}]),
        examples(
            [
                {"color": "blue", "city": "brest", "tag": "zz", "age": 61.0},
                {"color": "green", "age": 17.0},  # city and tag missing
                {"color": ["red", "blue"], "city": "paris", "tag": ["a", "c"], "age": 50.0},
            ]
        ),
    ]
    return every_signature(export_dir, batches)
