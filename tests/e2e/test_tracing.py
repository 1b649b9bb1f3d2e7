"""OpenTelemetry tracing of ``model_server``, configured by OTel's standard variables: an OTLP
receiver (a gRPC TraceService written here, and an OTLP/HTTP one) gets a server span per
request, in the caller's trace (W3C ``traceparent`` from gRPC metadata and from an HTTP
header), with its decode, batching queue, Session run and encode children."""

from __future__ import annotations

import http.client
import json
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import numpy as np
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from apis.tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from runtime.tensor_util import make_tensor_proto
from tests.e2e.conftest import free_port

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
REST_TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
REST_PARENT_ID = "b7ad6b7169203331"


class Received:
    """Spans as (trace id, span id, parent id, name, attributes, service name)."""

    def __init__(self):
        self.spans: list[tuple] = []
        self._lock = threading.Lock()

    def add(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        with self._lock:
            for resource_spans in request.resource_spans:
                service = next(
                    (
                        a.value.string_value
                        for a in resource_spans.resource.attributes
                        if a.key == "service.name"
                    ),
                    "",
                )
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        attributes = {
                            a.key: a.value.string_value or a.value.int_value for a in span.attributes
                        }
                        self.spans.append(
                            (span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(), span.name,
                             attributes, service)
                        )  # fmt: skip

    def of_trace(self, trace_id: str) -> list[tuple]:
        with self._lock:
            return [s for s in self.spans if s[0] == trace_id]


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, received):
        self.received = received

    def Export(self, request, context):  # noqa: N802
        self.received.add(request)
        return trace_service_pb2.ExportTraceServiceResponse()


def start_grpc_receiver(received) -> tuple[grpc.Server, int]:
    server = grpc.server(futures.ThreadPoolExecutor(4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Collector(received), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def start_http_receiver(received) -> tuple[ThreadingHTTPServer, int]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.add(trace_service_pb2.ExportTraceServiceRequest.FromString(body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()
            self.wfile.write(trace_service_pb2.ExportTraceServiceResponse().SerializeToString())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def wait_for(received, trace_id: str, names: set[str], timeout: float = 20) -> list[tuple]:
    deadline = time.monotonic() + timeout
    while True:
        spans = received.of_trace(trace_id)
        if names <= {s[3] for s in spans}:
            return spans
        assert time.monotonic() < deadline, (names, spans)
        time.sleep(0.1)


def predict(channel, traceparent: str | None):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "half_plus_two"
    request.inputs["x"].CopyFrom(make_tensor_proto(np.float32([[1.0]])))
    metadata = (("traceparent", traceparent),) if traceparent else ()
    return prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
        request, timeout=10, metadata=metadata
    )


def check_tree(spans, trace_id, parent_id, root_name, children):
    (root,) = [s for s in spans if s[2] == parent_id]
    assert root[3] == root_name and root[5] == "sms-under-test"
    by_name = {s[3]: s for s in spans}
    for name in children:
        span = by_name[name]
        ancestors, at = [], span
        while at[2] and at[2] != parent_id:  # walk up to the root
            at = next(s for s in spans if s[1] == at[2])
            ancestors.append(at[3])
        assert at is root or root[3] in ancestors, (name, ancestors)
    return root


def test_spans_join_the_callers_trace_over_otlp_grpc(model_server, model_dir, monkeypatch):
    received = Received()
    receiver, port = start_grpc_receiver(received)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "sms-under-test")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    rest_port = free_port()
    server = model_server(
        f"--model_base_path={model_dir('half_plus_two')}", "--model_name=half_plus_two",
        f"--rest_api_port={rest_port}", "--enable_batching",
    )  # fmt: skip
    predict(server.channel(), f"00-{TRACE_ID}-{PARENT_ID}-01")
    spans = wait_for(received, TRACE_ID, {"decode", "batching queue", "Session run", "encode"})
    root = check_tree(
        spans, TRACE_ID, PARENT_ID, "tensorflow.serving.PredictionService/Predict",
        ["decode", "batching queue", "Session run", "encode"],
    )  # fmt: skip
    assert root[4]["rpc.system"] == "grpc" and root[4]["tfserving.status"] == "OK"
    connection = http.client.HTTPConnection("127.0.0.1", rest_port, timeout=10)
    connection.request(
        "POST", "/v1/models/half_plus_two:predict", json.dumps({"instances": [[1.0]]}).encode(),
        {"traceparent": f"00-{REST_TRACE_ID}-{REST_PARENT_ID}-01"},
    )  # fmt: skip
    response = connection.getresponse()
    assert (response.status, json.loads(response.read())) == (200, {"predictions": [[2.5]]})
    spans = wait_for(received, REST_TRACE_ID, {"decode", "Session run", "encode"})
    root = check_tree(
        spans,
        REST_TRACE_ID,
        REST_PARENT_ID,
        "POST /v1/models/half_plus_two:predict",
        ["decode", "Session run", "encode"],
    )
    assert root[4]["tfserving.status"] == "200"
    # a call without a traceparent starts a trace of its own; a refused one is marked so
    connection.request("POST", "/v1/models/nope:predict", json.dumps({"instances": [[1.0]]}).encode())
    response = connection.getresponse()
    assert (response.status, response.read()[:1]) == (404, b"{")
    deadline = time.monotonic() + 20
    while not any(s[3] == "POST /v1/models/nope:predict" for s in received.spans):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    (own,) = [s for s in received.spans if s[3] == "POST /v1/models/nope:predict"]
    assert own[0] not in (TRACE_ID, REST_TRACE_ID) and own[2] == "" and own[4]["tfserving.status"] == "404"
    assert server.stop() == 0
    receiver.stop(0)


def test_otlp_over_http(model_server, model_dir, monkeypatch):
    received = Received()
    receiver, port = start_http_receiver(received)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{port}/v1/traces")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "sms-under-test")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    server = model_server(f"--model_base_path={model_dir('half_plus_two')}", "--model_name=half_plus_two")
    predict(server.channel(), f"00-{TRACE_ID}-{PARENT_ID}-01")
    spans = wait_for(received, TRACE_ID, {"decode", "Session run", "encode"})
    check_tree(
        spans,
        TRACE_ID,
        PARENT_ID,
        "tensorflow.serving.PredictionService/Predict",
        ["decode", "Session run", "encode"],
    )
    assert server.stop() == 0
    receiver.shutdown()


def test_an_unknown_exporter_fails_the_start(model_server, model_dir, monkeypatch):
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    server = model_server(
        f"--model_base_path={model_dir('half_plus_two')}", "--model_name=half_plus_two", wait=False
    )
    assert server.wait_exit(timeout=60) != 0
    assert "OTEL_TRACES_EXPORTER=zipkin: only otlp and console are known" in server.output()
