"""JSON <-> the request and response protos: TF Serving's ``util/json_tensor.cc``.

Requests: a parsed JSON document (``json_text.loads``) fills the very protos gRPC receives, with
TF Serving's rules and error texts:

- Predict: ``"instances"`` (row format: a list, one item per batch row, objects keyed by input
  alias when there are several inputs) or ``"inputs"`` (columnar: one value, or an object of
  aliases); ``"signature_name"``; ``{"b64": "..."}`` for string values. A value's shape is read
  off its first elements (``GetDenseTensorShape``); every list must then match it. Numbers are
  typed as rapidjson types them: DT_FLOAT/DT_DOUBLE take any number, the integer types only
  integers in their range, DT_BOOL only true/false.
- Classify and Regress: ``"examples"`` (objects of feature name -> value or list) and an
  optional ``"context"``; a feature's kind comes from its JSON values (a whole number is int64,
  a decimal or NaN/Infinity is float, strings and b64 objects are bytes, booleans are int64).

Responses: the outputs map written as ``"predictions"`` (row; each item of the batch, or objects
keyed by alias) or ``"outputs"`` (columnar), aliases ending in ``_bytes`` as b64 objects, floats
through ``WriteDecimal``; classification ``"results"`` as [label, score] pairs; regression
``"results"`` as values; errors as ``{"error": ...}``: the bytes TF Serving's PrettyWriter makes,
except that objects of several outputs list them sorted by alias (TF Serving's map order is a
hash's).

The fast path: a dense, well-typed value becomes one numpy array in a few vector operations
(``_dense``); anything else (ragged lists, b64 objects, wrong types) goes through
``_Columns.add``, TF Serving's element-by-element walk, which gives its result or its error.
Tests check that both give the same tensors.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable, Mapping

import numpy as np

from apis.tensorflow.core.example import example_pb2
from apis.tensorflow.core.framework import tensor_pb2
from apis.tensorflow_serving.apis import classification_pb2, predict_pb2, regression_pb2
from runtime import dtypes, errors
from serving import json_text, tensor_codec

ROW, COLUMNAR = "row", "columnar"

SIGNATURE_KEY = "signature_name"
INSTANCES_KEY = "instances"
INPUTS_KEY = "inputs"
CONTEXT_KEY = "context"
EXAMPLES_KEY = "examples"
PREDICTIONS_KEY = "predictions"
OUTPUTS_KEY = "outputs"
RESULTS_KEY = "results"
ERROR_KEY = "error"
BASE64_KEY = "b64"
BYTES_SUFFIX = "_bytes"

_INT_RANGES = {
    dtypes.DT_INT32: (-(2**31), 2**31),  # rapidjson's IsInt: what fits an int32
    dtypes.DT_INT16: (-(2**31), 2**31),
    dtypes.DT_INT8: (-(2**31), 2**31),
    dtypes.DT_UINT8: (-(2**31), 2**31),
    dtypes.DT_INT64: (-(2**63), 2**63),
    dtypes.DT_UINT32: (0, 2**32),
    dtypes.DT_UINT64: (0, 2**64),
}
_FLOATS = (dtypes.DT_FLOAT, dtypes.DT_DOUBLE)


def _invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)


def format_error(value, *text: str) -> errors.InvalidArgumentError:
    """``FormatError``: the offending JSON value quoted, then what is wrong with it."""
    return _invalid(f"JSON Value: {json_text.debug_string(value)} " + "".join(text))


def status_text(error: errors.OpError) -> str:
    """``absl::Status::ToString``, how one error quotes another: "INVALID_ARGUMENT: ..."."""
    return f"{errors.CODE_NAMES.get(error.code, 'UNKNOWN')}: {error.message}"


def _type_name(value) -> str:
    """``JsonTypeString``."""
    if value is None:
        return "Null"
    if value is True:
        return "True"
    if value is False:
        return "False"
    if isinstance(value, dict):
        return "Object"
    if isinstance(value, list):
        return "Array"
    if isinstance(value, str):
        return "String"
    return "Number"


def _type_error(value, dtype: int) -> errors.InvalidArgumentError:
    return _invalid(
        f"JSON Value: {json_text.debug_string(value)} Type: {_type_name(value)} "
        f"is not of expected type: {dtypes.name(dtype)}"
    )


def is_b64_object(value) -> bool:
    """``IsValBase64Object``: an object whose only member is "b64", a string."""
    return type(value) is dict and len(value) == 1 and type(value.get(BASE64_KEY)) is str


_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_ASCII_SPACE = str.maketrans("", "", " \t\n\v\f\r")


def decode_base64(value: dict) -> bytes:
    """``JsonDecodeBase64Object`` with ``absl::Base64Unescape``'s leniency: whitespace is
    skipped and padding may be left off."""
    if not is_b64_object(value):
        raise _invalid(f"JSON Value: {json_text.debug_string(value)} not formatted correctly for base64 data")
    text = value[BASE64_KEY].translate(_ASCII_SPACE)
    data = text.rstrip("=")
    padding = len(text) - len(data)
    if not _BASE64.fullmatch(text) or len(data) % 4 == 1 or (padding and len(text) % 4):
        raise _invalid("Unable to base64 decode")
    try:
        return base64.b64decode(data + "=" * (-len(data) % 4))
    except (binascii.Error, ValueError):
        raise _invalid("Unable to base64 decode") from None


def _as_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _fill_signature(doc: dict, model_spec) -> None:
    if SIGNATURE_KEY in doc:
        name = doc[SIGNATURE_KEY]
        if type(name) is not str:
            raise format_error(doc, "not formatted correctly. 'signature_name' key must be a string value.")
        model_spec.signature_name = name


# ---------------------------------------------------------------------------------------------
# Predict requests


def fill_predict_request(
    doc, request: predict_pb2.PredictRequest, input_dtypes: Callable[[str], Mapping[str, int]]
) -> str:
    """``FillPredictRequestFromJson``: fill ``request`` (model_spec already named) from ``doc``;
    ``input_dtypes(signature_name)`` gives the signature's inputs (alias -> dtype). Returns
    ROW or COLUMNAR, the form the response takes."""
    if type(doc) is not dict:
        raise format_error(doc, "Is not object")
    _fill_signature(doc, request.model_spec)
    name = request.model_spec.signature_name
    infos = dict(input_dtypes(name))
    if not infos:
        raise _invalid(f"Failed to get input map for signature: {name or 'DEFAULT'}")
    if INSTANCES_KEY in doc:
        if INPUTS_KEY in doc:
            raise format_error(
                doc, "Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist "
            )
        instances = doc[INSTANCES_KEY]
        if type(instances) is not list:
            raise format_error(doc, "Expecting 'instances' to be an list/array")
        if not instances:
            raise format_error(doc, "No values in 'instances' array")
        _set_inputs(request, _tensors_from_instances(instances, infos), infos)
        return ROW
    if INPUTS_KEY in doc:
        _set_inputs(request, _tensors_from_inputs(doc[INPUTS_KEY], infos), infos)
        return COLUMNAR
    raise _invalid("Missing 'inputs' or 'instances' key")


def _set_inputs(request, arrays: dict[str, np.ndarray], infos: dict[str, int]) -> None:
    for alias, array in arrays.items():
        dtype = infos[alias]
        proto = request.inputs[alias]
        if dtype == dtypes.DT_STRING or not array.size:
            tensor_codec.encode_into(proto, array, dtype)
        else:  # tensor_content: the same tensor, the form Predict reads without a copy
            tensor_codec.encode_content_into(proto, array, dtype)


def _tensors_from_instances(instances: list, infos: dict[str, int]) -> dict[str, np.ndarray]:
    """``FillTensorMapFromInstancesList``."""
    first = instances[0]
    if type(first) is not dict and len(infos) > 1:
        raise _invalid(
            "instances is a plain list, but expecting list of objects as multiple input tensors "
            "required as per tensorinfo_map"
        )
    names = sorted(infos)
    if type(first) is dict and not is_b64_object(first):
        fast = _dense_objects(instances, infos, names)
        if fast is not None:
            return fast
        columns = _Columns(infos)
        for index, item in enumerate(instances):
            if type(item) is not dict or is_b64_object(item):
                raise _invalid(f"Expecting object but got list at item {index} of input list")
            for name, value in item.items():
                try:
                    columns.add(name, value)
                except errors.OpError as e:
                    raise _invalid(
                        f"Failed to process element: {index} key: {name} of 'instances' list. "
                        f"Error: {status_text(e)}"
                    ) from None
            if set(item) != set(names):
                raise _invalid(
                    f"Failed to process element: {index} of 'instances' list. JSON object: "
                    f"{json_text.debug_string(item)} keys must be equal to: {','.join(names)}"
                )
        return columns.batched(len(instances))
    name = names[0]
    dense = _dense(instances, infos[name])
    if dense is not None:
        return {name: dense}
    columns = _Columns(infos)
    for index, item in enumerate(instances):
        if type(item) is dict and not is_b64_object(item):
            raise _invalid(f"Expecting value/list but got object at item {index} of input list")
        try:
            columns.add(name, item)
        except errors.OpError as e:
            raise _invalid(
                f"Failed to process element: {index} of 'instances' list. Error: {status_text(e)}"
            ) from None
    return columns.batched(len(instances))


def _dense_objects(instances: list, infos: dict[str, int], names: list[str]) -> dict | None:
    """The fast path of row objects: every item an object of exactly the inputs, each input
    dense across items; None for anything else."""
    wanted = set(names)
    for item in instances:
        if type(item) is not dict or item.keys() != wanted or is_b64_object(item):
            return None
    out = {}
    for name in names:
        dense = _dense([item[name] for item in instances], infos[name])
        if dense is None:
            return None
        out[name] = dense
    return out


def _tensors_from_inputs(value, infos: dict[str, int]) -> dict[str, np.ndarray]:
    """``FillTensorMapFromInputsMap``."""
    if type(value) is not dict or is_b64_object(value):
        if len(infos) > 1:
            raise _invalid(
                "inputs is a plain value/list, but expecting an object as multiple input tensors "
                "required as per tensorinfo_map"
            )
        (name,) = infos
        return {name: _tensor(value, infos[name])}
    out = {}
    for name in sorted(infos):
        if name not in value:
            raise _invalid(f"Missing named input: {name} in 'inputs' object.")
        out[name] = _tensor(value[name], infos[name])
    return out


def _tensor(value, dtype: int) -> np.ndarray:
    """One columnar value as an array of ``dtype``: the fast path, else TF Serving's walk."""
    dense = _dense(value, dtype)
    if dense is not None:
        return dense
    columns = _Columns({"": dtype})
    columns.add("", value)
    return columns.single("")


