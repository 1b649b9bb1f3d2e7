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

from collections.abc import Callable, Iterator

import grpc

from runtime import errors
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
    raw = {method: parse_in_handler(handler, drain or _NEVER) for method, handler in handlers.items()}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, raw),))
    server.add_registered_method_handlers(service, raw)


def parse_in_handler(handler: grpc.RpcMethodHandler, drain: Drain) -> grpc.RpcMethodHandler:
    """``handler`` taking request bytes: the same behaviour, its deserializer called by us."""
    parse = handler.request_deserializer
    if parse is None:
        return handler
    if handler.request_streaming:
        behavior = handler.stream_stream or handler.stream_unary
        kind = "stream_stream" if handler.stream_stream else "stream_unary"

        def on_stream(requests, context, *rest):
            if drain.refusing:
                _refuse(drain, context)
            return behavior(_parsed_stream(requests, parse, context), context, *rest)

        wrapped = on_stream
    else:
        behavior = handler.unary_unary or handler.unary_stream
        kind = "unary_unary" if handler.unary_unary else "unary_stream"

        admitted, request_bytes = drain.admitted, drain.request_bytes

        def on_unary(data, context, *rest):
            if drain.refusing:
                _refuse(drain, context)
            # Admitted until the RPC ends, its answer sent (or the call cancelled), not until the
            # handler returns: the process must not exit while a large answer is still leaving.
            admitted.append(None)
            if not context.add_callback(admitted.pop):
                admitted.pop()  # (the RPC has already ended)
            if len(data) >= SMALL:
                _admit_bytes(request_bytes, len(data), context)
            return behavior(_parsed(data, parse, context), context, *rest)

        wrapped = on_unary
    return handler._replace(request_deserializer=None, **{kind: wrapped})


_NEVER = Drain()  # for services added without one: never refuses


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
