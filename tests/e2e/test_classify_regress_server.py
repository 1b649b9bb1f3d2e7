"""Classify, Regress and MultiInference end to end: ``model_server`` as a process, our stubs.

TF Serving's integration scenarios (tensorflow_model_server_test.py: _TestClassify, _TestRegress,
_TestMultiInference) on the TF1 half_plus_two export, example_list_with_context, TF Serving's
errors, and every classify/regress signature of the oracle corpus with results matching
TensorFlow's outputs. Nothing is skipped.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import grpc
import numpy as np
import pytest

from apis.tensorflow.core.example import example_pb2
from apis.tensorflow.core.framework import tensor_pb2
from apis.tensorflow_serving.apis import (
    classification_pb2,
    inference_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)
from serving.inference import tensor_codec
from tests.e2e.test_predict_server import start_serving
from tests.oracle import corpus
from tests.oracle.catalog import discover

REPO = Path(__file__).resolve().parents[2]
CLASSIFY, REGRESS = "tensorflow/serving/classify", "tensorflow/serving/regress"
INVALID = grpc.StatusCode.INVALID_ARGUMENT


@pytest.fixture
def half_plus_two(model_server, tmp_path):
    source = REPO / "models" / "half_plus_two"
    versions = [p for p in source.iterdir() if p.is_dir() and p.name.isdigit()]
    if not versions:
        pytest.fail("models/half_plus_two has no version directory: run `python -m tests.oracle models`")
    for version in versions:
        shutil.copytree(version, tmp_path / "base" / version.name)
    server = start_serving(model_server, "--model_name=default", f"--model_base_path={tmp_path / 'base'}")
    yield prediction_service_pb2_grpc.PredictionServiceStub(server.channel())
    assert server.stop() == 0


def example(**features) -> example_pb2.Example:
    ex = example_pb2.Example()
    for key, value in features.items():
        ex.features.feature[key].float_list.value.append(value)
    return ex


def request_of(cls, signature, *rows, context=None, model="default"):
    request = cls()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    if context is None:
        request.input.example_list.examples.extend(example(**row) for row in rows)
    else:
        request.input.example_list_with_context.context.CopyFrom(example(**context))
        request.input.example_list_with_context.examples.extend(example(**row) for row in rows)
    return request


def rpc_error(call, request):
    with pytest.raises(grpc.RpcError) as info:
        call(request, timeout=30)
    return info.value.code(), info.value.details()


def verify_model_spec(spec, name, signature, version):
    assert (spec.name, spec.signature_name, spec.version.value) == (name, signature, version)


def test_classify_like_tf_serving(half_plus_two):
    result = half_plus_two.Classify(
        request_of(classification_pb2.ClassificationRequest, "classify_x_to_y", {"x": 2.0}), timeout=30
    )
    assert len(result.result.classifications) == 1
    assert len(result.result.classifications[0].classes) == 1
    assert result.result.classifications[0].classes[0].score == 3.0
    verify_model_spec(result.model_spec, "default", "classify_x_to_y", 123)


def test_regress_like_tf_serving_with_batches_and_context(half_plus_two):
    result = half_plus_two.Regress(
        request_of(regression_pb2.RegressionRequest, "regress_x_to_y", {"x": 2.0}), timeout=30
    )
    assert [r.value for r in result.result.regressions] == [3.0]
    verify_model_spec(result.model_spec, "default", "regress_x_to_y", 123)
    rows = [{"x": 0.0}, {"x": 2.0}, {"x": 4.0, "x2": 1.0}]
    result = half_plus_two.Regress(
        request_of(regression_pb2.RegressionRequest, "regress_x_to_y2", *rows), timeout=30
    )
    assert [r.value for r in result.result.regressions] == [3.0, 4.0, 5.0]
    # the context's features reach every example; an example's own value wins
    request = request_of(
        regression_pb2.RegressionRequest,
        "regress_x2_to_y3",
        {"x": 1.0},
        {"x": 1.0, "x2": 4.0},
        context={"x2": 2.0},
    )
    result = half_plus_two.Regress(request, timeout=30)
    assert [r.value for r in result.result.regressions] == [4.0, 5.0]


def test_multi_inference_like_tf_serving(half_plus_two):
    request = inference_pb2.MultiInferenceRequest()
    for signature, method in (("regress_x_to_y", REGRESS), ("classify_x_to_y", CLASSIFY)):
        task = request.tasks.add(method_name=method)
        task.model_spec.name = "default"
        task.model_spec.signature_name = signature
    request.input.example_list.examples.add().CopyFrom(example(x=2.0))
    result = half_plus_two.MultiInference(request, timeout=30)
    assert len(result.results) == 2
    assert result.results[0].regression_result.regressions[0].value == 3.0
    assert result.results[1].classification_result.classifications[0].classes[0].score == 3.0
    for inference, signature in zip(result.results, ("regress_x_to_y", "classify_x_to_y")):
        verify_model_spec(inference.model_spec, "default", signature, 123)


def test_classify_regress_multi_inference_errors(half_plus_two):
    stub = half_plus_two
    classify, regress = classification_pb2.ClassificationRequest, regression_pb2.RegressionRequest
    assert rpc_error(stub.Classify, request_of(classify, "nope", {"x": 1.0})) == (
        INVALID,
        "No signature was found with the name: nope",
    )
    assert rpc_error(stub.Regress, request_of(regress, "nope", {"x": 1.0})) == (
        INVALID,
        "No signature was found with the name: nope",
    )
    assert rpc_error(stub.Regress, request_of(regress, "regress_x_to_y")) == (INVALID, "Input is empty.")
    assert rpc_error(stub.Classify, request_of(classify, "classify_x_to_y", context={"x": 1.0})) == (
        INVALID,
        "Input is empty.",
    )
    code, text = rpc_error(stub.Classify, request_of(classify, "regress_x_to_y", {"x": 1.0}))
    assert code == INVALID and text.startswith(
        'Expected classification signature outputs to contain at least one of "classes" or "scores". '
        "Signature was: inputs {"
    )
    code, text = rpc_error(stub.Classify, request_of(classify, "serving_default", {"x": 1.0}))
    assert code == INVALID and text.startswith("No classification inputs found in SignatureDef: ")
    code, text = rpc_error(stub.Regress, request_of(regress, "classify_x_to_y", {"x": 1.0}))
    assert code == INVALID and text.startswith("No regression outputs found in SignatureDef: ")
    # a required feature is missing: the Session's ParseExample fails, the server carries on
    code, _ = rpc_error(stub.Regress, request_of(regress, "regress_x_to_y", {"x2": 1.0}))
    assert code == INVALID
    no_spec = request_of(classify, "classify_x_to_y", {"x": 1.0})
    no_spec.ClearField("model_spec")
    assert rpc_error(stub.Classify, no_spec) == (INVALID, "Missing ModelSpec")

    def multi(*tasks):
        request = inference_pb2.MultiInferenceRequest()
        for model, signature, method in tasks:
            task = request.tasks.add(method_name=method)
            task.model_spec.name = model
            task.model_spec.signature_name = signature
        request.input.example_list.examples.add().CopyFrom(example(x=2.0))
        return request

    cases = [
        (
            multi(("default", "regress_x_to_y", REGRESS), ("other", "classify_x_to_y", CLASSIFY)),
            (INVALID, "All ModelSpecs in a MultiInferenceRequest must access the same model name."),
        ),
        (
            multi(("default", "regress_x_to_y", REGRESS), ("default", "regress_x_to_y", REGRESS)),
            (INVALID, "Duplicate evaluation of signature: regress_x_to_y"),
        ),
        (
            multi(("default", "nope", REGRESS)),
            (INVALID, "Requested signature not found in model graph: nope"),
        ),
        (
            multi(("default", "serving_default", "tensorflow/serving/predict")),
            (grpc.StatusCode.UNIMPLEMENTED, "Unsupported signature method_name: tensorflow/serving/predict"),
        ),
        (
            multi(("nope", "regress_x_to_y", REGRESS)),
            (grpc.StatusCode.NOT_FOUND, "Servable not found for request: Latest(nope)"),
        ),
    ]
    for request, expected in cases:
        assert rpc_error(stub.MultiInference, request) == expected
    result = stub.Regress(request_of(regress, "regress_x_to_y", {"x": 2.0}), timeout=30)
    assert result.result.regressions[0].value == 3.0


# --------------------------------------------------------------------------------------------
# the oracle corpus: every classify/regress signature fed tf.Examples


def corpus_cases():
    """(model, case index) of every case whose signature is a Classify/Regress one."""
    out = []
    for entry in discover():
        if not corpus.manifest_path(entry.name).is_file():
            out.append((entry.name, None))  # reported as a failure by the test
            continue
        for index, case in enumerate(corpus.load_manifest(entry.name)["cases"]):
            if case["method_name"] in (CLASSIFY, REGRESS) and list(case["inputs"]) == ["inputs"]:
                out.append((entry.name, index))
    return out


@pytest.mark.parametrize("name, index", corpus_cases())
def test_classify_regress_match_tensorflow_on_oracle_corpus(model_server, tmp_path, name, index):
    data = corpus.load_manifest(name)  # fails with how to build the cache when it is missing
    assert index is not None
    root, case = data["dir"], data["cases"][index]
    base = tmp_path / "base"
    shutil.copytree(data["export_path"], base / "1", symlinks=True)
    server = start_serving(
        model_server,
        f"--model_name={name}",
        f"--model_base_path={base}",
        f"--saved_model_tags={','.join(case['tags'])}",
    )
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel())

    serialized = read(root / case["inputs"]["inputs"])
    cls = (
        classification_pb2.ClassificationRequest
        if case["method_name"] == CLASSIFY
        else regression_pb2.RegressionRequest
    )
    request = cls()
    request.model_spec.name = name
    request.model_spec.signature_name = case["signature"]
    add_examples(request, serialized)
    if case["method_name"] == CLASSIFY:
        check_classification(stub.Classify(request, timeout=120).result, root, case, len(serialized))
    else:
        check_regression(stub.Regress(request, timeout=120).result, root, case)
    assert server.stop() == 0


def read(path: Path) -> np.ndarray:
    return tensor_codec.decode(tensor_pb2.TensorProto.FromString(path.read_bytes()))


def add_examples(request, serialized: np.ndarray) -> None:
    for item in serialized.reshape(-1):
        request.input.example_list.examples.add().ParseFromString(item)


def check_classification(result, root: Path, case: dict, num_examples: int) -> None:
    expected = {alias: read(root / file) for alias, file in case["outputs"].items()}
    assert len(result.classifications) == num_examples
    if "scores" in expected:
        scores = np.array([[c.score for c in cl.classes] for cl in result.classifications], np.float32)
        np.testing.assert_allclose(scores, expected["scores"], rtol=case["rtol"], atol=case["atol"])
    if "classes" in expected:
        labels = [[c.label.encode() for c in cl.classes] for cl in result.classifications]
        assert labels == expected["classes"].tolist()


def check_regression(result, root: Path, case: dict) -> None:
    values = np.array([r.value for r in result.regressions], np.float32)
    expected = read(root / case["outputs"]["outputs"]).reshape(-1)
    np.testing.assert_allclose(values, expected, rtol=case["rtol"], atol=case["atol"])


def multi_inference_groups():
    """(model, [case indices]): Classify/Regress cases of distinct signatures on identical inputs,
    which one MultiInference request must answer exactly as the separate calls."""
    out = []
    by_model: dict[str, dict[tuple, dict[str, int]]] = {}
    for name, index in corpus_cases():
        if index is None:
            continue
        data = corpus.load_manifest(name)
        case = data["cases"][index]
        key = (tuple(case["tags"]), (data["dir"] / case["inputs"]["inputs"]).read_bytes())
        by_model.setdefault(name, {}).setdefault(key, {}).setdefault(case["signature"], index)
    for name, groups in by_model.items():
        for signatures in groups.values():
            if len(signatures) >= 2:
                out.append((name, sorted(signatures.values())))
                break
    return out


@pytest.mark.parametrize("name, indices", multi_inference_groups())
def test_multi_inference_matches_tensorflow_on_oracle_corpus(model_server, tmp_path, name, indices):
    data = corpus.load_manifest(name)
    root, cases = data["dir"], [data["cases"][i] for i in indices]
    shutil.copytree(data["export_path"], tmp_path / "base" / "1", symlinks=True)
    server = start_serving(
        model_server,
        f"--model_name={name}",
        f"--model_base_path={tmp_path / 'base'}",
        f"--saved_model_tags={','.join(cases[0]['tags'])}",
    )
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel())
    request = inference_pb2.MultiInferenceRequest()
    for case in cases:
        task = request.tasks.add(method_name=case["method_name"])
        task.model_spec.name = name
        task.model_spec.signature_name = case["signature"]
    serialized = read(root / cases[0]["inputs"]["inputs"])
    add_examples(request, serialized)
    response = stub.MultiInference(request, timeout=120)
    assert len(response.results) == len(cases)
    for result, case in zip(response.results, cases):
        assert (result.model_spec.name, result.model_spec.signature_name) == (name, case["signature"])
        if case["method_name"] == CLASSIFY:
            check_classification(result.classification_result, root, case, len(serialized))
        else:
            check_regression(result.regression_result, root, case)
    assert server.stop() == 0