def dense_shape(value) -> list[int]:
    """``GetDenseTensorShape``: the lengths of the first list at each level."""
    shape = []
    while type(value) is list:
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return shape


def _dense(value, dtype: int) -> np.ndarray | None:
    """``value`` as an array of ``dtype`` when it is a dense nest of lists of well-typed
    scalars (the case where TF Serving's walk succeeds with the same values); else None."""
    try:
        shape = dense_shape(value)
        if not shape:
            if type(value) in (list, dict):
                return None
            flat = [value]
        else:
            objects = np.array(value, dtype=object)
            if list(objects.shape) != shape:
                return None
            flat = objects.reshape(-1).tolist()
        array = _typed(flat, dtype)
    except (ValueError, TypeError, OverflowError):
        return None
    return None if array is None else array.reshape(shape)


def _typed(flat: list, dtype: int) -> np.ndarray | None:
    """A flat list of JSON scalars as a 1-D array of ``dtype``, if every one is of a JSON type
    that ``dtype`` takes (``AddValueToTensor``); else None."""
    kinds = set(map(type, flat))
    np_dtype = tensor_codec.numpy_dtype(dtype)
    if not flat:
        return np.empty(0, np_dtype) if np_dtype is not None else None
    if dtype in _FLOATS:
        if not kinds <= {int, float}:
            return None
        with np.errstate(over="ignore"):  # past float32's range: infinity, as C's cast gives
            return np.array(flat, np.float64).astype(np_dtype)  # rapidjson: GetDouble, then a cast
    if dtype in _INT_RANGES:
        if kinds != {int}:
            return None
        low, high = _INT_RANGES[dtype]
        if not (low <= min(flat) and max(flat) < high):
            return None
        wide = np.array(flat, np.uint64 if dtype == dtypes.DT_UINT64 else np.int64)
        return wide.astype(np_dtype)  # int_val of an int8 tensor: TF's cast wraps
    if dtype == dtypes.DT_BOOL:
        return np.array(flat, np.bool_) if kinds == {bool} else None
    if dtype == dtypes.DT_STRING:
        if kinds != {str}:
            return None
        out = np.empty(len(flat), object)
        out[:] = [_as_bytes(s) for s in flat]
        return out
    return None


