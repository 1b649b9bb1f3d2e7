"""The HTTP server of ``--rest_api_port``: TF Serving's REST API, probes and model listing.

An aiohttp server (its C HTTP parser; uvloop's event loop where installed) runs on an event
loop thread of its own; HTTP/1.1 keep-alive, chunked and gzip bodies are aiohttp's. The
requests themselves run on ``--rest_api_num_threads`` worker threads (TF Serving's
``RequestExecutor``), so a slow model never holds the loop: the probes and other connections
are still answered. With ``--rest_api_ssl_config_file`` (ours: TF Serving's REST port has no TLS)
the port speaks HTTPS only, requiring client certificates where the SSLConfig says
``client_verify``; a changed file is loaded within a second (``serving/resources/tls.py``).

Routes, as TF Serving's ``RestApiRequestDispatcher`` and ``evhttp`` have them:

- any method on a path that starts with ``/v1/`` (case-insensitively; path and query as sent):
  ``serving.rest_api.routes.RestApi`` answers, JSON with ``Content-Type: application/json``; OPTIONS is
  a CORS preflight (200 with an ``http(s)://`` Origin, else 400, empty either way);
  ``--rest_api_enable_cors_support`` adds TF Serving's three CORS headers to these answers;
  ``--rest_api_cors_allowed_origins`` (ours) adds them, with the caller's origin, only to answers
  to an allowed ``Origin`` (``Vary: Origin`` on every answer), and refuses others' preflights 403;
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
import contextvars
import logging
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from aiohttp import web

from runtime import errors as op_errors
from serving import errors
from serving.inference.request_functions import DEFAULT_FUNCTIONS, RequestFunctions
from serving.lifecycle.health import Readiness
from serving.observability import access_log, tracing
from serving.resources import auth, tls
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
_TLS_POLL_SECONDS = 1.0  # how soon a rotated --rest_api_ssl_config_file is served


class Request(NamedTuple):
    """What a route's handler gets: method, path (with its query, as sent), headers, body."""

    method: str
    path: str
    headers: dict
    body: bytes


