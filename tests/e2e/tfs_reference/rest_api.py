"""The reference server's REST front end: TF Serving's HTTP API around the same request protos.

As TF Serving's ``http_rest_api_handler.cc`` does, each request is turned into the proto a gRPC
client would send (``json_tensor.cc``'s codecs: row ``instances`` / columnar ``inputs``,
``{"b64": ...}`` for bytes, tf.Examples from JSON objects), answered by the same functions in
``inference.py``, and printed as TF Serving prints it; errors are ``{"error": message}`` with
TF Serving's HTTP status for the code. ``http.server`` with a thread per connection; TLS optional.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import re
import ssl
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import tensorflow as tf
from google.protobuf import json_format
from inference import (
    CLASSIFY,
    DEFAULT_SIGNATURE,
    REGRESS,
    C,
    ServerCore,
    ServingError,
    classify,
    get_model_metadata,
    get_model_status,
    invalid,
    predict,
    regress,
)
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_pb2,
    predict_pb2,
    regression_pb2,
)

logger = logging.getLogger("tfs_reference.rest_api")
REST_TIMEOUT_S = 30.0  # TF Serving's default --rest_api_timeout_in_ms
HTTP_CODES = {C.CANCELLED: 499, C.INVALID_ARGUMENT: 400, C.DEADLINE_EXCEEDED: 504, C.NOT_FOUND: 404,
              C.ALREADY_EXISTS: 409, C.PERMISSION_DENIED: 403, C.RESOURCE_EXHAUSTED: 429,
              C.FAILED_PRECONDITION: 400, C.ABORTED: 409, C.OUT_OF_RANGE: 400, C.UNIMPLEMENTED: 501,
              C.UNAVAILABLE: 503, C.UNAUTHENTICATED: 401}  # fmt: skip  # http_server.cc; the rest: 500

_PREDICT_PATH = re.compile(
    r"/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?:(classify|regress|predict)", re.I
)
_STATUS_PATH = re.compile(
    r"/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?(?:/(metadata))?", re.I
)


def _debug(value) -> str:
    return json.dumps(value, separators=(",", ":"))[:256]


def _json_type(value) -> str:
    if value is None or isinstance(value, bool):
        return str(value).replace("None", "Null")
    kinds = ((dict, "Object"), (list, "Array"), (str, "String"), ((int, float), "Number"))
    return next(name for kind, name in kinds if isinstance(value, kind))


def _dtype_string(dtype: tf.DType) -> str:
    """DataTypeString: "float", "double", "int32", "string"."""
    return {"float32": "float", "float64": "double", "float16": "half"}.get(dtype.name, dtype.name)


def _is_b64(value) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("b64"), str)


def _is_object(value) -> bool:
    return isinstance(value, dict) and not _is_b64(value)


def _b64decode(value: dict) -> bytes:
    text = value["b64"]
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except ValueError:
        raise invalid("Unable to base64 decode") from None


def _json_scalar(value, dtype: tf.DType):
    if dtype == tf.string:
        if isinstance(value, dict):
            if not _is_b64(value):
                raise invalid(f"JSON Value: {_debug(value)} not formatted correctly for base64 data")
            return _b64decode(value)
        if isinstance(value, str):
            return value.encode()
    elif dtype == tf.bool:
        if isinstance(value, bool):
            return value
    elif dtype.is_integer:
        if isinstance(value, int) and not isinstance(value, bool) and dtype.min <= value <= dtype.max:
            return value
    elif dtype.is_floating:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
    else:
        raise ServingError(
            C.UNIMPLEMENTED, f"Conversion of JSON Value: {_debug(value)} to type: {_dtype_string(dtype)}"
        )
    raise invalid(
        f"JSON Value: {_debug(value)} Type: {_json_type(value)} is not of expected type: {_dtype_string(dtype)}"
    )


def json_to_ndarray(value, dtype: tf.DType) -> np.ndarray:
    """FillTensorProto: the shape is read from the first element at each level; lists must be dense."""
    shape, probe = [], value
    while isinstance(probe, list):
        shape.append(len(probe))
        probe = probe[0] if probe else None
    flat: list = []

    def walk(item, level: int) -> None:
        if not isinstance(item, list):
            if level != len(shape):
                raise invalid(
                    f"JSON Value: {_debug(item)} found at incorrect level: {level + 1} in the JSON DOM. "
                    f"Expected at level: {len(shape)}"
                )
            flat.append(_json_scalar(item, dtype))
        elif level >= len(shape):
            raise invalid(f"Encountered list at unexpected level: {level} expected < {len(shape)}")
        elif len(item) != shape[level]:
            raise invalid(
                f"Encountered list at unexpected size: {len(item)} at level: {level} expected size: {shape[level]}"
            )
        else:
            for element in item:
                walk(element, level + 1)

    walk(value, 0)
    return np.array(flat, dtype=dtype.as_numpy_dtype).reshape(shape)


def _instances_to_arrays(instances: list, infos) -> dict[str, np.ndarray]:
    """FillTensorMapFromInstancesList: rows of one value, or rows of objects keyed by input."""
    names = sorted(infos)
    objects = _is_object(instances[0])
    if not objects and len(names) > 1:
        raise invalid(
            "instances is a plain list, but expecting list of objects as multiple input tensors required as "
            "per tensorinfo_map"
        )
    rows: dict[str, list[np.ndarray]] = {}
    for i, item in enumerate(instances):
        if objects != _is_object(item):
            got = "list" if objects else "object"
            raise invalid(
                f"Expecting {'object' if objects else 'value/list'} but got {got} at item {i} of input list"
            )
        for name, value in item.items() if objects else [(names[0], item)]:
            where = f"{i} key: {name}" if objects else f"{i}"
            try:
                if name not in infos:
                    raise invalid(f"JSON object: does not have named input: {name}")
                array = json_to_ndarray(value, tf.as_dtype(infos[name].dtype))
                if name in rows and array.shape != rows[name][0].shape:
                    raise invalid(f"Expecting shape {list(rows[name][0].shape)} but got: {list(array.shape)}")
            except ServingError as e:
                raise invalid(
                    f"Failed to process element: {where} of 'instances' list. Error: {e.code.name}: {e.message}"
                ) from None
            rows.setdefault(name, []).append(array)
        if objects and set(item) != set(names):
            raise invalid(
                f"Failed to process element: {i} of 'instances' list. JSON object: {_debug(item)} keys must be "
                f"equal to: {','.join(names)}"
            )
    return {name: np.stack(arrays) for name, arrays in rows.items()}


def _inputs_to_arrays(value, infos) -> dict[str, np.ndarray]:
    """FillTensorMapFromInputsMap: one value for a single input, else an object keyed by input."""
    if not _is_object(value):
        if len(infos) > 1:
            raise invalid(
                "inputs is a plain value/list, but expecting an object as multiple input tensors required as "
                "per tensorinfo_map"
            )
        name = next(iter(infos))
        return {name: json_to_ndarray(value, tf.as_dtype(infos[name].dtype))}
    arrays = {}
    for name, info in infos.items():
        if name not in value:
            raise invalid(f"Missing named input: {name} in 'inputs' object.")
        arrays[name] = json_to_ndarray(value[name], tf.as_dtype(info.dtype))
    return arrays


def _json_decimal(value, dtype) -> float:
    """WriteDecimal: "%g", or all the digits when that does not round-trip (0.1f prints as 0.1)."""
    if not math.isfinite(value):
        return float(value)
    text = f"{value:g}"
    if dtype(text) != value:
        text = f"{value:.{9 if dtype == np.float32 else 17}g}"
    return float(text)


def _json_value(value, dtype: np.dtype, as_b64: bool):
    """AddSingleValueAndAdvance: the dtypes TF Serving writes; strings as text, or as
    {"b64": ...} when the output's name ends in "_bytes"."""
    if dtype.kind == "O":
        return {"b64": base64.b64encode(value).decode()} if as_b64 else value.decode("utf-8", "replace")
    if dtype in (np.float32, np.float64):
        return _json_decimal(value, dtype.type)
    if dtype == np.bool_:
        return bool(value)
    if dtype in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64):
        return int(value)
    raise invalid(f"Failed to write JSON value for tensor type: {_dtype_string(tf.as_dtype(dtype))}")


