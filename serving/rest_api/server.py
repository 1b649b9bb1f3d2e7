"""The HTTP server of ``--rest_api_port``: TF Serving's REST API, probes and model listing.

An aiohttp server (its C HTTP parser; uvloop's event loop where installed) runs on an event
loop thread of its own; HTTP/1.1 keep-alive, chunked and gzip bodies are aiohttp's. The
requests themselves run on ``--rest_api_num_threads`` worker threads (TF Serving's
``RequestExecutor``), so a slow model never holds the loop: the probes and other connections
are still answered.

Routes, as TF Serving's ``RestApiRequestDispatcher`` and ``evhttp`` have them:

- any method on a path that starts with ``/v1/`` (case-insensitively; path and query as sent):
  ``serving.rest_api.routes.RestApi`` answers, JSON with ``Content-Type: application/json``; OPTIONS is
  a CORS preflight (200 with an ``http(s)://`` Origin, else 400, empty either way);
  ``--rest_api_enable_cors_support`` adds TF Serving's three CORS headers to these answers;
- any method on ``/v2`` or a path under it (unless ``--enable_open_inference_protocol=false``):
  ``serving.rest_api.open_inference.OpenInferenceApi`` answers, the Open Inference Protocol
  (KServe V2), its request headers read (the binary data extension), its replies' content type
  and headers its own; admitted, drained and refused as ``/v1/`` is;
- ``GET /healthz`` and ``GET /readyz`` (ours, for Kubernetes probes: the process is up; every
  configured model has an available version, else 503 with the reason), answered on the loop;
- anything else: libevent's plain 404 page.

``add_route`` adds one more (the Prometheus page will be one). A body over
``--rest_api_max_body_bytes`` (ours) is answered 413 without reading the rest of it; the body
is parsed as JSON whatever its Content-Type says, as TF Serving does.

Shutdown: while ``drain`` (``serving/resources/drain.py``) refuses, requests under ``/v1/`` and ``/v2`` are answered
503 at once (the probes still answer); ``stop_accepting`` closes the listening socket (answers then say ``Connection:
close``), ``wait_for_requests`` waits for the requests in flight, ``close`` ends the loop; ``stop``
is all three. /readyz turns 503 through the shared ``Readiness``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from aiohttp import web

from serving import errors
from serving.inference.request_functions import DEFAULT_FUNCTIONS, RequestFunctions
from serving.lifecycle.health import Readiness
from serving.resources.drain import REFUSAL_MESSAGE, Drain
from serving.resources.request_bytes import Ticket
from serving.rest_api import json_tensor
from serving.rest_api.open_inference import PATH_PREFIX as V2_PATH_PREFIX
from serving.rest_api.open_inference import OpenInferenceApi
from serving.rest_api.routes import (
    JSON_CONTENT_TYPE,
    PATH_PREFIX,
    Reply,
    RestApi,
    liveness_json,
    readiness_json,
)

try:  # uvloop: a faster event loop where it is built (not on Windows)
    import uvloop
except ImportError:  # pragma: no cover - the pure-asyncio loop serves the same
    uvloop = None

logger = logging.getLogger(__name__)

CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "POST, GET",
    "Access-Control-Allow-Headers": "Content-Type",
}
# libevent's evhttp_send_error(req, HTTP_NOTFOUND, NULL): what TF Serving answers off /v1/.
NOT_FOUND_PAGE = (
    b"<HTML><HEAD>\n<TITLE>404 Not Found</TITLE>\n</HEAD><BODY>\n<H1>Not Found</H1>\n</BODY></HTML>\n"
)
_ORIGIN = re.compile(r"https?://")
_REASONS = {499: "Client Closed Request"}  # TF Serving's CLIENT_CLOSED_REQUEST, not in http's list
_CLOSE_TIMEOUT = 5.0


class Request(NamedTuple):
    """What a route's handler gets: method, path (with its query, as sent), headers, body."""

    method: str
    path: str
    headers: dict
    body: bytes


class Route(NamedTuple):
    handler: Callable[[Request], Reply]
    inline: bool  # run on the event loop (cheap, never blocks) rather than a worker thread


