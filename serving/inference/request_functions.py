"""The request functions every transport calls, and the one wrapper around them.

gRPC's servicers (``serving.grpc_api.services``, ``serving.lifecycle.model_service``) and REST's handler
(``serving.rest_api.routes``) hold a ``RequestFunctions`` and call nothing else: each builds the same
request proto and calls the same transport-free function. ``instrument`` wraps every
inference function once per transport with what TF Serving does around a request: the
request count by status, the latency of successes (``serving.observability.metrics``), the sampled
request log (``serving.observability.request_log``), and what the access log's line says was served
(``serving.observability.access_log.note``). So metrics and logs are counted once, in one place,
never per method or per transport.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable

from runtime import errors
from serving.inference.classify import classify
from serving.inference.metadata import get_model_metadata
from serving.inference.multi_inference import multi_inference
from serving.inference.predict import predict, predict_outputs, predict_wire
from serving.inference.regress import regress
from serving.lifecycle.model_service import get_model_status
from serving.observability import access_log, metrics, tracing


@contextlib.contextmanager
def _decoding(api: str, request):
    yield


@dataclasses.dataclass(frozen=True)
class RequestFunctions:
    """``(core, request, deadline) -> response`` per API (``get_model_status``: without the
    deadline). ``predict_wire`` is ``predict`` answering the serialized response gRPC sends,
    ``predict_outputs`` answering the outputs' arrays REST writes; ``infer`` is the same call
    for the Open Inference Protocol's ModelInfer (counted under its own API label).
    ``decoding(api, request)`` is the context a transport decodes a request in (REST's JSON):
    a request refused there is counted as one that reached its function would be."""

    decoding: Callable = _decoding
    predict: Callable = predict
    predict_wire: Callable = predict_wire
    predict_outputs: Callable = predict_outputs
    infer: Callable = predict_outputs
    classify: Callable = classify
    regress: Callable = regress
    multi_inference: Callable = multi_inference
    get_model_metadata: Callable = get_model_metadata
    get_model_status: Callable = get_model_status


DEFAULT_FUNCTIONS = RequestFunctions()

# field -> (TF Serving's API label, request log kind)
_INFERENCE = {
    "predict": ("Predict", "predict"),
    "predict_wire": ("Predict", "predict"),
    "predict_outputs": ("Predict", "predict"),
    "infer": ("ModelInfer", "predict"),
    "classify": ("Classify", "classify"),
    "regress": ("Regress", "regress"),
    "multi_inference": ("MultiInference", "multi_inference"),
}


def instrument(functions: RequestFunctions, entrypoint: str, request_logger=None) -> RequestFunctions:
    """``functions`` with each inference function counted and timed for ``entrypoint``
    ("GRPC", "REST") and, with ``request_logger``, sampled into the request log."""
    wrapped = {
        field: _instrumented(getattr(functions, field), api, kind, entrypoint, request_logger)
        for field, (api, kind) in _INFERENCE.items()
    }
    return dataclasses.replace(
        functions, decoding=functools.partial(_counted_decoding, entrypoint), **wrapped
    )


@contextlib.contextmanager
def _counted_decoding(entrypoint: str, api: str, request):
    start = time.perf_counter()
    try:
        with tracing.span("decode"):
            yield
    except Exception as e:
        spec = _model_spec(request)
        metrics.request_done(
            spec.name, spec.signature_name, api, entrypoint, _code(e), time.perf_counter() - start
        )
        raise


def _instrumented(function: Callable, api: str, kind: str, entrypoint: str, request_logger) -> Callable:
    clock, done, current = time.perf_counter, metrics.request_done, access_log.CURRENT.get

    def call(core, request, deadline=None):
        start = clock()
        try:
            response = function(core, request, deadline)
        except Exception as e:
            spec = _model_spec(request)
            done(spec.name, spec.signature_name, api, entrypoint, _code(e), clock() - start)
            if current() is not None:
                access_log.note(spec.name, spec.signature_name, None)
            raise
        spec = _model_spec(request)
        done(spec.name, spec.signature_name, api, entrypoint, errors.OK, clock() - start)
        if current() is not None:
            access_log.note(spec.name, spec.signature_name or _DEFAULT_SIGNATURE, _served_version(response))
        if request_logger is not None:
            request_logger.log(kind, spec.name, spec.signature_name, request, response)
        return response

    call.__name__ = getattr(function, "__name__", api)
    return call


_DEFAULT_SIGNATURE = "serving_default"  # what a request naming no signature was served by


def _served_version(response) -> int | None:
    """The version a response says it came from (None where it does not say)."""
    version = getattr(response, "version", None)  # PredictOutputs
    if isinstance(version, int):
        return version
    spec = getattr(response, "model_spec", None)
    if spec is None:  # MultiInference: its first result's
        results = getattr(response, "results", None)
        spec = results[0].model_spec if results else None
    return spec.version.value if spec is not None and spec.HasField("version") else None


def _code(e: Exception) -> int:
    """The canonical code a client gets for ``e`` (``serving.errors.as_op_error``'s rule)."""
    if isinstance(e, errors.OpError):
        return e.code
    return errors.RESOURCE_EXHAUSTED if isinstance(e, MemoryError) else errors.INTERNAL


def _model_spec(request):
    """The request's ModelSpec (a MultiInference request's first task's)."""
    tasks = getattr(request, "tasks", None)
    if tasks is not None:
        return tasks[0].model_spec if tasks else _NO_SPEC
    return request.model_spec


class _NoSpec:
    name = ""
    signature_name = ""


_NO_SPEC = _NoSpec()
