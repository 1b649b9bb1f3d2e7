"""ModelInfer as the PredictRequest every transport's Predict becomes, and its answer in V2 terms.

A V2 request names a model (and maybe a version), feeds inputs by their signature keys and may
ask for some outputs; ``signature_name`` in its parameters picks a signature (else
``serving_default``). ``infer`` builds the PredictRequest (inputs as ``tensor_content``, the
requested outputs as ``output_filter``) and calls ``RequestFunctions.infer``, which is Predict
counted under the API label "ModelInfer": the same checks, codes and texts, batching, request
log and metrics. The answer is the outputs' arrays (``PredictOutputs.arrays``) with their V2
datatypes; writing them is the transport's.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from apis.tensorflow_serving.apis import predict_pb2
from runtime import errors
from serving.inference import tensor_codec
from serving.open_inference import datatypes

SIGNATURE_PARAMETER = "signature_name"
_INT64_MAX = 2**63 - 1


@dataclasses.dataclass
class InferInput:
    """An input tensor: its elements as an ``array``, or as ``content``, raw bytes that are
    already its ``tensor_content`` (``datatypes.raw_content``: sent on without a copy)."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    array: np.ndarray | None = None
    content: bytes | None = None


@dataclasses.dataclass
class InferRequest:
    """A ModelInfer request, whichever transport brought it: ``outputs`` None asks for every output."""

    model_name: str
    model_version: str = ""
    id: str = ""
    parameters: dict = dataclasses.field(default_factory=dict)
    inputs: list[InferInput] = dataclasses.field(default_factory=list)
    outputs: list[str] | None = None


@dataclasses.dataclass
class InferOutput:
    name: str
    datatype: str
    shape: tuple[int, ...]
    array: np.ndarray


@dataclasses.dataclass
class InferResponse:
    model_name: str
    model_version: str
    id: str
    outputs: list[InferOutput]


def version_number(text: str, model_name: str) -> int | None:
    """A V2 version string as the servable version it names (None: the latest); NOT_FOUND for
    text that names no version this server can have."""
    if not text:
        return None
    if not text.isdigit() or int(text) > _INT64_MAX:
        raise errors.NotFoundError(
            None, None, f"Servable not found for request: Specific({model_name}, {text})"
        )
    return int(text)


def predict_request(request: InferRequest) -> predict_pb2.PredictRequest:
    """The PredictRequest a ModelInfer request becomes."""
    if not request.model_name:
        raise errors.InvalidArgumentError(None, None, "Missing model name")
    message = predict_pb2.PredictRequest()
    spec = message.model_spec
    spec.name = request.model_name
    version = version_number(request.model_version, request.model_name)
    if version is not None:
        spec.version.value = version
    signature = request.parameters.get(SIGNATURE_PARAMETER)
    if signature is not None:
        if type(signature) is not str:
            raise errors.InvalidArgumentError(None, None, "parameter 'signature_name' must be a string")
        spec.signature_name = signature
    for tensor in request.inputs:
        if tensor.name in message.inputs:
            raise errors.InvalidArgumentError(None, None, f"input '{tensor.name}' is given more than once")
        dtype = datatypes.tf_dtype(tensor.datatype)
        proto = message.inputs[tensor.name]
        if tensor.content is not None:  # its bytes are the tensor_content: one parse, no copy
            proto.MergeFromString(tensor_codec.raw_values_prefix(dtype, tensor.shape, True) + tensor.content)
        else:
            tensor_codec.encode_input_into(proto, tensor.array, dtype)
    if request.outputs is not None:
        message.output_filter.extend(request.outputs)
    return message


def infer(functions, core, request: InferRequest, deadline: float | None, message=None) -> InferResponse:
    """Answer one ModelInfer request through ``functions.infer`` (Predict, counted as ModelInfer);
    ``message``: its ``predict_request``, where the transport has built it already."""
    answer = functions.infer(core, message if message is not None else predict_request(request), deadline)
    outputs = [  # in the order asked (Predict fetches output_filter in its order), else sorted
        InferOutput(name, datatypes.datatype_of(dtype), array.shape, array)
        for name, (array, dtype) in answer.arrays().items()
    ]
    return InferResponse(answer.model_name, str(answer.version), request.id, outputs)
