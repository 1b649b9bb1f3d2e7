"""TensorFlow Lite models converted by TensorFlow, in TF Serving's layout, with the answers of
TF Lite in TensorFlow (``tf.lite.Interpreter``) as their cases.

Each model's export is the SavedModel its TF Lite models come from (tfside's cases are that
SavedModel's answers); beside it, in the model's cache directory::

    tflite/<layout>/<version>/model.tflite      one base path per layout, as TF Serving reads it
    tflite/<layout>.signature_defs.pb          MetaGraphDef whose signature_def map is what TF
                                               Serving reports for the layout (GetModelMetadata)
    tflite/<layout>/cases/<i>/<key>.pb          TensorProtos: inputs and out_<key> outputs
    tflite.json                                {"layouts": {name: {"base_path", "version",
                                               "native_signatures", "signature_defs", "cases"}}}

What TF Serving reports and runs (``tflite_session.cc``): the SignatureDefs stored in the model's
``signature_defs_metadata`` when it has them, else one ``serving_default`` built from the primary
subgraph's input and output tensors, keyed by their names without ``:N``. Either way the primary
subgraph runs: its inputs resized to what a request sends, then invoked. The cases are made that
way here, with ``tf.lite.Interpreter`` (one thread), and record every output a signature names.
``native_signatures`` lists the model's own TF Lite signatures, which TF Serving does not serve.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import flatbuffers
import numpy as np
import tensorflow as tf
from flatbuffers import flexbuffers
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow.lite.python import schema_py_generated as schema_fb
from tensorflow.lite.tools import flatbuffer_utils

from tests.oracle import REPO_ROOT
from tests.oracle.tfside import Case, every_signature, examples, model, rng

VENV = "tf221"
FAMILY = "tflite"
DEPENDS = (
    "models/half_plus_two/00000123/saved_model.pb",
    "models/half_plus_two/00000123/variables/variables.index",
    "models/half_plus_two/00000123/variables/variables.data-00000-of-00001",
)

v1 = tf.compat.v1
HALF_PLUS_TWO = REPO_ROOT / "models" / "half_plus_two" / "00000123"
SIGNATURE_DEFS_METADATA = "signature_defs_metadata"  # TF Lite's signature_def_util name

# TfLiteType -> TF DataType, as tflite_session.cc maps them (by numpy dtype here).
_TF_DTYPES = {
    np.dtype(np.float32): types_pb2.DT_FLOAT,
    np.dtype(np.int32): types_pb2.DT_INT32,
    np.dtype(np.uint8): types_pb2.DT_UINT8,
    np.dtype(np.int64): types_pb2.DT_INT64,
    np.dtype(np.bool_): types_pb2.DT_BOOL,
    np.dtype(np.int16): types_pb2.DT_INT16,
    np.dtype(np.complex64): types_pb2.DT_COMPLEX64,
    np.dtype(np.int8): types_pb2.DT_INT8,
}


# -- TF Serving's view of a TF Lite model ---------------------------------------------------------


def _legacy_name(name: str) -> str:
    return name.split(":", 1)[0]


def _tensor_info(detail: dict) -> meta_graph_pb2.TensorInfo:
    info = meta_graph_pb2.TensorInfo(name=detail["name"], dtype=_TF_DTYPES[np.dtype(detail["dtype"])])
    for size in detail["shape"]:
        info.tensor_shape.dim.add().size = int(size)
    return info


def stored_signature_defs(model_bytes: bytes) -> dict[str, meta_graph_pb2.SignatureDef]:
    """The SignatureDefs in the model's ``signature_defs_metadata`` (none: {})."""
    model = schema_fb.Model.GetRootAsModel(model_bytes, 0)
    for i in range(model.MetadataLength()):
        metadata = model.Metadata(i)
        if metadata.Name().decode() == SIGNATURE_DEFS_METADATA:
            data = model.Buffers(metadata.Buffer()).DataAsNumpy().tobytes()
            root = flexbuffers.GetRoot(bytearray(data)).AsMap
            return {
                key.AsKey: meta_graph_pb2.SignatureDef.FromString(value.AsStringBytes)
                for key, value in zip(root.Keys, root.Values, strict=True)
            }
    return {}


