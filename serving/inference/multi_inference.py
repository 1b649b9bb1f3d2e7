"""PredictionService.MultiInference without a transport: TF Serving's ``multi_inference.cc``.

Several Classify/Regress tasks, all on one model, share one input and one Session run: every
task's input tensor is fed the same serialized tf.Examples, the union of their outputs is fetched
once, and each task's result is cut from it. The servable is the one the first task's model_spec
resolves, as in ``RunMultiInferenceWithServerCore``.
"""

from __future__ import annotations

from apis.tensorflow.core.protobuf import config_pb2
from apis.tensorflow_serving.apis import inference_pb2, model_pb2
from runtime import dtypes, errors
from serving.inference import classify, regress, signatures


def multi_inference(core, request: inference_pb2.MultiInferenceRequest, deadline: float | None = None):
    """Run one MultiInferenceRequest; returns a MultiInferenceResponse."""
    model_spec = request.tasks[0].model_spec if request.tasks else model_pb2.ModelSpec()
    with signatures.servable(core, model_spec, deadline) as servable:
        return run_multi_inference(
            servable,
            request,
            signatures.run_options(deadline),
            method_name_check=signatures.method_name_check(core),
        )


def run_multi_inference(
    servable,
    request: inference_pb2.MultiInferenceRequest,
    run_options: config_pb2.RunOptions | None = None,
    *,
    method_name_check: bool = False,
) -> inference_pb2.MultiInferenceResponse:
    """TF Serving's ``TensorFlowMultiInferenceRunner::Infer`` on a pinned servable."""
    defs = signatures.signature_defs(servable)
    input_names: dict[str, int] = {}  # input tensor name -> its TensorInfo dtype
    output_names: set[str] = set()
    _check_tasks(servable, request, defs, input_names, output_names, method_name_check)

    fetches = sorted(output_names)
    examples = signatures.serialized_examples(request.input)
    feeds = {name: examples for name in sorted(input_names)}
    signatures.check_feed_dtypes([(input_names[name], dtypes.DT_STRING) for name in feeds])
    outputs = signatures.run_session(servable.bundle.session, fetches, feeds, run_options)

    response = inference_pb2.MultiInferenceResponse()
    for task in request.tasks:
        name = signatures.signature_name(task.model_spec)
        signature = defs.get(name)
        if signature is None:
            raise errors.InvalidArgumentError(
                None, None, f"Requested signature not found in model graph: {name}"
            )
        result = response.results.add()
        if task.method_name == signatures.CLASSIFY_METHOD_NAME:
            classify.post_process(signature, len(examples), fetches, outputs, result.classification_result)
        elif task.method_name == signatures.REGRESS_METHOD_NAME:
            regress.post_process(signature, len(examples), fetches, outputs, result.regression_result)
        else:
            raise errors.InvalidArgumentError(
                None, None, f"Unrecognized signature method_name: {task.method_name}"
            )
        signatures.set_model_spec(
            result.model_spec, task.model_spec.name, task.model_spec.signature_name, servable.version
        )
    return response


def _check_tasks(
    servable, request, defs, input_names: dict[str, int], output_names: set[str], method_name_check: bool
) -> None:
    model_name = ""
    seen: set[str] = set()
    for task in request.tasks:
        if not task.model_spec.name:
            raise errors.InvalidArgumentError(None, None, "Found ModelSpec with an empty model name.")
        if not model_name:
            model_name = task.model_spec.name
        elif model_name != task.model_spec.name:
            raise errors.InvalidArgumentError(
                None,
                None,
                "All ModelSpecs in a MultiInferenceRequest must access the same model name.",
            )
        name = signatures.signature_name(task.model_spec)
        if name in seen:
            raise errors.InvalidArgumentError(None, None, f"Duplicate evaluation of signature: {name}")
        seen.add(name)
        signature = defs.get(name)
        if signature is None:
            raise errors.InvalidArgumentError(
                None, None, f"Requested signature not found in model graph: {name}"
            )
        signatures.check_available(servable, name)
        if task.method_name == signatures.CLASSIFY_METHOD_NAME:
            input_name, names = classify.pre_process(signature, method_name_check=method_name_check)
        elif task.method_name == signatures.REGRESS_METHOD_NAME:
            input_name, names = regress.pre_process(signature, method_name_check=method_name_check)
        else:
            raise errors.UnimplementedError(
                None, None, f"Unsupported signature method_name: {task.method_name}"
            )
        input_names[input_name] = signature.inputs[signatures.CLASSIFY_INPUTS].dtype
        output_names.update(names)