class _Columns:
    """TF Serving's element-by-element walk (``AddInstanceItem`` / ``FillTensorProto``): values
    per input in order, the shape of each input's first item, every later item checked
    against it. Slow; it runs where the fast path declined, for TF Serving's result or error."""

    def __init__(self, infos: dict[str, int]):
        self._infos = infos
        self._values: dict[str, list] = {}
        self._shapes: dict[str, list[int]] = {}

    def add(self, name: str, item) -> None:
        if name not in self._infos:
            raise _invalid(f"JSON object: does not have named input: {name}")
        dtype = self._infos[name]
        shape = dense_shape(item)
        values: list = []
        try:
            _fill(item, 0, shape, dtype, values)
        except RecursionError:
            raise _invalid("Encountered list nested too deeply") from None
        if name not in self._shapes:
            self._shapes[name] = shape
        else:
            expected = math.prod(self._shapes[name])
            if expected != len(values):
                raise _invalid(f"Expecting tensor size: {expected} but got: {len(values)}")
            if self._shapes[name] != shape:
                raise _invalid(
                    f"Expecting shape {_shape_text(self._shapes[name])} but got: {_shape_text(shape)}"
                )
        self._values.setdefault(name, []).extend(values)

    def batched(self, count: int) -> dict[str, np.ndarray]:
        return {
            name: _array(values, self._infos[name], [count, *self._shapes[name]])
            for name, values in self._values.items()
        }

    def single(self, name: str) -> np.ndarray:
        return _array(self._values[name], self._infos[name], self._shapes[name])