def served_signature_defs(model_bytes: bytes) -> dict[str, meta_graph_pb2.SignatureDef]:
    """What TF Serving reports for the model: its stored SignatureDefs with each tensor name
    matched to a primary-subgraph tensor (exactly, else without ``:N``), or one generated
    ``serving_default`` of the primary subgraph's inputs and outputs."""
    interpreter = tf.lite.Interpreter(model_content=model_bytes)
    inputs = {d["name"]: d for d in interpreter.get_input_details()}
    outputs = {d["name"]: d for d in interpreter.get_output_details()}
    stored = stored_signature_defs(model_bytes)
    if not stored:
        signature = meta_graph_pb2.SignatureDef(method_name="tensorflow/serving/predict")
        for name in sorted(inputs):
            signature.inputs[_legacy_name(name)].CopyFrom(_tensor_info(inputs[name]))
        for name in sorted(outputs):
            signature.outputs[_legacy_name(name)].CopyFrom(_tensor_info(outputs[name]))
        return {"serving_default": signature}
    for signature in stored.values():
        for infos, tensors in ((signature.inputs, inputs), (signature.outputs, outputs)):
            for info in infos.values():
                if info.name not in tensors:
                    info.name = _legacy_name(info.name)
                    assert info.name in tensors, info.name
    return stored


def run_primary(model_bytes: bytes, signature: meta_graph_pb2.SignatureDef, feeds: dict) -> dict:
    """TfLiteSession's Run in tf.lite.Interpreter: each input resized to the value's shape when
    it differs, the primary subgraph invoked, the signature's outputs read."""
    interpreter = tf.lite.Interpreter(model_content=model_bytes, num_threads=1)
    index = {
        d["name"]: d["index"] for d in interpreter.get_input_details() + interpreter.get_output_details()
    }
    interpreter.allocate_tensors()
    for key, value in feeds.items():
        i = index[signature.inputs[key].name]
        if tuple(interpreter.get_tensor(i).shape) != value.shape:
            interpreter.resize_tensor_input(i, value.shape)
            interpreter.allocate_tensors()
    for key, value in feeds.items():
        interpreter.set_tensor(index[signature.inputs[key].name], value)
    interpreter.invoke()
    return {key: interpreter.get_tensor(index[info.name]) for key, info in signature.outputs.items()}


def with_signature_defs(model_bytes: bytes, signature_defs: dict) -> bytes:
    """``model_bytes`` with ``signature_defs`` stored as TF Lite's ``signature_def_util`` stores
    them: a flexbuffer map of key -> serialized SignatureDef, in a metadata buffer."""
    builder = flexbuffers.Builder()
    with builder.Map():
        for key in sorted(signature_defs):
            builder.Key(key)
            builder._WriteBlob(signature_defs[key].SerializeToString(), True, flexbuffers.Type.STRING)
    data = builder.Finish()
    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(model_bytes))
    buffer = schema_fb.BufferT()
    buffer.data = np.frombuffer(bytes(data), np.uint8)
    model.buffers.append(buffer)
    metadata = schema_fb.MetadataT()
    metadata.name = SIGNATURE_DEFS_METADATA
    metadata.buffer = len(model.buffers) - 1
    model.metadata = [*(model.metadata or []), metadata]
    out = flatbuffers.Builder(1024)
    out.Finish(model.Pack(out), file_identifier=b"TFL3")
    return bytes(out.Output())


