"""The Open Inference Protocol (KServe V2) over HTTP, on ``--rest_api_port`` beside ``/v1/``.

``OpenInferenceApi.process(method, path, headers, body)`` answers one request under ``/v2``:

- ``GET /v2/health/live``, ``GET /v2/health/ready``: ``{"live": true}`` / ``{"ready": ...}``,
  200, or 503 while not ready;
- ``GET /v2``: server metadata; ``GET /v2/models/{name}[/versions/{v}]``: model metadata;
- ``GET /v2/models/{name}[/versions/{v}]/ready``: 200 ``{"name", "ready": true}``, 503 while not;
- ``POST /v2/models/{name}[/versions/{v}]/infer``: one inference (``serving.open_inference.infer``).

Inference bodies are JSON, or JSON followed by binary tensor data (the binary data extension):
a request header ``Inference-Header-Content-Length`` says how long the JSON is, whatever the
content type (Triton's client sends none); each input with a ``binary_data_size`` parameter
takes that many bytes of what follows, in input order. Outputs are binary where their
``binary_data`` parameter, or the request's ``binary_data_output``, asks; then the answer is
``application/octet-stream`` with its own ``Inference-Header-Content-Length``. Errors are
``{"error": "..."}`` with the HTTP status of TF Serving's code (400 bad request, 404 unknown
model or version, 503 not ready).
"""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote

import orjson

from apis.tensorflow_serving.apis import predict_pb2
from runtime import errors as op_errors
from serving import errors
from serving.inference.request_functions import DEFAULT_FUNCTIONS, RequestFunctions
from serving.open_inference import datatypes, infer, models
from serving.rest_api.routes import Reply

logger = logging.getLogger(__name__)

PATH_PREFIX = re.compile(r"/v2(?:/.*)?")
HEADER_LENGTH = "Inference-Header-Content-Length"
BINARY_CONTENT_TYPE = "application/octet-stream"
_MODEL_PATH = re.compile(r"/v2/models/([^/]+)(?:/versions/([^/]+))?(/ready|/infer)?")
_API = {"": "metadata", "/ready": "ready", "/infer": "infer"}


class OpenInferenceApi:
    """V2 over a ServerCore; ``readiness``: the server's (``serving.lifecycle.health.Readiness``);
    ``timeout_ms``: ``--rest_api_timeout_in_ms``, as for ``/v1``. Stateless: any number of
    threads may call ``process`` at once."""

    def __init__(self, core, readiness, timeout_ms: int = 0, functions: RequestFunctions = DEFAULT_FUNCTIONS):
        self._core = core
        self._readiness = readiness
        self._deadline = timeout_ms / 1000 if timeout_ms > 0 else None
        self.functions = functions

    def process(self, method: str, path: str, headers, body: bytes) -> Reply:
        path = path.partition("?")[0]
        model_name = api = ""
        try:
            if path in ("/v2", "/v2/"):
                api = "server_metadata"
                _expect(method, "GET", path)
                name, version, extensions = models.server_metadata()
                return _json(200, {"name": name, "version": version, "extensions": list(extensions)}, "", api)
            if path == "/v2/health/live":
                api = "live"
                _expect(method, "GET", path)
                return _json(200, {"live": True}, "", api)
            if path == "/v2/health/ready":
                api = "ready"
                _expect(method, "GET", path)
                ready = models.server_ready(self._readiness)
                return _json(200 if ready else 503, {"ready": ready}, "", api)
            match = _MODEL_PATH.fullmatch(path)
            if match is None:
                raise op_errors.NotFoundError(None, None, f"Not found: {method} {path}")
            model_name, version = unquote(match.group(1)), unquote(match.group(2) or "")
            api = _API[match.group(3) or ""]
            if api == "infer":
                _expect(method, "POST", path)
                return self._infer(model_name, version, headers, body)
            _expect(method, "GET", path)
            if api == "ready":
                ready = models.model_ready(self._core, model_name, version)
                return _json(200 if ready else 503, {"name": model_name, "ready": ready}, model_name, api)
            meta = models.model_metadata(self._core, model_name, version, self._deadline)
            return _json(200, _metadata_json(meta), model_name, api)
        except Exception as exc:  # noqa: BLE001 - every failure is an answer, never the server's end
            error = errors.as_op_error(exc)
            logger.debug("Error Processing V2 request: %s %s Error: %s", method, path, error.message)
            return _json(errors.http_status(error.code), {"error": error.message}, model_name, api)

    def _infer(self, model_name: str, version: str, headers, body: bytes) -> Reply:
        named = predict_pb2.PredictRequest()  # what a request refused while decoding is counted under
        named.model_spec.name = model_name
        with self.functions.decoding("ModelInfer", named):
            header_length = _header_length(headers, len(body))
            document = _parse(body if header_length is None else body[:header_length])
            binary = memoryview(body)[header_length:] if header_length is not None else None
            request, binary_outputs = infer_request(document, model_name, version, binary)
            message = infer.predict_request(request)
        answer = infer.infer(self.functions, self._core, request, self._deadline, message)
        return infer_reply(answer, binary_outputs, model_name)


def _expect(method: str, wanted: str, path: str) -> None:
    if method != wanted:
        raise op_errors.InvalidArgumentError(None, None, f"Malformed request: {method} {path}")


