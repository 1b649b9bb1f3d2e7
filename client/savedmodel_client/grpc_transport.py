"""TF Serving's gRPC API (PredictionService, ModelService) under the high-level client's calls.

Channels lift gRPC's 4 MiB message limit (TF Serving's users meet it with every large batch) and
take TLS credentials, with a client certificate for servers that verify clients.
"""

from __future__ import annotations

import grpc
import numpy as np
from google.protobuf import json_format

from savedmodel_client.errors import ServingError
from savedmodel_client.tensor_util import make_ndarray, make_tensor_proto
from savedmodel_client.tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)
from savedmodel_client.xla.tsl.protobuf import error_codes_pb2

UNLIMITED = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
_TASK_METHODS = {"classify": "tensorflow/serving/classify", "regress": "tensorflow/serving/regress"}


def channel(address: str, *, tls=None, options=()) -> grpc.Channel:
    """A channel to ``address``: ``tls`` (a ``TlsConfig``) or plain text; ``options`` come after
    the unlimited message sizes, so they may set limits of their own."""
    options = [*UNLIMITED, *options]
    if tls is None:
        return grpc.insecure_channel(address, options=options)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=tls.root_certificates,
        private_key=tls.private_key,
        certificate_chain=tls.certificate_chain,
    )
    if tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    return grpc.secure_channel(address, credentials, options=options)


class GrpcTransport:
    """The calls over one channel; each takes a timeout in seconds (None: no deadline)."""

    def __init__(self, address: str, *, tls=None, options=(), metadata=()) -> None:
        self._channel = channel(address, tls=tls, options=options)
        self._metadata = tuple(metadata)
        self._predictions = prediction_service_pb2_grpc.PredictionServiceStub(self._channel)
        self._models = model_service_pb2_grpc.ModelServiceStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def predict(self, spec, inputs: dict, output_filter, signature, timeout) -> dict[str, np.ndarray]:
        request = predict_pb2.PredictRequest()
        spec.fill(request.model_spec)
        for alias, (value, dtype) in inputs.items():
            request.inputs[alias].CopyFrom(make_tensor_proto(value, dtype=dtype))
        request.output_filter.extend(output_filter or ())
        response = _call(self._predictions.Predict, request, timeout, self._metadata)
        return {alias: make_ndarray(tensor) for alias, tensor in sorted(response.outputs.items())}

    def classify(self, spec, examples, context, timeout) -> list[list[tuple[str, float]]]:
        request = classification_pb2.ClassificationRequest()
        spec.fill(request.model_spec)
        _fill_input(request.input, examples, context)
        return classes(_call(self._predictions.Classify, request, timeout, self._metadata).result)

    def regress(self, spec, examples, context, timeout) -> np.ndarray:
        request = regression_pb2.RegressionRequest()
        spec.fill(request.model_spec)
        _fill_input(request.input, examples, context)
        return values(_call(self._predictions.Regress, request, timeout, self._metadata).result)

    def multi_inference(self, spec, tasks, examples, context, timeout) -> list:
        request = inference_pb2.MultiInferenceRequest()
        for method, signature_name in tasks:
            if method not in _TASK_METHODS:
                raise ValueError(f"a task's method is 'classify' or 'regress', not {method!r}")
            task = request.tasks.add(method_name=_TASK_METHODS[method])
            spec.fill(task.model_spec, with_signature=False)
            task.model_spec.signature_name = signature_name
        _fill_input(request.input, examples, context)
        response = _call(self._predictions.MultiInference, request, timeout, self._metadata)
        return [
            classes(result.classification_result)
            if result.HasField("classification_result")
            else values(result.regression_result)
            for result in response.results
        ]

    def metadata(self, spec, timeout) -> dict:
        request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
        spec.fill(request.model_spec, with_signature=False)
        response = _call(self._predictions.GetModelMetadata, request, timeout, self._metadata)
        signatures = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(signatures)
        return {  # as TF Serving's REST API prints them: field names kept, defaults printed
            "model_spec": _as_dict(response.model_spec),
            "signature_def": _as_dict(signatures).get("signature_def", {}),
        }

    def status(self, spec, timeout) -> list[dict]:
        request = get_model_status_pb2.GetModelStatusRequest()
        spec.fill(request.model_spec, with_signature=False)
        response = _call(self._models.GetModelStatus, request, timeout, self._metadata)
        return [
            {
                "version": entry.version,
                "state": get_model_status_pb2.ModelVersionStatus.State.Name(entry.state),
                "error_code": _error_code_name(entry.status.error_code),
                "error_message": entry.status.error_message,
            }
            for entry in response.model_version_status
        ]


def _call(method, request, timeout, metadata=()):
    try:
        return method(request, timeout=timeout, metadata=metadata or None)
    except grpc.RpcError as error:
        raise ServingError.from_rpc(error) from None


def _as_dict(message) -> dict:
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


def _fill_input(message, examples, context) -> None:
    if context is None:
        message.example_list.examples.extend(examples)
    else:
        message.example_list_with_context.examples.extend(examples)
        message.example_list_with_context.context.CopyFrom(context)


def classes(result) -> list[list[tuple[str, float]]]:
    """A ClassificationResult as (label, score) pairs per example."""
    return [[(c.label, c.score) for c in item.classes] for item in result.classifications]


def values(result) -> np.ndarray:
    """A RegressionResult as one float32 per example."""
    return np.array([r.value for r in result.regressions], np.float32)


def _error_code_name(code: int) -> str:
    return error_codes_pb2.Code.Name(code) if code in error_codes_pb2.Code.values() else str(code)
