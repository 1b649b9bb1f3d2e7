"""tensorflow.serving.PredictionService over gRPC: a thin transport over the inference functions.

Each method hands the request proto and the time left before the call's deadline to one
transport-free function (the REST transport calls the same ones) and returns its response;
``errors.grpc_method`` turns any failure into TF Serving's status. The servicer holds no state
of its own, so grpc may call it from any number of threads at once.
"""

from __future__ import annotations

from apis.tensorflow_serving.apis import prediction_service_pb2_grpc
from serving import errors
from serving.classify import classify
from serving.metadata import get_model_metadata
from serving.multi_inference import multi_inference
from serving.predict import predict
from serving.regress import regress


class PredictionServiceServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    """PredictionService backed by a ServerCore (``core.servable_handle(model_spec)``)."""

    def __init__(self, core) -> None:
        self._core = core

    @errors.grpc_method
    def Classify(self, request, context):  # noqa: N802 - gRPC method names
        return classify(self._core, request, context.time_remaining())

    @errors.grpc_method
    def Regress(self, request, context):  # noqa: N802
        return regress(self._core, request, context.time_remaining())

    @errors.grpc_method
    def Predict(self, request, context):  # noqa: N802
        return predict(self._core, request, context.time_remaining())

    @errors.grpc_method
    def MultiInference(self, request, context):  # noqa: N802
        return multi_inference(self._core, request, context.time_remaining())

    @errors.grpc_method
    def GetModelMetadata(self, request, context):  # noqa: N802
        return get_model_metadata(self._core, request, context.time_remaining())


def add_to_server(core, server) -> PredictionServiceServicer:
    """Register a PredictionServiceServicer for ``core`` on a grpc server."""
    servicer = PredictionServiceServicer(core)
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(servicer, server)
    return servicer
