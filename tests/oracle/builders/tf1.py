"""TF1-style SavedModels: ``tf.compat.v1`` graphs exported with ``SavedModelBuilder``."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf

from tests.oracle.tfside import Case, examples, model, rng

VENV = "tf215"
FAMILY = "tf1"

v1 = tf.compat.v1
sigs = v1.saved_model.signature_def_utils
ASSETS = v1.GraphKeys.ASSET_FILEPATHS


def _save(export_dir: str, sess, signatures: dict, **kwargs) -> None:
    builder = v1.saved_model.Builder(export_dir)
    builder.add_meta_graph_and_variables(
        sess, [v1.saved_model.tag_constants.SERVING], signature_def_map=signatures, **kwargs
    )
    builder.save()


def _predict(inputs: dict, outputs: dict):
    return sigs.predict_signature_def(inputs=inputs, outputs=outputs)


@model("tf1_half_plus_two")
def tf1_half_plus_two(export_dir: str) -> list[Case]:
    """y = 0.5x + 2 and y3 = 0.5x2 + 3 over tf.Example, ref variables, an asset read by main_op."""
    asset = Path(tempfile.mkdtemp()) / "foo.txt"
    asset.write_text("asset-file-contents")
    with tf.Graph().as_default(), v1.Session() as sess:
        serialized = v1.placeholder(tf.string, [None], name="tf_example")
        spec = {
            "x": tf.io.FixedLenFeature([1], tf.float32),
            "x2": tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0]),
        }
        features = tf.io.parse_example(serialized, spec)
        x = tf.identity(features["x"], name="x")
        x2 = tf.identity(features["x2"], name="x2")
        a = v1.Variable(0.5, name="a", use_resource=False)
        b = v1.Variable(2.0, name="b", use_resource=False)
        c = v1.Variable(3.0, name="c", use_resource=False)
        y = tf.add(tf.multiply(a, x), b, name="y")
        y3 = tf.add(tf.multiply(a, x2), c, name="y3")
        contents, main_op = _read_asset_on_init(asset)
        contents_out = tf.fill(tf.shape(x)[:1], contents, name="contents")
        sess.run(v1.global_variables_initializer())
        regress_x_to_y = sigs.regression_signature_def(serialized, y)
        _save(
            export_dir,
            sess,
            {
                "serving_default": regress_x_to_y,
                "regress_x_to_y": regress_x_to_y,
                "regress_x2_to_y3": sigs.regression_signature_def(serialized, y3),
                "classify_x_to_y": sigs.classification_signature_def(serialized, None, y),
                "predict_x_to_y": _predict({"x": x}, {"y": y}),
                "predict_asset_contents": _predict({"x": x}, {"y": y, "contents": contents_out}),
            },
            assets_collection=v1.get_collection(ASSETS),
            main_op=main_op,
        )
    one = examples([{"x": 1.0, "x2": 4.0}])
    three = examples([{"x": 0.0, "x2": -1.5}, {"x": 2.5}, {"x": -3.0, "x2": 10.0}])
    x = np.array([[1.0], [2.0], [5.0]], np.float32)
    cases = [
        Case(key, {"inputs": batch})
        for batch in (one, three)
        for key in ("serving_default", "regress_x_to_y", "regress_x2_to_y3", "classify_x_to_y")
    ]
    cases += [Case("predict_x_to_y", {"x": x}), Case("predict_asset_contents", {"x": x})]
    return cases


def _read_asset_on_init(asset: Path):
    """A local variable the init op fills with the asset's contents; returns (variable, op).

    Asset paths are only fed while the init op runs, so the init op keeps what it read."""
    asset_path = tf.constant(str(asset), name="asset_filepath")
    v1.add_to_collection(ASSETS, asset_path)
    contents = v1.Variable(
        "", name="asset_contents", use_resource=False, collections=[v1.GraphKeys.LOCAL_VARIABLES]
    )
    main_op = tf.group(v1.assign(contents, tf.io.read_file(asset_path)), name="main_op")
    return contents, main_op


@model("tf1_multi_metagraph")
def tf1_multi_metagraph(export_dir: str) -> list[Case]:
    """Three MetaGraphDefs (train; serve; serve+gpu with device strings) over one checkpoint."""
    r = rng(1)
    w0 = r.normal(size=(3, 2)).astype(np.float32)
    data = r.normal(size=(16, 3)).astype(np.float32)
    labels = (data[:, 0] > 0).astype(np.int64)
    builder = v1.saved_model.Builder(export_dir)
    with tf.Graph().as_default(), v1.Session() as sess:
        x, w, b = _linear_inputs(w0)
        logits = tf.add(tf.matmul(x, w), b, name="logits")
        label = v1.placeholder(tf.int64, [None], name="label")
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=logits), name="loss"
        )
        step = v1.train.GradientDescentOptimizer(0.5).minimize(loss)
        sess.run(v1.global_variables_initializer())
        for _ in range(3):
            sess.run(step, {x: data, label: labels})
        train = _predict({"x": x, "label": label}, {"loss": loss, "logits": logits})
        builder.add_meta_graph_and_variables(sess, ["train"], signature_def_map={"train": train})
    for tags, device in ((["serve"], None), (["serve", "gpu"], "/device:GPU:0")):
        with tf.Graph().as_default():
            x, w, b = _linear_inputs(w0)
            with tf.device(device):
                probabilities = tf.nn.softmax(tf.matmul(x, w) + b, name="probabilities")
            classes = tf.argmax(probabilities, axis=1, name="classes")
            default = _predict({"x": x}, {"probabilities": probabilities, "classes": classes})
            builder.add_meta_graph(tags, signature_def_map={"serving_default": default})
    builder.save()
    batch = r.normal(size=(4, 3)).astype(np.float32)
    return [
        Case("train", {"x": batch, "label": [0, 1, 1, 0]}, tags=("train",)),
        Case("serving_default", {"x": batch}),
        Case("serving_default", {"x": batch[:1]}, tags=("serve", "gpu")),
    ]


def _linear_inputs(w0: np.ndarray):
    x = v1.placeholder(tf.float32, [None, 3], name="x")
    w = v1.get_variable("w", initializer=w0)
    b = v1.get_variable("b", initializer=np.zeros(2, np.float32))
    return x, w, b


# dtype -> (variable value, how the serving signature combines it with int32 x[:, None])
_ALL_DTYPES = {
    tf.float16: ([0.5, -1.25, 3.0], "mul"),
    tf.bfloat16: ([0.5, -1.25, 3.0], "mul"),
    tf.float32: ([0.1, -2.5, 7.0], "mul"),
    tf.float64: ([0.1, -2.5, 1e300], "mul"),
    tf.int8: ([-128, 0, 127], "add"),
    tf.int16: ([-32768, 1, 32767], "add"),
    tf.int32: ([-(2**31), 2, 2**31 - 1], "add"),
    tf.int64: ([-(2**63), 3, 2**63 - 1], "add"),
    tf.uint8: ([0, 1, 255], "add"),
    tf.uint16: ([0, 1, 65535], "read"),
    tf.uint32: ([0, 1, 2**32 - 1], "read"),
    tf.uint64: ([0, 1, 2**64 - 1], "read"),
    tf.bool: ([True, False, True], "xor"),
    tf.complex64: ([1 + 2j, -0.5j, 3], "mul"),
    tf.complex128: ([1 + 2j, -0.5j, 3], "mul"),
    tf.string: ([b"", b"abc", b"\x00\xff"], "join"),
}


@model("tf1_all_dtypes")
def tf1_all_dtypes(export_dir: str) -> list[Case]:
    """A variable of every checkpoint dtype (resource, plus ref int64/string) and ops on them."""
    with tf.Graph().as_default(), v1.Session() as sess:
        x = v1.placeholder(tf.int32, [None], name="x")
        column = x[:, None]
        outputs, raw = {}, {}
        for dtype, (value, how) in _ALL_DTYPES.items():
            var = v1.get_variable(f"v_{dtype.name}", initializer=tf.constant(value, dtype))
            raw[dtype.name] = tf.identity(var, name=f"read_{dtype.name}")
            outputs[dtype.name] = _combine(var, column, dtype, how)
        for dtype in (tf.int64, tf.string):
            value = _ALL_DTYPES[dtype][0]
            ref = v1.Variable(tf.constant(value, dtype), name=f"ref_{dtype.name}", use_resource=False)
            raw[f"ref_{dtype.name}"] = tf.identity(ref, name=f"read_ref_{dtype.name}")
        sess.run(v1.global_variables_initializer())
        _save(
            export_dir,
            sess,
            {"serving_default": _predict({"x": x}, outputs), "read_all": _predict({"x": x}, raw)},
        )
    values = np.array([0, 3, -2], np.int32)
    return [
        Case("serving_default", {"x": values}, rtol=1e-3, atol=1e-3),  # float16/bfloat16 inside
        Case("read_all", {"x": values}),
    ]


def _combine(var, column, dtype, how: str):
    rows = tf.shape(column)[0]
    if how == "mul":
        return var * tf.cast(column, dtype)
    if how == "add":
        return var + tf.cast(column, dtype)
    if how == "xor":
        return tf.math.logical_xor(var, column > 0)
    if how == "join":
        left = tf.broadcast_to(var, [rows, 3])
        right = tf.broadcast_to(tf.strings.as_string(column), [rows, 3])
        return tf.strings.join([left, right], separator="|")
    return tf.identity(var)  # no CPU arithmetic kernels for these unsigned types


@model("tf1_partitioned")
def tf1_partitioned(export_dir: str) -> list[Case]:
    """Partitioned variables (fixed_size_partitioner) saved as slices; embedding lookups."""
    with tf.Graph().as_default(), v1.Session() as sess:
        ids = v1.placeholder(tf.int64, [None], name="ids")
        r = rng(2)
        embeddings = v1.get_variable(
            "embeddings",
            shape=[10, 4],
            partitioner=v1.fixed_size_partitioner(3),
            initializer=_slice_of(r.normal(size=(10, 4)).astype(np.float32)),
        )
        kernel = v1.get_variable(
            "kernel",
            shape=[4, 6],
            partitioner=v1.fixed_size_partitioner(2, axis=1),
            initializer=_slice_of(r.normal(size=(4, 6)).astype(np.float32)),
        )
        by_mod = v1.nn.embedding_lookup(embeddings, ids, partition_strategy="mod")
        by_div = v1.nn.embedding_lookup(embeddings, ids, partition_strategy="div")
        dense = tf.matmul(by_div, tf.convert_to_tensor(kernel), name="dense")
        sess.run(v1.global_variables_initializer())
        outputs = {"by_mod": by_mod, "by_div": by_div, "dense": dense}
        _save(export_dir, sess, {"serving_default": _predict({"ids": ids}, outputs)})
    return [
        Case("serving_default", {"ids": [0, 9, 4, 4, 7]}),
        Case("serving_default", {"ids": [3]}),
    ]


def _slice_of(full: np.ndarray):
    """An initializer giving each partition its own slice of ``full``."""

    def initializer(shape, dtype=None, partition_info=None):
        offset = partition_info.var_offset if partition_info else [0] * len(shape)
        index = tuple(slice(o, o + n) for o, n in zip(offset, shape))
        return tf.constant(full[index], dtype=dtype)

    return initializer


@model("tf1_cond_while")
def tf1_cond_while(export_dir: str) -> list[Case]:
    """TF1 dataflow control flow (Switch/Merge/Enter/Exit/NextIteration/LoopCond)."""
    v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default(), v1.Session() as sess:
            x = v1.placeholder(tf.float32, [None], name="x")
            n = v1.placeholder(tf.int32, [], name="n")
            scale = v1.get_variable("scale", initializer=np.float32(0.5))
            y = v1.cond(tf.reduce_sum(x) > 0, lambda: x * 2.0, lambda: -x, name="sign_cond")

            def body(i, acc):
                term = v1.cond(tf.equal(i % 2, 0), lambda: x, lambda: x * x)
                return i + 1, acc * scale + term

            steps, z = v1.while_loop(
                lambda i, acc: i < n, body, [tf.constant(0), tf.zeros_like(x)], name="accumulate"
            )
            sess.run(v1.global_variables_initializer())
            outputs = {"y": y, "z": z, "steps": steps}
            _save(export_dir, sess, {"serving_default": _predict({"x": x, "n": n}, outputs)})
    finally:
        v1.enable_control_flow_v2()
    x = np.array([1.0, -0.5, 2.0], np.float32)
    return [
        Case("serving_default", {"x": x, "n": 5}),
        Case("serving_default", {"x": -x, "n": 0}),
        Case("serving_default", {"x": x[:1], "n": 1}),
    ]


@model("tf1_vocab_table")
def tf1_vocab_table(export_dir: str) -> list[Case]:
    """Lookup tables from an asset vocabulary and from constants, initialized by main_op."""
    vocab = Path(tempfile.mkdtemp()) / "vocab.txt"
    vocab.write_text("".join(f"{w}\n" for w in ("the", "quick", "brown", "fox", "jumps")))
    with tf.Graph().as_default(), v1.Session() as sess:
        words = v1.placeholder(tf.string, [None], name="words")
        ids_in = v1.placeholder(tf.int64, [None], name="ids")
        lines = v1.lookup.TextFileIndex
        to_id = v1.lookup.StaticVocabularyTable(
            v1.lookup.TextFileInitializer(
                str(vocab), tf.string, lines.WHOLE_LINE, tf.int64, lines.LINE_NUMBER
            ),
            num_oov_buckets=2,
        )
        to_word = v1.lookup.StaticHashTable(
            v1.lookup.TextFileInitializer(
                str(vocab), tf.int64, lines.LINE_NUMBER, tf.string, lines.WHOLE_LINE
            ),
            default_value="<unk>",
        )
        weights = v1.lookup.StaticHashTable(
            v1.lookup.KeyValueTensorInitializer(["fox", "the"], [2.5, -1.0]), default_value=0.0
        )
        ids = to_id.lookup(words)
        outputs = {"ids": ids, "weights": weights.lookup(words), "roundtrip": to_word.lookup(ids)}
        _save(
            export_dir,
            sess,
            {
                "serving_default": _predict({"words": words}, outputs),
                "ids_to_words": _predict({"ids": ids_in}, {"words": to_word.lookup(ids_in)}),
            },
            assets_collection=v1.get_collection(ASSETS),
            main_op=v1.tables_initializer(),
        )
    return [
        Case("serving_default", {"words": [b"fox", b"cat", b"the", b"", b"jumps", b"zebra"]}),
        Case("ids_to_words", {"ids": [0, 4, 5, -1]}),
    ]


@model("tf1_no_variables")
def tf1_no_variables(export_dir: str) -> list[Case]:
    """A pure constant graph: no checkpoint tensors at all."""
    r = rng(4)
    with tf.Graph().as_default(), v1.Session() as sess:
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        w = tf.constant(r.normal(size=(3, 4)).astype(np.float32))
        scores = tf.nn.relu(tf.matmul(x, w) + tf.constant([0.1, -0.2, 0.3, 0.0]), name="scores")
        names = tf.constant([b"north", b"east", b"south", b"west"])
        best = tf.gather(names, tf.argmax(scores, axis=1), name="best")
        outputs = {"scores": scores, "best": best}
        _save(export_dir, sess, {"serving_default": _predict({"x": x}, outputs)})
    return [Case("serving_default", {"x": r.normal(size=(5, 3)).astype(np.float32)})]
