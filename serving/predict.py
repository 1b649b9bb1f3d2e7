"""PredictionService.Predict without a transport: TF Serving's ``predict_impl`` + ``predict_util``.

A request names a signature (default "serving_default") and feeds its inputs by alias; the
Session runs the aliased tensors and the response carries every signature output (or those in
``output_filter``) encoded as ``Tensor::AsProtoField`` does. Checks, their order, codes and texts
are TF Serving's; the dtype check that TF's Session makes on feeds ("Expects arg[i] ...") is made
here, before anything runs.
"""

from __future__ import annotations

import numpy as np

from apis.tensorflow.core.protobuf import config_pb2, meta_graph_pb2
from apis.tensorflow_serving.apis import predict_pb2
from runtime import errors
from serving import signatures, tensor_codec


def predict(core, request: predict_pb2.PredictRequest, deadline: float | None = None):
    """Run one PredictRequest against the servable ``core`` resolves; returns a PredictResponse."""
    if not request.HasField("model_spec"):
        raise errors.InvalidArgumentError(None, None, "Missing ModelSpec")
    with signatures.servable(core, request.model_spec) as servable:
        return run_predict(
            servable,
            request,
            signatures.run_options(deadline),
            method_name_check=signatures.method_name_check(core),
            as_tensor_content=signatures.serialize_as_tensor_content(core),
        )


def run_predict(
    servable,
    request: predict_pb2.PredictRequest,
    run_options: config_pb2.RunOptions | None = None,
    *,
    method_name_check: bool = False,
    as_tensor_content: bool = False,
) -> predict_pb2.PredictResponse:
    """TF Serving's ``RunPredict`` on a pinned servable."""
    name = signatures.signature_name(request.model_spec)
    signature = signatures.signature_defs(servable).get(name)
    if signature is None:
        raise errors.FailedPreconditionError(None, None, f'Serving signature key "{name}" not found.')
    signatures.check_available(servable, name)
    response = predict_pb2.PredictResponse()
    signatures.set_model_spec(response.model_spec, request.model_spec.name, name, servable.version)

    feeds, fetches, aliases = pre_process(signature, request, method_name_check=method_name_check)
    outputs = signatures.run_session(servable.bundle.session, fetches, feeds, run_options)
    post_process(signature, aliases, outputs, response, as_tensor_content=as_tensor_content)
    return response


def pre_process(
    signature: meta_graph_pb2.SignatureDef,
    request: predict_pb2.PredictRequest,
    *,
    method_name_check: bool = False,
) -> tuple[dict[str, np.ndarray], list[str], list[str]]:
    """``PreProcessPrediction``: feeds by tensor name, fetched tensor names, their aliases."""
    if method_name_check:
        _verify_method_name(signature)
    _verify_inputs_size(signature, request)
    feeds, feed_dtypes = _input_values(signature, request)
    fetches, aliases = _outputs(signature, request)
    signatures.check_feed_dtypes(feed_dtypes)  # TF's Session checks feeds once the run starts
    return feeds, fetches, aliases


def post_process(
    signature: meta_graph_pb2.SignatureDef,
    aliases: list[str],
    outputs,
    response: predict_pb2.PredictResponse,
    *,
    as_tensor_content: bool = False,
) -> None:
    """``PostProcessPredictionResult``: each output under its alias, TF Serving's encoding."""
    if len(outputs) != len(aliases):
        raise errors.UnknownError(None, None, "Predict internal error")
    encode = tensor_codec.encode_content_into if as_tensor_content else tensor_codec.encode_into
    for alias, value in zip(aliases, outputs, strict=True):
        encode(response.outputs[alias], value, signature.outputs[alias].dtype)


def _verify_method_name(signature: meta_graph_pb2.SignatureDef) -> None:
    allowed = (
        signatures.PREDICT_METHOD_NAME,
        signatures.CLASSIFY_METHOD_NAME,
        signatures.REGRESS_METHOD_NAME,
    )
    if signature.method_name not in allowed:
        raise errors.InternalError(
            None,
            None,
            "Expected prediction signature method_name to be one of {"
            + ", ".join(allowed)
            + f"}}. Was: {signature.method_name}",
        )


def _verify_inputs_size(signature: meta_graph_pb2.SignatureDef, request) -> None:
    sent, expected = len(request.inputs), len(signature.inputs)
    if sent > expected or (sent < expected and not signature.defaults):
        request_inputs = set(request.inputs)
        signature_inputs = set(signature.inputs)
        raise errors.InvalidArgumentError(
            None,
            None,
            f"input size does not match signature: {sent}!={expected} "
            f"len({{{_join(request_inputs)}}}) != len({{{_join(signature_inputs)}}}). "
            f"Sent extra: {{{_join(request_inputs - signature_inputs)}}}. "
            f"Missing but required: {{{_join(signature_inputs - request_inputs)}}}.",
        )


def _input_values(signature: meta_graph_pb2.SignatureDef, request):
    """TF's ``saved_model::GetInputValues``: feeds by tensor name, and (expected, fed) dtypes in
    feed order for the Session's check."""
    feeds: dict[str, np.ndarray] = {}
    seen: set[str] = set()
    aliases = sorted(signature.inputs)
    fed_dtypes: list[int] = []
    for alias in aliases:
        tensor_info = signature.inputs[alias]
        if alias in request.inputs:
            proto = request.inputs[alias]
            seen.add(alias)
        elif alias in signature.defaults:
            proto = signature.defaults[alias]
        else:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Signature input alias: {alias}(feed name: {tensor_info.name}) not found in "
                f"request and no default value provided. Inputs expected to be in the request "
                f"{{{_join(request.inputs)}}}, or default input alias set: "
                f"{_join(signature.defaults)}",
            )
        try:
            feeds[tensor_info.name] = tensor_codec.decode(proto)
        except tensor_codec.TensorProtoError:
            raise errors.InvalidArgumentError(None, None, f"tensor parsing error: {alias}") from None
        fed_dtypes.append(proto.dtype)
    if request.inputs and len(seen) != len(request.inputs):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Inputs contains invalid name. Used request inputs: {_join(seen)}, "
            f"request input: {_join(request.inputs)}",
        )
    return feeds, [
        (signature.inputs[alias].dtype, fed) for alias, fed in zip(aliases, fed_dtypes, strict=True)
    ]


def _outputs(signature: meta_graph_pb2.SignatureDef, request) -> tuple[list[str], list[str]]:
    fetches: list[str] = []
    aliases: list[str] = []
    for alias in request.output_filter:
        tensor_info = signature.outputs.get(alias)
        if tensor_info is None:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"output tensor alias not found in signature: {alias} Outputs expected to be in "
                f"the set {{{_join(signature.outputs)}}}.",
            )
        if alias in aliases:
            raise errors.InvalidArgumentError(None, None, f"duplicate output tensor alias: {alias}")
        fetches.append(tensor_info.name)
        aliases.append(alias)
    if not fetches:
        for alias in sorted(signature.outputs):
            fetches.append(signature.outputs[alias].name)
            aliases.append(alias)
    return fetches, aliases


def _join(names) -> str:
    """``absl::StrJoin`` over a ``std::set``: sorted, comma-separated."""
    return ",".join(sorted(names))