class Layouts:
    """The layouts of one model: ``add`` writes a base path and its cases; ``finish`` the index."""

    def __init__(self, export_dir: str):
        self.root = Path(export_dir).parent
        self.index: dict[str, dict] = {}

    def add(
        self,
        name: str,
        model_bytes: bytes,
        cases: list[tuple[str, dict]],
        version: int = 1,
        rtol: float = 1e-5,
        atol: float = 1e-6,
    ) -> None:
        base = self.root / "tflite" / name
        version_dir = base / f"{version:08d}"
        version_dir.mkdir(parents=True)
        (version_dir / "model.tflite").write_bytes(model_bytes)
        served = served_signature_defs(model_bytes)
        defs_file = f"tflite/{name}.signature_defs.pb"
        meta_graph = meta_graph_pb2.MetaGraphDef()
        for key, signature in served.items():
            meta_graph.signature_def[key].CopyFrom(signature)
        (self.root / defs_file).write_bytes(meta_graph.SerializeToString())
        covered = {key for key, _ in cases}
        if covered != set(served):
            raise ValueError(f"{name}: cases cover {sorted(covered)}, TF Serving serves {sorted(served)}")
        records = []
        for i, (key, feeds) in enumerate(cases):
            signature = served[key]
            feeds = {
                alias: np.asarray(value, tf.as_dtype(signature.inputs[alias].dtype).as_numpy_dtype)
                for alias, value in feeds.items()
            }
            outputs = run_primary(model_bytes, signature, feeds)
            record = {"signature": key, "inputs": {}, "outputs": {}, "rtol": rtol, "atol": atol}
            for kind, values in (("inputs", feeds), ("outputs", outputs)):
                for alias, value in values.items():
                    prefix = "out_" if kind == "outputs" else ""
                    relative = f"tflite/{name}/cases/{i}/{prefix}{re.sub(r'[^A-Za-z0-9_.-]', '_', alias)}.pb"
                    (self.root / relative).parent.mkdir(parents=True, exist_ok=True)
                    (self.root / relative).write_bytes(tf.make_tensor_proto(value).SerializeToString())
                    record[kind][alias] = relative
            records.append(record)
        interpreter = tf.lite.Interpreter(model_content=model_bytes)
        self.index[name] = {
            "base_path": f"tflite/{name}",
            "version": version,
            "native_signatures": sorted(interpreter.get_signature_list()),
            "signature_defs": defs_file,
            "cases": records,
        }

    def add_unloadable(self, name: str, model_bytes: bytes, version: int = 1) -> None:
        """A layout TF Lite in TensorFlow cannot run either: no signatures, no cases."""
        version_dir = self.root / "tflite" / name / f"{version:08d}"
        version_dir.mkdir(parents=True)
        (version_dir / "model.tflite").write_bytes(model_bytes)
        self.index[name] = {"base_path": f"tflite/{name}", "version": version, "cases": []}

    def finish(self) -> None:
        (self.root / "tflite.json").write_text(json.dumps({"layouts": self.index}, indent=1) + "\n")


# -- TF Serving's half_plus_two, as its TF Lite test data -----------------------------------------


def _half_plus_two_tflite(input_name: str, with_sigdef: bool) -> bytes:
    """TF Serving's ``saved_model_half_plus_two.py --as_tflite[_with_sigdef]`` on the variables of
    models/half_plus_two: the graph cut at ``x``, shaped (1, 1) for the v1 converter."""
    values = tf.train.load_checkpoint(str(HALF_PLUS_TWO / "variables" / "variables"))
    with tf.Graph().as_default(), v1.Session() as sess:
        a = v1.Variable(values.get_tensor("a"), name="a")
        b = v1.Variable(values.get_tensor("b"), name="b")
        serialized = v1.placeholder(tf.string, name="tf_example", shape=[None])
        features = v1.parse_example(serialized, {"x": tf.io.FixedLenFeature([1], tf.float32)})
        x = tf.ensure_shape(features["x"], (1, 1), name=input_name)
        y = tf.identity(tf.add(tf.multiply(a, x), b), name="y")
        sess.run(v1.global_variables_initializer())
        converted = tf.compat.v1.lite.TFLiteConverter.from_session(sess, [x], [y]).convert()
        if not with_sigdef:
            return converted
        signature = v1.saved_model.signature_def_utils.predict_signature_def({"x": x}, {"y": y})
        return with_signature_defs(converted, {"serving_default": signature})