class RestServer:
    """One HTTP server for a ServerCore. Start it once (``start``), stop it once (``stop``, or
    its three steps); ``port`` is the bound port. Thread-safe: requests run concurrently on
    the worker threads; the control methods may be called from any one thread."""

    def __init__(
        self,
        options,
        core,
        readiness: Readiness,
        *,
        host: str = "0.0.0.0",
        functions: RequestFunctions = DEFAULT_FUNCTIONS,
        drain: Drain | None = None,
        reuse_port: bool = False,
    ) -> None:
        self.api = RestApi(core, options.rest_api_timeout_in_ms, functions)
        self.open_inference = (
            OpenInferenceApi(core, readiness, options.rest_api_timeout_in_ms, functions)
            if getattr(options, "enable_open_inference_protocol", True)
            else None
        )
        self._reuse_port = reuse_port
        self._drain = drain or Drain()
        self._cors = options.rest_api_enable_cors_support
        self._max_body = options.rest_api_max_body_bytes
        self._address = (host, options.rest_api_port)
        self._workers = ThreadPoolExecutor(
            max(1, options.rest_api_num_threads), thread_name_prefix="httprestserver"
        )
        self._routes: dict[tuple[str, str], Route] = {}
        self.add_route("GET", "/healthz", lambda request: liveness_json(), inline=True)
        self.add_route("GET", "/readyz", lambda request: readiness_json(readiness.reason()), inline=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.ServerRunner | None = None
        self._site: web.SockSite | None = None
        self.port = 0
        self._in_flight = 0  # changed on the loop only
        self._draining = False

    def add_route(
        self, method: str, path: str, handler: Callable[[Request], Reply], *, inline: bool = False
    ) -> None:
        """Answer ``method`` on exactly ``path`` (query ignored) with ``handler``; ``inline``
        runs it on the event loop (only for what never blocks), else on a worker thread."""
        self._routes[(method, path)] = Route(handler, inline)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Bind and serve; raises OSError if the port cannot be bound."""
        # The workers of --num_workers share the port (serving/supervisor.py); a lone server
        # fails on a taken port, as TF Serving's HTTP server does.
        sock = socket.create_server(self._address, backlog=1024, reuse_port=self._reuse_port)
        self.port = sock.getsockname()[1]
        self._loop = uvloop.new_event_loop() if uvloop is not None else asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rest_api", daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._serve(sock), self._loop).result()
        except BaseException:
            sock.close()
            self._end_loop()
            raise

    async def _serve(self, sock: socket.socket) -> None:
        server = web.Server(self._handle, access_log=None)
        self._runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        self._site = web.SockSite(self._runner, sock)
        await self._site.start()

    def stop_accepting(self) -> None:
        """Close the listening socket; requests on open connections are still answered, each
        with ``Connection: close``."""
        self._draining = True
        site, self._site = self._site, None
        if site is not None and self._loop is not None:
            asyncio.run_coroutine_threadsafe(site.stop(), self._loop).result(_CLOSE_TIMEOUT)

    def wait_for_requests(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the requests in flight; True if none is left."""
        deadline = time.monotonic() + timeout
        while self._in_flight and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self._in_flight

    def close(self) -> None:
        """Close every connection and end the loop and the workers (a request still running
        ends with the process). Stopping twice is stopping once."""
        runner, self._runner = self._runner, None
        if runner is not None and self._loop is not None:
            try:
                asyncio.run_coroutine_threadsafe(runner.cleanup(), self._loop).result(_CLOSE_TIMEOUT)
            except Exception:  # noqa: BLE001 - closing anyway
                logger.exception("Closing the HTTP/REST server")
        self._end_loop()
        self._workers.shutdown(wait=False)

    def stop(self, grace: float) -> None:
        """``stop_accepting``, ``wait_for_requests(grace)``, ``close``."""
        self.stop_accepting()
        self.wait_for_requests(grace)
        self.close()

    def _end_loop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None and self._thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(_CLOSE_TIMEOUT)
            if not self._thread.is_alive():
                loop.close()

    # -- requests -------------------------------------------------------------------------------

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        self._in_flight += 1
        try:
            response = await self._respond(request)
        finally:
            self._in_flight -= 1
        if self._draining or self._drain.draining:  # the next request opens a connection
            response.force_close()
        return response

    async def _respond(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.raw_path
        route = self._routes.get((request.method, path.partition("?")[0]))
        if route is not None:
            return await self._run_route(request, path, route)
        if PATH_PREFIX.fullmatch(path):
            return await self._run_api(request, path, self._v1)
        if self.open_inference is not None and V2_PATH_PREFIX.fullmatch(path.partition("?")[0]):
            return await self._run_api(request, path, self.open_inference.process)
        return web.Response(status=404, body=NOT_FOUND_PAGE, headers={"Content-Type": "text/html"})

    async def _run_route(self, request: web.BaseRequest, path: str, route: Route) -> web.StreamResponse:
        body = await self._read_body(request)
        if body is None:
            return self._too_large()
        call = Request(request.method, path, dict(request.headers), body)
        if route.inline:
            reply = route.handler(call)
        else:
            reply = await asyncio.get_running_loop().run_in_executor(self._workers, route.handler, call)
        return self._response(reply, {"Content-Type": reply.content_type})

    def _v1(self, method: str, path: str, headers, body: bytes) -> Reply:
        return self.api.process(method, path, body)

    async def _run_api(self, request: web.BaseRequest, path: str, process) -> web.StreamResponse:
        """``process(method, path, headers, body)``'s reply, the request admitted by its size and
        refused while draining."""
        if request.method == "OPTIONS":  # a CORS preflight: no body, no Content-Type
            ok = _ORIGIN.search(request.headers.get("Origin", ""))
            return self._response(Reply(200 if ok else 400, b""), {})
        if self._drain.refusing:  # shutting down: 503, which clients and proxies retry elsewhere
            self._drain.refused()
            body = json_tensor.error_json(REFUSAL_MESSAGE).encode()
            return self._response(Reply(503, body), {"Content-Type": JSON_CONTENT_TYPE})
        length = request.content_length
        sized = length is not None and length <= self._max_body  # admitted before it is read
        ticket = await self._admit(length) if sized else None
        if sized and ticket is None:
            await self._discard_body(request)  # so that the client, still sending, reads the 429
            return self._too_many_bytes(length)
        try:
            body = await self._read_body(request)
            if body is None:
                return self._too_large()
            if ticket is None:  # a chunked body: its size is known once it is read
                ticket = await self._admit(len(body))
                if ticket is None:
                    return self._too_many_bytes(len(body))
            loop = asyncio.get_running_loop()
            reply = await loop.run_in_executor(
                self._workers, process, request.method, path, request.headers, body
            )
            return self._response(reply, {"Content-Type": reply.content_type, **dict(reply.headers)})
        finally:
            if ticket is not None:
                ticket.release()

    async def _admit(self, size: int) -> Ticket | None:
        """The request's ticket (``serving/resources/request_bytes.py``), waiting on the loop for room
        up to its wait; None if it found none."""
        request_bytes = self._drain.request_bytes
        deadline = time.monotonic() + request_bytes.wait_seconds
        while True:
            ticket = request_bytes.try_admit(size, json=True)
            if ticket is not None or time.monotonic() >= deadline:
                return ticket
            await asyncio.sleep(0.005)

    async def _discard_body(self, request: web.BaseRequest) -> None:
        """Reads the body and drops it as it comes (a chunk at a time in memory)."""
        if request.version >= (1, 1) and request.headers.get("Expect", "").lower() == "100-continue":
            return  # the client waits for our answer before it sends
        while await request.content.readany():
            pass

    def _too_many_bytes(self, size: int) -> web.Response:
        error = self._drain.request_bytes.refusal(size)
        body = json_tensor.error_json(error.message).encode()
        return self._response(
            Reply(errors.http_status(error.code), body), {"Content-Type": JSON_CONTENT_TYPE}
        )

    def _response(self, reply: Reply, headers: dict) -> web.Response:
        if self._cors:
            headers.update(CORS_HEADERS)
        return web.Response(
            status=reply.status, reason=_REASONS.get(reply.status), body=reply.body, headers=headers
        )

    async def _read_body(self, request: web.BaseRequest) -> bytes | None:
        """The whole body (decompressed), or None once it is past ``--rest_api_max_body_bytes``."""
        length = request.content_length
        if length is not None and length > self._max_body:
            return None
        content = request.content
        if length is not None and content.is_eof() and content.total_bytes == length:
            return content.read_nowait()  # (the common small body: all here with its headers)
        if request.version >= (1, 1) and request.headers.get("Expect", "").lower() == "100-continue":
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        chunks, size = [], 0
        while True:
            chunk = await request.content.readany()
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > self._max_body:
                return None
            chunks.append(chunk)

    def _too_large(self) -> web.Response:
        message = (
            f"Request body is larger than the limit of {self._max_body} bytes (--rest_api_max_body_bytes)."
        )
        response = self._response(
            Reply(413, json_tensor.error_json(message).encode()), {"Content-Type": JSON_CONTENT_TYPE}
        )
        response.force_close()  # the rest of the body is never read
        return response


def start_rest_server(
    options,
    core,
    readiness: Readiness,
    host: str,
    drain: Drain | None = None,
    reuse_port: bool = False,
    functions: RequestFunctions = DEFAULT_FUNCTIONS,
) -> RestServer | None:
    """TF Serving's start of the HTTP server: none when ``--rest_api_port`` is 0, or the same
    as ``--port`` (logged), or when the port cannot be bound (logged; gRPC serves on)."""
    if options.rest_api_port == 0:
        return None
    address = f"localhost:{options.rest_api_port}"
    if options.rest_api_port == options.port:
        logger.error(
            "server_options.http_port cannot be same as grpc_port. Please use a different port for "
            "HTTP/REST API. Skipped exporting HTTP/REST API."
        )
        return None
    server = RestServer(
        options, core, readiness, host=host, functions=functions, drain=drain, reuse_port=reuse_port
    )
    try:
        server.start()
    except OSError as e:
        logger.error("Failed to start HTTP Server at %s: %s", address, e)
        return None
    logger.info("Exporting HTTP/REST API at:%s ...", address)
    return server