def _shape_text(shape: list[int]) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


def _fill(value, level: int, shape: list[int], dtype: int, out: list) -> None:
    """``FillTensorProto``: every leaf at depth ``len(shape)``, every list of its level's size."""
    rank = len(shape)
    if type(value) is not list:
        if level != rank:
            raise _invalid(
                f"JSON Value: {json_text.debug_string(value)} found at incorrect level: {level + 1} "
                f"in the JSON DOM. Expected at level: {rank}"
            )
        if type(value) is dict:
            if dtype != dtypes.DT_STRING:
                raise _type_error(value, dtype)
            out.append(decode_base64(value))
        else:
            out.append(_scalar(value, dtype))
        return
    if level >= rank:
        raise _invalid(f"Encountered list at unexpected level: {level} expected < {rank}")
    if len(value) != shape[level]:
        raise _invalid(
            f"Encountered list at unexpected size: {len(value)} at level: {level} "
            f"expected size: {shape[level]}"
        )
    for item in value:
        _fill(item, level + 1, shape, dtype, out)


def _scalar(value, dtype: int):
    """``AddValueToTensor``: one JSON scalar as a value of ``dtype``."""
    kind = type(value)
    if dtype in _FLOATS:
        if kind not in (int, float):
            raise _type_error(value, dtype)
        return float(value)
    if dtype in _INT_RANGES:
        low, high = _INT_RANGES[dtype]
        if kind is not int or not low <= value < high:
            raise _type_error(value, dtype)
        return value
    if dtype == dtypes.DT_STRING:
        if kind is not str:
            raise _type_error(value, dtype)
        return _as_bytes(value)
    if dtype == dtypes.DT_BOOL:
        if kind is not bool:
            raise _type_error(value, dtype)
        return value
    raise errors.UnimplementedError(
        None, None, f"Conversion of JSON Value: {json_text.debug_string(value)} to type: {dtypes.name(dtype)}"
    )


