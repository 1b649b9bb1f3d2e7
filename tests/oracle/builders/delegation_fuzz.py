"""Generated graphs for differential testing of delegation: random compositions of the ops real
exports use, each a signature, run with delegation on and off and compared with TF's outputs
(``tests/runtime/onnx/test_corpus.py``).

A program is drawn from a seeded generator: a pool of float tensors of shape [batch, 4], each
step an op over one or two of them. Ops that convert to ONNX (elementwise math, matmuls with
constant or variable weights, reductions, reshapes, gathers, concatenations, selects) mix with
ops that stay native (``Atan``, ``Cumsum``, ``Atan2``, ``Cosh``, ``Asinh``), so that clusters form
around native islands, the shape the partitioner must keep acyclic; and with control flow:
conds, while loops, ``map_fn`` and TensorArrays, in v1 (Switch/Merge/Enter/Exit frames, in the
TF1 Builder model) or v2 (functional While/If, in the ``tf.saved_model.save`` model). Values stay
bounded (``tanh`` where a step could grow them) and no op rounds, so that float tolerances mean
something.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tests.oracle.tfside import Case, model

VENV = "tf215"
FAMILY = "delegation_fuzz"

v1 = tf.compat.v1
SIGNATURES = 100  # per model
BATCHES = (3, 1)  # per signature: a second batch size compiles its clusters again


def _unary(rng, a):
    kind = rng.integers(11)
    return [
        tf.tanh,
        tf.sigmoid,
        tf.nn.relu,
        lambda t: tf.exp(tf.tanh(t)),
        tf.abs,
        lambda t: -t,
        lambda t: tf.square(tf.tanh(t)),
        tf.atan,  # native: no converter
        lambda t: tf.cumsum(t, axis=1),  # native
        lambda t: tf.cosh(tf.tanh(t)),  # native
        tf.asinh,  # native
    ][kind](a)


def _binary(rng, a, b):
    kind = rng.integers(7)
    return [
        tf.add,
        tf.multiply,
        tf.subtract,
        tf.maximum,
        tf.minimum,
        tf.atan2,  # native
        tf.math.squared_difference,
    ][kind](a, tf.tanh(b) if kind == 6 else b)


def _weight(rng, variables: list | None, name: str):
    """A constant, or a variable: a new one in a TF1 graph, one of ``variables`` in TF2."""
    value = rng.normal(size=(4, 4)).astype(np.float32) * 0.5
    if rng.random() < 0.5:
        return tf.constant(value)
    if variables is None:
        return v1.get_variable(name, initializer=value)
    return variables[int(rng.integers(len(variables)))]


def _structural(rng, a, b, weight):
    kind = rng.integers(10)
    if kind == 0:
        return tf.matmul(a, weight())
    if kind == 1:
        return a - tf.reduce_mean(a, axis=1, keepdims=True)
    if kind == 2:
        return a * tf.reduce_max(tf.tanh(b), axis=0, keepdims=True)
    if kind == 3:
        return tf.reshape(tf.transpose(tf.reshape(a, [-1, 2, 2]), [0, 2, 1]), [-1, 4])
    if kind == 4:
        return tf.concat([a, b], axis=1)[:, 2:6]
    if kind == 5:
        return tf.where(a > b, a, b * 0.5)
    if kind == 6:
        return tf.gather(a, [3, 1, 0, 2], axis=1)
    if kind == 7:  # an int32 shape into the math (no rounding of values: an edge would amplify error)
        return a / tf.cast(tf.shape(a)[0], tf.float32)
    if kind == 8:
        return tf.math.top_k(a, k=4).values
    return tf.reshape(a, tf.shape(b))


def _control(rng, a, b):
    kind = rng.integers(5)
    if kind == 0:
        return tf.cond(
            tf.reduce_max(a) > 0.1, lambda: a * 2.0, lambda: tf.atan(b)
        )  # (a max is exact: no edge)
    if kind == 1:

        def body(i, acc):
            return i + 1, acc * 0.5 + tf.tanh(a + tf.cast(i, tf.float32))

        return tf.while_loop(lambda i, _: i < 3, body, [tf.constant(0), tf.zeros_like(a)])[1]
    if kind == 2:
        return tf.map_fn(lambda row: row * tf.atan(row) + 1.0, a)
    if kind == 3:
        rows = tf.shape(a)[0]

        def write(i, ta):
            return i + 1, ta.write(i, tf.tanh(a[i]) + b[i])

        ta = tf.TensorArray(tf.float32, size=rows)
        return tf.while_loop(lambda i, _: i < rows, write, [tf.constant(0), ta])[1].stack()
    n = tf.reduce_sum(tf.cast(a > 0.25, tf.int32)) % 3

    def halve(i, acc):
        return i + 1, tf.tanh(acc) * 0.9

    return tf.while_loop(lambda i, _: i < n, halve, [tf.constant(0), b])[1]


def program(rng: np.random.Generator, x, variables: list | None, prefix: str) -> dict:
    """A random program over ``x`` ([batch, 4] float32): its fetched tensors by name."""
    pool = [x]
    weights = iter(range(100))

    def weight():
        return _weight(rng, variables, f"{prefix}_w{next(weights)}")

    for _ in range(int(rng.integers(12, 40))):
        a, b = pool[rng.integers(len(pool))], pool[rng.integers(len(pool))]
        roll = rng.random()
        if roll < 0.3:
            y = _unary(rng, a)
        elif roll < 0.55:
            y = _binary(rng, a, b)
        elif roll < 0.85:
            y = _structural(rng, a, b, weight)
        else:
            y = _control(rng, a, b)
        pool.append(tf.tanh(y) if rng.random() < 0.2 else y)
    picks = {len(pool) - 1, *rng.integers(1, len(pool), size=int(rng.integers(0, 3)))}
    return {f"y{i}": pool[i] for i in sorted(picks)}


def _inputs(seed: int) -> list[np.ndarray]:
    r = np.random.default_rng(10_000 + seed)
    return [r.normal(size=(batch, 4)).astype(np.float32) for batch in BATCHES]


@model("delegation_fuzz_v1")
def delegation_fuzz_v1(export_dir: str) -> list[Case]:
    """TF1 graphs (control flow v1), one per signature, in one Builder export."""
    v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default(), v1.Session() as sess:
            signatures = {}
            for number in range(SIGNATURES):
                with tf.name_scope(f"g{number}"):
                    x = v1.placeholder(tf.float32, [None, 4], name="x")
                    outputs = program(np.random.default_rng(number), x, None, f"g{number}")
                predict = v1.saved_model.signature_def_utils.predict_signature_def
                signatures[f"g{number}"] = predict({"x": x}, outputs)
            sess.run(v1.global_variables_initializer())
            builder = v1.saved_model.Builder(export_dir)
            builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map=signatures)
            builder.save()
    finally:
        v1.enable_control_flow_v2()
    return [Case(f"g{n}", {"x": x}) for n in range(SIGNATURES) for x in _inputs(n)]


class _Programs(tf.Module):
    def __init__(self):
        super().__init__()
        weights = np.random.default_rng(999).normal(size=(6, 4, 4)).astype(np.float32) * 0.5
        self.weights = [tf.Variable(w, name=f"w{i}") for i, w in enumerate(weights)]


@model("delegation_fuzz_v2")
def delegation_fuzz_v2(export_dir: str) -> list[Case]:
    """TF2 functions (functional While/If, TensorLists), one per signature."""
    module = _Programs()
    signatures = {}
    for number in range(SIGNATURES):

        def serve(x, seed=1000 + number):
            return program(np.random.default_rng(seed), x, module.weights, f"f{seed}")

        spec = tf.TensorSpec([None, 4], tf.float32, name="x")
        signatures[f"f{number}"] = tf.function(serve, input_signature=[spec]).get_concrete_function()
    tf.saved_model.save(module, export_dir, signatures=signatures)
    return [Case(f"f{n}", {"x": x}) for n in range(SIGNATURES) for x in _inputs(1000 + n)]