def ndarray_to_json(array: np.ndarray, as_b64: bool):
    """AddTensorValues: nested lists, a bare value for a scalar."""
    values = [_json_value(v, array.dtype, as_b64) for v in array.ravel()]
    return np.array(values, dtype=object).reshape(array.shape).tolist()


def outputs_to_json(outputs, row: bool) -> dict:
    """MakeJsonFromTensors: "predictions" (rows) or "outputs" (columns), unwrapped for one output."""
    if not outputs:
        raise invalid("Cannot convert empty tensor map to JSON")
    arrays = {name: tf.make_ndarray(proto) for name, proto in sorted(outputs.items())}
    values = {name: ndarray_to_json(a, name.endswith("_bytes")) for name, a in arrays.items()}
    if not row:
        return {"outputs": values if len(values) > 1 else next(iter(values.values()))}
    batch = None
    for name, array in arrays.items():
        if array.ndim == 0:
            raise invalid(f"Tensor name: {name} has no shape information ")
        if batch is not None and array.shape[0] != batch:
            raise invalid(
                f"Tensor name: {name} has inconsistent batch size: {array.shape[0]} expecting: {batch}"
            )
        batch = array.shape[0]
    if len(values) == 1:
        return {"predictions": next(iter(values.values()))}
    return {"predictions": [{name: values[name][i] for name in values} for i in range(batch)]}


