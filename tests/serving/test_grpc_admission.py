"""serving.grpc_api.handlers with a Drain: a call stays admitted until its RPC ends, not until its
handler returns, so the drain waits for answers still being sent (a streamed answer makes the
span between the two observable without timing)."""

from __future__ import annotations

import threading
import time
from concurrent import futures
from dataclasses import dataclass

import grpc
import pytest

from serving.grpc_api.handlers import add_handlers
from serving.resources.drain import Drain

SERVICE = "test.Admission"


@dataclass
class Served:
    """An in-process server of the two methods, its Drain, and the stream's events."""

    drain: Drain
    channel: grpc.Channel
    release: threading.Event  # the stream's second answer may go
    handler_returned: threading.Event


@pytest.fixture
def served():
    drain, release, handler_returned = Drain(), threading.Event(), threading.Event()

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
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield Served(drain, channel, release, handler_returned)
    finally:
        release.set()
        channel.close()
        server.stop(None)


def _wait_for(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)
    return condition()


def test_a_call_is_admitted_until_its_rpc_ends_not_until_its_handler_returns(served):
    answers = served.channel.unary_stream(f"/{SERVICE}/Stream")(b"x", timeout=10)
    assert next(answers) == b"x"
    assert served.handler_returned.is_set()
    assert len(served.drain.admitted) == 1  # the handler returned, its answer is still leaving
    assert not served.drain.wait_idle(0.05)
    served.release.set()
    assert list(answers) == [b"x"]
    assert _wait_for(lambda: not served.drain.admitted)  # the RPC ended: the call is done
    assert served.channel.unary_unary(f"/{SERVICE}/Unary")(b"y", timeout=10) == b"y"
    assert _wait_for(lambda: not served.drain.admitted)


def test_a_cancelled_call_is_no_longer_admitted(served):
    answers = served.channel.unary_stream(f"/{SERVICE}/Stream")(b"x", timeout=10)
    assert next(answers) == b"x"
    assert len(served.drain.admitted) == 1
    answers.cancel()
    assert _wait_for(lambda: not served.drain.admitted)
