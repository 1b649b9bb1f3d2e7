"""The one place where ``runtime.errors.OpError`` becomes a transport status.

TF Serving turns a ``tensorflow::Status`` into a gRPC status by keeping the code (canonical codes
are gRPC's) and the message, cut to 1024 characters plus "...TRUNCATED" (``ToGRPCStatus``); and
into an HTTP status with ``ToHTTPStatusCode``. ``grpc_method`` wraps a servicer method once, so a
bad request (or a bug) ends that request with a status and never the server.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import grpc

from runtime import errors

logger = logging.getLogger(__name__)

ERROR_MESSAGE_LIMIT = 1024

_GRPC_CODES: dict[int, grpc.StatusCode] = {code.value[0]: code for code in grpc.StatusCode}

_HTTP_STATUS: dict[int, int] = {
    errors.OK: 200,
    errors.CANCELLED: 499,
    errors.UNKNOWN: 500,
    errors.INVALID_ARGUMENT: 400,
    errors.DEADLINE_EXCEEDED: 504,
    errors.NOT_FOUND: 404,
    errors.ALREADY_EXISTS: 409,
    errors.PERMISSION_DENIED: 403,
    errors.RESOURCE_EXHAUSTED: 429,
    errors.FAILED_PRECONDITION: 400,
    errors.ABORTED: 409,
    errors.OUT_OF_RANGE: 400,
    errors.UNIMPLEMENTED: 501,
    errors.INTERNAL: 500,
    errors.UNAVAILABLE: 503,
    errors.DATA_LOSS: 500,
    errors.UNAUTHENTICATED: 401,
}


def truncate(message: str) -> str:
    """The message as TF Serving sends it: at most 1024 characters, then "...TRUNCATED"."""
    if len(message) > ERROR_MESSAGE_LIMIT:
        return message[:ERROR_MESSAGE_LIMIT] + "...TRUNCATED"
    return message


def grpc_code(code: int) -> grpc.StatusCode:
    return _GRPC_CODES.get(code, grpc.StatusCode.UNKNOWN)


def http_status(code: int) -> int:
    """TF Serving's ``ToHTTPStatusCode`` for a canonical code."""
    return _HTTP_STATUS.get(code, 500)


def as_op_error(exc: BaseException) -> errors.OpError:
    """Any exception as the OpError a client sees: OpErrors as they are, memory as
    RESOURCE_EXHAUSTED (TF's OOM), anything else as INTERNAL (a bug of ours, logged)."""
    if isinstance(exc, errors.OpError):
        return exc
    if isinstance(exc, MemoryError):
        return errors.ResourceExhaustedError(None, None, f"OOM when allocating tensor: {exc}")
    logger.exception("Unexpected error while serving a request", exc_info=exc)
    return errors.InternalError(None, None, f"{type(exc).__name__}: {exc}")


def grpc_method(method: Callable) -> Callable:
    """Wrap a servicer method ``(self, request, context)``: an exception aborts the RPC with
    TF Serving's code and text instead of escaping into grpc."""

    @functools.wraps(method)
    def wrapper(self, request, context):
        try:
            return method(self, request, context)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a status
            error = as_op_error(exc)
            logger.debug("%s failed: %s", method.__name__, error.message)
            context.abort(grpc_code(error.code), truncate(error.message))

    return wrapper