def _json(status: int, document, model_name: str, api: str) -> Reply:
    return Reply(status, orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY), model_name, api)


def _metadata_json(meta: models.ModelMetadata) -> dict:
    def tensors(items):
        return [{"name": t.name, "datatype": t.datatype, "shape": t.shape} for t in items]

    return {
        "name": meta.name,
        "versions": meta.versions,
        "platform": meta.platform,
        "inputs": tensors(meta.inputs),
        "outputs": tensors(meta.outputs),
    }


def _header_length(headers, size: int) -> int | None:
    text = headers.get(HEADER_LENGTH) if headers is not None else None
    if text is None:
        return None
    if not text.strip().isdigit() or int(text) > size:
        raise op_errors.InvalidArgumentError(
            None, None, f"{HEADER_LENGTH} is {text!r}, the body {size} bytes long"
        )
    return int(text)


def _parse(data) -> dict:
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise op_errors.InvalidArgumentError(None, None, f"JSON parse error: {e}") from None
    if type(document) is not dict:
        raise op_errors.InvalidArgumentError(None, None, "the inference request must be a JSON object")
    return document


def _object(value, what: str) -> dict:
    if value is None:
        return {}
    if type(value) is not dict:
        raise op_errors.InvalidArgumentError(None, None, f"'{what}' must be an object")
    return value


def _string(value, what: str) -> str:
    if type(value) is not str:
        raise op_errors.InvalidArgumentError(None, None, f"'{what}' must be a string")
    return value


def infer_request(document: dict, model_name: str, version: str, binary) -> tuple[infer.InferRequest, dict]:
    """The transport-free request of a V2 JSON body (and its binary data), and per output name
    (``""``: every output) whether it is to be sent binary."""
    parameters = _object(document.get("parameters"), "parameters")
    inputs_json = document.get("inputs")
    if type(inputs_json) is not list:
        raise op_errors.InvalidArgumentError(None, None, "'inputs' must be an array")
    inputs, at = [], 0
    for entry in inputs_json:
        if type(entry) is not dict:
            raise op_errors.InvalidArgumentError(None, None, "each input must be an object")
        name = _string(entry.get("name"), "name")
        datatype = _string(entry.get("datatype"), "datatype")
        shape = entry.get("shape")
        if type(shape) is not list:
            raise op_errors.InvalidArgumentError(None, None, f"input '{name}': 'shape' must be an array")
        shape = tuple(shape)
        size = _object(entry.get("parameters"), "parameters").get("binary_data_size")
        if size is not None:
            if binary is None or type(size) is not int or size < 0 or at + size > len(binary):
                raise op_errors.InvalidArgumentError(
                    None, None, f"input '{name}': binary_data_size {size} runs past the binary data"
                )
            data = bytes(binary[at : at + size])
            at += size
            content = datatypes.raw_content(data, datatype, shape, name)
            if content is not None:
                inputs.append(infer.InferInput(name, datatype, shape, content=content))
                continue
            array = datatypes.from_raw(data, datatype, shape, name)
        else:
            if "data" not in entry:
                raise op_errors.InvalidArgumentError(None, None, f"input '{name}' has no 'data'")
            array = datatypes.from_json(entry["data"], datatype, shape, name)
        inputs.append(infer.InferInput(name, datatype, shape, array))
    if binary is not None and at != len(binary):
        raise op_errors.InvalidArgumentError(
            None, None, f"the binary data holds {len(binary) - at} bytes that no input claims"
        )
    default_binary = bool(parameters.get("binary_data_output", False))
    outputs_json = document.get("outputs")
    outputs, binary_outputs = None, {"": default_binary}
    if outputs_json is not None:
        if type(outputs_json) is not list:
            raise op_errors.InvalidArgumentError(None, None, "'outputs' must be an array")
        outputs = []
        for entry in outputs_json:
            if type(entry) is not dict:
                raise op_errors.InvalidArgumentError(None, None, "each output must be an object")
            name = _string(entry.get("name"), "name")
            outputs.append(name)
            binary_outputs[name] = bool(
                _object(entry.get("parameters"), "parameters").get("binary_data", default_binary)
            )
    request_id = document.get("id", "")
    return (
        infer.InferRequest(model_name, version, _string(request_id, "id"), parameters, inputs, outputs),
        binary_outputs,
    )


def infer_reply(answer: infer.InferResponse, binary_outputs: dict, model_name: str) -> Reply:
    """The V2 response: JSON, or JSON then each binary output's bytes."""
    outputs, blobs = [], []
    for output in answer.outputs:
        entry = {"name": output.name, "datatype": output.datatype, "shape": list(output.shape)}
        if binary_outputs.get(output.name, binary_outputs[""]):
            blob = datatypes.to_raw(output.array, output.datatype)
            entry["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        else:
            entry["data"] = datatypes.to_json(output.array, output.datatype)
        outputs.append(entry)
    document = {"model_name": answer.model_name, "model_version": answer.model_version, "outputs": outputs}
    if answer.id:
        document["id"] = answer.id
    header = orjson.dumps(document)
    if not blobs:
        return Reply(200, header, model_name, "infer")
    return Reply(
        200,
        b"".join([header, *blobs]),
        model_name,
        "infer",
        BINARY_CONTENT_TYPE,
        ((HEADER_LENGTH, str(len(header))),),
    )
