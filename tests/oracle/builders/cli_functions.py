"""A TF2 SavedModel whose object graph has every kind of argument TF's ``saved_model_cli show
--all`` prints in its "Concrete Functions" block: TensorSpecs, Python bools, floats and None,
dicts and lists of specs, several concrete functions of one function, and a bare concrete
function attached to the module."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tests.oracle.tfside import Case, model

VENV = "tf221"
FAMILY = "tf2"


class Functions(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(np.float32(1.5), name="w")

    @tf.function
    def scale(self, x, training=False):
        return x * self.w if training else x + self.w

    @tf.function
    def offset(self, x, shift=None, factor=2.0):
        return x * factor if shift is None else x * factor + shift

    @tf.function
    def combine(self, inputs):
        return inputs["a"] + tf.cast(inputs["b"], tf.float32)

    @tf.function
    def pair(self, xs):
        return xs[0] - xs[1]

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
    def serve(self, x):
        return {"y": self.scale(x, training=False), "z": self.pair([x, x * 2.0])}


@model("cli_functions")
def cli_functions(export_dir: str) -> list[Case]:
    module = Functions()
    vector = tf.TensorSpec([None], tf.float32, name="x")
    module.scale.get_concrete_function(vector, training=True)
    module.scale.get_concrete_function(vector, training=False)
    module.offset.get_concrete_function(vector, None, 3.0)
    module.combine.get_concrete_function(
        {"b": tf.TensorSpec([None], tf.int32, name="b"), "a": tf.TensorSpec([None], tf.float32, name="a")}
    )
    module.pair.get_concrete_function([vector, tf.TensorSpec([None], tf.float32, name="y")])
    module.bare = module.offset.get_concrete_function(tf.TensorSpec([3], tf.float32, name="v"), 1.0)
    tf.saved_model.save(module, export_dir, signatures={"serving_default": module.serve})
    return [Case("serving_default", {"x": [[1.0, 2.0], [-3.0, 0.5]]})]
