"""The oracle corpus itself: every model built and current, every file present and parseable.

Runs in the main venv, without TensorFlow: tensors parse with our own ``apis`` TensorProto and
SavedModels with our own ``apis`` SavedModel. A missing cache fails with the command to run.
"""

from __future__ import annotations

import pytest
from google.protobuf import text_format

from apis.tensorflow.core.framework import tensor_pb2, types_pb2
from apis.tensorflow.core.protobuf import saved_model_pb2
from tests.oracle import catalog, corpus

MIN_MODELS = 15
MANIFEST_KEYS = {
    "name",
    "family",
    "tf_version",
    "builder_hash",
    "export_dir",
    "meta_graphs",
    "cases",
    "variables",
}
CASE_KEYS = {"tags", "signature", "method_name", "inputs", "outputs", "rtol", "atol"}
ITEMSIZE = {
    "DT_FLOAT": 4,
    "DT_DOUBLE": 8,
    "DT_INT32": 4,
    "DT_UINT8": 1,
    "DT_INT16": 2,
    "DT_INT8": 1,
    "DT_COMPLEX64": 8,
    "DT_INT64": 8,
    "DT_BOOL": 1,
    "DT_BFLOAT16": 2,
    "DT_UINT16": 2,
    "DT_COMPLEX128": 16,
    "DT_HALF": 2,
    "DT_UINT32": 4,
    "DT_UINT64": 8,
}
ENTRIES = catalog.discover()


def test_corpus_has_enough_models():
    built = corpus.built_names()
    assert len(built) >= MIN_MODELS, f"{len(built)} models built: {corpus.BUILD_HINT}"
    assert len(ENTRIES) >= MIN_MODELS


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_model(entry: catalog.Entry):
    manifest = corpus.check_current(entry)
    assert set(manifest) - {"dir", "export_path"} == MANIFEST_KEYS
    assert (manifest["name"], manifest["family"]) == (entry.name, entry.family)
    meta_graphs = read_saved_model(manifest["export_path"]).meta_graphs
    assert manifest["meta_graphs"] == [list(mg.meta_info_def.tags) for mg in meta_graphs]
    assert manifest["cases"], "every model has cases"
    for case in manifest["cases"]:
        check_case(manifest, meta_graphs, case)
    for name, path in manifest["variables"].items():
        read_tensor(manifest, path, f"variable {name}")


def read_saved_model(export_path) -> saved_model_pb2.SavedModel:
    binary, text = export_path / "saved_model.pb", export_path / "saved_model.pbtxt"
    if binary.is_file():
        return saved_model_pb2.SavedModel.FromString(binary.read_bytes())
    assert text.is_file(), f"no saved_model.pb(txt) in {export_path}: {corpus.BUILD_HINT}"
    return text_format.Parse(text.read_text(), saved_model_pb2.SavedModel())


def check_case(manifest: dict, meta_graphs, case: dict) -> None:
    assert set(case) == CASE_KEYS
    (meta_graph,) = [mg for mg in meta_graphs if set(mg.meta_info_def.tags) == set(case["tags"])]
    signature = meta_graph.signature_def[case["signature"]]
    assert case["method_name"] == signature.method_name
    assert set(case["inputs"]) == set(signature.inputs)
    assert set(case["outputs"]) == set(signature.outputs)
    assert case["rtol"] >= 0 and case["atol"] >= 0
    where = f"{case['signature']} {case['tags']}"
    for kind, infos in (("inputs", signature.inputs), ("outputs", signature.outputs)):
        for key, path in case[kind].items():
            tensor = read_tensor(manifest, path, f"{where} {kind}[{key}]")
            assert tensor.dtype == infos[key].dtype, f"{manifest['name']} {where} {key}"


def read_tensor(manifest: dict, relative: str, what: str) -> tensor_pb2.TensorProto:
    path = manifest["dir"] / relative
    assert path.is_file(), f"{manifest['name']}: {what}: {path} missing: {corpus.BUILD_HINT}"
    tensor = tensor_pb2.TensorProto.FromString(path.read_bytes())
    dtype = types_pb2.DataType.Name(tensor.dtype)
    assert tensor.dtype != types_pb2.DT_INVALID, f"{path}: no dtype"
    count = 1
    for dim in tensor.tensor_shape.dim:
        count *= dim.size
    if tensor.tensor_content:
        assert len(tensor.tensor_content) == count * ITEMSIZE[dtype], f"{path}: {dtype} {count}"
    elif dtype == "DT_STRING":
        assert len(tensor.string_val) in (count, 1 if count else 0), f"{path}: {count} strings"
    return tensor
