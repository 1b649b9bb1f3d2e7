"""ModelInfer as the PredictRequest every transport's Predict becomes, and its answer in V2 terms.

A V2 request names a model (and maybe a version), feeds inputs by their signature keys and may
ask for some outputs; ``signature_name`` in its parameters picks a signature (else
``serving_default``). ``infer`` builds the PredictRequest (inputs as ``tensor_content``, the
requested outputs as ``output_filter``; assembled as wire bytes and parsed once, raw inputs
sent on as they came) and calls ``RequestFunctions.infer``, which is Predict
counted under the API label "ModelInfer": the same checks, codes and texts, batching, request
log and metrics. The answer is the outputs' arrays (``PredictOutputs.arrays``) with their V2
datatypes; writing them is the transport's.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from apis.tensorflow_serving.apis import model_pb2, predict_pb2
from runtime import errors, wire
from serving.inference import tensor_codec
from serving.open_inference import datatypes

SIGNATURE_PARAMETER = "signature_name"
_INT64_MAX = 2**63 - 1


@dataclasses.dataclass(slots=True)
class InferInput:
    """An input tensor: its elements as an ``array``, or as ``content``, raw bytes that are
    already its ``tensor_content`` (``datatypes.raw_content``: sent on without a copy)."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    array: np.ndarray | None = None
    content: bytes | None = None


@dataclasses.dataclass(slots=True)
class InferRequest:
    """A ModelInfer request, whichever transport brought it: ``outputs`` None asks for every output."""

    model_name: str
    model_version: str = ""
    id: str = ""
    parameters: dict = dataclasses.field(default_factory=dict)
    inputs: list[InferInput] = dataclasses.field(default_factory=list)
    outputs: list[str] | None = None


@dataclasses.dataclass(slots=True)
class InferOutput:
    name: str
    datatype: str
    shape: tuple[int, ...]
    array: np.ndarray


@dataclasses.dataclass(slots=True)
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
    version = version_number(request.model_version, request.model_name)
    signature = request.parameters.get(SIGNATURE_PARAMETER)
    if signature is not None and type(signature) is not str:
        raise errors.InvalidArgumentError(None, None, "parameter 'signature_name' must be a string")
    try:
        parts = [_model_spec_field(request.model_name, version, signature or "")]
    except ValueError:  # a name protobuf refuses (not UTF-8)
        raise errors.InvalidArgumentError(
            None, None, "the model or signature name is not valid UTF-8"
        ) from None
    names = set()
    for tensor in request.inputs:
        if tensor.name in names:
            raise errors.InvalidArgumentError(None, None, f"input '{tensor.name}' is given more than once")
        names.add(tensor.name)
        dtype = datatypes.tf_dtype(tensor.datatype)
        if tensor.content is not None:  # its bytes are the tensor_content, sent on as they are
            head = _content_head(dtype, tensor.shape)
            size = len(head) + len(tensor.content)
        else:
            head = tensor_codec.input_bytes(tensor.array, dtype)
            size = len(head)
        key = _string_field(1, tensor.name)
        entry_head = key + _VALUE_TAG + wire.varint(size)
        parts += (_INPUTS_TAG, wire.varint(len(entry_head) + size), entry_head, head)
        if tensor.content is not None:
            parts.append(tensor.content)
    for name in request.outputs or ():
        parts.append(_string_field(3, name))
    return predict_pb2.PredictRequest.FromString(b"".join(parts))


def raw_predict_request(
    model_name: str, model_version: str, signature: str, inputs, outputs
) -> predict_pb2.PredictRequest | None:
    """``predict_request``'s message for the common request, numeric inputs as raw bytes
    (``inputs``: (name, datatype, shape as a tuple of ints, bytes)), with one cached head per
    input instead of an ``InferInput`` each; None where any input or name is not that case or
    would fail a check, so that the general path answers, and raises what it raises."""
    if not model_name:
        return None
    try:
        parts = [_model_spec_field(model_name, version_number(model_version, model_name), signature)]
        names = set()
        for name, datatype, shape, content in inputs:
            head, size = _raw_input_head(name, datatype, shape)
            if len(content) != size or name in names:
                return None
            names.add(name)
            parts += (head, content)
        for name in outputs:
            parts.append(_string_field(3, name))
    except (errors.OpError, ValueError):
        return None
    return predict_pb2.PredictRequest.FromString(b"".join(parts))


@functools.lru_cache(maxsize=1024)  # (name, datatype, shape): a few per model and batch size
def _raw_input_head(name: str, datatype: str, shape: tuple) -> tuple[bytes, int]:
    """The bytes of a PredictRequest.inputs entry before its tensor_content, and the content's
    size (``predict_request``'s, for an input whose ``content`` is given); INVALID_ARGUMENT
    where ``datatypes.raw_content`` would not take the bytes as they are."""
    if datatype == "BYTES" or not datatypes.RAW_IS_CONTENT:
        raise errors.InvalidArgumentError(None, None, f"input '{name}' is not raw tensor_content")
    size = datatypes.raw_size(datatype, shape)
    head = _content_head(datatypes.tf_dtype(datatype), shape)
    entry_head = _string_field(1, name) + _VALUE_TAG + wire.varint(len(head) + size)
    return _INPUTS_TAG + wire.varint(len(entry_head) + len(head) + size) + entry_head + head, size


@functools.lru_cache(maxsize=1024)  # (dtype, shape): a few per model and batch size
def _content_head(dtype: int, shape: tuple) -> bytes:
    return tensor_codec.raw_values_prefix(dtype, shape, True)


_INPUTS_TAG = wire.key(2, 2)  # PredictRequest.inputs' map entries
_VALUE_TAG = wire.key(2, 2)  # an entry's value


def _string_field(number: int, text: str) -> bytes:
    try:
        data = text.encode()
    except UnicodeEncodeError:  # a lone surrogate (JSON's "\\ud800"): no protobuf string holds it
        raise errors.InvalidArgumentError(None, None, f"the name {text!r} is not valid UTF-8") from None
    return wire.key(number, 2) + wire.varint(len(data)) + data


@functools.lru_cache(maxsize=256)  # (model, version, signature): a few per server
def _model_spec_field(name: str, version: int | None, signature: str) -> bytes:
    """PredictRequest.model_spec's field."""
    spec = model_pb2.ModelSpec(name=name, signature_name=signature)
    if version is not None:
        spec.version.value = version
    body = spec.SerializeToString()
    return wire.key(1, 2) + wire.varint(len(body)) + body


def infer(
    functions, core, request: InferRequest | None, deadline: float | None, message=None, request_id: str = ""
) -> InferResponse:
    """Answer one ModelInfer request through ``functions.infer`` (Predict, counted as ModelInfer);
    ``message``: its ``predict_request``, where the transport has built it already (then
    ``request`` may be None, and ``request_id`` is its id)."""
    answer = functions.infer(core, message if message is not None else predict_request(request), deadline)
    if request is not None:
        request_id = request.id
    outputs = [  # in the order asked (Predict fetches output_filter in its order), else sorted
        InferOutput(name, datatypes.datatype_of(dtype), array.shape, array)
        for name, (array, dtype) in answer.arrays().items()
    ]
    return InferResponse(answer.model_name, str(answer.version), request_id, outputs)
