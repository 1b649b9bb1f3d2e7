"""Our generated modules are wire-identical to TensorFlow's and TF Serving's.

Two kinds of evidence, both taken from TensorFlow's own generated modules running in
the oracle venvs (see `oracle_env`); the two module sets register the same full names,
so they never share a process and exchange files instead:

- descriptors: every message, enum and service we declare has TF 2.21's numbers, types,
  labels, oneofs, ... and nothing TF declares in the files we cover is missing;
- bytes: messages built by TF (including real SavedModels exported by TF 2.21 and 2.15)
  parse and re-serialize byte for byte with our modules, and ours with TF's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import descriptor_pool, message_factory, text_format

from tests.apis import descriptors
from tests.apis.oracle_env import oracle_python, run_script
from tests.apis.oracle_scripts.wire_cases import CASES, Protos, serialize

OURS = Protos("apis.")

# tensorflow-serving-api does not ship these TF Serving files, so no oracle can vouch for
# them; they were checked by hand against TF Serving's sources.
NOT_IN_ORACLE = {
    "tensorflow_serving/config/monitoring_config.proto",
    "tensorflow_serving/config/ssl_config.proto",
    "tensorflow_serving/servables/tensorflow/session_bundle_config.proto",
}

# Not TensorFlow's: the Open Inference Protocol, held against KServe's published proto by
# tests/apis/test_open_inference_proto.py.
OTHER_ORACLES = {"inference/grpc_predict_v2.proto"}

METHOD_PATHS = {
    "PredictionServiceStub": (
        "/tensorflow.serving.PredictionService/Classify",
        "/tensorflow.serving.PredictionService/Regress",
        "/tensorflow.serving.PredictionService/Predict",
        "/tensorflow.serving.PredictionService/MultiInference",
        "/tensorflow.serving.PredictionService/GetModelMetadata",
    ),
    "ModelServiceStub": (
        "/tensorflow.serving.ModelService/GetModelStatus",
        "/tensorflow.serving.ModelService/HandleReloadConfigRequest",
    ),
    "SessionServiceStub": ("/tensorflow.serving.SessionService/SessionRun",),
}
STUB_MODULES = {
    "PredictionServiceStub": "apis.tensorflow_serving.apis.prediction_service_pb2_grpc",
    "ModelServiceStub": "apis.tensorflow_serving.apis.model_service_pb2_grpc",
    "SessionServiceStub": "apis.tensorflow_serving.apis.session_service_pb2_grpc",
}

# SavedModels exported by each TF version (wire_oracle.build); TF 2.15's v1 Builder
# writes no fingerprint.
EXPORTS = [
    ("tf221", "exported_tf1"),
    ("tf221", "exported_tf2"),
    ("tf221", "exported_tf2_fingerprint"),
    ("tf215", "exported_tf1"),
    ("tf215", "exported_tf2"),
    ("tf215", "exported_tf2_fingerprint"),
]


@pytest.fixture(scope="module")
def our_files():
    return descriptors.our_files()


def _dump(venv: str, tmp_path_factory) -> list:
    out = tmp_path_factory.mktemp("descriptors") / f"{venv}.binpb"
    run_script(venv, "dump_descriptors", str(out))
    return descriptors.read_descriptor_set(out)


@pytest.fixture(scope="module")
def tf221_files(tmp_path_factory):
    return _dump("tf221", tmp_path_factory)


@pytest.fixture(scope="module")
def tf215_files(tmp_path_factory):
    return _dump("tf215", tmp_path_factory)


def _message_class(full_name: str):
    descriptors.our_files()  # imports every generated module into the default pool
    return message_factory.GetMessageClass(descriptor_pool.Default().FindMessageTypeByName(full_name))


# --- descriptors ---------------------------------------------------------------------


def test_declarations_match_tf221(our_files, tf221_files):
    ours, theirs = descriptors.declarations(our_files), descriptors.declarations(tf221_files)
    problems = []
    for name, decl in sorted(ours.items()):
        tf_decl = theirs.get(name)
        if tf_decl is None:
            if decl.file not in NOT_IN_ORACLE | OTHER_ORACLES:
                problems.append(f"{name}: not declared by TF 2.21 (invented?)")
            continue
        if (decl.kind, decl.file) != (tf_decl.kind, tf_decl.file):
            problems.append(
                f"{name}: ours is {decl.kind} in {decl.file}, TF's {tf_decl.kind} in {tf_decl.file}"
            )
        problems += [f"{name}: {d}" for d in descriptors.differences(decl.summary, tf_decl.summary)]
    assert not problems, "\n".join(problems)


def test_no_tf_declaration_omitted(our_files, tf221_files):
    covered = {f.name for f in our_files}
    ours = descriptors.declarations(our_files)
    omitted = [
        f"{name} ({decl.file})"
        for name, decl in sorted(descriptors.declarations(tf221_files).items())
        if decl.file in covered and name not in ours
    ]
    uncovered = [
        f.name for f in tf221_files if f.name not in covered and not f.name.startswith("google/protobuf/")
    ]
    assert not omitted, "TF declarations missing from our files:\n" + "\n".join(omitted)
    assert not uncovered, "TF files imported by the covered APIs but absent here:\n" + "\n".join(uncovered)


def test_files_match_tf221(our_files, tf221_files):
    theirs = {f.name: f for f in tf221_files}
    assert {f.name for f in our_files} - theirs.keys() == NOT_IN_ORACLE | OTHER_ORACLES
    problems = [
        f"{f.name}: {d}"
        for f in our_files
        if f.name in theirs
        for d in descriptors.differences(
            descriptors.file_summary(f), descriptors.file_summary(theirs[f.name])
        )
    ]
    assert not problems, "\n".join(problems)


def test_tf215_fields_keep_their_meaning(our_files, tf215_files):
    """SavedModels written by TF 2.15 parse with the same meaning under our 2.21 schema."""
    ours = descriptors.declarations(our_files)
    problems = []
    for name, old in sorted(descriptors.declarations(tf215_files).items()):
        if old.kind != "message" or name not in ours:
            continue
        now_fields = dict(dict(ours[name].summary)["fields"])
        for field, summary in dict(old.summary)["fields"]:
            old_wire = {k: v for k, v in summary if k in ("number", "type", "label", "type_name")}
            now = now_fields.get(field)
            now_wire = now and {k: v for k, v in now if k in old_wire}
            if now_wire != old_wire:
                problems.append(f"{name}.{field}: 2.15 {old_wire} vs ours {now_wire}")
    assert not problems, "\n".join(problems)


class _RecordingChannel:
    def __init__(self) -> None:
        self.paths: list[str] = []

    def _record(self, path, *args, **kwargs):
        self.paths.append(path)

    unary_unary = unary_stream = stream_unary = stream_stream = _record


@pytest.mark.parametrize("stub", sorted(METHOD_PATHS))
def test_stub_method_paths(stub):
    import importlib

    channel = _RecordingChannel()
    getattr(importlib.import_module(STUB_MODULES[stub]), stub)(channel)
    assert tuple(channel.paths) == METHOD_PATHS[stub]


# --- bytes ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exchange(tmp_path_factory) -> Path:
    """TF's bytes under tf221/ and tf215/; ours under ours/, with TF's verdicts in results.json."""
    root = tmp_path_factory.mktemp("wire")
    run_script("tf221", "wire_oracle", "build", str(root / "tf221"))
    run_script("tf215", "wire_oracle", "build", str(root / "tf215"), "--no-cases")
    ours = root / "ours"
    ours.mkdir()
    manifest = {}

    def write(name: str, message) -> None:
        (ours / f"{name}.binpb").write_bytes(serialize(message))
        (ours / f"{name}.txtpb").write_text(text_format.MessageToString(message))
        manifest[name] = message.DESCRIPTOR.full_name

    for name, case in CASES.items():
        write(name, case.build(OURS))
    for venv, name in EXPORTS:
        full_name = json.loads((root / venv / "manifest.json").read_text())[name]
        data = (root / venv / f"{name}.binpb").read_bytes()
        write(f"{venv}_{name}", _message_class(full_name).FromString(data))
    (ours / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
    run_script("tf221", "wire_oracle", "check", str(ours))
    return root


@pytest.mark.parametrize("name", sorted(CASES))
def test_tf_message_reserializes_identically(exchange, name):
    folder = exchange / "tf221"
    data = (folder / f"{name}.binpb").read_bytes()
    built = CASES[name].build(OURS)
    parsed = type(built).FromString(data)
    assert serialize(parsed) == data, "our re-serialization differs from TF's bytes"
    assert serialize(built) == data, "the same construction serializes differently from TF's"
    assert text_format.MessageToString(parsed) == (folder / f"{name}.txtpb").read_text()
    CASES[name].check(parsed)


@pytest.mark.parametrize(("venv", "name"), EXPORTS)
def test_exported_saved_model_reserializes_identically(exchange, venv, name):
    folder = exchange / venv
    full_name = json.loads((folder / "manifest.json").read_text())[name]
    data = (folder / f"{name}.binpb").read_bytes()
    parsed = _message_class(full_name).FromString(data)
    assert not _has_unknown_fields(parsed), f"{venv} wrote fields our schema does not know"
    assert serialize(parsed) == data
    assert text_format.MessageToString(parsed) == (folder / f"{name}.txtpb").read_text()


@pytest.mark.parametrize("name", sorted(CASES) + [f"{venv}_{name}" for venv, name in EXPORTS])
def test_our_message_reserializes_identically_in_tf(exchange, name):
    results = json.loads((exchange / "ours" / "results.json").read_text())
    assert results.get(name) == "ok", f"TF 2.21 rejected our {name}:\n{results.get(name)}"


def _has_unknown_fields(message) -> bool:
    from google.protobuf import unknown_fields

    if len(unknown_fields.UnknownFieldSet(message)):
        return True
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            items = value.values() if field.message_type.fields_by_name["value"].message_type else []
        elif field.is_repeated:
            items = value
        else:
            items = [value]
        if any(_has_unknown_fields(item) for item in items):
            return True
    return False


def test_missing_oracle_venv_fails_with_build_hint(monkeypatch, tmp_path):
    monkeypatch.setenv("SMS_ORACLE_DIR", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match="python -m tests.oracle build"):
        oracle_python("tf221")
