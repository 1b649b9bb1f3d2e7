"""The committed example models under ``models/`` built with TensorFlow 2.15.

Their SavedModels are built by ``models/<name>/build.py`` (``python -m tests.oracle models``)
and committed; here they only get cases, computed on the committed export directory.
"""

from __future__ import annotations

import numpy as np

from tests.oracle.tfside import Case, every_signature, examples, model

VENV = "tf215"
FAMILY = "example"


@model("example_half_plus_two", committed="models/half_plus_two/00000123")
def example_half_plus_two(export_dir: str) -> list[Case]:
    one = examples([{"x": 1.0}])
    three = examples([{"x": 1.0, "x2": 4.0}, {"x": 2.0}, {"x": 5.0, "x2": -1.0}])
    cases = every_signature(export_dir, [one, three])
    cases = [c for c in cases if c.signature != "serving_default"]
    x = np.array([[1.0], [2.0], [5.0]], np.float32)
    return [Case("serving_default", {"x": x}), *cases]


@model("example_estimator_classifier", committed="models/estimator_classifier/1")
def example_estimator_classifier(export_dir: str) -> list[Case]:
    flower = {"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4, "petal_width": 0.2}
    batch = [
        {"sepal_length": 6.7, "sepal_width": 3.0, "petal_length": 5.2, "petal_width": 2.3},
        {"sepal_length": 5.9, "sepal_width": 3.0, "petal_length": 4.2},  # petal_width defaults
        flower,
    ]
    return every_signature(export_dir, [examples([flower]), examples(batch)])
