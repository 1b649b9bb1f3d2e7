"""tf.Example from plain dicts: what Classify, Regress and MultiInference take as input.

A feature's values become a ``bytes_list`` (str, utf-8 encoded, and bytes), an ``int64_list``
(ints and bools) or a ``float_list`` (floats), as TF Serving's REST API reads JSON examples; a
list, tuple or numpy array gives several values of one kind. An ``Example`` proto passes through.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from savedmodel_client.tensorflow.core.example import example_pb2

_INT64 = (-(2**63), 2**63 - 1)


def make_example(features) -> example_pb2.Example:
    """An Example of ``features`` (a mapping of feature name to a value or a list of values)."""
    if isinstance(features, example_pb2.Example):
        return features
    if not isinstance(features, Mapping):
        raise TypeError(f"an example is a mapping of feature names to values, not {type(features).__name__}")
    example = example_pb2.Example()
    for name, value in features.items():
        kind, values = _feature_values(name, value)
        getattr(example.features.feature[str(name)], kind).value.extend(values)
    return example


def _feature_values(name, value) -> tuple[str, list]:
    if isinstance(value, np.ndarray):
        items = value.reshape(-1).tolist()
    elif isinstance(value, (list, tuple)):
        items = [v.item() if isinstance(v, np.generic) else v for v in value]
    else:
        items = [value.item() if isinstance(value, np.generic) else value]
    if not items:
        raise ValueError(f"feature '{name}' has no values: its kind (bytes, int64 or float) is unknown")
    kinds = {_kind(name, item) for item in items}
    if kinds == {"int64_list", "float_list"}:
        kinds = {"float_list"}  # ints among floats are floats, as numpy would make them
    if len(kinds) > 1:
        raise TypeError(f"feature '{name}' mixes strings and numbers")
    kind = kinds.pop()
    if kind == "bytes_list":
        return kind, [v.encode() if isinstance(v, str) else bytes(v) for v in items]
    if kind == "int64_list":
        items = [int(v) for v in items]
        if any(not _INT64[0] <= v <= _INT64[1] for v in items):
            raise ValueError(f"feature '{name}' has a value outside int64")
        return kind, items
    return kind, [float(v) for v in items]


def _kind(name, item) -> str:
    if isinstance(item, (str, bytes, bytearray)):
        return "bytes_list"
    if isinstance(item, (bool, int)):
        return "int64_list"
    if isinstance(item, float):
        return "float_list"
    raise TypeError(
        f"feature '{name}' has a value of type {type(item).__name__}: use str, bytes, int or float"
    )
