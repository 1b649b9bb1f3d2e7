"""TF Serving wire cases: requests, responses, logs and configs of the model server.

Builders receive a `pb` loader (see `wire_cases.Protos`), so the same code builds the
message from TensorFlow's modules and from ours.
"""

from __future__ import annotations

import struct

from google.protobuf import text_format

from .tf_cases import Case, case, example, signature_defs, typed_tensors


def predict_request(pb):
    predict = pb("tensorflow_serving/apis/predict")
    request = predict.PredictRequest(output_filter=["out_b", "out_a"])
    request.model_spec.name = "half_plus_two"
    request.model_spec.version.value = 123
    request.model_spec.signature_name = "serving_default"
    for key, tensor in typed_tensors(pb).items():
        request.inputs[key].CopyFrom(tensor)
    request.inputs["named_dims"].tensor_shape.dim.add(size=2, name="batch")
    request.client_id = b"client-1"
    return request


def check_predict_request(request) -> None:
    assert request.model_spec.version.value == 123
    assert request.model_spec.WhichOneof("version_choice") == "version"
    assert list(request.inputs["int8"].int_val) == [-128, 127]
    assert list(request.inputs["uint64"].uint64_val) == [1, 2**64 - 1]
    assert list(request.inputs["half"].half_val) == [0x3C00, 0xBC00, 0x7E00]
    assert request.inputs["content"].tensor_content == struct.pack("<2f", 1.0, -1.5)
    assert [d.size for d in request.inputs["unknown_dims"].tensor_shape.dim] == [-1, 3, -1]
    assert request.inputs["unknown_rank"].tensor_shape.unknown_rank
    assert request.inputs["resource"].resource_handle_val[0].hash_code == 2**64 - 1
    assert request.inputs["variant"].variant_val[0].tensors[0].int_val[0] == 7
    assert request.inputs["float8"].float8_val == b"\x38\xb8"
    assert request.HasField("client_id")


def predict_response(pb):
    predict = pb("tensorflow_serving/apis/predict")
    response = predict.PredictResponse()
    response.model_spec.name = "m"
    response.model_spec.version_label = "stable"
    response.model_spec.signature_name = "serving_default"
    tensors = typed_tensors(pb)
    for key in ("float", "string", "int64", "content"):
        response.outputs[key].CopyFrom(tensors[key])
    return response


def check_predict_response(response) -> None:
    assert response.model_spec.version_label == "stable"
    assert sorted(response.outputs) == ["content", "float", "int64", "string"]
    assert list(response.outputs["string"].string_val) == [b"caf\xc3\xa9", b"\x00\xff"]


def _fill_input(pb, input_message, with_context: bool) -> None:
    if with_context:
        examples = input_message.example_list_with_context
        examples.context.CopyFrom(example(pb, 99))
    else:
        examples = input_message.example_list
    for i in range(3):
        examples.examples.append(example(pb, i))


def _check_input(input_message, with_context: bool) -> None:
    kind = "example_list_with_context" if with_context else "example_list"
    assert input_message.WhichOneof("kind") == kind
    examples = getattr(input_message, kind).examples
    assert len(examples) == 3
    assert list(examples[2].features.feature["int64"].int64_list.value) == [2, -(2**63)]
    assert examples[1].features.feature["float"].float_list.value[0] == 0.5
    if with_context:
        context = input_message.example_list_with_context.context
        assert context.features.feature["bytes"].bytes_list.value[0] == b"a99"


def classification_request(with_context: bool):
    def build(pb):
        request = pb("tensorflow_serving/apis/classification").ClassificationRequest()
        request.model_spec.name = "classifier"
        request.model_spec.signature_name = "classify_x_to_y"
        _fill_input(pb, request.input, with_context)
        return request

    def check(request) -> None:
        assert request.model_spec.name == "classifier"
        _check_input(request.input, with_context)

    return Case(build, check)


def regression_request(with_context: bool):
    def build(pb):
        request = pb("tensorflow_serving/apis/regression").RegressionRequest()
        request.model_spec.name = "regressor"
        request.model_spec.version.value = 7
        _fill_input(pb, request.input, with_context)
        return request

    def check(request) -> None:
        assert request.model_spec.version.value == 7
        _check_input(request.input, with_context)

    return Case(build, check)


