"""serving.rest_api.server.RestServer in-process: routes, probes, threads, the shutdown steps."""

from __future__ import annotations

import http.client
import json
import socket
import threading

import pytest
from test_manager import FakeLoader, config_for, make_version

from serving.lifecycle.health import Readiness
from serving.options import ServerOptions
from serving.rest_api.routes import Reply
from serving.rest_api.server import NOT_FOUND_PAGE, RestServer, start_rest_server
from serving.server_core import ServerCore


@pytest.fixture
def served(tmp_path):
    make_version(tmp_path / "a", 1)
    options = ServerOptions(port=0, rest_api_port=0, rest_api_num_threads=3, file_system_poll_wait_seconds=0)
    core = ServerCore(options, load_fn=FakeLoader())
    core.reload_config(config_for([("a", tmp_path / "a")]))
    readiness = Readiness(core)
    server = RestServer(options, core, readiness, host="127.0.0.1")
    yield server, readiness
    server.stop(1.0)
    core.stop()


def get(port: int, path: str, method: str = "GET") -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request(method, path)
    response = connection.getresponse()
    return response.status, response.read()


def test_probes_routes_and_the_worker_threads(served):
    server, readiness = served
    threads = []

    def metrics(request):
        threads.append(threading.current_thread().name)
        return Reply(200, b"# TYPE x counter\n", content_type="text/plain")

    server.add_route("GET", "/monitoring/prometheus/metrics", metrics)
    server.start()
    assert get(server.port, "/healthz") == (200, b'{\n "status": "alive"\n}\n')
    status, body = get(server.port, "/readyz")
    assert (status, json.loads(body)) == (
        503,
        {"error": "The server is not serving (starting or shutting down)."},
    )
    readiness.set_serving()
    assert get(server.port, "/readyz?verbose")[0] == 200
    assert get(server.port, "/monitoring/prometheus/metrics") == (200, b"# TYPE x counter\n")
    assert threads and threads[0].startswith("httprestserver")
    assert get(server.port, "/nope") == (404, NOT_FOUND_PAGE)
    assert get(server.port, "/v1/models/a", "DELETE")[0] == 400
    assert server._workers._max_workers == 3  # --rest_api_num_threads


def test_stop_accepting_then_close(served):
    server, _ = served
    server.start()
    keep = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    keep.request("GET", "/healthz")
    assert keep.getresponse().read()
    server.stop_accepting()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=2).close()
    keep.request("GET", "/healthz")  # an open connection is still answered, then closed
    response = keep.getresponse()
    assert (response.status, response.getheader("Connection")) == (200, "close")
    assert server.wait_for_requests(1.0)
    server.close()


def test_start_rest_server_follows_tf_serving(tmp_path, caplog):
    make_version(tmp_path / "a", 1)
    core = ServerCore(ServerOptions(port=0), load_fn=FakeLoader())
    core.reload_config(config_for([("a", tmp_path / "a")]))
    readiness = Readiness(core)
    assert start_rest_server(ServerOptions(rest_api_port=0), core, readiness, "127.0.0.1") is None
    assert (
        start_rest_server(ServerOptions(port=8500, rest_api_port=8500), core, readiness, "127.0.0.1") is None
    )
    assert "http_port cannot be same as grpc_port" in caplog.text
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert start_rest_server(ServerOptions(rest_api_port=port), core, readiness, "127.0.0.1") is None
    assert f"Failed to start HTTP Server at localhost:{port}" in caplog.text
    core.stop()
