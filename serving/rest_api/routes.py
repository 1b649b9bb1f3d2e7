"""TF Serving's REST API without a transport: ``http_rest_api_handler.cc`` and its path rules.

``RestApi.process(method, path, body)`` answers one request to a path under ``/v1/``: it reads
the model, version or label and verb from the path as TF Serving's regular expressions do,
decodes the JSON body into the request proto gRPC receives (``serving.rest_api.json_tensor``), calls the
same transport-free function the gRPC servicers call (``RequestFunctions``: predict, classify,
regress, get_model_metadata, get_model_status), and writes the response as TF Serving writes
it. Every failure is answered ``{"error": ...}`` with TF Serving's text and the HTTP status of
its canonical code (``serving.errors.http_status``).

Beyond TF Serving: ``GET /v1/models`` lists every model with its versions' states (TF Serving
answers "Missing model name in request."), and ``readiness_json`` is what ``/readyz`` answers.

Stateless apart from its arguments: any number of threads may call ``process`` at once.
"""

from __future__ import annotations

import logging
import re
from typing import NamedTuple
from urllib.parse import unquote

from apis.tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    predict_pb2,
    regression_pb2,
)
from runtime import errors as op_errors
from serving import errors
from serving.inference import signatures
from serving.inference.metadata import SIGNATURE_DEF
from serving.inference.request_functions import DEFAULT_FUNCTIONS, RequestFunctions
from serving.lifecycle import memory_budget
from serving.observability import tracing
from serving.rest_api import json_examples, json_tensor, json_text, json_writer

logger = logging.getLogger(__name__)

PATH_PREFIX = re.compile(r"/v1/.*", re.IGNORECASE)  # kHTTPRestApiHandlerPathRegex
_PREDICTION_PATH = re.compile(
    r"/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?:(classify|regress|predict)",
    re.IGNORECASE,
)
_STATUS_PATH = re.compile(
    r"/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?(?:/(metadata))?",
    re.IGNORECASE,
)
JSON_CONTENT_TYPE = "application/json"
_INPUT_DTYPES = "rest.input_dtypes"  # servable.cache key of a signature's input dtypes
_INT64_MAX = 2**63 - 1


class Reply(NamedTuple):
    """An answer: HTTP status, body (UTF-8, raw bytes as rapidjson leaves them), and what it
    was for (``model_name``, ``api``: "predict", "classify", "regress", "metadata", "status",
    "" if the path named none), for logs and metrics; ``content_type`` of ``body``."""

    status: int
    body: bytes
    model_name: str = ""
    api: str = ""
    content_type: str = JSON_CONTENT_TYPE
    headers: tuple[tuple[str, str], ...] = ()  # more response headers


class ModelRequest(NamedTuple):
    """What a path names (``ParseModelInfo``)."""

    model_name: str
    version: int | None
    label: str | None
    verb: str  # POST: classify|regress|predict as written; GET: "metadata" or ""
    matched: bool


def parse_path(method: str, path: str) -> ModelRequest:
    """``ParseModelInfo``: a POST path must be a prediction path, a GET path a status or
    metadata path (matched whole, case-insensitively); names and labels are percent-decoded.
    Raises InvalidArgumentError for a version that is no int64."""
    pattern = _PREDICTION_PATH if method == "POST" else _STATUS_PATH if method == "GET" else None
    match = pattern.fullmatch(path) if pattern is not None else None
    name, version_text, label, verb = match.groups("") if match else ("", "", "", "")
    name = unquote(name) if name else ""
    version = None
    if version_text:
        version = int(version_text)
        if version > _INT64_MAX:
            raise op_errors.InvalidArgumentError(
                None, None, f"Failed to convert version: {version_text} to numeric."
            )
    return ModelRequest(name, version, unquote(label) if label else None, verb, match is not None)


def model_spec_for(spec, request: ModelRequest) -> None:
    """``FillModelSpecWithNameVersionAndLabel``."""
    spec.name = request.model_name
    if request.version is not None:
        spec.version.value = request.version
    if request.label is not None:
        spec.version_label = request.label