def _array(values: list, dtype: int, shape: list[int]) -> np.ndarray:
    np_dtype = tensor_codec.numpy_dtype(dtype)
    if dtype == dtypes.DT_STRING:
        array = np.empty(len(values), object)
        array[:] = values
    elif not values:
        array = np.empty(0, np_dtype if np_dtype is not None else np.float32)
    elif dtype in _INT_RANGES:
        array = np.array(values, np.uint64 if dtype == dtypes.DT_UINT64 else np.int64).astype(np_dtype)
    else:
        with np.errstate(over="ignore"):
            array = np.array(values, np.float64 if dtype in _FLOATS else np_dtype).astype(np_dtype)
    return array.reshape(shape)


# ---------------------------------------------------------------------------------------------
# Classify and Regress requests


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
    _fill_signature(doc, request.model_spec)
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
        raise _invalid(f"Example must be JSON object but got JSON {_type_name(value)}")
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
        wanted, item = _BYTES, _as_bytes(value)
    elif value_type is float or (value_type is int and not -(2**63) <= value < 2**64):
        wanted, item = _FLOAT, float(value)  # rapidjson holds integers past 64 bits as doubles
    elif value_type is int:
        wanted, item = _INT64, value
    elif value_type is dict and is_b64_object(value):
        wanted, item = _BYTES, None
    else:
        raise _invalid(f"Feature: {name} has element with unexpected JSON type: {_type_name(value)}")
    if kind is not None and kind != wanted:
        raise _invalid(f"Unexpected element type in feature: {name} expecting type: {_KIND_NAMES[kind]}")
    if item is None:
        item = decode_base64(value)
    elif wanted == _INT64 and item >= 2**63:
        raise _invalid(f"Feature: {name} has uint64_t element. Only int64_t is supported.")
    out.append(item)
    return wanted


# ---------------------------------------------------------------------------------------------
# responses

_WRITABLE = {
    dtypes.DT_FLOAT,
    dtypes.DT_DOUBLE,
    dtypes.DT_INT32,
    dtypes.DT_INT16,
    dtypes.DT_INT8,
    dtypes.DT_UINT8,
    dtypes.DT_STRING,
    dtypes.DT_INT64,
    dtypes.DT_BOOL,
    dtypes.DT_UINT32,
    dtypes.DT_UINT64,
}


def predict_response_json(outputs: Mapping[str, tensor_pb2.TensorProto], format: str) -> str:
    """``MakeJsonFromTensors``: a PredictResponse's outputs in the request's form."""
    if not outputs:
        raise _invalid("Cannot convert empty tensor map to JSON")
    arrays = {name: (tensor_codec.decode(outputs[name]), outputs[name].dtype) for name in sorted(outputs)}
    if format == ROW:
        return _row_json(arrays)
    if format == COLUMNAR:
        return _columnar_json(arrays)
    raise _invalid("Invalid request format")


def _tokens(name: str, array: np.ndarray, dtype: int, depth: int) -> list[str]:
    """Every value of an output rendered (``AddSingleValueAndAdvance``), row-major; a b64
    object's lines are indented for ``depth`` open containers."""
    if not array.size:
        return []
    if dtype not in _WRITABLE:
        raise _invalid(f"Failed to write JSON value for tensor type: {dtypes.name(dtype)}")
    if dtype in _FLOATS:
        return json_text.decimal_tokens(array)
    flat = array.reshape(-1).tolist()
    if dtype == dtypes.DT_BOOL:
        return ["true" if v else "false" for v in flat]
    if dtype != dtypes.DT_STRING:
        return list(map(str, flat))
    if name.endswith(BYTES_SUFFIX):
        return [json_text.b64_object(base64.b64encode(v).decode("ascii"), depth) for v in flat]
    return [json_text.quote(v.decode("utf-8", "surrogateescape")) for v in flat]