def _parse_json(body: bytes) -> dict:
    if not body:
        raise invalid("JSON Parse error: The document is empty")
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise invalid(f"JSON Parse error: {getattr(e, 'msg', e)} at offset: {getattr(e, 'pos', 0)}") from None
    if not isinstance(doc, dict):
        raise invalid(f"JSON Value: {_debug(doc)} Is not object")
    if "signature_name" in doc and not isinstance(doc["signature_name"], str):
        raise invalid(
            f"JSON Value: {_debug(doc)} not formatted correctly. 'signature_name' key must be a string value."
        )
    return doc


def rest_predict(core: ServerCore, model_spec, doc: dict) -> dict:
    request = predict_pb2.PredictRequest()
    request.model_spec.CopyFrom(model_spec)
    request.model_spec.signature_name = doc.get("signature_name", "")
    signature_name = request.model_spec.signature_name or DEFAULT_SIGNATURE
    signature = core.servable(model_spec).signature_def.get(signature_name)
    if signature is None:
        raise invalid(f'Serving signature name: "{signature_name}" not found in signature def')
    if not signature.inputs:
        raise invalid(
            f"Failed to get input map for signature: {request.model_spec.signature_name or 'DEFAULT'}"
        )
    if "instances" in doc and "inputs" in doc:
        raise invalid(
            f"JSON Value: {_debug(doc)} Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist "
        )
    if "instances" in doc:
        if not isinstance(doc["instances"], list):
            raise invalid(f"JSON Value: {_debug(doc)} Expecting 'instances' to be an list/array")
        if not doc["instances"]:
            raise invalid(f"JSON Value: {_debug(doc)} No values in 'instances' array")
        arrays = _instances_to_arrays(doc["instances"], signature.inputs)
    elif "inputs" in doc:
        arrays = _inputs_to_arrays(doc["inputs"], signature.inputs)
    else:
        raise invalid("Missing 'inputs' or 'instances' key")
    for name, array in arrays.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(array, dtype=signature.inputs[name].dtype))
    response = predict(core, request, REST_TIMEOUT_S)
    return outputs_to_json(response.outputs, row="instances" in doc)


_FEATURE_KINDS = {"bytes_list": "bytes", "float_list": "float", "int64_list": "int64"}


def _add_feature_value(value, name: str, feature) -> None:
    """AddValueToFeature: strings and b64 -> bytes, JSON doubles -> float, integers and bools -> int64."""
    if value is None or isinstance(value, list) or _is_object(value):
        raise invalid(f"Feature: {name} has element with unexpected JSON type: {_json_type(value)}")
    if isinstance(value, str) or _is_b64(value):
        kind, item = "bytes_list", value.encode() if isinstance(value, str) else _b64decode(value)
    elif isinstance(value, float):
        kind, item = "float_list", value
    else:
        kind, item = "int64_list", int(value)
        if item >= 1 << 63:
            raise invalid(f"Feature: {name} has uint64_t element. Only int64_t is supported.")
    current = feature.WhichOneof("kind")
    if current not in (None, kind):
        raise invalid(f"Unexpected element type in feature: {name} expecting type: {_FEATURE_KINDS[current]}")
    getattr(feature, kind).value.append(item)


def _example_from_json(value, example) -> None:
    if not isinstance(value, dict):
        raise invalid(f"Example must be JSON object but got JSON {_json_type(value)}")
    for name, content in value.items():
        feature = example.features.feature[name]
        for item in content if isinstance(content, list) else [content]:
            _add_feature_value(item, name, feature)


