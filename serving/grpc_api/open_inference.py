"""inference.GRPCInferenceService (the Open Inference Protocol over gRPC) on ``--port``.

A thin transport over ``serving.open_inference``: a ModelInferRequest becomes an ``InferRequest``
(typed ``contents`` or ``raw_input_contents``), the answer a ModelInferResponse (raw output
contents where the request sent raw inputs, or where a datatype has no typed field: FP16,
BF16; typed contents otherwise). Errors are TF Serving's codes and texts
(``errors.grpc_method``); requests are parsed in our handlers and refused while draining, as
PredictionService's are.
"""

from __future__ import annotations

from apis.inference import grpc_predict_v2_pb2 as v2
from apis.inference import grpc_predict_v2_pb2_grpc as v2_grpc
from runtime import errors as op_errors
from serving import errors
from serving.grpc_api import handlers as grpc_handlers
from serving.inference.request_functions import DEFAULT_FUNCTIONS, RequestFunctions
from serving.open_inference import datatypes, infer, models

SERVICE = "inference.GRPCInferenceService"


class InferenceServicer(v2_grpc.GRPCInferenceServiceServicer):
    """GRPCInferenceService over a ServerCore; ``readiness``: the server's ``Readiness``."""

    def __init__(self, core, readiness, functions: RequestFunctions = DEFAULT_FUNCTIONS) -> None:
        self._core = core
        self._readiness = readiness
        self._functions = functions

    @errors.grpc_method
    def ServerLive(self, request, context):  # noqa: N802 - gRPC method names
        return v2.ServerLiveResponse(live=True)

    @errors.grpc_method
    def ServerReady(self, request, context):  # noqa: N802
        return v2.ServerReadyResponse(ready=models.server_ready(self._readiness))

    @errors.grpc_method
    def ModelReady(self, request, context):  # noqa: N802
        return v2.ModelReadyResponse(ready=models.model_ready(self._core, request.name, request.version))

    @errors.grpc_method
    def ServerMetadata(self, request, context):  # noqa: N802
        name, version, extensions = models.server_metadata()
        return v2.ServerMetadataResponse(name=name, version=version, extensions=extensions)

    @errors.grpc_method
    def ModelMetadata(self, request, context):  # noqa: N802
        meta = models.model_metadata(self._core, request.name, request.version, context.time_remaining())
        response = v2.ModelMetadataResponse(name=meta.name, versions=meta.versions, platform=meta.platform)
        for tensors, field in ((meta.inputs, response.inputs), (meta.outputs, response.outputs)):
            for t in tensors:
                field.add(name=t.name, datatype=t.datatype, shape=t.shape)
        return response

    @errors.grpc_method
    def ModelInfer(self, request, context):  # noqa: N802
        raw = bool(request.raw_input_contents)
        answer = infer.infer(self._functions, self._core, infer_request(request), context.time_remaining())
        return infer_response(answer, raw)


def infer_request(request: v2.ModelInferRequest) -> infer.InferRequest:
    """The transport-free request of a ModelInferRequest."""
    raw = request.raw_input_contents
    if raw and len(raw) != len(request.inputs):
        raise op_errors.InvalidArgumentError(
            None,
            None,
            f"raw_input_contents has {len(raw)} entries for {len(request.inputs)} inputs",
        )
    inputs = []
    for index, tensor in enumerate(request.inputs):
        shape = tuple(tensor.shape)
        if raw:
            if tensor.HasField("contents"):
                raise op_errors.InvalidArgumentError(
                    None, None, f"input '{tensor.name}': contents and raw_input_contents are both given"
                )
            content = datatypes.raw_content(raw[index], tensor.datatype, shape, tensor.name)
            if content is not None:
                inputs.append(infer.InferInput(tensor.name, tensor.datatype, shape, content=content))
                continue
            array = datatypes.from_raw(raw[index], tensor.datatype, shape, tensor.name)
        else:
            array = datatypes.from_contents(tensor.contents, tensor.datatype, shape, tensor.name)
        inputs.append(infer.InferInput(tensor.name, tensor.datatype, shape, array))
    outputs = [output.name for output in request.outputs] if request.outputs else None
    return infer.InferRequest(
        request.model_name,
        request.model_version,
        request.id,
        {key: _parameter(value) for key, value in request.parameters.items()},
        inputs,
        outputs,
    )


def _parameter(value: v2.InferParameter):
    choice = value.WhichOneof("parameter_choice")
    return None if choice is None else getattr(value, choice)


def infer_response(answer: infer.InferResponse, raw: bool) -> v2.ModelInferResponse:
    """A ModelInferResponse: raw output contents if ``raw`` or any output has no typed field."""
    response = v2.ModelInferResponse(
        model_name=answer.model_name, model_version=answer.model_version, id=answer.id
    )
    raw = raw or any(output.datatype not in datatypes.CONTENTS_FIELD for output in answer.outputs)
    for output in answer.outputs:
        tensor = response.outputs.add(name=output.name, datatype=output.datatype, shape=output.shape)
        if raw:
            response.raw_output_contents.append(datatypes.to_raw(output.array, output.datatype))
        else:
            datatypes.fill_contents(tensor.contents, output.array, output.datatype)
    return response


def add_to_server(core, server, readiness, drain=None, functions: RequestFunctions = DEFAULT_FUNCTIONS):
    """Register GRPCInferenceService for ``core`` on a grpc server (requests parsed in our handlers)."""
    servicer = InferenceServicer(core, readiness, functions)
    grpc_handlers.add_service(
        server, lambda target: v2_grpc.add_GRPCInferenceServiceServicer_to_server(servicer, target), drain
    )
    return servicer
