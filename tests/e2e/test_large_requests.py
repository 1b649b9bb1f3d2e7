"""Large Predict requests over REST and gRPC: memory given back, and a bound on the bytes in
flight shared by both transports (``serving/resources/request_bytes.py``)."""

from __future__ import annotations

import http.client
import json
import os
import select
import socket
import threading
import time

import grpc
import numpy as np

from apis.tensorflow_serving.apis import predict_pb2
from runtime.tensor_util import make_ndarray
from tests.e2e.conftest import free_port

PREDICT = "/tensorflow.serving.PredictionService/Predict"
UNLIMITED = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def rest_body(floats: int) -> bytes:
    values = np.arange(floats, dtype=np.float32) % 10  # "3.0,": 4 bytes a value
    return json.dumps({"instances": values.tolist()}, separators=(",", ":")).encode()


def grpc_request(floats: int) -> bytes:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "half_plus_two"
    tensor = request.inputs["x"]
    tensor.dtype = 1  # DT_FLOAT
    tensor.tensor_shape.dim.add().size = floats
    tensor.tensor_content = (np.arange(floats, dtype=np.float32) % 10).tobytes()
    return request.SerializeToString()


def start(model_server, model_dir, *flags):
    rest_port = free_port()
    server = model_server(
        f"--rest_api_port={rest_port}",
        "--model_name=half_plus_two",
        f"--model_base_path={model_dir('half_plus_two')}",
        *flags,
    )
    return server, rest_port


class Answer:
    def __init__(self, status: int, body: bytes) -> None:
        self.status_code, self.text = status, body.decode(errors="replace")

    def json(self):
        return json.loads(self.text)


def post(port: int, body: bytes, timeout: float = 120) -> Answer:
    """POST to half_plus_two's predict on a connection of its own."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("POST", "/v1/models/half_plus_two:predict", body)
        response = connection.getresponse()
        return Answer(response.status, response.read())
    finally:
        connection.close()


def test_memory_of_large_requests_stays_bounded(model_server, model_dir):
    """Before: a JSON answer was one str per value (450 MB traced for 4M floats): a 16 MB REST
    request peaked at 44x its body, and REST's RSS rose 135 -> 480 MiB over 10 of them; then
    17x (a Python float per JSON number). Now the peak is under 12x (measured 9x, the answer's
    text included: ``serving/rest_api/json_numbers.py``), 12 more pairs of a REST (8 MB) and a gRPC
    (16 MB) request stay within 320 MiB of the RSS before any (measured 100-230 MiB: glibc's
    heap keeps some of what large requests freed; see serving/resources/memory.py), and so does the RSS
    a moment after 4 REST and 4 gRPC requests of 16 MB at once (measured +20 MiB)."""
    server, url = start(model_server, model_dir)
    floats = 4_000_000  # 16 MB of tensor content; the REST body half of it (2 MB of JSON is 1 s)
    body, data = rest_body(floats // 2), grpc_request(floats)
    call = server.new_channel(options=UNLIMITED).unary_unary(PREDICT)
    expected = (np.arange(floats, dtype=np.float32) % 10) * 0.5 + 2

    def both():
        answer = post(url, body)
        assert answer.status_code == 200, answer.text[:200]
        response = predict_pb2.PredictResponse.FromString(call(data, timeout=120))
        got = make_ndarray(response.outputs["y"])
        np.testing.assert_array_equal(got, expected)
        return answer

    assert post(url, b'{"instances": [1.0]}').json() == {"predictions": [2.5]}  # every path warm
    call(grpc_request(1), timeout=60)
    baseline = rss_mib(server.proc.pid)
    # The peak of one 16 MB REST request.
    large, peak, done = rest_body(floats), [baseline], threading.Event()

    def sample():
        while not done.is_set():
            peak.append(rss_mib(server.proc.pid))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        assert post(url, large, 300).status_code == 200
    finally:
        done.set()
        sampler.join()
    assert max(peak) - baseline < 12 * len(large) / 2**20, (baseline, max(peak), len(large))
    del large
    first = both()
    np.testing.assert_array_equal(np.float32(first.json()["predictions"]), expected[: floats // 2])
    sizes = [rss_mib(server.proc.pid)]
    for _ in range(12):
        both()
        time.sleep(0.3)  # (the heap is trimmed a moment after a large request ends)
        sizes.append(rss_mib(server.proc.pid))
    assert max(sizes) - baseline < 320, (baseline, [round(x) for x in sizes])
    # 4 REST requests of 16 MB and 4 gRPC ones at once: what they took is given back.
    large = rest_body(floats)
    answers = []
    threads = [
        threading.Thread(target=lambda: answers.append(post(url, large, 300).status_code)) for _ in range(4)
    ]
    threads += [
        threading.Thread(target=lambda: answers.append(len(call(data, timeout=300)))) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers.count(200) == 4 and len(answers) == 8, answers
    time.sleep(2.5)  # the heap's trim runs at most once a second
    settled = rss_mib(server.proc.pid)
    assert settled - baseline < 320, (baseline, settled)


class Held:
    """A large POST admitted and kept in flight: headers and half the body sent (the server
    admits a request by its Content-Length, before reading it), the rest sent by ``finish``."""

    def __init__(self, port: int, body: bytes) -> None:
        self.body = body
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        head = (
            "POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.sock.sendall(head.encode() + body[: len(body) // 2])

    def answered_early(self) -> bool:
        """Whether the server answered (refused it) before its body was all sent."""
        return bool(select.select([self.sock], [], [], 0)[0])

    def finish(self) -> int:
        self.sock.sendall(self.body[len(self.body) // 2 :])
        response = http.client.HTTPResponse(self.sock)
        response.begin()
        response.read()
        self.sock.close()
        return response.status


def test_requests_past_the_limit_of_bytes_in_flight_are_refused_on_both_transports(model_server, model_dir):
    """With --max_request_bytes_in_flight=1, a large request runs alone: one more that arrives
    while it is in flight, on either transport, waits its second and is answered 429 /
    RESOURCE_EXHAUSTED (its body read, so the client gets the answer); small requests are never
    counted; once the large one ends, the same requests are answered."""
    server, url = start(model_server, model_dir, "--max_request_bytes_in_flight=1")
    call = server.new_channel(options=UNLIMITED).unary_unary(PREDICT)
    long_body = rest_body(4_000_000)
    body, data = rest_body(100_000), grpc_request(100_000)
    held = Held(url, long_body)
    deadline = time.monotonic() + 60
    while True:  # until the held request is admitted (a probe may have been in flight first)
        if held.answered_early():
            held = Held(url, long_body)
        refused = post(url, body)
        if refused.status_code == 429 or time.monotonic() > deadline:
            break
    assert refused.status_code == 429, refused.text[:200]
    assert "--max_request_bytes_in_flight" in refused.json()["error"]
    try:
        call(data, timeout=60)
        raise AssertionError("a large gRPC request was admitted beside the REST one")
    except grpc.RpcError as e:
        assert e.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, e.details()
        assert "1 bytes of requests in flight" in e.details()
    small = post(url, b'{"instances": [1.0, 2.0]}')
    assert small.json() == {"predictions": [2.5, 3.0]}
    assert held.finish() == 200
    assert post(url, body).status_code == 200
    response = predict_pb2.PredictResponse.FromString(call(data, timeout=60))
    assert make_ndarray(response.outputs["y"]).shape == (100_000,)
    assert server.proc.poll() is None
