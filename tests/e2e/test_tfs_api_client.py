"""PredictionService driven by tensorflow-serving-api's own stubs (in the oracle's tf221 venv).

An existing TF Serving client must work unchanged: the script below uses only
``tensorflow_serving.apis`` and ``tf.make_tensor_proto`` / ``tf.make_ndarray``, talks to our
``model_server`` over loopback, and prints what it got as JSON; the test checks values, codes and
texts. Nothing is skipped: a missing oracle venv or export fails with how to build it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.oracle import oracle_dir

REPO = Path(__file__).resolve().parents[2]

CLIENT = textwrap.dedent(
    r"""
    import json, sys
    import grpc
    import numpy as np
    import tensorflow as tf
    from tensorflow_serving.apis import (classification_pb2, get_model_metadata_pb2, inference_pb2,
                                         predict_pb2, prediction_service_pb2_grpc, regression_pb2)

    address, flavour = sys.argv[1], sys.argv[2]
    limits = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    stub = prediction_service_pb2_grpc.PredictionServiceStub(grpc.insecure_channel(address, options=limits))
    out = {}

    def record(name, fn):
        try:
            out[name] = {"ok": True, "value": fn()}
        except grpc.RpcError as e:
            out[name] = {"ok": False, "code": e.code().name, "details": e.details()}

    def spec(response):
        return [response.model_spec.name, response.model_spec.signature_name, response.model_spec.version.value]

    def predict(value, signature="", alias="x", output_filter=(), model="default"):
        request = predict_pb2.PredictRequest()
        request.model_spec.name = model
        request.model_spec.signature_name = signature
        request.inputs[alias].CopyFrom(value)
        request.output_filter.extend(output_filter)
        response = stub.Predict(request, 30)
        return {"spec": spec(response),
                "outputs": {k: tf.make_ndarray(v).tolist() for k, v in response.outputs.items()},
                "float_val": {k: list(v.float_val) for k, v in response.outputs.items()},
                "dtypes": {k: v.dtype for k, v in response.outputs.items()}}

    def examples(request, *xs):
        for x in xs:
            request.input.example_list.examples.add().features.feature["x"].float_list.value.extend([x])
        return request

    def classify():
        request = classification_pb2.ClassificationRequest()
        request.model_spec.name = "default"
        request.model_spec.signature_name = "classify_x_to_y"
        response = stub.Classify(examples(request, 2.0), 30)
        return {"spec": spec(response),
                "scores": [[c.score for c in cl.classes] for cl in response.result.classifications]}

    def regress():
        request = regression_pb2.RegressionRequest()
        request.model_spec.name = "default"
        request.model_spec.signature_name = "regress_x_to_y"
        response = stub.Regress(examples(request, 2.0, 4.0), 30)
        return {"spec": spec(response), "values": [r.value for r in response.result.regressions]}

    def multi():
        request = inference_pb2.MultiInferenceRequest()
        request.tasks.add().model_spec.name = "default"
        request.tasks[0].model_spec.signature_name = "regress_x_to_y"
        request.tasks[0].method_name = "tensorflow/serving/regress"
        request.tasks.add().model_spec.name = "default"
        request.tasks[1].model_spec.signature_name = "classify_x_to_y"
        request.tasks[1].method_name = "tensorflow/serving/classify"
        response = stub.MultiInference(examples(request, 2.0), 30)
        return {"regression": response.results[0].regression_result.regressions[0].value,
                "score": response.results[1].classification_result.classifications[0].classes[0].score,
                "specs": [[r.model_spec.name, r.model_spec.signature_name, r.model_spec.version.value]
                          for r in response.results]}

    def metadata():
        request = get_model_metadata_pb2.GetModelMetadataRequest()
        request.model_spec.name = "default"
        request.metadata_field.append("signature_def")
        response = stub.GetModelMetadata(request, 30)
        signature_def_map = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(signature_def_map)
        return {"spec": [response.model_spec.name, response.model_spec.version.value],
                "signatures": sorted(signature_def_map.signature_def),
                "serving_default_inputs": sorted(signature_def_map.signature_def["serving_default"].inputs)}

    one = [1, 1] if flavour == "tf1" else [1]  # x is [-1, 1] in TF1 half_plus_two, [-1] in TF2's
    record("predict", lambda: predict(tf.make_tensor_proto([2.0], shape=one), output_filter=["y"]))
    batch = np.float32([[1.0], [2.0], [5.0]]) if flavour == "tf1" else np.float32([1.0, 2.0, 5.0])
    record("predict_batch", lambda: predict(tf.make_tensor_proto(batch)))
    big = np.ones([3000000, 1] if flavour == "tf1" else [3000000], np.float32)  # 12 MB each way: over grpc's 4 MiB
    record("predict_big", lambda: predict(tf.make_tensor_proto(big))["spec"])
    record("metadata", metadata)
    record("missing_signature", lambda: predict(tf.make_tensor_proto([2.0], shape=one), signature="nope"))
    record("wrong_dtype", lambda: predict(tf.make_tensor_proto([2], dtype=tf.int32, shape=one)))
    record("unknown_model", lambda: predict(tf.make_tensor_proto([2.0], shape=one), model="nope"))
    if flavour == "tf1":
        record("classify", classify)
        record("regress", regress)
        record("multi", multi)
    print(json.dumps(out))
    """
)


def oracle_python() -> Path:
    python = oracle_dir() / "tf221" / "bin" / "python"
    if not python.exists():
        pytest.fail(f"no oracle venv at {python}: run `python -m tests.oracle build`")
    return python


def run_client(server, flavour: str) -> dict:
    result = subprocess.run(
        [str(oracle_python()), "-c", CLIENT, server.address, flavour],
        capture_output=True,
        text=True,
        timeout=300,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def start(model_server, tmp_path: Path, name: str):
    source = REPO / "models" / name
    versions = [p for p in source.iterdir() if p.is_dir() and p.name.isdigit()]
    if not versions:
        pytest.fail(f"models/{name} has no version directory: run `python -m tests.oracle models`")
    for version in versions:
        shutil.copytree(version, tmp_path / "base" / version.name)
    return model_server("--model_name=default", f"--model_base_path={tmp_path / 'base'}")


def check_common(out: dict, version: int) -> None:
    assert out["predict"]["ok"], out["predict"]
    assert out["predict"]["value"]["float_val"] == {"y": [3.0]}
    assert out["predict"]["value"]["outputs"] in ({"y": [3.0]}, {"y": [[3.0]]})
    assert out["predict"]["value"]["dtypes"] == {"y": 1}
    assert out["predict"]["value"]["spec"] == ["default", "serving_default", version]
    assert out["predict_big"] == {"ok": True, "value": ["default", "serving_default", version]}
    assert out["missing_signature"] == {
        "ok": False,
        "code": "FAILED_PRECONDITION",
        "details": 'Serving signature key "nope" not found.',
    }
    assert out["wrong_dtype"] == {
        "ok": False,
        "code": "INVALID_ARGUMENT",
        "details": "Expects arg[0] to be float but int32 is provided",
    }
    assert out["unknown_model"] == {
        "ok": False,
        "code": "NOT_FOUND",
        "details": "Servable not found for request: Latest(nope)",
    }
    metadata = out["metadata"]["value"]
    assert metadata["spec"] == ["default", version]
    assert metadata["serving_default_inputs"] == ["x"]


def test_tensorflow_serving_api_client_against_tf1_half_plus_two(model_server, tmp_path):
    server = start(model_server, tmp_path, "half_plus_two")
    out = run_client(server, "tf1")
    check_common(out, 123)
    assert out["predict_batch"]["value"]["outputs"] == {"y": [[2.5], [3.0], [4.5]]}
    assert {"serving_default", "classify_x_to_y", "regress_x_to_y"} <= set(
        out["metadata"]["value"]["signatures"]
    )
    assert out["classify"]["value"] == {"spec": ["default", "classify_x_to_y", 123], "scores": [[3.0]]}
    assert out["regress"]["value"] == {"spec": ["default", "regress_x_to_y", 123], "values": [3.0, 4.0]}
    assert out["multi"]["value"] == {
        "regression": 3.0,
        "score": 3.0,
        "specs": [["default", "regress_x_to_y", 123], ["default", "classify_x_to_y", 123]],
    }
    assert server.stop() == 0


def test_tensorflow_serving_api_client_against_tf2_half_plus_two(model_server, tmp_path):
    server = start(model_server, tmp_path, "half_plus_two_tf2")
    out = run_client(server, "tf2")
    assert out["predict_batch"]["value"]["outputs"] == {"y": [2.5, 3.0, 4.5]}
    check_common(out, 1)
    assert {"serving_default", "x2_to_y3"} <= set(out["metadata"]["value"]["signatures"])
    assert server.stop() == 0