def _classification_result(pb, result) -> None:
    for i in range(2):
        classifications = result.classifications.add()
        classifications.classes.add(label="cat", score=0.75 - i * 0.5)
        classifications.classes.add(label="", score=0.25)


def classification_response(pb):
    response = pb("tensorflow_serving/apis/classification").ClassificationResponse()
    response.model_spec.name = "classifier"
    response.model_spec.version.value = 1
    _classification_result(pb, response.result)
    return response


def check_classification_response(response) -> None:
    assert len(response.result.classifications) == 2
    assert response.result.classifications[1].classes[0].score == 0.25
    assert response.result.classifications[0].classes[0].label == "cat"


def regression_response(pb):
    response = pb("tensorflow_serving/apis/regression").RegressionResponse()
    response.model_spec.name = "regressor"
    response.result.regressions.add(value=1.5)
    response.result.regressions.add(value=-0.0)
    return response


def check_regression_response(response) -> None:
    assert [r.value for r in response.result.regressions] == [1.5, 0.0]


def multi_inference_request(pb):
    request = pb("tensorflow_serving/apis/inference").MultiInferenceRequest()
    for method, signature in (("tensorflow/serving/classify", "c"), ("tensorflow/serving/regress", "r")):
        task = request.tasks.add(method_name=method)
        task.model_spec.name = "multi"
        task.model_spec.signature_name = signature
    _fill_input(pb, request.input, with_context=True)
    return request


def check_multi_inference_request(request) -> None:
    assert [t.method_name for t in request.tasks] == [
        "tensorflow/serving/classify",
        "tensorflow/serving/regress",
    ]
    _check_input(request.input, with_context=True)


def multi_inference_response(pb):
    response = pb("tensorflow_serving/apis/inference").MultiInferenceResponse()
    classify = response.results.add()
    classify.model_spec.name = "multi"
    _classification_result(pb, classify.classification_result)
    regress = response.results.add()
    regress.model_spec.name = "multi"
    regress.regression_result.regressions.add(value=3.0)
    return response


def check_multi_inference_response(response) -> None:
    assert response.results[0].WhichOneof("result") == "classification_result"
    assert response.results[1].regression_result.regressions[0].value == 3.0


def get_model_metadata_response(pb):
    metadata = pb("tensorflow_serving/apis/get_model_metadata")
    response = metadata.GetModelMetadataResponse()
    response.model_spec.name = "m"
    response.model_spec.version.value = 3
    response.metadata["signature_def"].Pack(signature_defs(pb), deterministic=True)
    return response


def check_get_model_metadata_response(response) -> None:
    packed = response.metadata["signature_def"]
    assert packed.type_url == "type.googleapis.com/tensorflow.serving.SignatureDefMap"
    assert response.model_spec.version.value == 3


def get_model_metadata_request(pb):
    request = pb("tensorflow_serving/apis/get_model_metadata").GetModelMetadataRequest()
    request.model_spec.name = "m"
    request.metadata_field.append("signature_def")
    return request


def check_get_model_metadata_request(request) -> None:
    assert list(request.metadata_field) == ["signature_def"]


def get_model_status_response(pb):
    status = pb("tensorflow_serving/apis/get_model_status")
    response = status.GetModelStatusResponse()
    for version, state in ((1, "END"), (2, "AVAILABLE"), (3, "LOADING")):
        entry = response.model_version_status.add(version=version)
        entry.state = status.ModelVersionStatus.State.Value(state)
    failed = response.model_version_status[0].status
    failed.error_code = 3  # INVALID_ARGUMENT
    failed.error_message = "Could not load version 1"
    response.model_version_status[1].status.SetInParent()
    return response


def check_get_model_status_response(response) -> None:
    statuses = response.model_version_status
    assert [s.version for s in statuses] == [1, 2, 3]
    assert [s.state for s in statuses] == [50, 30, 20]
    assert statuses[0].status.error_code == 3
    assert statuses[1].HasField("status") and not statuses[2].HasField("status")


MODEL_SERVER_CONFIG_TEXT = """
model_config_list {
  config {
    name: "half_plus_two"
    base_path: "/models/half_plus_two"
    model_platform: "tensorflow"
    model_version_policy { specific { versions: 1 versions: 2 } }
    version_labels { key: "stable" value: 1 }
    version_labels { key: "canary" value: 2 }
  }
  config {
    name: "latest3"
    base_path: "s3://bucket/latest3"
    model_platform: "tensorflow"
    model_version_policy { latest { num_versions: 3 } }
  }
  config {
    name: "everything"
    base_path: "/models/everything"
    model_platform: "tensorflow"
    model_version_policy { all {} }
    logging_config {
      log_collector_config { type: "file" filename_prefix: "/tmp/log" }
      sampling_config { sampling_rate: 0.25 }
    }
  }
}
"""


