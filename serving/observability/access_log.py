"""The access log (``--access_log=stderr|PATH``, ours): one JSON line per request, on both ports.

Each line: ``time`` (UTC, ISO 8601, when the request arrived), ``transport`` ("grpc", "rest"),
``method`` (the gRPC method's path, or the HTTP method and path), ``model``, ``version``,
``signature`` (as the request path resolved them; empty or null for calls that name none),
``status`` (the gRPC code's name, or the HTTP status), ``latency_ms``, ``request_bytes``,
``response_bytes``, ``peer`` and ``request_id``. The request id is the caller's ``x-request-id``
(an HTTP header, or gRPC metadata) or one made here; it is returned the same way (gRPC: in
the trailing metadata). Headers and
metadata are never logged, so neither is a token. ``--access_log_sampling_rate`` keeps that
share of the lines (every request still gets its id).

A transport opens a ``CallRecord`` with ``AccessLog.start`` and closes it with ``finish``; in
between the record is the context's ``CURRENT``, so the request functions
(``serving/inference/request_functions.py``) note the model, signature and version they served
without any transport passing them. Off (the default), nothing is made: ``ACTIVE`` is None.

Thread-safe: lines are written whole, under a lock, and flushed (``O_APPEND`` keeps workers'
lines whole in one file).
"""

from __future__ import annotations

import contextvars
import dataclasses
import datetime
import os
import random
import sys
import threading
import time
import uuid

import orjson

from runtime import errors

REQUEST_ID = "x-request-id"
_MAX_ID = 128  # a caller's request id longer than this is replaced by ours


@dataclasses.dataclass(slots=True)
class CallRecord:
    transport: str
    method: str
    peer: str
    request_id: str
    request_bytes: int
    arrived: float  # time.time()
    started: float  # time.perf_counter()
    sampled: bool
    model: str = ""
    version: int | None = None
    signature: str = ""
    status: str = ""
    response_bytes: int = 0


CURRENT: contextvars.ContextVar[CallRecord | None] = contextvars.ContextVar("access_log_call", default=None)


def request_id(given: str | None) -> str:
    """The caller's id where it is a sane one, else a new one."""
    if given and len(given) <= _MAX_ID and given.isprintable():
        return given
    return uuid.uuid4().hex


def note(model: str, signature: str, version: int | None) -> None:
    """What the request path served, into the current record (if any)."""
    record = CURRENT.get()
    if record is not None:
        record.model, record.signature = model, signature
        if version is not None:
            record.version = version


def note_version(version: int) -> None:
    record = CURRENT.get()
    if record is not None:
        record.version = version


class AccessLog:
    """Writes CallRecords as JSON lines to ``destination`` ("stderr" or a path)."""

    def __init__(self, destination: str, sampling_rate: float = 1.0) -> None:
        if not 0.0 <= sampling_rate <= 1.0:
            raise ValueError(f"--access_log_sampling_rate must be in [0, 1], not {sampling_rate}")
        self.destination = destination
        self.sampling_rate = sampling_rate
        if destination == "stderr":
            self._fd, self._owned = sys.stderr.fileno(), False
        else:
            self._fd, self._owned = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), True
        self._lock = threading.Lock()

    def start(
        self, transport: str, method: str, peer: str, given_id: str | None, request_bytes: int
    ) -> CallRecord:
        sampled = self.sampling_rate >= 1.0 or random.random() < self.sampling_rate
        return CallRecord(
            transport,
            method,
            peer,
            request_id(given_id),
            request_bytes,
            time.time(),
            time.perf_counter(),
            sampled,
        )

    def finish(self, record: CallRecord) -> None:
        if not record.sampled:
            return
        latency = time.perf_counter() - record.started
        line = orjson.dumps(
            {
                "time": datetime.datetime.fromtimestamp(record.arrived, datetime.timezone.utc).isoformat(
                    timespec="milliseconds"
                ),
                "transport": record.transport,
                "method": record.method,
                "model": record.model,
                "version": record.version,
                "signature": record.signature,
                "status": record.status,
                "latency_ms": round(latency * 1e3, 3),
                "request_bytes": record.request_bytes,
                "response_bytes": record.response_bytes,
                "peer": record.peer,
                "request_id": record.request_id,
            }
        )
        with self._lock:
            os.write(self._fd, line + b"\n")

    def close(self) -> None:
        if self._owned:
            os.close(self._fd)
            self._owned = False


ACTIVE: AccessLog | None = None


def configure(destination: str, sampling_rate: float) -> AccessLog | None:
    """Set the process's access log (none for an empty destination); returns it."""
    global ACTIVE
    if ACTIVE is not None:
        ACTIVE.close()
    try:
        ACTIVE = AccessLog(destination, sampling_rate) if destination else None
    except OSError as e:
        raise errors.InvalidArgumentError(
            None, None, f"--access_log: cannot open {destination}: {e.strerror}"
        ) from None
    return ACTIVE
