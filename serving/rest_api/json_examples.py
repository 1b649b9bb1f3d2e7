"""JSON <-> Classify and Regress: the tf.Example half of TF Serving's ``util/json_tensor.cc``.

Requests: ``"examples"`` (objects of feature name -> value or list of values) and an optional
``"context"`` fill the ClassificationRequest / RegressionRequest gRPC receives. A feature's
kind comes from its JSON values as rapidjson types them: a whole number is int64 (past int64,
refused; past 64 bits, a double), a decimal or NaN/Infinity is float, strings and b64 objects
are bytes, booleans are int64; one feature holds one kind. Responses: ``"results"``, per
example a list of [label, score] pairs (classification) or one value (regression), floats
through ``WriteDecimal``. Texts and layout are TF Serving's.
"""

from __future__ import annotations

import numpy as np

from apis.tensorflow.core.example import example_pb2
from apis.tensorflow_serving.apis import classification_pb2, regression_pb2
from serving.rest_api import json_writer
from serving.rest_api.json_tensor import RESULTS_KEY, _invalid
from serving.rest_api.json_text import (
    as_bytes,
    decode_base64,
    fill_signature,
    format_error,
    is_b64_object,
    type_name,
)

CONTEXT_KEY = "context"
EXAMPLES_KEY = "examples"


def fill_classification_request(doc, request: classification_pb2.ClassificationRequest) -> None:
    """``FillClassificationRequestFromJson``."""
    _fill_examples(doc, request)


def fill_regression_request(doc, request: regression_pb2.RegressionRequest) -> None:
    """``FillRegressionRequestFromJson``."""
    _fill_examples(doc, request)


def _fill_examples(doc, request) -> None:
    """``FillClassifyRegressRequestFromJson``."""
    if type(doc) is not dict:
        raise format_error(doc, "Is not object")
    fill_signature(doc, request.model_spec)
    has_context = CONTEXT_KEY in doc
    if has_context:
        _fill_example(doc[CONTEXT_KEY], request.input.example_list_with_context.context)
    if EXAMPLES_KEY not in doc:
        raise format_error(doc, "When method is classify, key 'examples' is expected and was not found")
    examples = doc[EXAMPLES_KEY]
    if type(examples) is not list:
        raise format_error(doc, "Expecting 'examples' value to be an list/array")
    if not examples:
        raise format_error(doc, "'examples' value is an empty array")
    target = request.input.example_list_with_context if has_context else request.input.example_list
    for value in examples:
        _fill_example(value, target.examples.add())


_BYTES, _FLOAT, _INT64 = "bytes_list", "float_list", "int64_list"
_KIND_NAMES = {_BYTES: "bytes", _FLOAT: "float", _INT64: "int64", None: "UNKNOWN"}


def _fill_example(value, example: example_pb2.Example) -> None:
    """``MakeExampleFromJsonObject``."""
    if type(value) is not dict:
        raise _invalid(f"Example must be JSON object but got JSON {type_name(value)}")
    features = example.features.feature
    for name, content in value.items():
        kind, values = None, []
        for item in content if type(content) is list else (content,):
            kind = _feature_value(item, name, kind, values)
        feature = features[name]
        feature.Clear()
        if kind is not None:
            getattr(feature, kind).value.extend(values)


def _feature_value(value, name: str, kind: str | None, out: list) -> str:
    """``AddValueToFeature``: append ``value`` to a feature of ``kind`` (None: not yet known);
    returns the feature's kind."""
    value_type = type(value)
    if value_type is bool:
        wanted, item = _INT64, int(value)
    elif value_type is str:
        wanted, item = _BYTES, as_bytes(value)
    elif value_type is float or (value_type is int and not -(2**63) <= value < 2**64):
        wanted, item = _FLOAT, float(value)  # rapidjson holds integers past 64 bits as doubles
    elif value_type is int:
        wanted, item = _INT64, value
    elif value_type is dict and is_b64_object(value):
        wanted, item = _BYTES, None
    else:
        raise _invalid(f"Feature: {name} has element with unexpected JSON type: {type_name(value)}")
    if kind is not None and kind != wanted:
        raise _invalid(f"Unexpected element type in feature: {name} expecting type: {_KIND_NAMES[kind]}")
    if item is None:
        item = decode_base64(value)
    elif wanted == _INT64 and item >= 2**63:
        raise _invalid(f"Feature: {name} has uint64_t element. Only int64_t is supported.")
    out.append(item)
    return wanted


def classification_json(result: classification_pb2.ClassificationResult) -> str:
    """``MakeJsonFromClassificationResult``: [[label, score], ...] per example."""
    if not result.classifications:
        raise _invalid("Cannot convert empty ClassificationResults to JSON")
    rows = []
    for classifications in result.classifications:
        classes = classifications.classes
        scores = json_writer.decimal_tokens(np.array([c.score for c in classes], np.float32))
        pairs = ", ".join(f"[{json_writer.quote(c.label)}, {s}]" for c, s in zip(classes, scores))
        rows.append(f"[{pairs}]")
    writer = json_writer.PrettyWriter()
    writer.start_object()
    writer.key(RESULTS_KEY)
    writer.start_array()
    writer.single_line = True
    for row in rows:
        writer.raw(row)
    writer.single_line = False
    writer.end_array()
    writer.end_object()
    return writer.text()


def regression_json(result: regression_pb2.RegressionResult) -> str:
    """``MakeJsonFromRegressionResult``: one value per example, on one line."""
    if not result.regressions:
        raise _invalid("Cannot convert empty RegressionResults to JSON")
    values = json_writer.decimal_tokens(np.array([r.value for r in result.regressions], np.float32))
    return "{\n" + json_writer.indent(1) + f'"{RESULTS_KEY}": [' + ", ".join(values) + "]\n}"