def _row_json(arrays: dict[str, tuple[np.ndarray, int]]) -> str:
    """``MakeRowFormatJsonFromTensors``."""
    batch = -1
    for name, (array, _) in arrays.items():
        if array.ndim == 0:
            raise _invalid(f"Tensor name: {name} has no shape information ")
        if batch >= 0 and array.shape[0] != batch:
            raise _invalid(
                f"Tensor name: {name} has inconsistent batch size: {array.shape[0]} expecting: {batch}"
            )
        batch = array.shape[0]
    objects = len(arrays) > 1
    if not objects:  # the common response: what the writer below makes for a single output
        ((name, (array, dtype)),) = arrays.items()
        items = _row_items(name, array, dtype, 2, batch)
        close = "\n" + json_text.indent(1) + "]" if items else "]"
        return "{\n" + json_text.indent(1) + f'"{PREDICTIONS_KEY}": [' + ", ".join(items) + close + "\n}"
    writer = json_text.PrettyWriter()
    writer.start_object()
    writer.key(PREDICTIONS_KEY)
    writer.start_array()
    # Each output's items, rendered at the depth they are written at (inside the item object).
    depth = writer.depth + (1 if objects else 0)
    items = {}
    for name, (array, dtype) in arrays.items():
        tokens = _tokens(name, array, dtype, depth + array.ndim - 1)
        per_item = len(tokens) // batch if batch else 0
        inner = array.shape[1:]
        items[name] = [
            json_text.nested(tokens[i * per_item : (i + 1) * per_item], inner, depth, True)
            for i in range(batch)
        ]
    for i in range(batch):
        if objects:
            writer.start_object()
        writer.single_line = True
        for name in arrays:
            if objects:
                writer.key(name)
            writer.raw(items[name][i])
        writer.single_line = False
        if objects:
            writer.end_object()
    writer.end_array()
    writer.end_object()
    return writer.text()


def _row_items(name: str, array: np.ndarray, dtype: int, depth: int, batch: int) -> list[str]:
    """Each batch item of an output rendered on one line, written with ``depth`` containers
    open."""
    tokens = _tokens(name, array, dtype, depth + array.ndim - 1)
    if array.ndim == 1:
        return tokens
    per_item = len(tokens) // batch if batch else 0
    inner = array.shape[1:]
    return [
        json_text.nested(tokens[i * per_item : (i + 1) * per_item], inner, depth, True) for i in range(batch)
    ]


def _columnar_json(arrays: dict[str, tuple[np.ndarray, int]]) -> str:
    """``MakeColumnarFormatJsonFromTensors``."""
    writer = json_text.PrettyWriter()
    writer.start_object()
    writer.key(OUTPUTS_KEY)
    objects = len(arrays) > 1
    if objects:
        writer.start_object()
    for name, (array, dtype) in arrays.items():
        if objects:
            writer.key(name)
        depth = writer.depth
        tokens = _tokens(name, array, dtype, depth + array.ndim)
        writer.raw(json_text.nested(tokens, array.shape, depth, False))
    if objects:
        writer.end_object()
    writer.end_object()
    return writer.text()


def classification_json(result: classification_pb2.ClassificationResult) -> str:
    """``MakeJsonFromClassificationResult``: [[label, score], ...] per example."""
    if not result.classifications:
        raise _invalid("Cannot convert empty ClassificationResults to JSON")
    rows = []
    for classifications in result.classifications:
        classes = classifications.classes
        scores = json_text.decimal_tokens(np.array([c.score for c in classes], np.float32))
        pairs = ", ".join(f"[{json_text.quote(c.label)}, {s}]" for c, s in zip(classes, scores))
        rows.append(f"[{pairs}]")
    writer = json_text.PrettyWriter()
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
    values = json_text.decimal_tokens(np.array([r.value for r in result.regressions], np.float32))
    return "{\n" + json_text.indent(1) + f'"{RESULTS_KEY}": [' + ", ".join(values) + "]\n}"


def error_json(message: str) -> str:
    """``MakeJsonFromStatus``: ``{"error": message}``."""
    return "{\n" + json_text.indent(1) + f'"{ERROR_KEY}": ' + json_text.quote(message) + "\n}"
