"""inference.GRPCInferenceService (the Open Inference Protocol over gRPC) on ``--port``.

A thin transport over ``serving.open_inference``: a ModelInferRequest becomes an ``InferRequest``
(typed ``contents`` or ``raw_input_contents``), the answer a ModelInferResponse (raw output
contents where the request sent raw inputs, or where a datatype has no typed field: FP16,
BF16; typed contents otherwise). A response of raw contents, the common one (tritonclient sends
raw inputs), is written as wire bytes (``response_bytes``, tested against ``infer_response``):
the V2 server's per-request CPU was a quarter above Predict's at 32 concurrent calls, and the
messages built for each request were the difference. The common request, raw numeric inputs,
goes further: its PredictRequest is assembled from one cached head per input and its answer
written from Predict's outputs, with no ``InferRequest`` or ``InferResponse`` between
(``raw_predict_request``, ``raw_response_bytes``; anything else, or anything a check would
refuse, takes the general path, and tests hold the two equal). Errors are TF Serving's codes and texts
(``errors.grpc_method``); requests are parsed in our handlers and refused while draining, as
PredictionService's are.
"""

from __future__ import annotations

import functools

from apis.inference import grpc_predict_v2_pb2 as v2
from apis.inference import grpc_predict_v2_pb2_grpc as v2_grpc
from runtime import errors as op_errors
from runtime import wire
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
        message = raw_predict_request(request) if raw else None
        if message is not None:  # the common request: no InferRequest or InferResponse built
            outputs = self._functions.infer(self._core, message, context.time_remaining())
            return raw_response_bytes(outputs, request.id)  # (as ``response_bytes``: tested so)
        answer = infer.infer(self._functions, self._core, infer_request(request), context.time_remaining())
        return response_bytes(answer, raw)  # sent as it is (no serializer: ``add_to_server``)


def raw_predict_request(request: v2.ModelInferRequest):
    """``infer.raw_predict_request`` of a request of raw inputs: the PredictRequest, or None
    where the general path (``infer_request``) must answer."""
    raw, tensors = request.raw_input_contents, request.inputs
    if len(raw) != len(tensors):
        return None
    signature, parameters = "", request.parameters
    if parameters:
        for key, value in parameters.items():
            if key == infer.SIGNATURE_PARAMETER:
                if value.WhichOneof("parameter_choice") != "string_param":
                    return None
                signature = value.string_param
    inputs = []
    for tensor, content in zip(tensors, raw):
        if tensor.HasField("contents"):
            return None
        inputs.append((tensor.name, tensor.datatype, tuple(tensor.shape), content))
    outputs = request.outputs
    return infer.raw_predict_request(
        request.model_name,
        request.model_version,
        signature,
        inputs,
        [output.name for output in outputs] if outputs else (),
    )


def raw_response_bytes(outputs, request_id: str) -> bytes:
    """``response_bytes`` of the InferResponse ``infer.infer`` makes of ``outputs`` (a
    ``PredictOutputs``), raw, without making it."""
    parts = [_response_head(outputs.model_name, str(outputs.version))]
    if request_id:
        parts.append(_string_field(3, request_id))
    blobs = []
    for name, (array, dtype) in outputs.arrays().items():
        datatype = datatypes.datatype_of(dtype)
        parts.append(_output_field(name, datatype, array.shape))
        blob = datatypes.to_raw(array, datatype)
        blobs += (_RAW_OUTPUT_TAG, wire.varint(len(blob)), blob)
    return b"".join(parts + blobs)


