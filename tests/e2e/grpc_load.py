"""Closed-loop Predict load for stop, crash and spreading tests, every call recorded.

``PredictLoad(address, request_bytes, clients=16)`` runs ``clients`` threads, each on a channel
of its own with its own TCP connection (a local subchannel pool: grpcio's channels to one target
otherwise share one connection). Each sends Predict as soon as the previous call is answered;
a client answered with an error backs off (50 ms doubling to 1 s, jittered), as gRPC retry
policies do. Every call is recorded as ``Call(client, sent, done, code)`` (monotonic times).

Connections are made one client at a time in ``__enter__`` (a first call each, waiting for the
server), so that ``client_ports[i]``, the local port of client ``i``'s connection, is known:
``tests/e2e/sockets.py`` maps it to the server process that holds the other end.
"""

from __future__ import annotations

import random
import threading
import time
from typing import NamedTuple

import grpc

from tests.e2e import sockets

PREDICT = "/tensorflow.serving.PredictionService/Predict"
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


class Call(NamedTuple):
    client: int
    sent: float
    done: float
    code: str


def count(calls) -> dict[str, int]:
    counts: dict[str, int] = {}
    for call in calls:
        counts[call.code] = counts.get(call.code, 0) + 1
    return counts


class PredictLoad:
    """See the module docstring. Use as a context manager; ``calls`` is complete after exit."""

    def __init__(
        self,
        address: str,
        request: bytes,
        clients: int = 16,
        connect_timeout: float = 60,
        method: str = PREDICT,
    ) -> None:
        self.address, self.request, self.method = address, request, method
        self.port = int(address.rsplit(":", 1)[1])
        self.calls: list[Call] = []
        self.client_ports: list[int] = []
        self._channels: list[grpc.Channel] = []
        self._stop = threading.Event()
        self._clients = clients
        self._connect_timeout = connect_timeout
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> PredictLoad:
        for i in range(self._clients):
            before = sockets.own_connections(self.port)
            channel = grpc.insecure_channel(self.address, options=OWN_CONNECTION)
            channel.unary_unary(self.method)(self.request, timeout=self._connect_timeout, wait_for_ready=True)
            new = sockets.own_connections(self.port) - before
            assert len(new) == 1, f"client {i}: expected one new connection, found {sorted(new)}"
            self._channels.append(channel)
            self.client_ports.append(new.pop())
        self._threads = [threading.Thread(target=self._client, args=(i,)) for i in range(self._clients)]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        for channel in self._channels:
            channel.close()

    def _client(self, index: int) -> None:
        rng, backoff = random.Random(index), 0.0
        call = self._channels[index].unary_unary(self.method)
        while not self._stop.is_set():
            sent = time.monotonic()
            try:
                call(self.request, timeout=10)
                code = "OK"
            except grpc.RpcError as e:
                code = e.code().name
            self.calls.append(Call(index, sent, time.monotonic(), code))
            backoff = 0.0 if code == "OK" else min(backoff * 2, 1.0) or 0.05
            time.sleep(backoff * rng.uniform(0.8, 1.2))
