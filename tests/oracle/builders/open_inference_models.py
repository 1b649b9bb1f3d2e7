"""SavedModels for the Open Inference Protocol (KServe V2) tests: a signature per use."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tests.oracle.tfside import Case, model

VENV = "tf221"
FAMILY = "open_inference"

# Every TF dtype that V2 has a datatype for (BYTES is tf.string), in a [None, 2] input each.
V2_DTYPES = {
    "bool": tf.bool,
    "uint8": tf.uint8,
    "uint16": tf.uint16,
    "uint32": tf.uint32,
    "uint64": tf.uint64,
    "int8": tf.int8,
    "int16": tf.int16,
    "int32": tf.int32,
    "int64": tf.int64,
    "float16": tf.float16,
    "float32": tf.float32,
    "float64": tf.float64,
    "bfloat16": tf.bfloat16,
    "string": tf.string,
}


def _transform(name: str, x):
    """What each output makes of its input: something a dtype's kernel computes, so an echo
    would not pass for an answer."""
    if name == "bool":
        return tf.logical_not(x)
    if name == "string":
        return tf.strings.join([x, "!"])
    if name.startswith(("float", "bfloat")):
        return x * tf.constant(2, x.dtype) + tf.constant(1, x.dtype)
    return tf.reverse(x, axis=[-1])  # every integer dtype


class AllDtypes(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None, 2], d, name=n) for n, d in V2_DTYPES.items()])
    def echo(self, *inputs):
        return {f"{name}_out": _transform(name, x) for name, x in zip(V2_DTYPES, inputs, strict=True)}

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, 3], tf.float32, name="a"),
            tf.TensorSpec([None, 3], tf.float32, name="b"),
        ]
    )
    def arithmetic(self, a, b):
        return {"sum": a + b, "product": a * b, "any_positive": tf.reduce_any(a > 0, axis=-1)}


def all_dtype_inputs(rows: int) -> dict[str, np.ndarray]:
    """Inputs of every V2 dtype, ``rows`` x 2, with each dtype's extremes."""
    out = {}
    for name, dtype in V2_DTYPES.items():
        if name == "bool":
            value = np.resize(np.array([True, False, False]), rows * 2)
        elif name == "string":
            value = np.resize(np.array([b"a", b"", "h\u00e9llo".encode(), b"\x00z"], object), rows * 2)
        elif name == "bfloat16":
            value = np.resize(np.float32([1.5, -2.0, 0.0, 3.25]), rows * 2)
        elif name.startswith("float"):
            value = np.resize(np.array([0.5, -1e4, 3.0, 0.0], dtype.as_numpy_dtype), rows * 2)
        else:
            info = np.iinfo(dtype.as_numpy_dtype)
            value = np.resize(np.array([info.min, info.max, 0, 7], dtype.as_numpy_dtype), rows * 2)
        out[name] = value.reshape(rows, 2)
    return out


@model("open_inference_dtypes")
def open_inference_dtypes(export_dir: str) -> list[Case]:
    """A signature with an input and output of every V2 datatype, and one of two float inputs
    with a bool output (tf1_all_dtypes has the outputs V2 has no datatype for)."""
    module = AllDtypes()
    signatures = {
        "serving_default": module.echo,
        "arithmetic": module.arithmetic,
    }
    tf.saved_model.save(module, export_dir, signatures=signatures)
    inputs = all_dtype_inputs(3)
    inputs["bfloat16"] = tf.constant(inputs["bfloat16"], tf.bfloat16).numpy()
    return [
        Case("serving_default", inputs, rtol=1e-2, atol=1e-2),
        Case(
            "arithmetic",
            {"a": np.float32([[1, -2, 3], [0.5, 0, -1]]), "b": np.float32([[4, 5, 6], [-1, 2, 0.25]])},
        ),
    ]