class RestApi:
    """``HttpRestApiHandler`` over a ServerCore. ``timeout_ms`` (``--rest_api_timeout_in_ms``;
    0 or less: none) bounds each Predict, Classify and Regress run, as gRPC's deadline does."""

    def __init__(self, core, timeout_ms: int = 0, functions: RequestFunctions = DEFAULT_FUNCTIONS):
        self._core = core
        self._deadline = timeout_ms / 1000 if timeout_ms > 0 else None
        self.functions = functions

    def process(self, method: str, path: str, body: bytes) -> Reply:
        """``ProcessRequest``: the reply to ``method`` on ``path`` (with its query, as sent)."""
        model_name = api = ""
        try:
            request = parse_path(method, path)
            model_name = request.model_name
            if method == "POST" and request.matched and request.verb in _POST_APIS:
                api = request.verb
                text = _POST_APIS[api](self, request, body)
            elif method == "GET" and request.matched:
                api = "metadata" if request.verb == "metadata" else "status"
                text = self._metadata(request) if api == "metadata" else self._status(request)
            else:
                raise op_errors.InvalidArgumentError(None, None, f"Malformed request: {method} {path}")
        except Exception as exc:  # noqa: BLE001 - every failure is an answer, never the server's end
            error = errors.as_op_error(exc)
            logger.debug("Error Processing HTTP/REST request: %s %s Error: %s", method, path, error.message)
            return Reply(
                errors.http_status(error.code),
                _encode(json_tensor.error_json(error.message)),
                model_name,
                api,
            )
        return Reply(200, _encode(text), model_name, api)

    # -- the APIs ---------------------------------------------------------------------------

    def _predict(self, request: ModelRequest, body: bytes) -> str:
        message = predict_pb2.PredictRequest()
        model_spec_for(message.model_spec, request)
        with self.functions.decoding("Predict", message):
            form = json_tensor.fill_predict_request(
                json_text.loads(body, lift_numbers=True),
                message,
                lambda name: self._input_dtypes(message.model_spec, name),
            )
        response = self.functions.predict_outputs(self._core, message, self._deadline)
        with tracing.span("encode"):
            return json_tensor.outputs_json(response.arrays(), form)

    def _input_dtypes(self, model_spec, signature_name: str) -> dict[str, int]:
        """``GetInfoMap``: the signature's inputs (alias -> dtype) on the servable the request
        names, kept in the servable's per-version cache."""
        servable = self._core.pinned(model_spec, self._deadline)
        try:
            name = signature_name or signatures.DEFAULT_SERVING_SIGNATURE_DEF_KEY
            key = (_INPUT_DTYPES, name)
            dtypes = servable.cache.get(key)
            if dtypes is None:
                signature = signatures.signature_defs(servable).get(name)
                if signature is None:
                    raise op_errors.InvalidArgumentError(
                        None, None, f'Serving signature name: "{name}" not found in signature def'
                    )
                dtypes = {alias: info.dtype for alias, info in signature.inputs.items()}
                servable.cache.setdefault(key, dtypes)
            return dtypes
        finally:
            servable.unpin()

    def _classify(self, request: ModelRequest, body: bytes) -> str:
        message = classification_pb2.ClassificationRequest()
        model_spec_for(message.model_spec, request)
        with self.functions.decoding("Classify", message):
            json_examples.fill_classification_request(json_text.loads(body), message)
        response = self.functions.classify(self._core, message, self._deadline)
        return json_examples.classification_json(response.result)

    def _regress(self, request: ModelRequest, body: bytes) -> str:
        message = regression_pb2.RegressionRequest()
        model_spec_for(message.model_spec, request)
        with self.functions.decoding("Regress", message):
            json_examples.fill_regression_request(json_text.loads(body), message)
        response = self.functions.regress(self._core, message, self._deadline)
        return json_examples.regression_json(response.result)

    def _status(self, request: ModelRequest) -> str:
        if not request.model_name:
            if request.version is None and request.label is None:
                return self.models_json()
            raise op_errors.InvalidArgumentError(None, None, "Missing model name in request.")
        message = get_model_status_pb2.GetModelStatusRequest()
        model_spec_for(message.model_spec, request)
        return json_writer.proto_json(self.functions.get_model_status(self._core, message))

    def _metadata(self, request: ModelRequest) -> str:
        if not request.model_name:
            raise op_errors.InvalidArgumentError(None, None, "Missing model name in request.")
        message = get_model_metadata_pb2.GetModelMetadataRequest()
        message.metadata_field.append(SIGNATURE_DEF)
        model_spec_for(message.model_spec, request)
        response = self.functions.get_model_metadata(self._core, message, self._deadline)
        return metadata_json(response)

    def models_json(self) -> str:
        """``GET /v1/models`` (ours): every model, configured or known to the manager, sorted,
        with GetModelStatus's view of its versions (an empty list while none was found) and, for
        each loaded one, the bytes it holds (``memory_bytes``: arrays, onnxruntime)."""
        names = sorted({*self._core.configured_model_names(), *self._core.model_names()})
        held = self._core.footprints()
        models = []
        for name in names:
            message = get_model_status_pb2.GetModelStatusRequest()
            message.model_spec.name = name
            try:
                status = self.functions.get_model_status(self._core, message)
            except op_errors.NotFoundError:
                status = get_model_status_pb2.GetModelStatusResponse()
            document = json_writer.proto_document(status)
            for entry in document.get("model_version_status", []):  # ours: what a loaded one holds
                footprint = held.get((name, int(entry.get("version", 0))))
                if entry.get("state") == "AVAILABLE":  # (with a memory budget, some are not)
                    entry["resident"] = (
                        entry.get("status", {}).get("error_message") != memory_budget.NOT_RESIDENT
                    )
                if footprint is not None:
                    entry["memory_bytes"] = {"arrays": footprint.arrays, "onnxruntime": footprint.onnxruntime}
            models.append({"name": name, **document})
        return json_writer.pretty({"models": models}) + "\n"


