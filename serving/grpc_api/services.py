"""tensorflow.serving.PredictionService and ModelService over gRPC: a thin transport over the
inference and model service functions.

Each method hands the request proto and the time left before the call's deadline to one
transport-free function (the REST transport calls the same ones) and returns its response;
``errors.grpc_method`` turns any failure into TF Serving's status. The servicer holds no state
of its own, so grpc may call it from any number of threads at once.
"""

from __future__ import annotations

import grpc

from apis.tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    inference_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)
from serving import errors
from serving.grpc_api import handlers as grpc_handlers
from serving.inference.request_functions import DEFAULT_FUNCTIONS, RequestFunctions
from serving.lifecycle.model_service import get_model_status, handle_reload_config_request

SERVICE = "tensorflow.serving.PredictionService"


class PredictionServiceServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    """PredictionService backed by a ServerCore (``core.pinned(model_spec)``), calling
    ``functions`` (``serving.inference.request_functions``: the same ones REST calls)."""

    def __init__(self, core, functions: RequestFunctions = DEFAULT_FUNCTIONS) -> None:
        self._core = core
        self._functions = functions

    @errors.grpc_method
    def Classify(self, request, context):  # noqa: N802 - gRPC method names
        return self._functions.classify(self._core, request, context.time_remaining())

    @errors.grpc_method
    def Regress(self, request, context):  # noqa: N802
        return self._functions.regress(self._core, request, context.time_remaining())

    @errors.grpc_method
    def Predict(self, request, context):  # noqa: N802
        return self._functions.predict_wire(self._core, request, context.time_remaining())  # sent as it is

    @errors.grpc_method
    def MultiInference(self, request, context):  # noqa: N802
        return self._functions.multi_inference(self._core, request, context.time_remaining())

    @errors.grpc_method
    def GetModelMetadata(self, request, context):  # noqa: N802
        return self._functions.get_model_metadata(self._core, request, context.time_remaining())


def add_to_server(
    core, server, drain=None, functions: RequestFunctions = DEFAULT_FUNCTIONS
) -> PredictionServiceServicer:
    """Register a PredictionServiceServicer for ``core`` on a grpc server: the generated
    registration, except that requests are parsed in the handler (``grpc_handlers``) and
    Predict's response is already serialized (``predict_wire``)."""
    servicer = PredictionServiceServicer(core, functions)
    handlers = {
        "Classify": _handler(
            servicer.Classify,
            classification_pb2.ClassificationRequest,
            classification_pb2.ClassificationResponse,
        ),
        "Regress": _handler(
            servicer.Regress, regression_pb2.RegressionRequest, regression_pb2.RegressionResponse
        ),
        "Predict": _handler(servicer.Predict, predict_pb2.PredictRequest, None),
        "MultiInference": _handler(
            servicer.MultiInference, inference_pb2.MultiInferenceRequest, inference_pb2.MultiInferenceResponse
        ),
        "GetModelMetadata": _handler(
            servicer.GetModelMetadata,
            get_model_metadata_pb2.GetModelMetadataRequest,
            get_model_metadata_pb2.GetModelMetadataResponse,
        ),
    }
    grpc_handlers.add_handlers(server, SERVICE, handlers, drain)
    return servicer


def _handler(method, request_type, response_type):
    """A unary handler; ``response_type`` None: the method returns serialized bytes (grpc sends
    a response as it is where the handler has no serializer)."""
    serialize = response_type.SerializeToString if response_type is not None else None
    return grpc.unary_unary_rpc_method_handler(
        method, request_deserializer=request_type.FromString, response_serializer=serialize
    )


class ModelServiceServicer(model_service_pb2_grpc.ModelServiceServicer):
    """ModelService backed by a ``ServerCore``."""

    def __init__(self, core) -> None:
        self._core = core

    @errors.grpc_method
    def GetModelStatus(self, request, context):  # noqa: N802 - gRPC method names
        return get_model_status(self._core, request)

    def HandleReloadConfigRequest(self, request, context):  # noqa: N802
        # TF Serving answers with both: the StatusProto in the response and the same gRPC status.
        response, error = handle_reload_config_request(self._core, request)
        if error is not None:
            context.set_code(errors.grpc_code(error.code))
            context.set_details(errors.truncate(error.message))
        return response