def infer_request(request: v2.ModelInferRequest) -> infer.InferRequest:
    """The transport-free request of a ModelInferRequest."""
    raw = request.raw_input_contents
    tensors = request.inputs
    if raw and len(raw) != len(tensors):
        raise op_errors.InvalidArgumentError(
            None,
            None,
            f"raw_input_contents has {len(raw)} entries for {len(tensors)} inputs",
        )
    inputs = []
    for index, tensor in enumerate(tensors):
        name, datatype, shape = tensor.name, tensor.datatype, tuple(tensor.shape)
        if raw:
            if tensor.HasField("contents"):
                raise op_errors.InvalidArgumentError(
                    None, None, f"input '{name}': contents and raw_input_contents are both given"
                )
            content = datatypes.raw_content(raw[index], datatype, shape, name)
            if content is not None:
                inputs.append(infer.InferInput(name, datatype, shape, None, content))
                continue
            array = datatypes.from_raw(raw[index], datatype, shape, name)
        else:
            array = datatypes.from_contents(tensor.contents, datatype, shape, name)
        inputs.append(infer.InferInput(name, datatype, shape, array))
    parameters = request.parameters
    return infer.InferRequest(
        request.model_name,
        request.model_version,
        request.id,
        {key: _parameter(value) for key, value in parameters.items()} if parameters else {},
        inputs,
        [output.name for output in request.outputs] if request.outputs else None,
    )


def _parameter(value: v2.InferParameter):
    choice = value.WhichOneof("parameter_choice")
    return None if choice is None else getattr(value, choice)


_OutputTensor = v2.ModelInferResponse.InferOutputTensor


def infer_response(answer: infer.InferResponse, raw: bool) -> v2.ModelInferResponse:
    """A ModelInferResponse: raw output contents if ``raw`` or any output has no typed field."""
    outputs = answer.outputs
    raw = raw or any(output.datatype not in datatypes.CONTENTS_FIELD for output in outputs)
    response = v2.ModelInferResponse(
        model_name=answer.model_name,
        model_version=answer.model_version,
        id=answer.id,
        outputs=[_OutputTensor(name=o.name, datatype=o.datatype, shape=o.shape) for o in outputs],
        raw_output_contents=[datatypes.to_raw(o.array, o.datatype) for o in outputs] if raw else None,
    )
    if not raw:
        for tensor, output in zip(response.outputs, outputs):
            datatypes.fill_contents(tensor.contents, output.array, output.datatype)
    return response


def response_bytes(answer: infer.InferResponse, raw: bool) -> bytes:
    """``infer_response(answer, raw)``'s wire bytes, assembled without a message where the
    outputs go as raw contents."""
    outputs = answer.outputs
    if not (raw or any(output.datatype not in datatypes.CONTENTS_FIELD for output in outputs)):
        return infer_response(answer, raw).SerializeToString()
    parts = [_response_head(answer.model_name, answer.model_version)]
    if answer.id:
        parts.append(_string_field(3, answer.id))
    parts += [_output_field(o.name, o.datatype, o.shape) for o in outputs]
    for output in outputs:
        blob = datatypes.to_raw(output.array, output.datatype)
        parts += (_RAW_OUTPUT_TAG, wire.varint(len(blob)), blob)
    return b"".join(parts)


_RAW_OUTPUT_TAG = wire.key(6, 2)  # ModelInferResponse.raw_output_contents


def _string_field(number: int, text: str) -> bytes:
    data = text.encode()
    return wire.key(number, 2) + wire.varint(len(data)) + data


@functools.lru_cache(maxsize=256)  # (model, version): a few per server
def _response_head(model_name: str, model_version: str) -> bytes:
    return v2.ModelInferResponse(model_name=model_name, model_version=model_version).SerializeToString()


@functools.lru_cache(maxsize=1024)  # (name, datatype, shape): a few per signature and batch size
def _output_field(name: str, datatype: str, shape: tuple) -> bytes:
    body = _OutputTensor(name=name, datatype=datatype, shape=shape).SerializeToString()
    return wire.key(5, 2) + wire.varint(len(body)) + body


def add_to_server(core, server, readiness, drain=None, functions: RequestFunctions = DEFAULT_FUNCTIONS):
    """Register GRPCInferenceService for ``core`` on a grpc server (requests parsed in our
    handlers; ModelInfer's response already serialized, ``response_bytes``)."""
    servicer = InferenceServicer(core, readiness, functions)
    grpc_handlers.add_service(
        server,
        lambda target: v2_grpc.add_GRPCInferenceServiceServicer_to_server(servicer, target),
        drain,
        unserialized={"ModelInfer"},
    )
    return servicer
