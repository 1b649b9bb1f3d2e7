"""SavedModels that exercise the loader: every checkpoint dtype, partitioned and sharded variables,
several MetaGraphDefs, text format, no variables, assets and TF2 exports.

Signatures are kept to ops every runtime has (Identity, Add, Mul, MatMul, Cast) so the loader's
conformance does not wait on kernels; the checkpoint contents are what these models test.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np
import tensorflow as tf

from tests.oracle.tfside import Case, model, rng

VENV = "tf215"
FAMILY = "loader"

v1 = tf.compat.v1
sigs = v1.saved_model.signature_def_utils

# name -> (tf dtype, value); every dtype a TensorBundle stores, with awkward shapes included.
_R = rng(3)
DTYPE_VALUES = {
    "f16": (tf.float16, _R.standard_normal((3, 4)).astype(np.float16)),
    "bf16": (tf.bfloat16, _R.standard_normal((5,)).astype(ml_dtypes.bfloat16)),
    "f32": (tf.float32, _R.standard_normal((4, 3)).astype(np.float32)),
    "f64": (tf.float64, _R.standard_normal((2, 2, 2)).astype(np.float64)),
    "i8": (tf.int8, np.array([-128, -1, 0, 1, 127], np.int8)),
    "i16": (tf.int16, np.array([-32768, 7, 32767], np.int16)),
    "i32": (tf.int32, np.array([[-(2**31), 0], [5, 2**31 - 1]], np.int32)),
    "i64": (tf.int64, np.array([-(2**63), 2**63 - 1, 42], np.int64)),
    "u8": (tf.uint8, np.array([0, 1, 255], np.uint8)),
    "u16": (tf.uint16, np.array([0, 65535], np.uint16)),
    "u32": (tf.uint32, np.array([0, 2**32 - 1], np.uint32)),
    "u64": (tf.uint64, np.array([0, 2**64 - 1], np.uint64)),
    "bool": (tf.bool, np.array([[True, False], [False, True]])),
    "c64": (tf.complex64, np.array([1 + 2j, -3.5 - 0.25j], np.complex64)),
    "c128": (tf.complex128, np.array([[1e300 + 1j], [-0.0 + 5j]], np.complex128)),
    "str": (tf.string, np.array([b"", b"a", b"\x00\xff binary", "h\u00e9llo".encode(), b"x" * 300], object)),
    "str_scalar": (tf.string, np.array(b"scalar string", object)),
    "f32_scalar": (tf.float32, np.array(1.5, np.float32)),
    "f32_empty": (tf.float32, np.zeros((0, 3), np.float32)),
    "str_empty": (tf.string, np.zeros((2, 0), object)),
    "f32_big": (tf.float32, _R.standard_normal((256, 300)).astype(np.float32)),
}


def _x_times_w(w_value: np.ndarray):
    x = v1.placeholder(tf.float32, [None, w_value.shape[0]], name="x")
    w = v1.get_variable("w", initializer=w_value, use_resource=False)
    y = tf.matmul(x, w, name="y")
    return x, y


@model("loader_all_dtypes")
def loader_all_dtypes(export_dir: str) -> list[Case]:
    """One ref variable per dtype; MetaGraphDefs tagged serve, train and serve+gpu."""
    w_value = rng(1).standard_normal((3, 2)).astype(np.float32)
    builder = v1.saved_model.Builder(export_dir)
    with tf.Graph().as_default(), v1.Session() as sess:
        for name, (dtype, value) in DTYPE_VALUES.items():
            v1.Variable(value, dtype=dtype, name=name, use_resource=False)
        x, y = _x_times_w(w_value)
        sess.run(v1.global_variables_initializer())
        signature = sigs.predict_signature_def({"x": x}, {"y": y})
        builder.add_meta_graph_and_variables(
            sess, ["serve"], signature_def_map={"serving_default": signature}
        )
        builder.add_meta_graph(["train"])
        builder.add_meta_graph(["serve", "gpu"], signature_def_map={"predict": signature})
    builder.save()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    return [Case("serving_default", {"x": x}), Case("predict", {"x": x}, tags=("serve", "gpu"))]


@model("loader_partitioned_sharded")
def loader_partitioned_sharded(export_dir: str) -> list[Case]:
    """Partitioned variables (slice starts of 1-, 2- and 3-byte OrderedCode) over two data shards."""
    config = v1.ConfigProto(device_count={"CPU": 2})
    with tf.Graph().as_default(), v1.Session(config=config) as sess:
        init = v1.random_normal_initializer(seed=7)
        with tf.device("/cpu:0"):
            tall = v1.get_variable(
                "tall", [20000, 2], partitioner=v1.fixed_size_partitioner(3), initializer=init
            )
            x = v1.placeholder(tf.float32, [None, 4], name="x")
        with tf.device("/cpu:1"):
            wide = v1.get_variable(
                "wide", [4, 130], partitioner=v1.fixed_size_partitioner(2), initializer=init
            )
            names = v1.get_variable(
                "names", initializer=np.array([b"alpha", b"beta", b"gamma", b"delta"]), dtype=tf.string
            )
            ints = v1.get_variable(
                "ints",
                [9],
                tf.int64,
                partitioner=v1.fixed_size_partitioner(4),
                initializer=v1.ones_initializer(),
            )
        y = tf.matmul(x, tf.concat(list(wide), axis=0), name="y")
        total = tf.identity(tf.reduce_sum(tf.concat(list(tall), axis=0)), name="total")
        del names, ints
        sess.run(v1.global_variables_initializer())
        builder = v1.saved_model.Builder(export_dir)
        builder.add_meta_graph_and_variables(
            sess,
            ["serve"],
            signature_def_map={
                "serving_default": sigs.predict_signature_def({"x": x}, {"y": y, "total": total})
            },
            saver=v1.train.Saver(sharded=True, allow_empty=True),
        )
        builder.save()
    return [
        Case(
            "serving_default", {"x": rng(2).standard_normal((2, 4)).astype(np.float32)}, rtol=1e-4, atol=1e-4
        )
    ]


@model("loader_pbtxt_no_variables")
def loader_pbtxt_no_variables(export_dir: str) -> list[Case]:
    """A text-format SavedModel (saved_model.pbtxt) whose graph has no variables at all."""
    with tf.Graph().as_default(), v1.Session() as sess:
        x = v1.placeholder(tf.float32, [None], name="x")
        y = tf.add(x * 2.0, 1.0, name="y")
        builder = v1.saved_model.Builder(export_dir)
        builder.add_meta_graph_and_variables(
            sess,
            ["serve"],
            signature_def_map={"serving_default": sigs.predict_signature_def({"x": x}, {"y": y})},
        )
        builder.save(as_text=True)
    return [Case("serving_default", {"x": np.array([1.0, -2.0], np.float32)})]


@model("loader_legacy_init_op_assets")
def loader_legacy_init_op_assets(export_dir: str) -> list[Case]:
    """A legacy_init_op (a local variable set from a constant) and an asset in the ASSET_FILEPATHS collection."""
    asset = Path(tempfile.mkdtemp()) / "vocab.txt"
    asset.write_text("a\nb\n")
    with tf.Graph().as_default(), v1.Session() as sess:
        x = v1.placeholder(tf.float32, [None], name="x")
        scale = v1.Variable(3.0, name="scale", use_resource=True)
        offset = v1.Variable(
            0.0, name="offset", collections=[v1.GraphKeys.LOCAL_VARIABLES], use_resource=False
        )
        path = tf.constant(str(asset), name="vocab_path")
        v1.add_to_collection(v1.GraphKeys.ASSET_FILEPATHS, path)
        legacy_init = tf.group(v1.assign(offset, 10.0), name="legacy_init_op")
        y = tf.add(x * scale, offset, name="y")
        sess.run(v1.global_variables_initializer())
        builder = v1.saved_model.Builder(export_dir)
        builder.add_meta_graph_and_variables(
            sess,
            ["serve"],
            signature_def_map={"serving_default": sigs.predict_signature_def({"x": x}, {"y": y})},
            assets_collection=v1.get_collection(v1.GraphKeys.ASSET_FILEPATHS),
            legacy_init_op=legacy_init,
        )
        builder.save()
    return [Case("serving_default", {"x": np.array([1.0, 2.0], np.float32)})]


class _Module(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(rng(4).standard_normal((3, 2)).astype(np.float32), name="w")
        self.b = tf.Variable(np.array([0.5, -0.5], np.float32), name="b")
        self.steps = tf.Variable(np.int64(7), name="steps")
        self.half = tf.Variable(np.array([1.5, 2.5], np.float16), name="half")
        self.label = tf.Variable(b"tf2-label", name="label")

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def __call__(self, x):
        return {"y": tf.matmul(x, self.w) + self.b}


@model("loader_tf2_module", family="loader_tf2")
def loader_tf2_module(export_dir: str) -> list[Case]:
    """A TF2 export: resource variables restored through the saver's function, an asset file."""
    module = _Module()
    asset = Path(tempfile.mkdtemp()) / "labels.txt"
    asset.write_text("cat\ndog\n")
    module.labels = tf.saved_model.Asset(str(asset))
    tf.saved_model.save(module, export_dir, signatures={"serving_default": module.__call__})
    return [Case("serving_default", {"x": np.ones((2, 3), np.float32)}, rtol=1e-5, atol=1e-5)]


@model("loader_many_variables")
def loader_many_variables(export_dir: str) -> list[Case]:
    """2500 variables with 200-character names: an index of several blocks (TF cuts them at 256 KiB)."""
    import hashlib

    def name(i: int) -> str:  # distinct from the first bytes on: prefix compression cannot shrink the index
        digest = hashlib.sha256(str(i).encode()).hexdigest()
        return f"{digest}/{digest[:64]}/{digest[:64]}/v{i:05d}"

    with tf.Graph().as_default(), v1.Session() as sess:
        x = v1.placeholder(tf.float32, [None], name="x")
        values = []
        for i in range(2500):
            values.append(v1.Variable(i / 7, dtype=tf.float32, name=name(i), use_resource=False))
        y = tf.add(x, tf.add_n(values[:3] + values[-3:]), name="y")
        sess.run(v1.global_variables_initializer())
        builder = v1.saved_model.Builder(export_dir)
        builder.add_meta_graph_and_variables(
            sess,
            ["serve"],
            signature_def_map={"serving_default": sigs.predict_signature_def({"x": x}, {"y": y})},
        )
        builder.save()
    return [Case("serving_default", {"x": np.array([0.0, 1.0], np.float32)})]
