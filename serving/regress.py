"""PredictionService.Regress without a transport: TF Serving's ``regressor.cc``.

The request's tf.Examples are fed, serialized, to the signature's single input "inputs"; its single
output "outputs" (float, [batch] or [batch, 1]) becomes one Regression per example. Checks, codes
and texts are TF Serving's.
"""

from __future__ import annotations

import numpy as np

from apis.tensorflow.core.protobuf import config_pb2, meta_graph_pb2
from apis.tensorflow_serving.apis import regression_pb2
from runtime import dtypes, errors
from serving import signatures, tensor_codec


def regress(core, request: regression_pb2.RegressionRequest, deadline: float | None = None):
    """Run one RegressionRequest; returns a RegressionResponse."""
    if not request.HasField("model_spec"):
        raise errors.InvalidArgumentError(None, None, "Missing ModelSpec")
    with signatures.servable(core, request.model_spec) as servable:
        return run_regress(
            servable,
            request,
            signatures.run_options(deadline),
            method_name_check=signatures.method_name_check(core),
        )


def run_regress(
    servable,
    request: regression_pb2.RegressionRequest,
    run_options: config_pb2.RunOptions | None = None,
    *,
    method_name_check: bool = False,
) -> regression_pb2.RegressionResponse:
    """TF Serving's ``RunRegress`` on a pinned servable."""
    signature = get_regression_signature(
        signatures.signature_defs(servable), request.model_spec, method_name_check=method_name_check
    )
    signatures.check_available(servable, signatures.signature_name(request.model_spec))
    response = regression_pb2.RegressionResponse()
    signatures.set_model_spec(
        response.model_spec,
        request.model_spec.name,
        request.model_spec.signature_name,
        servable.version,
    )
    input_name, output_names = pre_process(signature, method_name_check=method_name_check)
    examples = signatures.serialized_examples(request.input)
    signatures.check_feed_dtypes([(_input_dtype(signature), dtypes.DT_STRING)])
    outputs = signatures.run_session(
        servable.bundle.session, output_names, {input_name: examples}, run_options
    )
    post_process(signature, len(examples), output_names, outputs, response.result)
    return response


def get_regression_signature(
    signature_defs, model_spec, *, method_name_check: bool = False
) -> meta_graph_pb2.SignatureDef:
    """``GetRegressionSignatureDef``: the requested signature, checked for Regress."""
    name = signatures.signature_name(model_spec)
    signature = signature_defs.get(name)
    if signature is None:
        raise errors.InvalidArgumentError(None, None, f"No signature was found with the name: {name}")
    if method_name_check:
        _check_method_name(signature)
    else:
        pre_process(signature)
    return signature


def pre_process(
    signature: meta_graph_pb2.SignatureDef, *, method_name_check: bool = False
) -> tuple[str, list[str]]:
    """``PreProcessRegression``: the input tensor name and the output tensor name."""
    if method_name_check:
        _check_method_name(signature)
    if len(signature.inputs) != 1:
        raise errors.InvalidArgumentError(None, None, "Expected one input Tensor.")
    if len(signature.outputs) != 1:
        raise errors.InvalidArgumentError(None, None, "Expected one output Tensor.")
    input_info = signature.inputs.get(signatures.REGRESS_INPUTS)
    if input_info is None:
        raise errors.InvalidArgumentError(
            None,
            None,
            "No regression inputs found in SignatureDef: " + signatures.debug_string(signature),
        )
    output_info = signature.outputs.get(signatures.REGRESS_OUTPUTS)
    if output_info is None:
        raise errors.InvalidArgumentError(
            None,
            None,
            "No regression outputs found in SignatureDef: " + signatures.debug_string(signature),
        )
    return input_info.name, [output_info.name]


def post_process(
    signature: meta_graph_pb2.SignatureDef,
    num_examples: int,
    output_names: list[str],
    outputs,
    result: regression_pb2.RegressionResult,
) -> None:
    """``PostProcessRegressionResult``: the checked output -> one Regression per example."""
    if len(outputs) != len(output_names):
        raise errors.InvalidArgumentError(
            None,
            None,
            "Expected output_tensors and output_tensor_names to have the same size.",
        )
    output_info = signature.outputs.get(signatures.REGRESS_OUTPUTS)
    if output_info is None:
        raise errors.FailedPreconditionError(
            None,
            None,
            "No regression outputs found in SignatureDef: " + signatures.debug_string(signature),
        )
    value = next(
        (np.asarray(v) for n, v in zip(output_names, outputs, strict=True) if n == output_info.name),
        None,
    )
    if value is None:
        raise errors.InvalidArgumentError(None, None, f"Could not find output tensor '{output_info.name}'")
    if not (value.ndim == 1 or (value.ndim == 2 and value.shape[1] == 1)):
        raise errors.InvalidArgumentError(
            None,
            None,
            "Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got "
            + signatures.shape_debug_string(value.shape),
        )
    if num_examples != value.shape[0]:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Input batch size did not match output batch size: {num_examples} vs. {value.shape[0]}",
        )
    actual = signatures.dtype_enum_name(tensor_codec.dtype_of(value))
    if actual != "DT_FLOAT":
        raise errors.InvalidArgumentError(None, None, f"Expected output Tensor of DT_FLOAT.  Got: {actual}")
    if value.size != num_examples:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Expected output batch size to be {num_examples}.  Got: {value.size}",
        )
    # regressions (1) of Regression{value (1, fixed32)}: 7 bytes each, built at once and parsed.
    wire = np.empty((num_examples, 7), np.uint8)
    wire[:, :3] = (0x0A, 0x05, 0x0D)
    wire[:, 3:] = np.ascontiguousarray(value.reshape(-1), "<f4").view(np.uint8).reshape(-1, 4)
    result.MergeFromString(wire.tobytes())


def _check_method_name(signature: meta_graph_pb2.SignatureDef) -> None:
    if signature.method_name != signatures.REGRESS_METHOD_NAME:
        raise errors.InvalidArgumentError(
            None,
            None,
            "Expected regression signature method_name to be "
            f"{signatures.REGRESS_METHOD_NAME}. Was: {signature.method_name}",
        )


def _input_dtype(signature: meta_graph_pb2.SignatureDef) -> int:
    return signature.inputs[signatures.REGRESS_INPUTS].dtype
