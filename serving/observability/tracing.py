"""OpenTelemetry tracing of requests, configured by OpenTelemetry's own environment variables.

Off unless ``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``, ``console``), or an OTLP
endpoint is set (``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, then
OTLP it is). The OTLP exporter speaks ``OTEL_EXPORTER_OTLP_PROTOCOL`` (``grpc``, the default, or
``http/protobuf``) and reads its endpoint, headers and certificates from the same variables;
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` name the service, ``OTEL_TRACES_SAMPLER``
samples, as in every OpenTelemetry-instrumented service. It needs the ``tracing`` extra
(``pip install savedmodel-server[tracing]``); a configured exporter without it is one clear error
at start-up.

Each request is a server span (``request``: the gRPC method, or the HTTP method and path) that
joins its caller's trace through W3C ``traceparent`` (an HTTP header, or gRPC metadata), with
child spans where the time goes: ``decode``, ``batching queue``, ``Session run``, ``encode``.
Spans are exported in batches by the SDK's thread. Off, ``TRACER`` is None and ``span`` is a
shared no-op context: nothing is imported and nothing is made per request.
"""

from __future__ import annotations

import contextlib
import os

from runtime import errors

TRACER = None  # an opentelemetry Tracer while tracing is on
_PROPAGATOR = None
_PROVIDER = None
_NOOP = contextlib.nullcontext()
INSTALL_HINT = "pip install 'savedmodel-server[tracing]'"


def span(name: str):
    """A child span of the current one while tracing is on; a no-op otherwise."""
    tracer = TRACER
    return _NOOP if tracer is None else tracer.start_as_current_span(name)


def request_span(name: str, carrier: dict, attributes: dict):
    """The server span of one request, child of the caller's ``traceparent`` in ``carrier``
    (lower-case header or metadata keys); call only while ``TRACER`` is set."""
    from opentelemetry.trace import SpanKind

    parent = _PROPAGATOR.extract(carrier) if carrier else None
    return TRACER.start_as_current_span(name, context=parent, kind=SpanKind.SERVER, attributes=attributes)


def set_status(status: str, ok: bool) -> None:
    """The request's outcome on the current span."""
    from opentelemetry import trace

    current = trace.get_current_span()
    current.set_attribute("tfserving.status", status)
    if not ok:
        current.set_status(trace.Status(trace.StatusCode.ERROR, status))


def _exporter_name(environ) -> str:
    name = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not name and (
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    ):
        name = "otlp"
    return "" if name == "none" else name


def configure(environ=os.environ) -> bool:
    """Turn tracing on as the environment says; True if it is on."""
    global TRACER, _PROPAGATOR, _PROVIDER
    name = _exporter_name(environ)
    if not name:
        return False
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        raise errors.InvalidArgumentError(
            None, None, f"OTEL_TRACES_EXPORTER={name} needs OpenTelemetry's SDK: {INSTALL_HINT}"
        ) from None
    provider = TracerProvider(resource=Resource.create())
    provider.add_span_processor(BatchSpanProcessor(_exporter(name, environ)))
    _PROVIDER, _PROPAGATOR = provider, TraceContextTextMapPropagator()
    TRACER = provider.get_tracer("savedmodel-server")
    return True


def _exporter(name: str, environ):
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        raise errors.InvalidArgumentError(
            None, None, f"OTEL_TRACES_EXPORTER={name}: only otlp and console are known"
        )
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "grpc"
    )
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        elif protocol == "http/protobuf":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        else:
            raise errors.InvalidArgumentError(
                None, None, f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: grpc and http/protobuf are known"
            )
    except ImportError:
        raise errors.InvalidArgumentError(
            None, None, f"the OTLP {protocol} exporter is not installed: {INSTALL_HINT}"
        ) from None
    return OTLPSpanExporter()


def shutdown() -> None:
    """Export what is left and stop (the server's exit)."""
    global TRACER
    provider, TRACER = _PROVIDER, None
    if provider is not None:
        provider.shutdown()
