"""Representative messages built the same way from either set of generated modules.

The cases import only `google.protobuf`, so they run both in our venv (against
`apis.*_pb2`) and in the TF 2.21 oracle venv (against TensorFlow's and
tensorflow-serving-api's own `*_pb2`). Each case builds one message and knows a few
field values to check after a round trip through the other side's modules.
"""

from __future__ import annotations

import importlib

from . import serving_cases, tf_cases
from .tf_cases import Case


class Protos:
    """Loads generated modules by TF's proto path, e.g. `protos("tensorflow/core/framework/tensor")`.

    `prefix` is "" for TensorFlow's own modules and "apis." for ours.
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def __call__(self, proto_path: str):
        return importlib.import_module(self.prefix + proto_path.replace("/", ".") + "_pb2")


def serialize(message) -> bytes:
    """Both sides serialize deterministically so map entries come out sorted by key."""
    return message.SerializeToString(deterministic=True)


CASES: dict[str, Case] = {**serving_cases.CASES, **tf_cases.CASES}
