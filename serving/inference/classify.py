"""PredictionService.Classify without a transport: TF Serving's ``classifier.cc``.

The request's tf.Examples are fed, serialized, to the signature's single input "inputs"; its
"classes" (string [batch, n]) and/or "scores" (float [batch, n]) outputs become one
Classifications per example. Signature checks, output checks, codes and texts are TF Serving's;
the method_name check runs only with ``--enable_signature_method_name_check``, as there.
"""

from __future__ import annotations

import numpy as np

from apis.tensorflow.core.protobuf import config_pb2, meta_graph_pb2
from apis.tensorflow_serving.apis import classification_pb2
from runtime import errors
from serving.inference import signatures, tensor_codec


def classify(core, request: classification_pb2.ClassificationRequest, deadline: float | None = None):
    """Run one ClassificationRequest; returns a ClassificationResponse."""
    return signatures.serve_examples(core, request, deadline, run_classify)


def run_classify(
    servable,
    request: classification_pb2.ClassificationRequest,
    run_options: config_pb2.RunOptions | None = None,
    *,
    method_name_check: bool = False,
) -> classification_pb2.ClassificationResponse:
    """TF Serving's ``RunClassify`` on a pinned servable."""
    signature = get_classification_signature(
        signatures.signature_defs(servable), request.model_spec, method_name_check=method_name_check
    )
    return signatures.run_examples(
        servable,
        request,
        classification_pb2.ClassificationResponse(),
        signature,
        signatures.CLASSIFY_INPUTS,
        pre_process,
        post_process,
        run_options,
        method_name_check=method_name_check,
    )


def get_classification_signature(
    signature_defs, model_spec, *, method_name_check: bool = False
) -> meta_graph_pb2.SignatureDef:
    """``GetClassificationSignatureDef``: the requested signature, checked for Classify."""
    return signatures.get_signature(
        signature_defs, model_spec, _check_method_name if method_name_check else pre_process
    )


def pre_process(
    signature: meta_graph_pb2.SignatureDef, *, method_name_check: bool = False
) -> tuple[str, list[str]]:
    """``PreProcessClassification``: the input tensor name and the output tensor names."""
    if method_name_check:
        _check_method_name(signature)
    if len(signature.inputs) != 1:
        raise errors.InvalidArgumentError(None, None, "Expected one input Tensor.")
    if len(signature.outputs) not in (1, 2):
        raise errors.InvalidArgumentError(
            None, None, f"Expected one or two output Tensors, found {len(signature.outputs)}"
        )
    input_info = signature.inputs.get(signatures.CLASSIFY_INPUTS)
    if input_info is None:
        raise errors.InvalidArgumentError(
            None,
            None,
            "No classification inputs found in SignatureDef: " + signatures.debug_string(signature),
        )
    classes = signature.outputs.get(signatures.CLASSIFY_OUTPUT_CLASSES)
    scores = signature.outputs.get(signatures.CLASSIFY_OUTPUT_SCORES)
    if classes is None and scores is None:
        raise errors.InvalidArgumentError(
            None,
            None,
            'Expected classification signature outputs to contain at least one of "classes" '
            'or "scores". Signature was: ' + signatures.debug_string(signature),
        )
    output_names = [info.name for info in (classes, scores) if info is not None]
    return input_info.name, output_names


def post_process(
    signature: meta_graph_pb2.SignatureDef,
    num_examples: int,
    output_names: list[str],
    outputs,
    result: classification_pb2.ClassificationResult,
) -> None:
    """``PostProcessClassificationResult``: checked outputs -> one Classifications per example."""
    if len(outputs) != len(output_names):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Expected {len(output_names)} output tensor(s).  Got: {len(outputs)}",
        )
    classes_info = signature.outputs.get(signatures.CLASSIFY_OUTPUT_CLASSES)
    scores_info = signature.outputs.get(signatures.CLASSIFY_OUTPUT_SCORES)
    classes_name = classes_info.name if classes_info is not None else ""
    scores_name = scores_info.name if scores_info is not None else ""
    classes = scores = None
    for name, value in zip(output_names, outputs, strict=True):
        if name == classes_name:
            classes = np.asarray(value)
        elif name == scores_name:
            scores = np.asarray(value)
    if classes is not None:
        _check_output(classes, "classes", "DT_STRING", num_examples)
    if scores is not None:
        _check_output(scores, "scores", "DT_FLOAT", num_examples)
    if classes is not None and scores is not None and classes.shape[1] != scores.shape[1]:
        raise errors.InvalidArgumentError(
            None,
            None,
            "Tensors class and score should match in dim_size(1). "
            f"Got {classes.shape[1]} vs. {scores.shape[1]}",
        )
    present = classes if classes is not None else scores
    num_classes = present.shape[1] if present is not None else 0
    labels = None if classes is None else [[_label(v) for v in row] for row in classes.tolist()]
    values = None if scores is None else scores.tolist()
    # Setting fields one by one is the fastest protobuf offers here (measured: faster than
    # building the wire bytes in Python, unlike Regress's fixed-size records).
    add = result.classifications.add
    for i in range(num_examples):
        row = add().classes
        for c in range(num_classes):
            cls = row.add()
            if labels is not None:
                cls.label = labels[i][c]
            if values is not None:
                cls.score = values[i][c]


def _label(value) -> str:
    """Class.label is a proto3 string: bytes that are not UTF-8 are decoded with replacement."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _check_output(value: np.ndarray, what: str, dtype_name: str, num_examples: int) -> None:
    if value.ndim != 2:
        raise errors.InvalidArgumentError(
            None,
            None,
            "Expected Tensor shape: [batch_size num_classes] but got "
            + signatures.shape_debug_string(value.shape),
        )
    actual = signatures.dtype_enum_name(tensor_codec.dtype_of(value))
    if actual != dtype_name:
        raise errors.InvalidArgumentError(
            None, None, f"Expected {what} Tensor of {dtype_name}. Got: {actual}"
        )
    if value.shape[0] != num_examples:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Expected {what} output batch size of {num_examples}. Got: {value.shape[0]}",
        )


def _check_method_name(signature: meta_graph_pb2.SignatureDef) -> None:
    signatures.check_method_name(signature, signatures.CLASSIFY_METHOD_NAME, "classification")
