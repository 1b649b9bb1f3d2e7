"""Control flow SavedModels: TF1 dataflow loops (frames) and TF2 functional control flow.

The TF1 models are built with control flow v1 (``disable_control_flow_v2``), so their graphs
hold Switch/Merge/Enter/Exit/NextIteration/LoopCond and TensorArrayV3 ops: nested while loops,
loop invariants, control inputs into frames, a cond inside a while and a while inside a cond,
``map_fn``, ``dynamic_rnn`` with an ``LSTMCell``, TensorArray gather/scatter/concat/split. The
TF2 model is ``tf.function`` code: While, If/StatelessIf, Case and TensorList ops.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tests.oracle.tfside import Case, model, rng

VENV = "tf215"
FAMILY = "control_flow"

v1 = tf.compat.v1


def _save_v1(export_dir: str, sess, inputs: dict, outputs: dict) -> None:
    builder = v1.saved_model.Builder(export_dir)
    signature = v1.saved_model.signature_def_utils.predict_signature_def(inputs=inputs, outputs=outputs)
    builder.add_meta_graph_and_variables(
        sess, [v1.saved_model.tag_constants.SERVING], signature_def_map={"serving_default": signature}
    )
    builder.save()


def _v1_graph(build) -> None:
    """Runs ``build()`` in a fresh graph and Session with control flow v1."""
    v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default(), v1.Session() as sess:
            build(sess)
    finally:
        v1.enable_control_flow_v2()


@model("cf_v1_nested_while")
def cf_v1_nested_while(export_dir: str) -> list[Case]:
    """Nested while loops, loop invariants, a control input into the frame, a while in a cond."""

    def build(sess):
        x = v1.placeholder(tf.float32, [None], name="x")
        n = v1.placeholder(tf.int32, [], name="n")
        offset = v1.get_variable("offset", initializer=np.float32(0.25))
        marker = tf.reduce_max(x, name="marker")

        def outer_body(i, acc):
            def inner_body(j, inner):
                with tf.control_dependencies([marker]):  # from outside both frames
                    step = tf.cast(j + 1, tf.float32)
                return j + 1, inner + x * step + offset

            _, inner = v1.while_loop(lambda j, _: j < i, inner_body, [tf.constant(0), tf.zeros_like(x)])
            return i + 1, acc + inner

        steps, total = v1.while_loop(lambda i, _: i < n, outer_body, [tf.constant(0), tf.zeros_like(x)])
        gated = v1.cond(
            n > 2,
            lambda: v1.while_loop(lambda k, v: k < n, lambda k, v: (k + 1, v * 0.5), [0, x])[1],
            lambda: x - 1.0,
        )
        sess.run(v1.global_variables_initializer())
        _save_v1(export_dir, sess, {"x": x, "n": n}, {"steps": steps, "total": total, "gated": gated})

    _v1_graph(build)
    x = np.array([1.0, -2.0, 0.5], np.float32)
    return [Case("serving_default", {"x": x, "n": k}) for k in (0, 1, 2, 4)]


@model("cf_v1_while_cond")
def cf_v1_while_cond(export_dir: str) -> list[Case]:
    """A while whose body holds nested conds, and a loop variable of changing shape."""

    def build(sess):
        x = v1.placeholder(tf.float32, [None], name="x")
        n = v1.placeholder(tf.int32, [], name="n")

        def body(i, acc, grow):
            term = v1.cond(
                tf.equal(i % 3, 0),
                lambda: x,
                lambda: v1.cond(tf.equal(i % 3, 1), lambda: -x, lambda: x * x),
            )
            return i + 1, acc + term, tf.concat([grow, [tf.cast(i, tf.float32)]], 0)

        _, acc, grow = v1.while_loop(
            lambda i, *_: i < n,
            body,
            [tf.constant(0), tf.zeros_like(x), tf.zeros([0])],
            shape_invariants=[tf.TensorShape([]), tf.TensorShape([None]), tf.TensorShape([None])],
        )
        _save_v1(export_dir, sess, {"x": x, "n": n}, {"acc": acc, "grow": grow})

    _v1_graph(build)
    x = np.array([2.0, -1.0], np.float32)
    return [Case("serving_default", {"x": x, "n": k}) for k in (0, 1, 5)]


@model("cf_v1_map_fn")
def cf_v1_map_fn(export_dir: str) -> list[Case]:
    """``map_fn`` (TensorArray unstack/read/write/stack in a while loop) over rows, two outputs."""

    def build(sess):
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        w = v1.get_variable("w", initializer=rng(40).normal(size=(3, 2)).astype(np.float32))
        doubled, norms = tf.map_fn(
            lambda row: (row * 2.0, tf.matmul(row[None], w)[0]), x, dtype=(tf.float32, tf.float32)
        )
        sess.run(v1.global_variables_initializer())
        _save_v1(export_dir, sess, {"x": x}, {"doubled": doubled, "projected": norms})

    _v1_graph(build)
    r = rng(41)
    return [
        Case("serving_default", {"x": r.normal(size=(4, 3)).astype(np.float32)}),
        Case("serving_default", {"x": r.normal(size=(1, 3)).astype(np.float32)}),
    ]


@model("cf_v1_dynamic_rnn")
def cf_v1_dynamic_rnn(export_dir: str) -> list[Case]:
    """``tf.compat.v1.nn.dynamic_rnn`` with an ``LSTMCell`` and per-example sequence lengths."""

    def build(sess):
        v1.set_random_seed(42)
        inputs = v1.placeholder(tf.float32, [None, 5, 3], name="inputs")
        lengths = v1.placeholder(tf.int32, [None], name="lengths")
        cell = v1.nn.rnn_cell.LSTMCell(4, initializer=v1.glorot_uniform_initializer(seed=42))
        outputs, state = v1.nn.dynamic_rnn(cell, inputs, sequence_length=lengths, dtype=tf.float32)
        sess.run(v1.global_variables_initializer())
        _save_v1(
            export_dir,
            sess,
            {"inputs": inputs, "lengths": lengths},
            {"outputs": outputs, "c": state.c, "h": state.h},
        )

    _v1_graph(build)
    r = rng(42)
    seq = r.normal(size=(3, 5, 3)).astype(np.float32)
    return [
        Case("serving_default", {"inputs": seq, "lengths": np.array([5, 2, 0], np.int32)}),
        Case("serving_default", {"inputs": seq[:1], "lengths": np.array([3], np.int32)}),
    ]


@model("cf_v1_tensor_array")
def cf_v1_tensor_array(export_dir: str) -> list[Case]:
    """TensorArrayV3 scatter/gather/split/concat/size, in and out of a while loop."""

    def build(sess):
        x = v1.placeholder(tf.float32, [None, 2], name="x")
        rows = tf.shape(x)[0]
        scattered = tf.TensorArray(tf.float32, size=rows).scatter(tf.range(rows)[::-1], x)
        reversed_ = scattered.gather(tf.range(rows))
        split = tf.TensorArray(tf.float32, size=2, infer_shape=False).split(
            tf.reshape(x, [-1]), tf.stack([2, rows * 2 - 2])
        )
        concat = split.concat()
        grown = tf.TensorArray(tf.float32, size=0, dynamic_size=True, clear_after_read=False)

        def body(i, ta):
            return i + 1, ta.write(i, tf.reduce_sum(x[i]) * tf.cast(i, tf.float32))

        _, grown = v1.while_loop(lambda i, _: i < rows, body, [0, grown])
        _save_v1(
            export_dir,
            sess,
            {"x": x},
            {
                "reversed": reversed_,
                "concat": concat,
                "stacked": grown.stack(),
                "size": grown.size(),
                "first": grown.read(0),
            },
        )

    _v1_graph(build)
    r = rng(43)
    return [
        Case("serving_default", {"x": r.normal(size=(3, 2)).astype(np.float32)}),
        Case("serving_default", {"x": r.normal(size=(1, 2)).astype(np.float32)}),
    ]


@model("cf_v1_ref_variables")
def cf_v1_ref_variables(export_dir: str) -> list[Case]:
    """TF1 ref variables updated inside a cond (RefSwitch) and a while body (RefEnter).

    Reads of a ref variable the same run updates race in TF (a ref output aliases the
    variable's buffer), so the loop's updates are read by a later run ("read_total").
    """

    def build(sess):
        x = v1.placeholder(tf.float32, [], name="x")
        p = v1.placeholder(tf.bool, [], name="p")
        counter = v1.Variable(0.0, name="counter", use_resource=False)
        total = v1.Variable(0.0, name="total", use_resource=False)
        bumped = v1.cond(p, lambda: v1.assign_add(counter, x), lambda: tf.identity(counter))

        def body(i, acc):
            with tf.control_dependencies([v1.assign_add(total, x)]):
                return i + 1, acc + x

        _, acc = v1.while_loop(lambda i, _: i < 3, body, [0, 0.0])
        sess.run(v1.global_variables_initializer())
        predict = v1.saved_model.signature_def_utils.predict_signature_def
        builder = v1.saved_model.Builder(export_dir)
        builder.add_meta_graph_and_variables(
            sess,
            [v1.saved_model.tag_constants.SERVING],
            signature_def_map={
                "serving_default": predict({"x": x, "p": p}, {"bumped": bumped, "acc": acc}),
                "read_total": predict({"x": x}, {"total": total + 0.0 * x}),
            },
        )
        builder.save()

    _v1_graph(build)
    return [
        Case("serving_default", {"x": np.float32(1.0), "p": True}),
        Case("read_total", {"x": np.float32(0.0)}),
        Case("serving_default", {"x": np.float32(2.0), "p": False}),
        Case("read_total", {"x": np.float32(0.0)}),
        Case("serving_default", {"x": np.float32(0.5), "p": True}),
    ]


class Functional(tf.Module):
    """TF2 control flow: While, If/StatelessIf, Case, and TensorLists (tf.TensorArray in v2)."""

    def __init__(self):
        super().__init__()
        self.scale = tf.Variable(np.float32(1.5), name="scale")

    @tf.function(
        input_signature=[
            tf.TensorSpec([None], tf.float32, name="x"),
            tf.TensorSpec([], tf.int32, name="n"),
            tf.TensorSpec([], tf.int32, name="branch"),
        ]
    )
    def serve(self, x, n, branch):
        def body(i, acc, ta):
            acc = tf.cond(tf.equal(i % 2, 0), lambda: acc + x * self.scale, lambda: acc - 1.0)
            return i + 1, acc, ta.write(i, tf.reduce_sum(acc))

        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[])
        _, acc, ta = tf.while_loop(lambda i, *_: i < n, body, (tf.constant(0), x, ta))
        stateless = tf.cond(tf.reduce_sum(x) > 0, lambda: x * 2.0, lambda: -x)
        case = tf.switch_case(branch, [lambda: x + 1.0, lambda: x * x, lambda: tf.zeros_like(x)])
        parts = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False)
        parts = parts.split(x, tf.stack([1, tf.size(x) - 1]))
        listed = tf.TensorArray(tf.float32, size=tf.size(x)).unstack(x)
        scattered = listed.scatter([0], x[-1:])
        return {
            "acc": acc,
            "sums": ta.stack(),
            "count": ta.size(),
            "stateless": stateless,
            "case": case,
            "concat": parts.concat(),
            "gathered": scattered.gather(tf.range(tf.size(x))[::-1]),
        }

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, 2], tf.float32, name="rows"),
            tf.TensorSpec([], tf.int32, name="pops"),
        ]
    )
    def lists(self, rows, pops):
        """Raw TensorList ops in stateless loops (StatelessWhile), and a stateful Case."""
        raw = tf.raw_ops
        f32 = tf.float32
        empty = raw.EmptyTensorList(element_shape=tf.constant([2]), max_num_elements=-1, element_dtype=f32)

        def push(i, lst):
            return i + 1, raw.TensorListPushBack(input_handle=lst, tensor=rows[i] * tf.cast(i + 1, f32))

        _, pushed = tf.while_loop(lambda i, _: i < tf.shape(rows)[0], push, (0, empty))

        def pop(i, lst, acc):
            lst, item = raw.TensorListPopBack(input_handle=lst, element_shape=[2], element_dtype=f32)
            return i + 1, lst, acc + item

        _, rest, popped = tf.while_loop(lambda i, *_: i < pops, pop, (0, pushed, tf.zeros([2])))
        resized = raw.TensorListResize(input_handle=rest, size=4)
        return {
            "stacked": raw.TensorListStack(input_handle=pushed, element_shape=[2], element_dtype=f32),
            "popped": popped,
            "length": raw.TensorListLength(input_handle=rest),
            "resized": raw.TensorListStack(input_handle=resized, element_shape=[2], element_dtype=f32),
            "element_shape": raw.TensorListElementShape(input_handle=pushed, shape_type=tf.int32),
            "case": tf.switch_case(pops, [lambda: self.scale * 1.0, lambda: self.scale * 2.0]),
        }


@model("cf_tf2_functional")
def cf_tf2_functional(export_dir: str) -> list[Case]:
    module = Functional()
    signatures = {"serving_default": module.serve, "lists": module.lists}
    tf.saved_model.save(module, export_dir, signatures=signatures)
    x = np.array([1.0, -3.0, 0.5], np.float32)
    rows = rng(44).normal(size=(3, 2)).astype(np.float32)
    return [
        Case("serving_default", {"x": x, "n": 4, "branch": 0}),
        Case("serving_default", {"x": -x, "n": 0, "branch": 1}),
        Case("serving_default", {"x": x[:2], "n": 3, "branch": 7}),
        Case("lists", {"rows": rows, "pops": 2}),
        Case("lists", {"rows": rows[:1], "pops": 0}),
        Case("lists", {"rows": rows[:2], "pops": 1}),
    ]
