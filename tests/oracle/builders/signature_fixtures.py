"""SavedModels with signatures a model server must refuse: ``tf.py_function`` / ``tf.numpy_function``.

Runs inside the oracle venv named by ``VENV`` (``python -m tests.oracle build --only sigcheck_plain``).
The catalog model ``sigcheck_plain`` is an ordinary TF2 export (every corpus model must run
everywhere); the exports ``tests/loader/test_signature_check.py`` needs sit beside it, built
by the same TensorFlow, under ``<cache>/sigcheck_plain/fixtures/``::

    fixtures/mixed/            serving_default (plain) beside py_function (EagerPyFunc),
                               numpy_function (PyFunc), nested (a tf.function calling one that
                               calls tf.numpy_function inside tf.cond) and stateless
                               (numpy_function(stateful=False): PyFuncStateless)
    fixtures/only_py/          one signature, and it calls tf.py_function
    fixtures/tf1_init_py_func/ a TF1 export whose main op runs tf.compat.v1.py_func
    fixtures.json              {"mixed": {"serving_default": {"x": [...], "y": [...]}}}: TF's outputs
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import tensorflow as tf

from tests.oracle.tfside import Case, model

VENV = "tf221"
FAMILY = "loader"

v1 = tf.compat.v1
_SPEC = [tf.TensorSpec([None], tf.float32, name="x")]


class Mixed(tf.Module):
    @tf.function(input_signature=_SPEC)
    def plain(self, x):
        return {"y": 2.0 * x + 1.0}

    @tf.function(input_signature=_SPEC)
    def py_function(self, x):
        return {"y": tf.py_function(lambda a: a * 3.0, [x], tf.float32)}

    @tf.function(input_signature=_SPEC)
    def numpy_function(self, x):
        return {"y": tf.numpy_function(lambda a: a * 4.0, [x], tf.float32)}

    @tf.function
    def _inner(self, x):
        return tf.cond(
            tf.reduce_sum(x) > 0.0,
            lambda: tf.numpy_function(lambda a: a + 1.0, [x], tf.float32),
            lambda: x - 1.0,
        )

    @tf.function(input_signature=_SPEC)
    def nested(self, x):
        return {"y": self._inner(x) * 2.0}

    @tf.function(input_signature=_SPEC)
    def stateless(self, x):
        return {"y": tf.numpy_function(lambda a: a * 5.0, [x], tf.float32, stateful=False) + x}


class OnlyPy(tf.Module):
    @tf.function(input_signature=_SPEC)
    def serve(self, x):
        return {"y": tf.py_function(lambda a: a, [x], tf.float32)}


def _tf1_init_py_func(export_dir: str) -> None:
    with tf.Graph().as_default() as graph, v1.Session(graph=graph) as sess:
        x = v1.placeholder(tf.float32, [None], name="x")
        y = tf.identity(x * 2.0, name="y")
        main_op = v1.py_func(lambda: np.float32(0), [], tf.float32, name="init_py_func").op
        builder = v1.saved_model.Builder(export_dir)
        signature = v1.saved_model.predict_signature_def({"x": x}, {"y": y})
        builder.add_meta_graph_and_variables(
            sess, ["serve"], signature_def_map={"serving_default": signature}, main_op=main_op
        )
        builder.save()


@model("sigcheck_plain")
def sigcheck_plain(export_dir: str) -> list[Case]:
    """A plain y = 2x + 1 export; the refusing fixtures are written beside it."""
    fixtures = Path(export_dir).parent / "fixtures"
    mixed = Mixed()
    signatures = {
        "serving_default": mixed.plain,
        "py_function": mixed.py_function,
        "numpy_function": mixed.numpy_function,
        "nested": mixed.nested,
        "stateless": mixed.stateless,
    }
    tf.saved_model.save(mixed, str(fixtures / "mixed"), signatures=signatures)
    only = OnlyPy()
    tf.saved_model.save(only, str(fixtures / "only_py"), signatures={"serving_default": only.serve})
    _tf1_init_py_func(str(fixtures / "tf1_init_py_func"))
    x = np.array([1.0, -2.5, 4.0], np.float32)
    loaded = tf.saved_model.load(str(fixtures / "mixed"))
    y = loaded.signatures["serving_default"](x=tf.constant(x))["y"].numpy()
    expected = {"mixed": {"serving_default": {"x": x.tolist(), "y": y.tolist()}}}
    (Path(export_dir).parent / "fixtures.json").write_text(json.dumps(expected, indent=1))
    plain = Mixed()
    tf.saved_model.save(plain, export_dir, signatures={"serving_default": plain.plain})
    return [Case("serving_default", {"x": x})]