def model_server_config(pb):
    config = pb("tensorflow_serving/config/model_server_config").ModelServerConfig()
    return text_format.Parse(MODEL_SERVER_CONFIG_TEXT, config)


def check_model_server_config(config) -> None:
    models = config.model_config_list.config
    assert [m.name for m in models] == ["half_plus_two", "latest3", "everything"]
    assert list(models[0].model_version_policy.specific.versions) == [1, 2]
    assert dict(models[0].version_labels) == {"stable": 1, "canary": 2}
    assert models[1].model_version_policy.latest.num_versions == 3
    assert models[2].model_version_policy.WhichOneof("policy_choice") == "all"
    assert models[2].logging_config.sampling_config.sampling_rate == 0.25


def reload_config_request(pb):
    request = pb("tensorflow_serving/apis/model_management").ReloadConfigRequest()
    request.config.CopyFrom(model_server_config(pb))
    request.metric_names.append("/tensorflow/serving/model_count")
    return request


def check_reload_config_request(request) -> None:
    check_model_server_config(request.config)
    assert list(request.metric_names) == ["/tensorflow/serving/model_count"]


def reload_config_response(pb):
    response = pb("tensorflow_serving/apis/model_management").ReloadConfigResponse()
    response.status.error_code = 0
    response.metric.add(name="a", int64_value_increase=2)
    response.metric.add(name="b")
    return response


def check_reload_config_response(response) -> None:
    assert response.HasField("status")
    assert response.metric[0].int64_value_increase == 2
    assert response.metric[1].WhichOneof("value_increase") is None


def prediction_log(pb):
    log = pb("tensorflow_serving/apis/prediction_log").PredictionLog()
    log.log_metadata.model_spec.name = "m"
    log.log_metadata.sampling_config.sampling_rate = 0.5
    log.log_metadata.saved_model_tags.append("serve")
    log.log_metadata.timestamp_secs = 1_700_000_000
    log.predict_log.request.CopyFrom(predict_request(pb))
    log.predict_log.response.CopyFrom(predict_response(pb))
    return log


def check_prediction_log(log) -> None:
    assert log.WhichOneof("log_type") == "predict_log"
    check_predict_request(log.predict_log.request)


def session_run_request(pb):
    request = pb("tensorflow_serving/apis/session_service").SessionRunRequest()
    request.model_spec.name = "m"
    feed = request.feed.add(name="x:0")
    feed.tensor.CopyFrom(typed_tensors(pb)["float"])
    request.fetch.extend(["y:0", "z:0"])
    request.target.append("init")
    request.options.timeout_in_ms = 1500
    request.options.trace_level = pb("tensorflow/core/protobuf/config").RunOptions.FULL_TRACE
    return request


def check_session_run_request(request) -> None:
    assert request.feed[0].name == "x:0"
    assert request.options.timeout_in_ms == 1500
    assert request.options.trace_level == 3


CASES: dict[str, Case] = {
    "predict_request": case(globals(), "predict_request"),
    "predict_response": case(globals(), "predict_response"),
    "classification_request": classification_request(with_context=False),
    "classification_request_with_context": classification_request(with_context=True),
    "classification_response": case(globals(), "classification_response"),
    "regression_request": regression_request(with_context=False),
    "regression_request_with_context": regression_request(with_context=True),
    "regression_response": case(globals(), "regression_response"),
    "multi_inference_request": case(globals(), "multi_inference_request"),
    "multi_inference_response": case(globals(), "multi_inference_response"),
    "get_model_metadata_request": case(globals(), "get_model_metadata_request"),
    "get_model_metadata_response": case(globals(), "get_model_metadata_response"),
    "get_model_status_response": case(globals(), "get_model_status_response"),
    "model_server_config": case(globals(), "model_server_config"),
    "reload_config_request": case(globals(), "reload_config_request"),
    "reload_config_response": case(globals(), "reload_config_response"),
    "prediction_log": case(globals(), "prediction_log"),
    "session_run_request": case(globals(), "session_run_request"),
}
