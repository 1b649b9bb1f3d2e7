"""TensorFlow's side of the byte-for-byte wire checks (run inside an oracle venv).

Usage (from tests/apis, so that `oracle_scripts` is a package):
    python -m oracle_scripts.wire_oracle build OUT_DIR [--no-cases]
    python -m oracle_scripts.wire_oracle check IN_DIR

`build` writes, for every case of `wire_cases.CASES` (unless --no-cases) and for
SavedModels exported by this TensorFlow, `<name>.binpb` (deterministic bytes),
`<name>.txtpb` (text format) and `manifest.json` mapping names to message full names.

`check` reads the same layout written by our side, parses each message with TF's
modules, re-serializes it and demands identical bytes and text, runs the case's
field checks, and writes `results.json` ({name: "ok" or the failure}) into IN_DIR.
"""

import importlib
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path

from google.protobuf import descriptor_pool, message_factory, text_format

from .dump_descriptors import SERVING_MODULES, TF_MODULES
from .wire_cases import CASES, Protos, serialize

TF_PROTOS = Protos("")


def _message_class(full_name: str):
    for name in TF_MODULES + SERVING_MODULES:
        importlib.import_module(name)
    descriptor = descriptor_pool.Default().FindMessageTypeByName(full_name)
    return message_factory.GetMessageClass(descriptor)


def _write(out: Path, manifest: dict, name: str, message) -> None:
    (out / f"{name}.binpb").write_bytes(serialize(message))
    (out / f"{name}.txtpb").write_text(text_format.MessageToString(message))
    manifest[name] = message.DESCRIPTOR.full_name


def _export_tf2(tf, export_dir: str) -> None:
    class Scaler(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable([[1.0], [2.0], [3.0]], name="w")
            self.step = tf.Variable(0, dtype=tf.int64, name="step")

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
        def serve(self, x):
            return {"y": tf.matmul(x, self.w), "n": tf.shape(x, out_type=tf.int64)[0] + self.step}

    module = Scaler()
    tf.saved_model.save(module, export_dir, signatures={"serving_default": module.serve})


def _export_tf1(tf, export_dir: str) -> None:
    v1 = tf.compat.v1
    with tf.Graph().as_default(), v1.Session() as session:
        x = v1.placeholder(tf.float32, [None], name="x")
        a = v1.Variable(0.5, name="a")
        y = tf.add(a * x, 2.0, name="y")
        serialized = v1.placeholder(tf.string, [None], name="tf_example")
        parsed = tf.io.parse_example(serialized, {"x": tf.io.FixedLenFeature([1], tf.float32)})
        score = tf.add(a * parsed["x"], 2.0, name="score")
        session.run(v1.global_variables_initializer())
        builder = v1.saved_model.Builder(export_dir)
        signatures = {
            "serving_default": v1.saved_model.predict_signature_def({"x": x}, {"y": y}),
            "regress_x_to_y": v1.saved_model.regression_signature_def(serialized, score),
        }
        builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map=signatures)
        builder.save()


def build(out: Path, with_cases: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict = {}
    if with_cases:
        for name, case in CASES.items():
            _write(out, manifest, name, case.build(TF_PROTOS))
    import tensorflow as tf

    saved_model_pb2 = TF_PROTOS("tensorflow/core/protobuf/saved_model")
    fingerprint_pb2 = TF_PROTOS("tensorflow/core/protobuf/fingerprint")
    for name, export in (("exported_tf2", _export_tf2), ("exported_tf1", _export_tf1)):
        with tempfile.TemporaryDirectory() as tmp:
            export_dir = os.path.join(tmp, "1")
            export(tf, export_dir)
            raw = Path(export_dir, "saved_model.pb").read_bytes()
            _write(out, manifest, name, saved_model_pb2.SavedModel.FromString(raw))
            fingerprint = Path(export_dir, "fingerprint.pb")
            if fingerprint.exists():
                message = fingerprint_pb2.FingerprintDef.FromString(fingerprint.read_bytes())
                _write(out, manifest, name + "_fingerprint", message)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))


def _check_one(folder: Path, name: str, full_name: str) -> None:
    data = (folder / f"{name}.binpb").read_bytes()
    message = _message_class(full_name).FromString(data)
    again = serialize(message)
    if again != data:
        raise AssertionError(f"re-serialized {len(again)} bytes differ from the {len(data)} bytes read")
    text = (folder / f"{name}.txtpb").read_text()
    if text_format.MessageToString(message) != text:
        raise AssertionError("text format differs")
    if name in CASES:
        CASES[name].check(message)


def check(folder: Path) -> None:
    manifest = json.loads((folder / "manifest.json").read_text())
    results = {}
    for name, full_name in sorted(manifest.items()):
        try:
            _check_one(folder, name, full_name)
            results[name] = "ok"
        except Exception:  # report every case, not just the first failure
            results[name] = traceback.format_exc(limit=3)
    (folder / "results.json").write_text(json.dumps(results, indent=1, sort_keys=True))


def main(argv: list) -> None:
    command, folder = argv[0], Path(argv[1])
    if command == "build":
        build(folder, with_cases="--no-cases" not in argv[2:])
    elif command == "check":
        check(folder)
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