class Route(NamedTuple):
    handler: Callable[[Request], Reply]
    inline: bool  # run on the event loop (cheap, never blocks) rather than a worker thread
    public: bool = False  # answered without a token under --auth_token_file (probes)


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
        self._origins = cors_origins(getattr(options, "rest_api_cors_allowed_origins", ""))
        ssl_config = getattr(options, "rest_api_ssl_config_file", "")
        self._tls = tls.SslConfigFile(ssl_config, "rest_api_ssl_config_file") if ssl_config else None
        self._ssl_context = self._tls.server_context() if self._tls is not None else None
        self._max_body = options.rest_api_max_body_bytes
        self._address = (host, options.rest_api_port)
        self._workers = ThreadPoolExecutor(
            max(1, options.rest_api_num_threads), thread_name_prefix="httprestserver"
        )
        self._routes: dict[tuple[str, str], Route] = {}
        self.add_route("GET", "/healthz", lambda request: liveness_json(), inline=True, public=True)
        self.add_route(
            "GET", "/readyz", lambda request: readiness_json(readiness.reason()), inline=True, public=True
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.ServerRunner | None = None
        self._site: web.SockSite | None = None
        self.port = 0
        self._rotation: asyncio.Future | None = None
        self._in_flight = 0  # changed on the loop only
        self._draining = False

    def add_route(
        self,
        method: str,
        path: str,
        handler: Callable[[Request], Reply],
        *,
        inline: bool = False,
        public: bool = False,
    ) -> None:
        """Answer ``method`` on exactly ``path`` (query ignored) with ``handler``; ``inline``
        runs it on the event loop (only for what never blocks), else on a worker thread;
        ``public``: without a token under ``--auth_token_file``."""
        self._routes[(method, path)] = Route(handler, inline, public)

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
        self._site = web.SockSite(self._runner, sock, ssl_context=self._ssl_context)
        await self._site.start()
        if self._tls is not None:
            self._rotation = asyncio.ensure_future(self._rotate_certificate())

    async def _rotate_certificate(self) -> None:
        """Load a changed --rest_api_ssl_config_file into the live context, once a second: the
        connections accepted after it get the new certificate."""
        while True:
            await asyncio.sleep(_TLS_POLL_SECONDS)
            try:
                self._tls.reload_context(self._ssl_context)
            except Exception:  # noqa: BLE001 - a rotation that fails keeps the old certificate
                logger.exception("Reloading the REST API's TLS certificate")

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
        rotation, self._rotation = self._rotation, None
        if rotation is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(rotation.cancel)
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
        record = token = None
        try:
            if access_log.ACTIVE is not None:  # one line per request; its id in the answer
                record = access_log.ACTIVE.start(
                    "rest",
                    f"{request.method} {request.raw_path.partition('?')[0]}",
                    request.remote or "",
                    request.headers.get(access_log.REQUEST_ID),
                    request.content_length or 0,
                )
                token = access_log.CURRENT.set(record)  # (copied to the worker thread)
            refusal = self._unauthorized(request) if auth.ACTIVE is not None else None
            if refusal is not None:
                response = refusal
            elif tracing.TRACER is not None:
                response = await self._traced(request)
            else:
                response = await self._respond(request)
        finally:
            self._in_flight -= 1
            if token is not None:  # (a connection's requests share one task)
                access_log.CURRENT.reset(token)
        if record is not None:
            response.headers[access_log.REQUEST_ID] = record.request_id
            record.status = str(response.status)
            body = getattr(response, "body", None)
            record.response_bytes = len(body) if isinstance(body, bytes | bytearray) else 0
            if not record.model:
                record.model = _model_in_path(request.raw_path)
            access_log.ACTIVE.finish(record)
        if self._origins is not None:
            origin = request.headers.get("Origin")
            response.headers["Vary"] = "Origin"  # caches keep one answer per origin
            if origin is not None and self._allowed(origin):
                response.headers.update({**CORS_HEADERS, "Access-Control-Allow-Origin": origin})
        if self._draining or self._drain.draining:  # the next request opens a connection
            response.force_close()
        return response

    async def _traced(self, request: web.BaseRequest) -> web.StreamResponse:
        """``_respond`` in a server span joining the caller's ``traceparent``."""
        path = request.raw_path.partition("?")[0]
        carrier = {
            k.lower(): v for k, v in request.headers.items() if k.lower() in ("traceparent", "tracestate")
        }
        attributes = {"http.request.method": request.method, "url.path": path}
        with tracing.request_span(f"{request.method} {path}", carrier, attributes):
            response = await self._respond(request)
            tracing.set_status(str(response.status), response.status < 400)
            return response

    def _unauthorized(self, request: web.BaseRequest) -> web.Response | None:
        """401 (no token, or one the file lacks) or 403 (a token that may not call the model the
        path names), checked before the body is read; None for a call that may go on."""
        path = request.raw_path.partition("?")[0]
        route = self._routes.get((request.method, path))
        if (
            (route is not None and route.public)
            or _PUBLIC_PATH.fullmatch(path)
            or request.method == "OPTIONS"
        ):
            return None
        model = _model_in_path(path)
        try:
            auth.ACTIVE.authorize(
                request.headers.get("Authorization"), (model,) if model else auth.EVERY_MODEL
            )
        except op_errors.OpError as e:
            status = errors.http_status(e.code)
            headers = {"Content-Type": JSON_CONTENT_TYPE}
            if status == 401:
                headers["WWW-Authenticate"] = "Bearer"
            return self._response(Reply(status, json_tensor.error_json(e.message).encode()), headers)
        return None

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
            reply = await asyncio.get_running_loop().run_in_executor(
                self._workers, contextvars.copy_context().run, route.handler, call
            )
        return self._response(reply, {"Content-Type": reply.content_type})

    def _v1(self, method: str, path: str, headers, body: bytes) -> Reply:
        return self.api.process(method, path, body)

    async def _run_api(self, request: web.BaseRequest, path: str, process) -> web.StreamResponse:
        """``process(method, path, headers, body)``'s reply, the request admitted by its size and
        refused while draining."""
        if request.method == "OPTIONS":  # a CORS preflight: no body, no Content-Type
            origin = request.headers.get("Origin", "")
            if self._origins is not None:
                return self._response(Reply(200 if self._allowed(origin) else 403, b""), {})
            return self._response(Reply(200 if _ORIGIN.search(origin) else 400, b""), {})
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
            reply = await loop.run_in_executor(  # (the context: the access log's record)
                self._workers,
                contextvars.copy_context().run,
                process,
                request.method,
                path,
                request.headers,
                body,
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

    def _allowed(self, origin: str) -> bool:
        return origin.rstrip("/").lower() in self._origins or "*" in self._origins

    def _response(self, reply: Reply, headers: dict) -> web.Response:
        if self._cors and self._origins is None:
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


_MODEL_IN_PATH = re.compile(r"/v[12]/models/([^/:?]+)")
# The Open Inference Protocol's probes, public under --auth_token_file as /healthz and /readyz are.
_PUBLIC_PATH = re.compile(r"/v2/health/(live|ready)|/v2/models/[^/]+(/versions/[^/]+)?/ready")


def _model_in_path(path: str) -> str:
    """The model a REST path names (for lines of calls the request functions did not see)."""
    match = _MODEL_IN_PATH.match(path)
    return urllib.parse.unquote(match.group(1)) if match else ""


def cors_origins(flag: str) -> frozenset[str] | None:
    """``--rest_api_cors_allowed_origins`` as a set of lower-case origins; None when not set."""
    origins = frozenset(o.strip().rstrip("/").lower() for o in flag.split(",") if o.strip())
    return origins or None


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