@model("tflite_half_plus_two")
def tflite_half_plus_two(export_dir: str) -> list[Case]:
    """TF Serving's two TF Lite test models (``saved_model_half_plus_two_tflite`` and
    ``..._with_sigdef``, version 123), and models/half_plus_two's SavedModel with the first as
    its ``model.tflite`` beside it (the export: a version TF Serving serves either way)."""
    shutil.copytree(HALF_PLUS_TWO, export_dir)
    plain = _half_plus_two_tflite("x", with_sigdef=False)
    (Path(export_dir) / "model.tflite").write_bytes(plain)
    layouts = Layouts(export_dir)
    x = [[2.0]]
    layouts.add("saved_model_half_plus_two_tflite", plain, [("serving_default", {"x": x})], version=123)
    layouts.add(
        "saved_model_half_plus_two_tflite_with_sigdef",
        _half_plus_two_tflite("tflite_input", with_sigdef=True),
        [("serving_default", {"x": x}), ("serving_default", {"x": [2.0]})],
        version=123,
    )
    layouts.finish()
    one = examples([{"x": 1.0}])
    three = examples([{"x": 1.0, "x2": 4.0}, {"x": 2.0}, {"x": 5.0, "x2": -1.0}])
    cases = [c for c in every_signature(export_dir, [one, three]) if c.signature != "serving_default"]
    return [Case("serving_default", {"x": np.float32([[1.0], [2.0], [5.0]])}), *cases]


# -- TF2 models: float, quantized, several signatures ---------------------------------------------


class Dense(tf.Module):
    """Two dense layers over 64 features (weights large enough for dynamic-range quantization)."""

    def __init__(self):
        super().__init__()
        r = rng(45)
        self.w1 = tf.Variable(r.normal(0, 0.3, (64, 32)).astype(np.float32))
        self.b1 = tf.Variable(r.normal(0, 0.1, (32,)).astype(np.float32))
        self.w2 = tf.Variable(r.normal(0, 0.3, (32, 8)).astype(np.float32))
        self.b2 = tf.Variable(r.normal(0, 0.1, (8,)).astype(np.float32))

    def _hidden(self, x):
        return tf.nn.relu(tf.matmul(x, self.w1) + self.b1)

    @tf.function(input_signature=[tf.TensorSpec([None, 64], tf.float32, name="x")])
    def classify(self, x):
        return {"scores": tf.nn.softmax(tf.matmul(self._hidden(x), self.w2) + self.b2)}

    @tf.function(input_signature=[tf.TensorSpec([None, 64], tf.float32, name="x")])
    def embed(self, x):
        return {"hidden": self._hidden(x)}

    @tf.function(input_signature=[tf.TensorSpec([None, 64], tf.float32, name="x")])
    def both(self, x):
        hidden = self._hidden(x)
        return {"hidden": hidden, "scores": tf.nn.softmax(tf.matmul(hidden, self.w2) + self.b2)}


def _features(rows: int, seed: int) -> np.ndarray:
    return rng(seed).normal(0, 1, (rows, 64)).astype(np.float32)


def _convert(export_dir: str, keys: list[str], **settings) -> bytes:
    converter = tf.lite.TFLiteConverter.from_saved_model(export_dir, signature_keys=keys)
    for name, value in settings.items():
        setattr(converter, name, value)
    return converter.convert()


def _representative():
    for i in range(16):
        yield [_features(1, 100 + i)]


def _primary_cases(model_bytes: bytes, batches) -> list[tuple[str, dict]]:
    """A case per batch for every signature TF Serving serves, fed through its one input."""
    cases = []
    for key, signature in sorted(served_signature_defs(model_bytes).items()):
        (alias,) = signature.inputs
        cases += [(key, {alias: batch}) for batch in batches]
    return cases