def rest_classify_regress(core: ServerCore, model_spec, doc: dict, method: str) -> dict:
    """FillClassifyRegressRequestFromJson, then MakeJsonFromClassificationResult / RegressionResult."""
    request = (
        classification_pb2.ClassificationRequest if method == CLASSIFY else regression_pb2.RegressionRequest
    )()
    request.model_spec.CopyFrom(model_spec)
    request.model_spec.signature_name = doc.get("signature_name", "")
    target = request.input.example_list
    if "context" in doc:
        _example_from_json(doc["context"], request.input.example_list_with_context.context)
        target = request.input.example_list_with_context
    examples = doc.get("examples")
    if examples is None:
        raise invalid(
            f"JSON Value: {_debug(doc)} When method is classify, key 'examples' is expected and was not found"
        )
    if not isinstance(examples, list):
        raise invalid(f"JSON Value: {_debug(doc)} Expecting 'examples' value to be an list/array")
    if not examples:
        raise invalid(f"JSON Value: {_debug(doc)} 'examples' value is an empty array")
    for example in examples:
        _example_from_json(example, target.examples.add())
    if method == CLASSIFY:
        result = classify(core, request, REST_TIMEOUT_S).result
        return {
            "results": [
                [[c.label, _json_decimal(c.score, np.float32)] for c in cl.classes]
                for cl in result.classifications
            ]
        }
    result = regress(core, request, REST_TIMEOUT_S).result
    return {"results": [_json_decimal(r.value, np.float32) for r in result.regressions]}


def rest_model_info(core: ServerCore, model_spec, metadata: bool) -> dict:
    """ToJsonString of GetModelStatusResponse / GetModelMetadataResponse, as TF Serving prints them."""
    if not model_spec.name:
        raise invalid("Missing model name in request.")
    if not metadata:
        request = get_model_status_pb2.GetModelStatusRequest(model_spec=model_spec)
        response = get_model_status(core, request)
        return json_format.MessageToDict(response, always_print_fields_with_no_presence=True)
    request = get_model_metadata_pb2.GetModelMetadataRequest(
        model_spec=model_spec, metadata_field=["signature_def"]
    )
    response = get_model_metadata(core, request)
    signature_def_map = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signature_def_map)
    options = {"always_print_fields_with_no_presence": True, "preserving_proto_field_name": True}
    return {
        "model_spec": json_format.MessageToDict(response.model_spec, **options),
        "metadata": {"signature_def": json_format.MessageToDict(signature_def_map, **options)},
    }


def handle_rest(core: ServerCore, method: str, path: str, body: bytes) -> dict:
    """HttpRestApiHandler::ProcessRequest."""
    match = (_PREDICT_PATH if method == "POST" else _STATUS_PATH).fullmatch(path)
    if match is None:
        raise invalid(f"Malformed request: {method} {path}")
    name, version, label, verb = match.groups()
    if method == "POST" and verb not in ("predict", "classify", "regress"):  # the path regex ignores case
        raise invalid(f"Malformed request: {method} {path}")
    model_spec = model_pb2.ModelSpec(name=urllib.parse.unquote(name or ""))
    if version:
        model_spec.version.value = int(version)
    if label:
        model_spec.version_label = urllib.parse.unquote(label)
    if method == "GET":
        return rest_model_info(core, model_spec, verb == "metadata")
    doc = _parse_json(body)
    if verb == "predict":
        return rest_predict(core, model_spec, doc)
    return rest_classify_regress(core, model_spec, doc, CLASSIFY if verb == "classify" else REGRESS)


class RestHandler(BaseHTTPRequestHandler):
    """One request per call; ``self.server.core`` is the shared, read-only ServerCore."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        path = urllib.parse.urlsplit(self.path).path
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not path.lower().startswith("/v1/"):
            return self._reply(404, b"")
        try:
            status, output = 200, handle_rest(self.server.core, method, path, body)
        except ServingError as e:
            status, output = HTTP_CODES.get(e.code, 500), {"error": e.message}
        except Exception as e:  # noqa: BLE001 - reported to the client, as gRPC's INTERNAL
            logger.exception("%s %s failed", method, path)
            status, output = 500, {"error": f"{type(e).__name__}: {e}"}
        self._reply(status, json.dumps(output, indent=4).encode())

    def _reply(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - BaseHTTPRequestHandler's name
        logger.debug(format, *args)


class RestServer(ThreadingHTTPServer):
    """A thread per connection; TLS is negotiated in that thread, so a slow handshake blocks no one."""

    daemon_threads = True

    def __init__(self, port: int, core: ServerCore, ssl_context: ssl.SSLContext | None):
        super().__init__(("127.0.0.1", port), RestHandler)
        self.core, self.ssl_context = core, ssl_context

    def finish_request(self, request, client_address) -> None:
        if self.ssl_context is None:
            return super().finish_request(request, client_address)
        request.settimeout(30)
        with self.ssl_context.wrap_socket(request, server_side=True) as tls_request:
            super().finish_request(tls_request, client_address)

    def handle_error(self, request, client_address) -> None:
        logger.info("REST connection from %s failed: %s", client_address, sys.exc_info()[1])
