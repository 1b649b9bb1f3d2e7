"""Registering gRPC services so that our handlers, not grpc, parse the request bytes.

grpcio keeps about 16 KB of memory for every request whose ``request_deserializer`` raises
(its receive callback aborts the call from a state it never frees; measured: a bare grpcio
server grows 150 MB per 8,000 undecodable requests, one that parses in the handler stays
flat). Any client could grow the server until it is killed. So every service of the server,
ours and grpc's own (health, reflection), is registered through ``add_service``: each method
handler receives raw bytes and parses them itself; bytes that are no request end that call
with INTERNAL, the code gRPC gives a message it cannot parse, and the text clients got before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import grpc

from runtime import errors
from serving import errors as serving_errors
from serving.observability import access_log, tracing
from serving.resources import auth
from serving.resources.drain import REFUSAL_MESSAGE, Drain
from serving.resources.request_bytes import SMALL, RequestBytes

UNPARSABLE_REQUEST = "Exception deserializing request!"


class _Recorder:
    """Stands in for a ``grpc.Server`` while generated code registers a service: keeps the
    method handlers it is given, per service name."""

    def __init__(self) -> None:
        self.services: dict[str, dict[str, grpc.RpcMethodHandler]] = {}

    def add_generic_rpc_handlers(self, handlers) -> None:
        pass  # the same handlers arrive through add_registered_method_handlers

    def add_registered_method_handlers(self, service: str, handlers: dict) -> None:
        self.services[service] = dict(handlers)


def add_service(
    server: grpc.Server,
    register: Callable[[object], None],
    drain: Drain | None = None,
    unserialized: frozenset[str] | set[str] = frozenset(),
) -> list[str]:
    """Runs ``register(target)`` (e.g. a generated ``add_*Servicer_to_server`` bound to its
    servicer) and adds what it registers to ``server`` with requests parsed in the handler
    (and refused while ``drain`` refuses, if given). The methods named in ``unserialized``
    return their responses as bytes (grpc sends them as they are). Returns the service names
    added."""
    recorder = _Recorder()
    register(recorder)
    if not recorder.services:
        raise ValueError("register added no service")
    for service, handlers in recorder.services.items():
        for method in unserialized & handlers.keys():
            handlers[method] = handlers[method]._replace(response_serializer=None)
        add_handlers(server, service, handlers, drain)
    return list(recorder.services)


def add_handlers(
    server: grpc.Server,
    service: str,
    handlers: dict[str, grpc.RpcMethodHandler],
    drain: Drain | None = None,
) -> None:
    """What generated code does with ``handlers`` of ``service``, with requests parsed in the
    handler; while ``drain`` refuses, calls are answered UNAVAILABLE before they are parsed."""
    raw = {
        method: parse_in_handler(handler, drain or _NEVER, f"/{service}/{method}")
        for method, handler in handlers.items()
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, raw),))
    server.add_registered_method_handlers(service, raw)


def parse_in_handler(handler: grpc.RpcMethodHandler, drain: Drain, path: str = "") -> grpc.RpcMethodHandler:
    """``handler`` taking request bytes: the same behaviour, its deserializer called by us; a
    unary call is one line of the access log (``path``: its method) when that is on."""
    parse = handler.request_deserializer
    if parse is None:
        return handler
    if handler.request_streaming:
        behavior = handler.stream_stream or handler.stream_unary
        kind = "stream_stream" if handler.stream_stream else "stream_unary"

        def on_stream(requests, context, *rest):
            if drain.refusing:
                _refuse(drain, context)
            if auth.ACTIVE is not None and not path.startswith(PUBLIC_METHODS):
                _authenticated(auth.ACTIVE, context)  # (reflection: any valid token)
            return behavior(_parsed_stream(requests, parse, context), context, *rest)

        wrapped = on_stream
    else:
        behavior = handler.unary_unary or handler.unary_stream
        kind = "unary_unary" if handler.unary_unary else "unary_stream"
        public = path.startswith(PUBLIC_METHODS)  # health and readiness: no token needed

        admitted, request_bytes = drain.admitted, drain.request_bytes

        def on_unary(data, context, *rest):
            if access_log.ACTIVE is not None or tracing.TRACER is not None:
                return _observed(on_call, path, data, context, rest)
            return on_call(data, context, *rest)

        def on_call(data, context, *rest):
            if drain.refusing:
                _refuse(drain, context)
            # Admitted until the RPC ends, its answer sent (or the call cancelled), not until the
            # handler returns: the process must not exit while a large answer is still leaving.
            admitted.append(None)
            if not context.add_callback(admitted.pop):
                admitted.pop()  # (the RPC has already ended)
            tokens = auth.ACTIVE
            allowed = None if tokens is None or public else _authenticated(tokens, context)
            if len(data) >= SMALL:
                _admit_bytes(request_bytes, len(data), context)
            if tracing.TRACER is None:
                request = _parsed(data, parse, context)
            else:
                with tracing.span("decode"):
                    request = _parsed(data, parse, context)
            if allowed is not None:
                _permitted(allowed, request, context)
            if access_log.ACTIVE is not None:  # the model of calls the request functions do not see
                record = access_log.CURRENT.get()
                names = model_names(request)
                if record is not None and names:
                    record.model = names[0]
            return behavior(request, context, *rest)

        wrapped = on_unary
    return handler._replace(request_deserializer=None, **{kind: wrapped})


_NEVER = Drain()  # for services added without one: never refuses


# Methods any caller may call under --auth_token_file: health and readiness probes.
PUBLIC_METHODS = (
    "/grpc.health.v1.Health/",
    "/inference.GRPCInferenceService/ServerLive",
    "/inference.GRPCInferenceService/ServerReady",
    "/inference.GRPCInferenceService/ModelReady",
)
_ALL = object()  # a token allowed every model (None, there, means no token was checked)


def _authenticated(tokens: auth.TokenFile, context: grpc.ServicerContext):
    """The models the call's bearer token may call (``_ALL`` for every one), or the call
    aborted UNAUTHENTICATED, before its bytes are parsed."""
    header = next((v for k, v in context.invocation_metadata() if k == auth.AUTHORIZATION), None)
    try:
        allowed = tokens.authenticate(header)
    except errors.OpError as e:
        context.abort(serving_errors.grpc_code(e.code), e.message)
    return _ALL if allowed is auth.EVERY_MODEL else allowed


def _permitted(allowed, request, context: grpc.ServicerContext) -> None:
    if allowed is _ALL:
        return
    try:
        auth.permit(allowed, model_names(request))
    except errors.OpError as e:
        context.abort(serving_errors.grpc_code(e.code), e.message)


def model_names(request):
    """The models a request names (``auth.EVERY_MODEL`` for one that names none)."""
    tasks = getattr(request, "tasks", None)
    if tasks is not None:  # MultiInference
        return [task.model_spec.name for task in tasks]
    spec = getattr(request, "model_spec", None)
    if spec is not None:
        return (spec.name,)
    for field in ("model_name", "name"):  # the Open Inference Protocol's requests
        name = getattr(request, field, None)
        if isinstance(name, str):
            return (name,)
    return auth.EVERY_MODEL


def _observed(on_call, path: str, data: bytes, context: grpc.ServicerContext, rest):
    """``on_call`` as one access log line (the caller's x-request-id, or a new one, returned in
    the trailing metadata) and one server span joining the caller's ``traceparent``."""
    metadata = dict(context.invocation_metadata())
    log, record, token = access_log.ACTIVE, None, None
    if log is not None:
        record = log.start("grpc", path, context.peer(), metadata.get(access_log.REQUEST_ID), len(data))
        # (in the trailing metadata: sent with the status, where initial metadata costs a send of its own)
        context.set_trailing_metadata(((access_log.REQUEST_ID, record.request_id),))
        token = access_log.CURRENT.set(record)
    traced = tracing.TRACER is not None
    scope = (
        tracing.request_span(path.lstrip("/"), metadata, {"rpc.system": "grpc", "rpc.method": path})
        if traced
        else contextlib.nullcontext()
    )
    with scope:
        status = "UNKNOWN"
        try:
            response = on_call(data, context, *rest)
            code = context.code()
            status = "OK" if code is None else code.name
            if record is not None:
                if isinstance(response, bytes):
                    record.response_bytes = len(response)
                elif hasattr(response, "ByteSize"):
                    record.response_bytes = response.ByteSize()
            return response
        except BaseException:
            code = context.code()
            status = code.name if code is not None else "UNKNOWN"
            raise
        finally:
            if traced:
                tracing.set_status(status, status == "OK")
            if record is not None:
                record.status = status
                access_log.CURRENT.reset(token)
                log.finish(record)


def _admit_bytes(request_bytes: RequestBytes, size: int, context: grpc.ServicerContext) -> None:
    """Counts a large request in flight until its RPC ends; RESOURCE_EXHAUSTED if it finds no
    room (``serving/resources/request_bytes.py``)."""
    try:
        ticket = request_bytes.admit(size)
    except errors.ResourceExhaustedError as e:
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, e.message)
    if not context.add_callback(ticket.release):
        ticket.release()


def _refuse(drain: Drain, context: grpc.ServicerContext) -> None:
    drain.refused()
    context.abort(grpc.StatusCode.UNAVAILABLE, REFUSAL_MESSAGE)


def _parsed(data: bytes, parse: Callable[[bytes], object], context: grpc.ServicerContext):
    try:
        return parse(data)
    except Exception:  # noqa: BLE001 - whatever grpc's deserializer failure would have caught
        context.abort(grpc.StatusCode.INTERNAL, UNPARSABLE_REQUEST)


def _parsed_stream(requests: Iterator[bytes], parse, context) -> Iterator[object]:
    for data in requests:
        yield _parsed(data, parse, context)
