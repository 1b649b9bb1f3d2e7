"""The committed example models under ``models/`` built with TensorFlow 2.21 (and Keras 3).

Their SavedModels are built by ``models/<name>/build.py`` (``python -m tests.oracle models``)
and committed; here they only get cases, computed on the committed export directory.
"""

from __future__ import annotations

import numpy as np

from tests.oracle.tfside import Case, model, rng

VENV = "tf221"
FAMILY = "example"


@model("example_half_plus_two_tf2", committed="models/half_plus_two_tf2/1")
def example_half_plus_two_tf2(export_dir: str) -> list[Case]:
    return [
        Case("serving_default", {"x": [1.0, 2.0, 5.0]}),
        Case("x2_to_y3", {"x2": [0.0, -4.0]}),
    ]


@model("example_keras_mlp", committed="models/keras_mlp/1")
def example_keras_mlp(export_dir: str) -> list[Case]:
    features = rng(40).normal(size=(5, 4)).astype(np.float32)
    return [Case(key, {"features": features}) for key in ("serving_default", "serve")]
