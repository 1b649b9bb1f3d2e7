"""JSON <-> Predict's tensors: TF Serving's ``util/json_tensor.cc`` (its tf.Example half, for
Classify and Regress, is ``serving.rest_api.json_examples``).

Requests: a parsed JSON document (``json_text.loads``) fills the very PredictRequest gRPC
receives, with TF Serving's rules and error texts: ``"instances"`` (row format: a list, one item
per batch row, objects keyed by input alias when there are several inputs) or ``"inputs"``
(columnar: one value, or an object of aliases); ``"signature_name"``; ``{"b64": "..."}`` for
string values. A value's shape is read off its first elements (``GetDenseTensorShape``); every
list must then match it. Numbers are typed as rapidjson types them: DT_FLOAT/DT_DOUBLE take any
number, the integer types only integers in their range, DT_BOOL only true/false.

Responses: the outputs map written as ``"predictions"`` (row; each item of the batch, or objects
keyed by alias) or ``"outputs"`` (columnar), aliases ending in ``_bytes`` as b64 objects, floats
through ``WriteDecimal``; errors as ``{"error": ...}``: the bytes TF Serving's PrettyWriter
makes, except that objects of several outputs list them sorted by alias (TF Serving's map order
is a hash's).

The fast path: a dense, well-typed value becomes one numpy array in a few vector operations
(``_dense``); anything else (ragged lists, b64 objects, wrong types) goes through
``_Columns.add``, TF Serving's element-by-element walk, which gives its result or its error.
Tests check that both give the same tensors.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Iterator, Mapping

import numpy as np

from apis.tensorflow.core.framework import tensor_pb2
from apis.tensorflow_serving.apis import predict_pb2
from runtime import dtypes, errors
from serving.inference import tensor_codec
from serving.rest_api import json_bulk, json_numbers, json_text, json_writer

ROW, COLUMNAR = "row", "columnar"

INSTANCES_KEY = "instances"
INPUTS_KEY = "inputs"
PREDICTIONS_KEY = "predictions"
OUTPUTS_KEY = "outputs"
RESULTS_KEY = "results"
ERROR_KEY = "error"
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


def status_text(error: errors.OpError) -> str:
    """``absl::Status::ToString``, how one error quotes another: "INVALID_ARGUMENT: ..."."""
    return f"{errors.CODE_NAMES.get(error.code, 'UNKNOWN')}: {error.message}"


def _type_error(value, dtype: int) -> errors.InvalidArgumentError:
    return _invalid(
        f"JSON Value: {json_writer.debug_string(value)} Type: {json_text.type_name(value)} "
        f"is not of expected type: {dtypes.name(dtype)}"
    )


# ---------------------------------------------------------------------------------------------
# Predict requests


def fill_predict_request(
    doc, request: predict_pb2.PredictRequest, input_dtypes: Callable[[str], Mapping[str, int]]
) -> str:
    """``FillPredictRequestFromJson``: fill ``request`` (model_spec already named) from ``doc``;
    ``input_dtypes(signature_name)`` gives the signature's inputs (alias -> dtype). Returns
    ROW or COLUMNAR, the form the response takes."""
    if type(doc) is not dict:
        raise json_text.format_error(doc, "Is not object")
    json_text.fill_signature(doc, request.model_spec)
    name = request.model_spec.signature_name
    infos = dict(input_dtypes(name))
    if not infos:
        raise _invalid(f"Failed to get input map for signature: {name or 'DEFAULT'}")
    if INSTANCES_KEY in doc:
        if INPUTS_KEY in doc:
            raise json_text.format_error(
                doc, "Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist "
            )
        instances = doc[INSTANCES_KEY]
        if type(instances) is json_numbers.Numbers:  # a large array read from the body's text
            if len(infos) == 1:
                ((name, dtype),) = infos.items()
                array = _numbers(instances, dtype)
                if array is not None:
                    _set_inputs(request, {name: array}, infos)
                    return ROW
            instances = instances.parsed()
        if type(instances) is not list:
            raise json_text.format_error(doc, "Expecting 'instances' to be an list/array")
        if not instances:
            raise json_text.format_error(doc, "No values in 'instances' array")
        _set_inputs(request, _tensors_from_instances(instances, infos), infos)
        return ROW
    if INPUTS_KEY in doc:
        _set_inputs(request, _tensors_from_inputs(doc[INPUTS_KEY], infos), infos)
        return COLUMNAR
    raise _invalid("Missing 'inputs' or 'instances' key")


def _set_inputs(request, arrays: dict[str, np.ndarray], infos: dict[str, int]) -> None:
    for alias, array in arrays.items():
        tensor_codec.encode_input_into(request.inputs[alias], array, infos[alias])


def _tensors_from_instances(instances: list, infos: dict[str, int]) -> dict[str, np.ndarray]:
    """``FillTensorMapFromInstancesList``."""
    first = instances[0]
    if type(first) is not dict and len(infos) > 1:
        raise _invalid(
            "instances is a plain list, but expecting list of objects as multiple input tensors "
            "required as per tensorinfo_map"
        )
    names = sorted(infos)
    if type(first) is dict and not json_text.is_b64_object(first):
        fast = _dense_objects(instances, infos, names)
        if fast is not None:
            return fast
        columns = _Columns(infos)
        for index, item in enumerate(instances):
            if type(item) is not dict or json_text.is_b64_object(item):
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
                    f"{json_writer.debug_string(item)} keys must be equal to: {','.join(names)}"
                )
        return columns.batched(len(instances))
    name = names[0]
    dense = _dense(instances, infos[name])
    if dense is not None:
        return {name: dense}
    columns = _Columns(infos)
    for index, item in enumerate(instances):
        if type(item) is dict and not json_text.is_b64_object(item):
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
        if type(item) is not dict or item.keys() != wanted or json_text.is_b64_object(item):
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
    if type(value) is not dict or json_text.is_b64_object(value):
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
    if type(value) is json_numbers.Numbers:
        array = _numbers(value, dtype)
        if array is not None:
            return array
        value = value.parsed()
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


def _numbers(value: json_numbers.Numbers, dtype: int) -> np.ndarray | None:
    """A lifted array as a tensor of ``dtype``, by the rules of ``_typed``; None where
    ``dtype`` does not take its values (the general path then reads ``value.parsed()``)."""
    array = _typed(value.values, dtype, value.kinds)
    return None if array is None else array.reshape(value.shape)


def _typed(flat: list | np.ndarray, dtype: int, kinds: set[type] | None = None) -> np.ndarray | None:
    """A flat list of JSON scalars (or a lifted array of numbers, with the JSON ``kinds`` they
    had) as a 1-D array of ``dtype``, if every one is of a JSON type that ``dtype`` takes
    (``AddValueToTensor``); else None."""
    kinds = set(map(type, flat)) if kinds is None else kinds
    np_dtype = tensor_codec.numpy_dtype(dtype)
    if not len(flat):
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
        least, most = (
            (int(flat.min()), int(flat.max())) if type(flat) is np.ndarray else (min(flat), max(flat))
        )
        if not (low <= least and most < high):
            return None
        wide = np.array(flat, np.uint64 if dtype == dtypes.DT_UINT64 else np.int64)
        return wide.astype(np_dtype)  # int_val of an int8 tensor: TF's cast wraps
    if dtype == dtypes.DT_BOOL:
        return np.array(flat, np.bool_) if kinds == {bool} else None
    if dtype == dtypes.DT_STRING:
        if kinds == {dict}:  # b64 objects: decoded in bulk where all are canonical
            decoded = json_text.decode_base64_all(flat)
            if decoded is None:
                return None
        elif kinds == {str}:
            decoded = [json_text.as_bytes(s) for s in flat]
        else:
            return None
        out = np.empty(len(flat), object)
        out[:] = decoded
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
                f"JSON Value: {json_writer.debug_string(value)} found at incorrect level: {level + 1} "
                f"in the JSON DOM. Expected at level: {rank}"
            )
        if type(value) is dict:
            if dtype != dtypes.DT_STRING:
                raise _type_error(value, dtype)
            out.append(json_text.decode_base64(value))
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
        return json_text.as_bytes(value)
    if dtype == dtypes.DT_BOOL:
        if kind is not bool:
            raise _type_error(value, dtype)
        return value
    raise errors.UnimplementedError(
        None,
        None,
        f"Conversion of JSON Value: {json_writer.debug_string(value)} to type: {dtypes.name(dtype)}",
    )


_MAX_DIMS = 64


def _array(values: list, dtype: int, shape: list[int]) -> np.ndarray:
    if len(shape) > _MAX_DIMS:  # TF's limit is 254; numpy's, which holds the tensor here, 64
        raise _invalid(f"Tensor of {len(shape)} dimensions: at most {_MAX_DIMS} are supported")
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
    return outputs_json(
        {name: (tensor_codec.decode(proto), proto.dtype) for name, proto in outputs.items()}, format
    )


def outputs_json(outputs: Mapping[str, tuple[np.ndarray, int]], format: str) -> str:
    """``predict_response_json`` of the outputs as arrays (``PredictOutputs.arrays``: alias ->
    (array, TF dtype)), what the REST route writes without building TensorProtos."""
    if not outputs:
        raise _invalid("Cannot convert empty tensor map to JSON")
    arrays = {name: outputs[name] for name in sorted(outputs)}
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
        return json_writer.decimal_tokens(array)
    flat = array.reshape(-1).tolist()
    if dtype == dtypes.DT_BOOL:
        return ["true" if v else "false" for v in flat]
    if dtype != dtypes.DT_STRING:
        return list(map(str, flat))
    if name.endswith(BYTES_SUFFIX):
        return [json_writer.b64_object(base64.b64encode(v).decode("ascii"), depth) for v in flat]
    return json_writer.quote_all([v.decode("utf-8", "surrogateescape") for v in flat])


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
    if len(arrays) == 1:  # a list of each row's value
        ((name, (array, dtype)),) = arrays.items()
        pieces = list(_row_runs(name, array, dtype, 2 + array.ndim - 1, 2, True, ", "))
        close = "\n" + json_writer.indent(1) + "]" if batch else "]"
        return "{\n" + json_writer.indent(1) + f'"{PREDICTIONS_KEY}": [' + ", ".join(pieces) + close + "\n}"
    # What PrettyWriter writes for a list of objects, one per row, their members on lines of
    # their own and each value on one line (held equal to it in the tests): one format per row.
    depth = 3  # inside the root object, "predictions" and the row's object
    items = [
        [
            text
            for rows in _row_chunks(name, array, dtype, depth + array.ndim - 1, depth, True)
            for text in rows
        ]
        for name, (array, dtype) in arrays.items()
    ]
    member = ",\n" + json_writer.indent(depth)
    row = (
        "{\n"
        + json_writer.indent(depth)
        + member.join(json_writer.quote(name).replace("%", "%%") + ": %s" for name in arrays)
        + "\n"
        + json_writer.indent(depth - 1)
        + "}"
    )
    rows = (",\n" + json_writer.indent(depth - 1)).join(row % values for values in zip(*items))
    listed = (
        "\n" + json_writer.indent(depth - 1) + rows + "\n" + json_writer.indent(1) + "]" if batch else "]"
    )
    return "{\n" + json_writer.indent(1) + f'"{PREDICTIONS_KEY}": [' + listed + "\n}"


_CHUNK = 1 << 16  # values rendered at a time: a large output is never one str per value


def _row_chunks(
    name: str, array: np.ndarray, dtype: int, token_depth: int, depth: int, single_line: bool
) -> Iterator[list[str]]:
    """The rendered rows (``array[i]``, each nested at ``depth``; its values' b64 objects at
    ``token_depth``) in runs of about ``_CHUNK`` values: the texts of one run at a time are
    what a large output holds beyond its answer (not a str per value, ~60 bytes each)."""
    rows = len(array)
    per_row = array.size // rows if rows else 0
    step = max(1, _CHUNK // max(per_row, 1))
    inner = array.shape[1:]
    for start in range(0, rows, step):
        part = array[start : start + step]
        if json_bulk.renders(part, dtype, inner):  # rows apart by "|", which no number holds
            yield json_bulk.nested_rows(part, len(part), inner, depth, single_line, "|").split("|")
            continue
        tokens = _tokens(name, part, dtype, token_depth)
        if not inner:
            yield tokens
        else:
            yield [
                json_writer.nested(tokens[i * per_row : (i + 1) * per_row], inner, depth, single_line)
                for i in range(len(part))
            ]


def _row_runs(
    name: str, array: np.ndarray, dtype: int, token_depth: int, depth: int, single_line: bool, row_sep: str
) -> Iterator[str]:
    """``row_sep.join`` of each run of ``_row_chunks``, rendered in one join per run
    (``json_writer.nested_run``)."""
    rows = len(array)
    per_row = array.size // rows if rows else 0
    step = max(1, _CHUNK // max(per_row, 1))
    inner = array.shape[1:]
    for start in range(0, rows, step):
        part = array[start : start + step]
        if json_bulk.renders(part, dtype, inner):
            yield json_bulk.nested_rows(part, len(part), inner, depth, single_line, row_sep)
            continue
        tokens = _tokens(name, part, dtype, token_depth)
        yield json_writer.nested_run(tokens, len(part), inner, depth, single_line, row_sep)


def _columnar_json(arrays: dict[str, tuple[np.ndarray, int]]) -> str:
    """``MakeColumnarFormatJsonFromTensors``."""
    writer = json_writer.PrettyWriter()
    writer.start_object()
    writer.key(OUTPUTS_KEY)
    objects = len(arrays) > 1
    if objects:
        writer.start_object()
    for name, (array, dtype) in arrays.items():
        if objects:
            writer.key(name)
        depth = writer.depth
        if array.ndim == 0 or not array.size:
            tokens = _tokens(name, array, dtype, depth + array.ndim)
            writer.raw(json_writer.nested(tokens, array.shape, depth, False))
            continue
        # nested() of the whole array, its outermost list joined from runs of rows.
        lead = "\n" + json_writer.indent(depth + 1)
        pieces = [
            lead + run
            for run in _row_runs(name, array, dtype, depth + array.ndim, depth + 1, False, "," + lead)
        ]
        writer.raw("[" + ",".join(pieces) + "\n" + json_writer.indent(depth) + "]")
    if objects:
        writer.end_object()
    writer.end_object()
    return writer.text()


def error_json(message: str) -> str:
    """``MakeJsonFromStatus``: ``{"error": message}``."""
    return "{\n" + json_writer.indent(1) + f'"{ERROR_KEY}": ' + json_writer.quote(message) + "\n}"