@model("tflite_dense")
def tflite_dense(export_dir: str) -> list[Case]:
    """One TF2 model converted five ways: float; dynamic-range quantized; full-integer int8
    (int8 input and output); two native TF Lite signatures (two subgraphs); and one subgraph with
    two SignatureDefs stored in its metadata (the several signatures TF Serving serves)."""
    module = Dense()
    signatures = {"serving_default": module.classify, "embed": module.embed, "both": module.both}
    tf.saved_model.save(module, export_dir, signatures=signatures)
    batches = [_features(1, 1), _features(3, 2)]
    layouts = Layouts(export_dir)
    plain = _convert(export_dir, ["serving_default"])
    layouts.add("dense_float", plain, _primary_cases(plain, batches))
    dynamic = _convert(export_dir, ["serving_default"], optimizations=[tf.lite.Optimize.DEFAULT])
    layouts.add("dense_dynamic_range", dynamic, _primary_cases(dynamic, batches), rtol=1e-4, atol=1e-5)
    int8 = _convert(
        export_dir,
        ["serving_default"],
        optimizations=[tf.lite.Optimize.DEFAULT],
        representative_dataset=_representative,
        target_spec=_int8_only(),
        inference_input_type=tf.int8,
        inference_output_type=tf.int8,
    )
    int8_batches = [np.clip(np.round(b * 20), -128, 127).astype(np.int8) for b in batches]
    layouts.add("dense_int8", int8, _primary_cases(int8, int8_batches), rtol=0, atol=0)
    two = _convert(export_dir, ["serving_default", "embed"])
    layouts.add("dense_two_native_signatures", two, _primary_cases(two, batches))
    layouts.add(*_stored_signatures(export_dir, batches))
    layouts.add_unloadable("parse_example", _parse_example_model())
    layouts.finish()
    return [Case(key, {"x": batch}) for key in signatures for batch in batches]


def _int8_only():
    spec = tf.lite.TargetSpec()
    spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    return spec


def _stored_signatures(export_dir: str, batches) -> tuple[str, bytes, list]:
    """``both`` converted alone, with SignatureDefs ``serving_default`` (x -> scores) and
    ``embed`` (x -> hidden) stored in its metadata, naming its tensors as TF would (``:0``)."""
    converted = _convert(export_dir, ["both"])
    interpreter = tf.lite.Interpreter(model_content=converted)
    runner = interpreter._get_full_signature_list()["both"]
    names = {d["index"]: d["name"] for d in interpreter.get_tensor_details()}

    def info(index: int) -> meta_graph_pb2.TensorInfo:
        name = names[index]
        return meta_graph_pb2.TensorInfo(name=name if ":" in name else f"{name}:0", dtype=types_pb2.DT_FLOAT)

    defs = {}
    for key, output in (("serving_default", "scores"), ("embed", "hidden")):
        signature = meta_graph_pb2.SignatureDef(method_name="tensorflow/serving/predict")
        signature.inputs["x"].CopyFrom(info(runner["inputs"]["x"]))
        signature.outputs[output].CopyFrom(info(runner["outputs"][output]))
        defs[key] = signature
    model_bytes = with_signature_defs(converted, defs)
    cases = [(key, {"x": batch}) for key in sorted(defs) for batch in batches]
    return "dense_sigdefs", model_bytes, cases


def _parse_example_model() -> bytes:
    """TF Serving's ``parse_example_tflite``: ParseExample as a custom op, which TF Serving adds to
    its op resolver and LiteRT's Python interpreter lacks (its case is never answered here)."""
    with tf.Graph().as_default(), v1.Session() as sess:
        serialized = v1.placeholder(tf.string, name="input", shape=[None])
        parsed = v1.parse_example(
            serialized, {"x": tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0])}
        )
        converter = tf.compat.v1.lite.TFLiteConverter.from_session(sess, [serialized], [parsed["x"]])
        converter.allow_custom_ops = True
        return converter.convert()
