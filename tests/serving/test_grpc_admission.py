"""serving.grpc_handlers with a Drain: a call stays admitted until its RPC ends, not until its
handler returns, so the drain waits for answers still being sent (a streamed answer makes the
span between the two observable without timing)."""

from __future__ import annotations

import threading
import time
from concurrent import futures

import grpc

from serving.drain import Drain
from serving.grpc_handlers import add_handlers

SERVICE = "test.Admission"


def _serve(drain: Drain, release: threading.Event, handler_returned: threading.Event):
    def stream(request: bytes, context):
        def answers():
            yield request
            release.wait(10)  # the handler has long returned; the RPC goes on
            yield request

        handler_returned.set()
        return answers()

    def unary(request: bytes, context):
        return request

    handlers = {
        "Stream": grpc.unary_stream_rpc_method_handler(
            stream, request_deserializer=bytes, response_serializer=bytes
        ),
        "Unary": grpc.unary_unary_rpc_method_handler(
            unary, request_deserializer=bytes, response_serializer=bytes
        ),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    add_handlers(server, SERVICE, handlers, drain)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, grpc.insecure_channel(f"127.0.0.1:{port}")


def _wait_for(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)
    return condition()


def test_a_call_is_admitted_until_its_rpc_ends_not_until_its_handler_returns():
    drain, release, returned = Drain(), threading.Event(), threading.Event()
    server, channel = _serve(drain, release, returned)
    try:
        answers = channel.unary_stream(f"/{SERVICE}/Stream")(b"x", timeout=10)
        assert next(answers) == b"x"
        assert returned.is_set()
        assert len(drain.admitted) == 1  # the handler returned, its answer is still leaving
        assert not drain.wait_idle(0.05)
        release.set()
        assert list(answers) == [b"x"]
        assert _wait_for(lambda: not drain.admitted)  # the RPC ended: the call is done
        assert channel.unary_unary(f"/{SERVICE}/Unary")(b"y", timeout=10) == b"y"
        assert _wait_for(lambda: not drain.admitted)
    finally:
        release.set()
        channel.close()
        server.stop(None)


def test_a_cancelled_call_is_no_longer_admitted():
    drain, release, returned = Drain(), threading.Event(), threading.Event()
    server, channel = _serve(drain, release, returned)
    try:
        answers = channel.unary_stream(f"/{SERVICE}/Stream")(b"x", timeout=10)
        assert next(answers) == b"x"
        assert len(drain.admitted) == 1
        answers.cancel()
        assert _wait_for(lambda: not drain.admitted)
    finally:
        release.set()
        channel.close()
        server.stop(None)
