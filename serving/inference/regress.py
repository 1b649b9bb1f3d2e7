"""PredictionService.Regress without a transport: TF Serving's ``regressor.cc``.

The request's tf.Examples are fed, serialized, to the signature's single input "inputs"; its single
output "outputs" (float, [batch] or [batch, 1]) becomes one Regression per example. Checks, codes
and texts are TF Serving's.
"""

from __future__ import annotations

import numpy as np

from apis.tensorflow.core.protobuf import config_pb2, meta_graph_pb2
from apis.tensorflow_serving.apis import regression_pb2
from runtime import errors
from serving.inference import signatures, tensor_codec


def regress(core, request: regression_pb2.RegressionRequest, deadline: float | None = None):
    """Run one RegressionRequest; returns a RegressionResponse."""
    return signatures.serve_examples(core, request, deadline, run_regress)


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
    return signatures.run_examples(
        servable,
        request,
        regression_pb2.RegressionResponse(),
        signature,
        signatures.REGRESS_INPUTS,
        pre_process,
        post_process,
        run_options,
        method_name_check=method_name_check,
    )


def get_regression_signature(
    signature_defs, model_spec, *, method_name_check: bool = False
) -> meta_graph_pb2.SignatureDef:
    """``GetRegressionSignatureDef``: the requested signature, checked for Regress."""
    return signatures.get_signature(
        signature_defs, model_spec, _check_method_name if method_name_check else pre_process
    )


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
    signatures.check_method_name(signature, signatures.REGRESS_METHOD_NAME, "regression")