_POST_APIS = {
    "predict": RestApi._predict,
    "classify": RestApi._classify,
    "regress": RestApi._regress,
}


def metadata_json(response: get_model_metadata_pb2.GetModelMetadataResponse) -> str:
    """TF Serving's ``ToJsonString(GetModelMetadataResponse)``: the model_spec and the unpacked
    SignatureDefMap printed apart (proto field names kept) and joined as it joins them."""
    if SIGNATURE_DEF not in response.metadata:
        raise op_errors.InternalError(
            None, None, "Failed to find 'signature_def' key in the GetModelMetadataResponse metadata map."
        )
    signature_def_map = get_model_metadata_pb2.SignatureDefMap()
    if not response.metadata[SIGNATURE_DEF].Unpack(signature_def_map):
        raise op_errors.InternalError(None, None, "Failed to unpack 'Any' object to 'SignatureDefMap'.")
    model_spec = json_writer.proto_json(response.model_spec, preserve_names=True)
    signature_defs = json_writer.proto_json(signature_def_map, preserve_names=True)
    return (
        "{\n"
        + '"model_spec":'
        + model_spec
        + ",\n"
        + '"metadata": {'
        + '"signature_def": '
        + signature_defs
        + "}\n"
        + "}\n"
    )


def readiness_json(reason: str | None) -> Reply:
    """``GET /readyz`` (ours): 200 when ready, else 503 with the reason."""
    if reason is None:
        return Reply(200, b'{\n "status": "ready"\n}\n', api="readyz")
    return Reply(503, _encode(json_tensor.error_json(reason)), api="readyz")


def liveness_json() -> Reply:
    """``GET /healthz`` (ours): the process is up and answering."""
    return Reply(200, b'{\n "status": "alive"\n}\n', api="healthz")


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")
